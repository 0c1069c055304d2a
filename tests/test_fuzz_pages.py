"""Hostile collectives files and every page's URL parameters: applied where measured, or refused; no page exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz_common import (
    FAST,
    HOSTILE_NUMBERS,
    ROOT,
    _run_cli,
    _strict_json,
)


def _collectives(kind: str, backend: str, matched: str | None, bandwidth: float, time_s: float) -> dict:
    return {
        "schema": "roofline.measure",
        "version": 2,
        "mode": "collectives",
        "device": {"name": "dev", "kind": kind, "torch_version": "2", "date": "2026", "matched_hardware_id": matched},
        "collectives": {
            "backend": backend,
            "world_size": 2,
            "points": [{"message_bytes": 2**20, "time_s": time_s, "bus_bandwidth_gbps": bandwidth}],
        },
    }


@settings(max_examples=120, **FAST)
@given(
    kind=st.sampled_from(["cpu", "cuda"]),
    backend=st.sampled_from(["gloo", "nccl", "mpi", "NCCL", ""]),
    matched=st.sampled_from([None, "h100-sxm", "b200", "no-such-device"]),
    bandwidth=st.one_of(st.sampled_from([1e300, 1e-300, 0.0, -1.0, 1e5, 1e5 + 1]), st.floats(0, 1e6)),
    time_s=st.one_of(st.sampled_from([1e300, 1e-300, 0.0, 10.0, 10.5]), st.floats(0, 100)),
    force=st.booleans(),
    hardware=st.sampled_from(["h100-sxm", "b200", "tpu-v4"]),
)
def test_a_collectives_file_is_applied_only_where_it_was_measured_or_refused(
    tmp_path_factory, kind, backend, matched, bandwidth, time_s, force, hardware
):
    path = tmp_path_factory.mktemp("coll") / "coll.json"
    path.write_text(json.dumps(_collectives(kind, backend, matched, bandwidth, time_s)))
    argv = ["analyze", "--model", "llama-3.1-8b", "--hardware", hardware, "--tp", "2", "--phase", "decode"]
    argv += ["--seq-len", "256", "--collectives", str(path), "--json"] + (["--force-collectives"] if force else [])
    code, out, err = _run_cli(argv)
    assert code in (0, 2) and "Traceback" not in err, err[-500:]
    if code == 2:
        assert err.startswith("error: "), err
        return
    said = _strict_json(out)["measured_roofs"]["collectives"]
    gpu = kind == "cuda" and backend.lower() in ("nccl", "rccl")
    applied = force or (gpu and matched == hardware)
    assert said["applied_to"] == ([hardware] if applied else []), (said, kind, backend, matched)
    assert said["forced"] == force
    if not applied:
        assert said["why_not"]


# ---- page URLs ----------------------------------------------------------------------------------
PAGES = {
    "views/roofline_page.py": [
        "m",
        "n",
        "k",
        "hw",
        "dtypes",
        "gemm_dtype",
        "launch_us",
        "llm",
        "llm_batch",
        "llm_seq",
        "wdtype",
        "adtype",
        "tp",
        "adp",
        "engine",
        "lesson",
    ],
    "views/llm_page.py": [
        "batch",
        "prompt",
        "output",
        "hw",
        "model",
        "tp",
        "mem_util",
        "wdtype",
        "graphs",
        "cdevice",
        "engine",
        "moekernel",
        "moerouting",
        "view",
    ],
    "views/advisor_page.py": [
        "batch",
        "seq",
        "output",
        "tp",
        "x_compute",
        "x_capacity",
        "device",
        "phase",
        "engine",
        "moekernel",
        "moerouting",
        "view",
    ],
    "views/accuracy_page.py": ["metric", "runs", "engines", "within"],
    "views/kv_page.py": ["batch", "context", "block", "mbt", "tp", "mem_util", "hw", "kvdtype", "model", "view"],
    "views/hardware_page.py": ["vendor", "compare", "cdevice"],
    "views/measure_page.py": ["mode", "mdevice", "mmodel", "cmodel"],
    "views/serving_page.py": [
        "model",
        "hw",
        "prompt",
        "output",
        "ttft_ms",
        "tpot_ms",
        "tp",
        "spec_k",
        "spec_alpha",
        "engine",
        "moekernel",
        "moerouting",
        "view",
        "price_h100-sxm",
        "price_l40s",
    ],
    "views/training_page.py": [
        "model",
        "seq",
        "mb",
        "gb",
        "prec",
        "method",
        "targets",
        "dp",
        "zero",
        "hostram",
        "cmodel",
        "view",
    ],
}
url_value = st.one_of(st.sampled_from(HOSTILE_NUMBERS + ["h100-sxm", "tpu-v4", "x" * 3000]), st.text(max_size=10))


@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_urls(page):
    from streamlit.testing.v1 import AppTest

    # 12 links a page here; the hostile run (benchmarks/hostile_run.py) sends hundreds more.
    @settings(max_examples=12, **FAST)
    @given(picks=st.lists(st.tuples(st.sampled_from(PAGES[page]), st.lists(url_value, min_size=1, max_size=2))))
    def run(picks):
        at = AppTest.from_file(str(ROOT / page), default_timeout=60)
        for key, values in picks:
            at.query_params[key] = values if len(values) > 1 else values[0]
        at.run()
        assert not at.exception, (picks, [e.message for e in at.exception])

    run()
