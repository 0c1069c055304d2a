"""Pages with several views open one at a time: each view from its URL draws its own charts and
nothing of the others; a bad view warns and falls back; a widget that changes one view opens it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.page_helpers import ROOT, page

# page -> each view and the charts it draws (by key), the first view being the default.
VIEWS = {
    "views/kv_page.py": {
        "Capacity": ["capacity_chart"],
        "Memory": ["memory_bar"],
        "KV-bound decode": ["crossover_chart"],
        "KV dtype and GQA": ["variants_chart"],
    },
    "views/llm_page.py": {
        "Ops on the roofline": ["llm_roofline"],
        "Where the time goes": ["llm_breakdown"],
        "Batch and context": ["llm_trajectory"],
        "Op table": [],
    },
    "views/advisor_page.py": {
        "Ranking": ["ranking_chart"],
        "Diagnosis": [],
        "What-if": ["what_if_chart"],
        "Top roofs": ["top_roofs_chart"],
    },
    "views/training_page.py": {
        "Memory": ["memory_by_batch", "memory_by_length"],
        "Levers": [],
        "Step on the roofline": ["train_roofline"],
        "Loading the checkpoint": ["loading_chart"],
    },
    "views/serving_page.py": {
        "Frontier": ["frontier_chart"],
        "One point": ["point_roofline"],
        "Cheapest setup": [],
        "Techniques": ["spec_chart"],
        "Under load": ["load_rate_chart", "load_ttft_chart", "load_tpot_chart", "load_series_chart"],
    },
}
CASES = [(path, view, charts) for path, views in VIEWS.items() for view, charts in views.items()]


@pytest.mark.parametrize("path, view, charts", CASES, ids=[f"{p.split('/')[1][:-8]}-{v}" for p, v, _ in CASES])
def test_each_view_opens_from_its_url_with_its_charts_only(path, view, charts):
    at = page(path, view=view)
    assert not at.exception and not at.error and not at.warning, [w.value for w in at.warning]
    assert [c.key for c in at.get("plotly_chart")] == charts
    assert [t.label for t in at.tabs] == list(VIEWS[path])  # the first is the default: tests/test_pages.py


@pytest.mark.parametrize("bad", ["memory", ""])
def test_a_bad_view_warns_with_the_allowed_ones_and_falls_back(bad):
    at = page("views/kv_page.py", view=bad)
    assert not at.exception
    warning = " ".join(w.value for w in at.warning)
    assert "`view`" in warning and "Capacity" in warning and "KV dtype and GQA" in warning
    assert [c.key for c in at.get("plotly_chart")] == ["capacity_chart"]


def test_a_what_if_slider_opens_the_what_if_view_and_your_device_the_diagnosis():
    at = page("views/advisor_page.py")
    at.select_slider(key="x_memory").set_value(2.0).run()
    assert at.session_state["view"] == "What-if"
    assert [c.key for c in at.get("plotly_chart")] == ["what_if_chart"]
    at.selectbox(key="device").set_value("a100-sxm-80gb").run()  # the what-if stays open
    assert at.session_state["view"] == "What-if"
    fresh = page("views/advisor_page.py")
    fresh.selectbox(key="device").set_value("a100-sxm-80gb").run()
    assert fresh.session_state["view"] == "Diagnosis" and not fresh.get("plotly_chart")
    assert any("A100" in md.value for md in fresh.markdown)


def test_the_share_link_names_the_open_view():
    at = page("views/kv_page.py", view="Memory")
    assert "view=Memory" in at.code[-1].value


def test_the_downloads_sit_below_the_views_and_hold_the_whole_analysis():
    # The LLM page's CSV and JSON are there whichever view is open.
    wanted = {
        "views/llm_page.py": {"Download ops (CSV)", "Download analysis (JSON)"},
        "views/kv_page.py": {"Download the curves (CSV)"},
        "views/advisor_page.py": {"Download the ranking (CSV)", "Download the ranking (JSON)"},
        "views/training_page.py": {"Download the analysis (JSON)"},
        "views/serving_page.py": {"Download the frontier (CSV)", "Download the plan (JSON)"},
    }
    for path, labels in wanted.items():
        for view in list(VIEWS[path])[-2:]:  # views other than the one a file's table is in
            shown = {b.label for b in page(path, view=view).get("download_button")}
            assert labels <= shown, (path, view)


def test_a_page_reaches_its_first_chart_without_importing_pandas():
    """pandas is bound lazily (roofline.lazy): what a page imports before its chart leaves it out."""
    code = (
        "import sys; import dashboard.share, dashboard.custom, dashboard.state, dashboard.tabs, roofline.report, "
        "dashboard.llm_view, dashboard.advisor_view, dashboard.training_view, dashboard.serving_view; "
        "print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_lazy_module_imports_on_first_use_and_reads_like_the_module():
    import pandas

    from roofline.lazy import LazyModule

    lazy = LazyModule("pandas")
    assert lazy.DataFrame is pandas.DataFrame
    assert lazy.DataFrame({"a": [1, 2]})["a"].sum() == 3
    assert "lazy module 'pandas'" in repr(lazy)
    with pytest.raises(ModuleNotFoundError):
        LazyModule("no_such_module_here").anything  # noqa: B018


def test_a_view_open_on_one_page_does_not_leak_into_the_next():
    # Streamlit resets a stored label a page's tabs do not have to their first, so this checks that
    # no page raises or warns on the label another page left and each opens its first view.
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    at.switch_page("views/kv_page.py").run()
    at.session_state["view"] = "KV dtype and GQA"
    at.run()
    assert [c.key for c in at.get("plotly_chart")] == ["variants_chart"]
    for path, first in (
        ("views/llm_page.py", ["llm_roofline"]),
        ("views/training_page.py", VIEWS["views/training_page.py"]["Memory"]),
    ):
        at.switch_page(path).run()
        assert not at.exception and not at.warning and [c.key for c in at.get("plotly_chart")] == first


def test_the_roofline_lesson_is_built_only_while_open():
    closed = page("views/roofline_page.py")
    assert [c.key for c in closed.get("plotly_chart")] == ["roofline_chart"]
    assert not any("Arithmetic intensity" in md.value for md in closed.markdown)
    opened = page("views/roofline_page.py", lesson="true")
    assert [c.key for c in opened.get("plotly_chart")] == ["roofline_chart", "teach_chart"]
    assert any("Arithmetic intensity" in md.value for md in opened.markdown)
    bad = page("views/roofline_page.py", lesson="maybe")
    assert any("`lesson`: 'maybe' is not allowed" in w.value for w in bad.warning)


def test_which_hardware_cuts_a_workload_past_the_context_and_still_ranks():
    # Llama 3.1 8B holds 131,072 tokens. A request of 2,097,152 + 128 - 1: the prompt is cut to the
    # context, with one output token.
    at = page("views/advisor_page.py", model="llama-3.1-8b", seq="2097152", phase="request", output="128")
    assert not at.exception and not at.error
    assert "showing a prompt of 131,072 tokens and an output of 1 token." in " ".join(w.value for w in at.warning)
    assert len(at.dataframe[0].value) > 30  # the ranking is there
    # A decode step at a context of 131,072 would hold 131,073 tokens: the context is cut to 131,071.
    at = page("views/advisor_page.py", model="llama-3.1-8b", seq="131072", phase="decode")
    assert not at.exception and not at.error
    assert "Context 131,072 with the token a decode step adds exceeds" in " ".join(w.value for w in at.warning)
    assert "showing 131,071." in " ".join(w.value for w in at.warning)
    # A prefill of exactly the context fits: no warning.
    at = page("views/advisor_page.py", model="llama-3.1-8b", seq="131072", phase="prefill")
    assert not at.exception and not at.error and not at.warning


def test_kv_page_counts_read_as_counts_at_a_huge_batch():
    at = page("views/kv_page.py", batch="1048576")
    assert not at.exception and not at.error
    tiles = {m.label: m.value for m in at.metric}
    assert tiles["Max context at batch 1,048,576"] == "0 tokens"  # no context fits a million sequences
    assert (
        tiles["KV overtakes weights at batch 1,048,576"] == "1 token"
    )  # a million one-token caches outweigh the weights at once


def test_the_frontier_says_so_where_no_batch_fits_instead_of_an_empty_chart():
    at = page("views/serving_page.py", model="deepseek-v3")  # 671B in bf16 on one GPU: nowhere
    assert not at.exception and not at.error
    assert any("does not fit in memory on any chosen device at TP=1, at any batch" in w.value for w in at.warning)
    assert [c.key for c in at.get("plotly_chart")] == []
    at = page("views/serving_page.py", model="llama-3.1-70b", hw=["h100-sxm", "l40s"])  # 141 GB: fits neither
    assert any("on any chosen device" in w.value for w in at.warning)
    at = page("views/serving_page.py", model="llama-3.1-70b", hw=["h200-sxm", "l40s"], wdtype="fp8")
    said = [w.value for w in at.warning if "does not fit in memory" in w.value]
    assert said == [
        "Llama 3.1 70B does not fit in memory on NVIDIA L40S 48GB at TP=1, at any batch: its line is left out. A "
        "higher TP, or smaller weights (fp8, int4), would make room."
    ]
    assert [c.key for c in at.get("plotly_chart")] == ["frontier_chart"]


def test_the_llm_pages_tiles_name_their_device_when_several_are_chosen():
    """The TTFT/TPOT tiles were the B200's beside a warning that the H100 does not fit, unnamed."""
    both = page("views/llm_page.py", model="llama-3.1-70b", hw=["b200", "h100-sxm"])
    assert not both.exception
    assert any(c.value.startswith("The figures below are NVIDIA B200") for c in both.caption)
    one = page("views/llm_page.py", model="llama-3.1-70b", hw=["b200"])
    assert not any("figures below" in c.value for c in one.caption)


def test_the_kv_variants_view_draws_the_engine_cap_its_smaller_caches_rise_past():
    import json

    at = page("views/kv_page.py", view="KV dtype and GQA")
    assert not at.exception
    chart = next(c for c in at.get("plotly_chart") if c.key == "variants_chart")
    spec = json.loads(chart.proto.spec)
    # vLLM's default on an H100 (80 GB and more, not an A100): 1,024 sequences at once.
    assert [s["y0"] for s in spec["layout"]["shapes"] if s.get("type") == "line" and s["y0"] == s["y1"]] == [1024]
    assert any(a["text"].startswith("engine cap 1,024") for a in spec["layout"]["annotations"])
    said = " ".join(c.value for c in at.caption)
    assert "Above the dotted line the cache holds more sequences than the engine runs at once" in said
    assert "max_num_seqs 1,024 on the device" in said
