"""roofline dashboard: `streamlit run app.py`."""

import streamlit as st

st.set_page_config(page_title="roofline", page_icon="📈", layout="wide")

pages = [
    st.Page(
        "views/roofline_page.py", title="Roofline", icon=":material/show_chart:", url_path="roofline", default=True
    ),
    st.Page("views/llm_page.py", title="LLM inference", icon=":material/bolt:", url_path="llm"),
    st.Page("views/advisor_page.py", title="Which hardware?", icon=":material/compare_arrows:", url_path="advisor"),
    st.Page("views/kv_page.py", title="KV cache", icon=":material/database:", url_path="kv"),
    st.Page("views/training_page.py", title="Training", icon=":material/model_training:", url_path="training"),
    st.Page("views/serving_page.py", title="Serving", icon=":material/dns:", url_path="serving"),
    st.Page("views/measure_page.py", title="Measure", icon=":material/speed:", url_path="measure"),
    st.Page("views/hardware_page.py", title="Hardware", icon=":material/memory:", url_path="hardware"),
]
st.navigation(pages).run()
