"""Hostile config.json files (sizes and types checked before anything is built), linked custom models, and
measured roofs: bounded, and applied only where they were measured."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.fuzz_common import LLAMA_CONFIG, ROOT
from tests.fuzz_common import cli as _cli

# ---- config.json: sizes and types checked before anything is built ------------------------------


@pytest.mark.parametrize("layers", [10**8, 10**9, 1025])
def test_a_config_with_a_huge_layer_count_is_refused_at_once(tmp_path, layers):
    """10^8 layers took 41 s and 5.5 GB (10^9: MemoryError) before the sizes were checked."""
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(LLAMA_CONFIG | {"num_hidden_layers": layers}))
    start = time.monotonic()
    code, out, err = _cli("kv", "--model", str(path), "--hardware", "h100-sxm", "--json")
    assert time.monotonic() - start < 10  # it took 41 s; a guard, loose enough for a busy machine
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"field 'num_hidden_layers' must be an integer from 1 to 1,024 (or null), got {layers}" in err


@pytest.mark.parametrize(
    "key, value, allowed",
    [
        ("model_type", ["llama"], "must be text"),
        ("sliding_window", "4096", "must be an integer from 1 to 16,777,216"),
        ("layer_types", 7, "must be a list"),
        ("no_rope_layers", 7, "must be a list"),
        ("tie_word_embeddings", "yes", "must be true or false"),
        ("hidden_size", 1e300, "must be an integer from 1 to 65,536"),
        ("vocab_size", -1, "must be an integer from 1 to 1,048,576"),
        ("max_position_embeddings", 2**25, "must be an integer from 1 to 16,777,216"),
        ("text_config", 3, "must be an object"),
        ("layer_types", ["full_attention"] * 5, "must be a list of one entry per layer (32, num_hidden_layers), not 5"),
    ],
)
def test_a_config_field_of_the_wrong_type_is_named(tmp_path, key, value, allowed):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(LLAMA_CONFIG | {key: value}))
    code, out, err = _cli("analyze", "--model", str(path), "--phase", "decode", "--seq-len", "64")
    assert code == 2 and "Traceback" not in err
    assert err.startswith(f"error: {path}: field '{key}' {allowed}"), err


def test_a_config_nested_in_text_config_names_the_nested_field():
    from roofline.datafiles import DataError
    from roofline.hf_config import model_from_hf_config

    scout = json.loads((ROOT / "tests" / "data" / "hf_configs" / "llama-4-scout.json").read_text())
    scout["text_config"]["no_rope_layers"] = 3
    with pytest.raises(DataError, match="field 'text_config.no_rope_layers' must be a list"):
        model_from_hf_config(scout)


def test_models_and_hf_config_do_not_import_each_other():
    for module, other in (("roofline/hf_config.py", "roofline.models"), ("roofline/model_schema.py", "roofline.")):
        text = (ROOT / module).read_text()
        assert f"from {other}models import" not in text and "import roofline.models" not in text


# ---- custom models in a link --------------------------------------------------------------------
def test_a_linked_model_with_a_context_past_the_limit_is_a_warning_on_every_reload():
    """A max_context above 2^24 crashed the Training page, and the link kept crashing it."""
    import base64
    import zlib

    from roofline.models import get_model

    record = get_model("llama-3.2-1b").model_dump(exclude_none=True) | {"id": "long-one", "max_context": 2**25}
    text = base64.urlsafe_b64encode(zlib.compress(json.dumps(record).encode())).decode().rstrip("=")
    for _ in range(2):
        at = AppTest.from_file(str(ROOT / "views/training_page.py"), default_timeout=60)
        at.query_params["cmodel"] = text
        at.query_params["model"] = "long-one"
        at.run()
        assert not at.exception, [e.message for e in at.exception]
        warnings = " ".join(w.value for w in at.warning).replace("\\", "")
        assert "`cmodel`" in warnings and "max_context" in warnings and "16777216" in warnings
        assert at.selectbox(key="model").value == "llama-3.1-8b"


# ---- measured roofs: bounded, and applied only where they were measured -------------------------
def _collectives_file(folder: Path, name: str, kind: str, backend: str, matched: str | None = None, **point) -> Path:
    data = {
        "schema": "roofline.measure",
        "version": 2,
        "mode": "collectives",
        "device": {"name": name, "kind": kind, "torch_version": "2.13", "date": "2026-01-01"},
        "collectives": {
            "backend": backend,
            "world_size": 2,
            "points": [
                {"message_bytes": 4096, "time_s": 1e-4, "bus_bandwidth_gbps": 0.5},
                {"message_bytes": 2**20, "time_s": 1e-3, "bus_bandwidth_gbps": 5.0} | point,
            ],
        },
    }
    if matched:
        data["device"]["matched_hardware_id"] = matched
    path = folder / f"{backend}-{kind}.json"
    path.write_text(json.dumps(data))
    return path


TP8 = ["analyze", "--model", "llama-3.1-70b", "--phase", "decode", "--seq-len", "1024", "--tp", "8", "--json"]


def _total(code_out_err: tuple[int, str, str]) -> tuple[float, dict]:
    code, out, err = code_out_err
    assert code == 0, err
    data = json.loads(out)
    return data["total"]["time_s"], data


def test_a_cpu_gloo_all_reduce_is_not_applied_to_a_gpu_unless_forced(tmp_path):
    """It was applied to an H100 with no word: TP=8 decode went from 1.52 to 134 ms."""
    gloo = _collectives_file(tmp_path, "CPU x86", "cpu", "gloo")
    plain, _ = _total(_cli(*TP8, "--hardware", "h100-sxm"))
    kept, data = _total(_cli(*TP8, "--hardware", "h100-sxm", "--collectives", str(gloo)))
    assert kept == plain
    said = data["measured_roofs"]["collectives"]
    assert said["applied_to"] == [] and said["not_applied_to"] == ["h100-sxm"] and not said["forced"]
    assert "gloo" in said["why_not"] and "--force-collectives" in said["why_not"]
    forced, data = _total(_cli(*TP8, "--hardware", "h100-sxm", "--collectives", str(gloo), "--force-collectives"))
    assert forced > plain and data["measured_roofs"]["collectives"]["applied_to"] == ["h100-sxm"]
    assert data["measured_roofs"]["collectives"]["forced"]
    code, text, _ = _cli(*TP8[:-1], "--hardware", "h100-sxm", "--collectives", str(gloo))
    assert code == 0 and "all-reduce" in text and "not applied" in text
    code, _, err = _cli(*TP8, "--hardware", "h100-sxm", "--force-collectives")  # nothing to force: said so
    assert code == 2 and "--force-collectives: applies --collectives FILE" in err


def test_an_nccl_all_reduce_applies_to_its_own_device_only(tmp_path):
    nccl = _collectives_file(tmp_path, "NVIDIA H100 80GB HBM3", "cuda", "nccl", "h100-sxm", bus_bandwidth_gbps=50.0)
    for device, applied in (("h100-sxm", True), ("b200", False)):
        plain, _ = _total(_cli(*TP8, "--hardware", device))
        measured, data = _total(_cli(*TP8, "--hardware", device, "--collectives", str(nccl)))
        assert (measured != plain) == applied
        assert data["measured_roofs"]["collectives"]["applied_to"] == ([device] if applied else [])


def test_an_all_reduce_measured_over_other_ranks_than_the_tp_says_so(tmp_path):
    """A two-rank all-reduce had been applied at TP 8 without a word; now the output says what
    carries over (the bus bandwidth, over a switch) and what does not (the latency)."""
    nccl = _collectives_file(tmp_path, "NVIDIA H100 80GB HBM3", "cuda", "nccl", "h100-sxm", bus_bandwidth_gbps=50.0)
    _, data = _total(_cli(*TP8, "--hardware", "h100-sxm", "--collectives", str(nccl)))
    note = data["measured_roofs"]["collectives"]["ranks_note"]
    assert note.startswith("measured over 2 ranks, applied at TP 8:") and "measure over 8 ranks" in note
    code, text, _ = _cli(*TP8[:-1], "--hardware", "h100-sxm", "--collectives", str(nccl))
    assert code == 0 and "applied to h100-sxm (measured over 2 ranks, applied at TP 8" in text
    at_two = [a if a != "8" else "2" for a in TP8]
    _, data = _total(_cli(*at_two, "--hardware", "h100-sxm", "--collectives", str(nccl)))
    assert data["measured_roofs"]["collectives"]["ranks_note"] == ""  # its own ranks
    _, data = _total(_cli(*TP8, "--hardware", "b200", "--collectives", str(nccl)))
    assert data["measured_roofs"]["collectives"]["ranks_note"] == ""  # not applied: nothing to say


def test_a_calibration_for_another_device_is_said_not_applied():
    cal = str(ROOT / "examples" / "h100-sxm-kernel-sweeps.json")
    base = ["analyze", "--model", "llama-3.1-8b", "--phase", "decode", "--seq-len", "1024"]
    plain, _ = _total(_cli(*base, "--hardware", "b200", "--json"))
    kept, data = _total(_cli(*base, "--hardware", "b200", "--calibration", cal, "--json"))
    said = data["measured_roofs"]["calibration"]
    assert kept == plain and said["applied_to"] == [] and said["not_applied_to"] == ["b200"]
    assert "h100-sxm" in said["why_not"]
    code, text, _ = _cli(*base, "--hardware", "b200", "--calibration", cal)
    assert code == 0 and "Calibrated roofs" in text and "not applied" in text and "datasheet roofs on b200" in text
    _, data = _total(_cli(*base, "--hardware", "h100-sxm", "--calibration", cal, "--json"))
    assert data["measured_roofs"]["calibration"]["applied_to"] == ["h100-sxm"]


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("bus_bandwidth_gbps", 1e300, "bus_bandwidth_gbps': Input should be less than or equal to 100000"),
        ("time_s", 1e300, "time_s': Input should be less than or equal to 10"),
    ],
)
def test_an_absurd_all_reduce_is_refused_by_the_schema(tmp_path, field, value, message):
    path = _collectives_file(tmp_path, "H100", "cuda", "nccl", "h100-sxm", **{field: value})
    code, out, err = _cli(*TP8, "--hardware", "h100-sxm", "--collectives", str(path))
    assert code == 2 and out == "" and message in err and "Traceback" not in err


def test_empty_peaks_and_huge_figures_in_a_results_file_are_refused():
    from roofline.measure.schema import ResultsError, parse_results

    example = json.loads((ROOT / "examples" / "h100-sxm-quick-run.json").read_text())
    for path, value, message in (
        (("ceilings", "peak_tflops"), {}, "peak_tflops': Dictionary should have at least 1 item"),
        (("ceilings", "memory_bandwidth_tbps"), 1e300, "memory_bandwidth_tbps': Input should be less than or equal"),
        (("calibration", "fits"), {}, "fits': Dictionary should have at least 1 item"),
    ):
        broken = json.loads(json.dumps(example))
        broken[path[0]][path[1]] = value
        with pytest.raises(ResultsError, match=message):
            parse_results(json.dumps(broken), "r.json")


def test_the_llm_page_says_a_gloo_all_reduce_is_not_applied_and_applies_it_when_forced(tmp_path):
    from roofline.measure.schema import load_results

    gloo = load_results(_collectives_file(tmp_path, "CPU x86", "cpu", "gloo"))

    def run_page(force: bool) -> tuple[str, str]:
        at = AppTest.from_file(str(ROOT / "views/llm_page.py"), default_timeout=60)
        at.query_params.update(hw=["h100-sxm"], tp="8", model="llama-3.1-70b")
        at.session_state["measure_results"] = gloo
        at.run()
        at.radio(key="measured_source").set_value("the Measure page's results").run()
        if force:
            at.checkbox(key="measured_force_link").check().run()
        assert not at.exception, [e.message for e in at.exception]
        caption = next(c.value for c in at.caption if c.value.startswith("Roofs:"))
        return {m.label: m.value for m in at.metric}["TPOT"], caption.replace("\\", "")

    kept, said = run_page(False)
    forced, said_forced = run_page(True)
    assert "not applied" in said and "gloo" in said and "datasheet link on h100-sxm" in said
    assert "applied to h100-sxm (forced" in said_forced and kept != forced


def test_a_measured_all_reduce_times_the_all_reduce_ops_over_the_engine_tables(tmp_path):
    """The step's ideal bound took the user's slow all-reduce while its expected time kept the
    table's: 10.8 ms expected against a 15.8 ms ideal bound (TP=8 decode, 5 GB/s measured)."""
    slow = _collectives_file(tmp_path, "NVIDIA H100 80GB HBM3", "cuda", "nccl", "h100-sxm", bus_bandwidth_gbps=5.0)
    step, data = _total(_cli(*TP8, "--hardware", "h100-sxm", "--collectives", str(slow)))
    assert data["engine"] == "vllm"
    assert step >= data["total"]["ideal_time_s"]
    reduce = [op for op in data["ops"] if op["name"].startswith("all-reduce")]
    assert reduce and all(op["rests_on"].startswith("calibrated (the link of the all-reduce measured") for op in reduce)
    tables, plain = _total(_cli(*TP8, "--hardware", "h100-sxm"))
    assert all(op["rests_on"].startswith("vLLM") for op in plain["ops"] if op["name"].startswith("all-reduce"))
    assert step > tables


def test_the_kernel_floor_holds_under_the_engines_tables_as_under_the_datasheet():
    """A 1x1x1 GEMM with a 1 ms kernel floor on the Roofline page read 2.41 us expected (the
    table's time) against a 1 ms ideal bound: the expected time below its own lower bound."""
    from roofline.api import matmul_result
    from roofline.hardware import get_hardware
    from roofline.settings import Settings

    h100 = get_hardware("h100-sxm")
    floored = Settings(engine="vllm", launch_overhead_s=0.0, graph_launch_overhead_s=1e-3).ceilings(h100, serving=False)
    r = matmul_result(floored, 1, 1, 1, "bf16")
    assert r["ideal_time_s"] == pytest.approx(1e-3) and r["time_s"] == pytest.approx(1e-3) and r["bound"] == "overhead"
    # At the default floor the table's own time stands, above it.
    plain = Settings(engine="vllm", launch_overhead_s=0.0).ceilings(h100, serving=False)
    r = matmul_result(plain, 1, 1, 1, "bf16")
    assert r["time_s"] > r["ideal_time_s"] == pytest.approx(plain.kernel_floor_s)


@pytest.mark.parametrize("model_id", ["qwen3-30b-a3b", "llama-3.1-8b"])
def test_a_steps_expected_time_is_never_below_its_ideal_bound_under_a_large_kernel_floor(model_id):
    """A fused MoE layer's kernels inside it (activation, down projection) carried no floor: with a
    100 us floor, Qwen3-30B-A3B's decode step read 72.4 ms expected against an 86.8 ms ideal bound."""
    from roofline.hardware import get_hardware
    from roofline.inference import analyze_step
    from roofline.models import get_model
    from roofline.settings import Settings
    from roofline.workload import Workload

    w = Workload(get_model(model_id), "decode", 8, 1024)
    total = analyze_step(w, get_hardware("h100-sxm"), Settings(engine="vllm", graph_launch_overhead_s=1e-4)).to_json()
    assert total["total"]["time_s"] >= total["total"]["ideal_time_s"] * (1 - 1e-12)
