"""AppTest for the Measure page: no GPU, the quick suite, shipped and uploaded files, calibration on other pages."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from tests.page_helpers import ROOT, TIMEOUT, page, trace_names


def test_measure_page_without_a_gpu_says_so():
    at = page("views/measure_page.py")
    assert not at.exception
    assert any("No CUDA device here" in i.value for i in at.info)


def _small_model_record() -> str:
    from roofline.models import ModelConfig
    from roofline.records import encode_record

    model = ModelConfig.model_validate(
        {
            "id": "tiny-llama",
            "name": "Tiny Llama",
            "family": "test",
            "num_layers": 4,
            "hidden_size": 256,
            "num_heads": 8,
            "num_kv_heads": 2,
            "head_dim": 32,
            "mlp": "gated",
            "intermediate_size": 768,
            "vocab_size": 4000,
            "max_context": 4096,
            "tied_embeddings": False,
            "norm": "rmsnorm",
            "sources": [{"name": "test"}],
        }
    )
    return encode_record(model)


def test_measure_page_runs_the_quick_suite_on_a_custom_model():
    at = page("views/measure_page.py", cmodel=_small_model_record(), mmodel="tiny-llama", mdevice="cpu")
    assert at.selectbox(key="mmodel").value == "tiny-llama"
    at.button[0].click().run(timeout=300)
    assert not at.exception and not at.error
    results = at.session_state["measure_results"]
    assert results.steps and results.steps[0].model == "tiny-llama" and results.steps[0].layers_measured == 2
    keys = [c.key for c in at.get("plotly_chart")]
    assert keys == ["sweeps_roofline", "step_bars_0", "step_roofline_0", "step_bars_1", "step_roofline_1"]
    names = trace_names(at, 2)
    assert "measured ops" in names and "predicted (calibrated)" in names
    # ceilings, calibration, and one op table per step
    assert len(at.dataframe) == 4
    assert any("2 of 4 layers measured" in h.value for h in at.subheader)


def test_measure_page_opens_the_shipped_h100_example():
    at = page("views/measure_page.py")
    at.button(key="example").click().run()
    assert not at.exception and not at.error
    assert at.subheader[2].value.startswith("NVIDIA H100")
    # The file holds sweeps and their calibration, no ceilings: one table, the datasheet roof.
    calibration = at.dataframe[0].value
    assert set(calibration["class"]) >= {"linear_m1", "linear_large", "attention_decode"}
    names = trace_names(at, 0)
    assert "linear m1" in names and "attention decode" in names
    # No whole model step in this file: the calibration's caption does not point to one below.
    fit = next(c.value for c in at.caption if c.value.startswith("time = latency"))
    assert "this file measured no whole model step to check it on" in fit and "held-out check" not in fit
    assert any("add 10.6 µs, tiny" in c.value for c in at.caption)  # the file's note, in µs


def test_measure_page_shows_an_uploaded_collectives_file():
    from roofline.measure.schema import CollectivePoint, Collectives, DeviceInfo, Results

    results = Results(
        mode="collectives",
        device=DeviceInfo(name="CPU", kind="cpu", torch_version="2", date="2026"),
        collectives=Collectives(
            backend="gloo",
            world_size=2,
            points=[CollectivePoint(message_bytes=4096, time_s=1e-4, bus_bandwidth_gbps=0.04)],
        ),
    )
    at = AppTest.from_file(str(ROOT / "views/measure_page.py"), default_timeout=TIMEOUT)
    at.session_state["measure_results"] = results
    at.run()
    assert not at.exception
    assert any("All-reduce over 2 ranks" in h.value for h in at.subheader)


def test_this_sessions_calibration_moves_its_device_on_the_llm_page():
    """The H100 calibration, chosen in the sidebar, replaces that device's datasheet roofs (its
    achievable roofs are lower, so the step is slower) and the page says which roofs it used."""
    from roofline.measure.schema import load_results

    def ttft(choice: str | None) -> tuple[str, list[str]]:
        at = AppTest.from_file(str(ROOT / "views/llm_page.py"), default_timeout=TIMEOUT)
        at.query_params["hw"] = ["h100-sxm"]
        at.session_state["measure_results"] = load_results(ROOT / "examples" / "h100-sxm-kernel-sweeps.json")
        at.run()
        if choice:
            at.radio(key="measured_source").set_value(choice).run()
        assert not at.exception and not at.error
        return at.metric[0].value, [c.value for c in at.caption]

    plain, plain_captions = ttft(None)
    calibrated, captions = ttft("the Measure page's results")
    assert not any(c.startswith("Roofs:") for c in plain_captions)
    assert any(c.startswith("Roofs: calibrated roofs") and "h100-sxm" in c for c in captions), captions
    assert plain != calibrated


def test_the_llm_page_says_where_an_all_reduce_ran_over_other_ranks_than_its_tp():
    """A two-rank NCCL all-reduce applied at TP 8: the roofs line says what carries over."""
    from roofline.measure.schema import CollectivePoint, Collectives, DeviceInfo, Results

    device = DeviceInfo(name="NVIDIA H100 80GB HBM3", kind="cuda", torch_version="2", date="2026")
    results = Results(
        mode="collectives",
        device=device.model_copy(update={"matched_hardware_id": "h100-sxm"}),
        collectives=Collectives(
            backend="nccl",
            world_size=2,
            points=[CollectivePoint(message_bytes=2**20, time_s=1e-4, bus_bandwidth_gbps=50)],
        ),
    )
    captions = {}
    for tp in ("2", "8"):
        at = AppTest.from_file(str(ROOT / "views/llm_page.py"), default_timeout=TIMEOUT)
        at.query_params["hw"], at.query_params["model"], at.query_params["tp"] = ["h100-sxm"], "llama-3.1-70b", tp
        at.session_state["measure_results"] = results
        at.run()
        at.radio(key="measured_source").set_value("the Measure page's results").run()
        assert not at.exception and not at.error
        captions[tp] = " ".join(c.value for c in at.caption if c.value.startswith("Roofs:"))
    assert "applied to h100-sxm." in captions["2"] and "ranks" not in captions["2"]
    assert "measured over 2 ranks, applied at TP 8" in captions["8"]


def test_measure_page_without_torch(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    at = page("views/measure_page.py")
    assert not at.exception
    assert any("PyTorch is not installed" in i.value for i in at.info)


def test_measure_page_bad_url_parameter():
    at = page("views/measure_page.py", mode="slow")
    assert not at.exception
    assert any("`mode`: 'slow' is not allowed" in w.value for w in at.warning)


def test_measure_page_opens_the_shipped_quick_run_in_one_click():
    at = page("views/measure_page.py")
    at.button(key="example_quick").click().run()
    assert not at.exception and not at.error
    results = at.session_state["measure_results"]
    assert results.ceilings is not None and len(results.steps) == 2
    fit = next(c.value for c in at.caption if c.value.startswith("time = latency"))
    assert "the model steps below are the held-out check" in fit
    keys = [c.key for c in at.get("plotly_chart")]
    assert keys == ["sweeps_roofline", "step_bars_0", "step_roofline_0", "step_bars_1", "step_roofline_1"]
    # The measured roofs are drawn at the kernels' dtype (bf16), not the first one measured (fp32).
    for index in (0, 2):
        names = trace_names(at, index)
        assert any("HBM3 · bf16" in n for n in names) and not any("· fp32" in n for n in names), names
    tiles = {m.label: m.proto.delta for m in at.metric}
    assert tiles["Eager step"] == tiles["Kernel time"] == "measured"
    # The kernel time stands in both columns (a graph replays the same kernels): no empty slot.
    bars = {t["name"]: t for t in json.loads(at.get("plotly_chart")[1].proto.spec)["data"]}
    kernels = bars["measured kernel time"]
    assert kernels["x"] == ["eager", "CUDA graph"] and kernels["y"][0] == kernels["y"][1] > 0
    assert "profiled in the eager run" in kernels["hovertemplate"]
    caption = next(c.value for c in at.caption if c.value.startswith("CUDA · torch"))
    assert "driver 580.159.04" in caption and "measured 2026-11-26 01:27 UTC" in caption and "not record" not in caption


def test_measure_page_opens_the_shipped_h200_run_in_one_click():
    at = page("views/measure_page.py")
    at.button(key="example_quick_h200").click().run()
    assert not at.exception and not at.error
    results = at.session_state["measure_results"]
    assert results.device.matched_hardware_id == "h200-sxm" and len(results.steps) == 2
    names = trace_names(at, 0)
    assert any(n.startswith("NVIDIA H200 · bf16") and "[measured]" in n for n in names), names
    caption = next(c.value for c in at.caption if c.value.startswith("CUDA · torch"))
    assert "measured 2026-11-26 19:44 UTC" in caption and "datasheet: NVIDIA H200 SXM" in caption
    # The host probe's figure in the ceilings and its rounds' spread under them.
    probe = next(c.value for c in at.caption if c.value.startswith("Host probe:"))
    assert r"29.50 ms \(median of 4 rounds over the run\: 22.28 to 33.25 ms\)" in probe  # Markdown-escaped
    # Each step names the ops the profiler saw run as more kernels than the model counts.
    chains = [c.value for c in at.caption if c.value.startswith("Ran as more kernels")]
    assert len(chains) == 2 and all("rotary embedding" in c for c in chains)
    # Each roof keeps its colour from the sweeps' chart to the steps' (the datasheet's first on both).
    charts = {c.key: c for c in at.get("plotly_chart")}

    def roof_colours(key):
        data = json.loads(charts[key].proto.spec)["data"]
        return {t["name"].split(" · ")[0]: t["line"]["color"] for t in data if t.get("mode") == "lines"}

    sweeps, step = roof_colours("sweeps_roofline"), roof_colours("step_roofline_0")
    shared = set(sweeps) & set(step)
    assert len(shared) == 2 and all(sweeps[n] == step[n] for n in shared), (sweeps, step)
    # Sweep kernels above the copy roof are named; the large GEMMs' fitted floor is not a floor.
    above = next(c.value for c in at.caption if "moved data faster than the copy and read roofs" in c.value)
    assert "3 of 39 sweep kernels" in above and "4,283 GB/s against 4,146 GB/s" in above
    calibration = next(df.value for df in at.dataframe if "latency" in df.value.columns)
    latency = dict(zip(calibration["class"], calibration["latency"], strict=True))
    assert latency["linear_large"] == "not resolved" and latency["linear_m1"] == "7.02 µs"
    note = next(c.value.replace("\\", "") for c in at.caption if c.value.startswith("Latency not resolved"))
    assert "linear_large (fastest point 25.4 µs)" in note and "attention_prefill" in note


def test_measure_page_says_in_words_what_an_imported_file_does_not_record():
    at = page("views/measure_page.py")
    at.button(key="example").click().run()
    caption = next(c.value for c in at.caption if c.value.startswith("CUDA · torch"))
    assert "· not recorded ·" not in caption
    assert "does not record the date it was measured, the driver or the CUDA version" in caption
    assert "converted from measurements taken outside this suite" in caption
