"""roofline dashboard: `streamlit run app.py`."""

import plotly.graph_objects as go
import streamlit as st

# A new browser session fetches and compiles Plotly's 4.7 MB script only when the first chart
# arrives: a blank, 10-pixel chart sent first has it do that while the page imports and computes
# (cold, the two took about the same time, one after the other). Removed once the page has run.
plotly_warmup = st.empty()
if not st.session_state.get("_plotly_loaded"):
    st.session_state["_plotly_loaded"] = True
    plotly_warmup.plotly_chart(
        go.Figure(
            layout={
                "height": 10,
                "margin": {"l": 0, "r": 0, "t": 0, "b": 0},
                # Nothing to see: a page that stops early (no results yet) may keep it a moment.
                "xaxis": {"visible": False},
                "yaxis": {"visible": False},
                "paper_bgcolor": "rgba(0,0,0,0)",
                "plot_bgcolor": "rgba(0,0,0,0)",
            }
        ),
        height=10,
        config={"staticPlot": True},
        theme=None,
    )

home = st.Page("views/roofline_page.py", title="Roofline", icon=":material/show_chart:", default=True)


def _roofline_address() -> None:
    """/roofline: the default page lives at /, and its name in a link should reach it too."""
    st.switch_page(home, query_params={k: st.query_params.get_all(k) for k in st.query_params})


pages = [
    home,
    st.Page(_roofline_address, title="Roofline", url_path="roofline", visibility="hidden"),
    st.Page("views/llm_page.py", title="LLM inference", icon=":material/bolt:", url_path="llm"),
    st.Page("views/advisor_page.py", title="Which hardware?", icon=":material/compare_arrows:", url_path="advisor"),
    st.Page("views/kv_page.py", title="KV cache", icon=":material/database:", url_path="kv"),
    st.Page("views/training_page.py", title="Training", icon=":material/model_training:", url_path="training"),
    st.Page("views/serving_page.py", title="Serving", icon=":material/dns:", url_path="serving"),
    st.Page("views/measure_page.py", title="Measure", icon=":material/speed:", url_path="measure"),
    st.Page("views/profile_page.py", title="Profile", icon=":material/timeline:", url_path="profile"),
    st.Page("views/accuracy_page.py", title="Accuracy", icon=":material/target:", url_path="accuracy"),
    st.Page("views/hardware_page.py", title="Hardware", icon=":material/memory:", url_path="hardware"),
]
page = st.navigation(pages)
# Each tab names its page, so several open tabs can be told apart.
st.set_page_config(page_title=f"{page.title} · roofline", page_icon=":material/show_chart:", layout="wide")
try:
    page.run()
finally:
    plotly_warmup.empty()
