"""The Profile page (AppTest): defaults, an imported trace on the roofline, a changed widget, and
a bad URL parameter."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from roofline.profile import import_traces
from tests.test_profile_trace import gpu_trace

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "views" / "profile_page.py")


def _with_trace(**params) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.session_state["profile_result"] = import_traces([(json.dumps(gpu_trace()), "rank0.json")], label="rank0.json")
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def test_defaults_ask_for_a_trace():
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception
    assert any("Upload a trace" in i.value for i in at.info)


def test_a_trace_goes_on_the_roofline_with_its_split():
    at = _with_trace(proofs="h100-sxm")
    assert not at.exception
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(specs) == 2  # the regime split and the roofline
    bars = {t["name"]: t["x"][0] for t in specs[0]["data"]}
    assert bars["communication-bound"] == pytest.approx(0.02)  # ms: the NCCL kernel
    # No compute-bound kernel in this trace: no bar, and no legend entry naming one.
    assert "compute-bound" not in bars and all(v > 0 for v in bars.values())
    names = [t.get("name", "") for t in specs[1]["data"]]
    assert "aten ops" in names
    assert any("H100" in n for n in names)
    # The profile lives in the session: the share panel does not promise the link brings it back.
    shared = " ".join(c.value for c in at.caption)
    assert "not the profile" in shared and "every input is in it" not in shared


def test_the_kernel_level_lists_kernels():
    at = _with_trace(proofs="h100-sxm", plevel="kernel")
    assert not at.exception
    assert "nvjet_tst_128x64" in at.dataframe[0].value["op"].tolist()


def test_a_bad_url_parameter_warns_and_falls_back():
    at = _with_trace(proofs="no-such-device")
    assert not at.exception
    assert at.warning
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.query_params["ptrain"] = "maybe"  # had been dropped from the link without a word
    at.run()
    assert not at.exception and "`ptrain`: 'maybe' is not allowed" in " ".join(w.value for w in at.warning)


def test_the_measure_page_draws_a_profile_as_measured_kernels():
    from roofline.engine import Ceilings
    from roofline.hardware import get_hardware

    prof = import_traces([(json.dumps(gpu_trace()), "rank0.json")])
    at = AppTest.from_file(str(ROOT / "views" / "measure_page.py"), default_timeout=60)
    at.session_state["measure_results"] = prof.to_results(Ceilings.from_hardware(get_hardware("h100-sxm")))
    at.session_state["measure_results_source"] = "run"
    at.run()
    assert not at.exception
    names = [t.get("name", "") for c in at.get("plotly_chart") for t in json.loads(c.proto.spec)["data"]]
    assert "linear skinny" in names  # the 16-row GEMM, as a measured point on the H100's roofs


def test_profiling_a_small_model_here():
    pytest.importorskip("torch")
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params["pseq"] = "8"
    at.run()
    at.button(key="profile_run").click().run()
    assert not at.exception
    assert any("smollm2-135m" in m.value for m in at.subheader)
    assert len(at.get("plotly_chart")) == 2
    assert not at.status and any(re.fullmatch(r"Profiled in [\d.,]+ s\.", c.value) for c in at.caption)  # no empty box
    assert "this CPU" in at.markdown[0].value  # a CPU profile on this CPU's measured roofs
    # The two FLOP counts in the tiles' unit, a digit finer than the tile (they differ in the fourth).
    note = next(c.value for c in at.caption if c.value.startswith("FLOPs: "))
    assert re.match(r"FLOPs: [\d.]{5} [KMG]FLOP per step from the recorded shapes; FlopCounterMode counts \d", note)
    assert "e+" not in note
    # The ops' intensity at one precision down the column.
    table = json.loads(next(d for d in at.dataframe if "FLOP/B" in d.value.columns).proto.columns)
    assert table["FLOP/B"]["type_config"]["format"] == "%,.2f"


def test_two_ranks_show_their_communication_and_skew():
    at = AppTest.from_file(PAGE, default_timeout=60)
    texts = [(json.dumps(gpu_trace(0)), "r0.json"), (json.dumps(gpu_trace(1, shift=7.0)), "r1.json")]
    at.session_state["profile_result"] = import_traces(texts)
    at.run()
    assert not at.exception
    ranks = at.dataframe[1].value
    assert ranks["rank"].tolist() == [0, 1]
    assert any("Skew between ranks: 7" in c.value for c in at.caption)
