"""Which hardware: ranking physics, sensitivities, levers, fit, and the vectorised device axis."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from roofline.advisor import advise, diagnose, rank, sensitivity
from roofline.engine import Ceilings, evaluate, evaluate_devices
from roofline.hardware import get_hardware, load_hardware
from roofline.inference import analyze_step
from roofline.models import get_model
from roofline.ops import step_ops
from roofline.report import html_report
from roofline.serving import Traffic, best_under_targets
from roofline.settings import Settings
from roofline.workload import Precision, Workload

DEVICES = list(load_hardware().values())
LLAMA8 = get_model("llama-3.1-8b")
NO_OVERHEAD = Settings(launch_overhead_s=0.0, graph_launch_overhead_s=0.0)


def fitting(rows):
    return [r.to_json() for r in rows if r.fits]


def rank_json(*args, **kwargs):
    return [r.to_json() for r in rank(*args, **kwargs)]


def test_batch_1_decode_ranking_follows_memory_bandwidth():
    rows = fitting(rank(Workload(LLAMA8, "decode", 1, 1024), DEVICES, "latency", NO_OVERHEAD))
    bandwidth = {hw.id: hw.memory_bandwidth_tbps for hw in DEVICES}
    assert len(rows) > 15
    for a, b in itertools.combinations(rows, 2):  # a ranks before b
        assert bandwidth[a["hardware"]] >= bandwidth[b["hardware"]], (a["hardware"], b["hardware"])
        assert a["bound"] == "memory"


def test_large_batch_prefill_ranking_follows_peak_compute():
    rows = fitting(rank(Workload(LLAMA8, "prefill", 16, 4096), DEVICES, "latency", NO_OVERHEAD))
    # the peak each part runs the step at: bf16, or fp16 where it lacks bf16 (V100, T4, A6000)
    peak = {hw.id: hw.peak_tflops.bf16 or hw.peak_tflops.fp16 or 0 for hw in DEVICES}
    for a, b in itertools.combinations(rows, 2):
        # A device with a clearly higher bf16 peak (>25%) ranks ahead. Closer peaks may swap: at
        # 64k tokens the elementwise ops are bandwidth-bound, so an H100 NVL (835 TFLOP/s,
        # 3.9 TB/s) beats a TPU v6e (918 TFLOP/s, 1.64 TB/s).
        assert not peak[b["hardware"]] > 1.25 * peak[a["hardware"]], (a["hardware"], b["hardware"])
        assert a["bound"] == "compute"


def test_sensitivity_names_the_binding_resource():
    h100 = get_hardware("h100-sxm")
    decode = sensitivity(Workload(LLAMA8, "decode", 1, 1024), h100, NO_OVERHEAD)
    assert decode["memory_bandwidth"] == pytest.approx(2.0, rel=0.05)
    assert decode["compute"] == pytest.approx(1.0, abs=0.02)
    prefill = sensitivity(Workload(LLAMA8, "prefill", 16, 4096), h100, NO_OVERHEAD)
    assert prefill["compute"] == pytest.approx(2.0, rel=0.1)
    assert prefill["memory_bandwidth"] == pytest.approx(1.0, abs=0.1)


def test_communication_bound_step_speeds_up_with_the_link():
    slow_link = Settings(
        launch_overhead_s=0.0, graph_launch_overhead_s=0.0, link_bandwidth_bytes_per_s=2e9, collective_latency_s=1e-4
    )
    w = Workload(get_model("llama-3.1-70b"), "decode", 8, 1024, tp=8)
    result = diagnose(w, get_hardware("h100-sxm"), slow_link)
    assert result["bound"] == "communication"
    names = [lv["name"] for lv in result["levers"]]
    assert "2× interconnect bandwidth" in names and "TP=4" in names
    assert sensitivity(w, get_hardware("h100-sxm"), slow_link)["interconnect"] > 1.2


def test_levers_are_evaluated_not_only_named():
    # With CUDA graphs the batch-1 decode is memory-bound (eager, the host's dispatching binds).
    result = diagnose(Workload(LLAMA8, "decode", 1, 1024, cuda_graphs=True), get_hardware("h100-sxm"))
    assert result["bound"] == "memory"
    levers = {lv["name"]: lv for lv in result["levers"]}
    assert levers["fp8 weights"]["time_s"] < result["time_s"]
    assert levers["int4 weights (W4A16)"]["time_s"] < levers["fp8 weights"]["time_s"]
    assert any(line.startswith("fp8 weights: ") and "->" in line for line in result["summary"])
    assert len(result["top_ops"]) == 3


def test_a_lever_that_slows_the_step_says_which_op_grew_and_on_what_roofs():
    w = Workload(LLAMA8, "decode", 1, 1024, cuda_graphs=True)
    h100 = get_hardware("h100-sxm")
    # On the datasheet an fp8 cache halves the KV bytes: faster, nothing to explain.
    ideal = {lv["name"]: lv for lv in diagnose(w, h100)["levers"]}
    assert ideal["fp8 KV cache"]["slower_because"] == ""
    # On vLLM's measured kernels its fp8-KV decode attention at this shape is slower than bf16's:
    # the step is slower, and the lever names that op, its two times and the tables they come from.
    result = diagnose(w, h100, Settings(engine="vllm"))
    fp8_kv = next(lv for lv in result["levers"] if lv["name"] == "fp8 KV cache")
    assert fp8_kv["time_s"] > result["time_s"]
    assert fp8_kv["slower_because"].startswith("slower: attention (fused decode) ")
    assert "vLLM" in fp8_kv["slower_because"] and "kernels" in fp8_kv["slower_because"]
    line = next(x for x in result["summary"] if x.startswith("fp8 KV cache: "))
    assert "(slower: attention (fused decode)" in line
    # A larger batch's step is longer by design: no such note.
    assert all(lv["slower_because"] == "" for lv in result["levers"] if "batch" in lv["name"])


def test_eager_decode_is_host_bound_and_cuda_graphs_fix_it():
    # Eager, the 8B batch-1 decode step dispatches 389 kernels at 10.6-18.5 us each (5.9 ms) while
    # the device needs 4.9 ms: overhead-bound; from a CUDA graph it is memory-bound.
    eager = diagnose(Workload(LLAMA8, "decode", 1, 1024), get_hardware("h100-sxm"))
    assert eager["bound"] == "overhead"
    graphs = next(lv for lv in eager["levers"] if lv["name"] == "CUDA graphs")
    assert graphs["bound"] == "memory" and graphs["time_s"] < eager["time_s"]


def test_overhead_bound_levers():
    result = diagnose(Workload(get_model("llama-3.2-1b"), "decode", 1, 128), get_hardware("h100-sxm"))
    assert result["bound"] == "overhead"
    graphs = next(lv for lv in result["levers"] if lv["name"] == "CUDA graphs")
    assert graphs["time_s"] < result["time_s"]


def test_a_workload_that_fits_nowhere_says_so():
    result = advise(Workload(get_model("llama-3.1-405b"), "decode", 1, 1024), DEVICES, get_hardware("h100-sxm"))
    assert not result["fits_anywhere"]
    assert all(not r["fits"] and r["why_not"] for r in result["ranking"])
    h100 = next(r for r in result["ranking"] if r["hardware"] == "h100-sxm")
    assert h100["smallest_tp"] == 16 and "fits at TP=16" in h100["why_not"]


def test_devices_that_cannot_run_it_say_why():
    rows = rank_json(Workload(LLAMA8, "decode", 1, 1024, precision=Precision(act_dtype="fp8")), DEVICES)
    a100 = next(r for r in rows if r["hardware"] == "a100-sxm-80gb")
    assert a100["time_s"] is None and a100["rank"] is None
    # Ampere runs fp8 checkpoints weight-only (FP8 Marlin) but has no fp8 math (W8A8).
    assert a100["why_not"].startswith("a100-sxm-80gb has no kernels for fp8 math (its formats record: ")


def test_devices_without_bf16_run_fp16_and_say_so():
    # V100 has no bf16 math: the step runs in fp16 (the same two bytes), with a note.
    rows = rank_json(Workload(LLAMA8, "decode", 1, 1024), DEVICES)
    v100 = next(r for r in rows if r["hardware"] == "v100-sxm2-32gb")
    assert v100["fits"] and v100["time_s"] > 0
    assert v100["notes"] == ["NVIDIA V100 SXM2 32GB has no bf16 math: fp16 is used instead (same two bytes per value)"]


def test_request_ranking_and_objectives():
    w = Workload(LLAMA8, "request", 8, 512, 64)
    latency = rank_json(w, DEVICES, "latency")
    throughput = rank_json(w, DEVICES, "throughput")
    assert latency[0]["hardware"] == throughput[0]["hardware"]
    per_watt = [r for r in rank_json(w, DEVICES, "per-watt") if r["rank"]]
    values = [r["tokens_per_s_per_watt"] for r in per_watt]
    assert values == sorted(values, reverse=True)
    with pytest.raises(ValueError, match="objective: 'cheap' is not allowed"):
        rank(w, DEVICES, "cheap")


def test_device_axis_equals_one_device_at_a_time():
    ops = step_ops(Workload(LLAMA8, "decode", 4, np.array([128, 4096]), tp=2))
    ceilings = [Ceilings.from_hardware(hw, tp=2) for hw in DEVICES]
    times, _ = evaluate_devices(ops, ceilings)
    for c, row in zip(ceilings, times):
        try:
            expected = evaluate(ops, c).step_time_s
        except ValueError:  # no bf16 peak, or no link figure for TP=2
            assert np.all(np.isnan(row))
            continue
        np.testing.assert_allclose(row, expected)


def test_what_if_capacity_makes_it_fit():
    w = Workload(get_model("llama-3.1-70b"), "decode", 1, 1024, precision=Precision())
    h100 = get_hardware("h100-sxm")
    assert not rank(w, [h100])[0].fits
    assert rank(w, [h100], settings=Settings(capacity_scale=2.0))[0].fits


def test_html_report_is_offline():
    import pandas as pd
    import plotly.graph_objects as go

    page = html_report(
        "Test",
        [
            ("A chart", go.Figure(go.Bar(x=[1], y=[2]))),
            ("", pd.DataFrame({"a": [None]})),
            ("Words", "<b>escaped</b>"),
            ("Second", go.Figure()),
        ],
        url="http://x/?a=1",
    )
    assert page.count("plotly.js v") == 1  # the library is inlined once
    assert "<script src=" not in page  # nothing fetched when it opens
    assert "unknown" in page and "&lt;b&gt;escaped" in page


def test_devices_without_a_published_peak_rank_for_decode_with_a_label():
    devices = [get_hardware(h) for h in ("h100-sxm", "m4-max", "rtx-pro-6000-blackwell", "l20")]
    w = Workload(LLAMA8, "decode", 1, 1024)
    rows = {r.hardware: r for r in rank(w, devices, "latency", NO_OVERHEAD)}
    m4 = rows["m4-max"]
    # A batch-1 decode moves every byte once: with no launch cost its time is bytes / bandwidth,
    # the lower bound M4 Max's 546 GB/s gives (Apple publishes no peak to add a compute term).
    moved = float(analyze_step(w, get_hardware("h100-sxm"), NO_OVERHEAD).table.bytes.sum())
    assert m4.time_s == pytest.approx(moved / 546e9, rel=1e-9)
    assert m4.rank is not None and m4.time_is_lower_bound and m4.bound == "memory"
    assert m4.to_json()["bound_label"] == "memory-bandwidth-bound at least (compute peak unpublished)"
    assert any("lower bound" in n for n in m4.notes)
    # Ranked by that bound among the others: H100 (3.35 TB/s) < RTX PRO 6000 (1.79) < L20 (0.864) < M4 Max.
    assert [r.hardware for r in rank(w, devices, "latency", NO_OVERHEAD)] == [
        "h100-sxm",
        "rtx-pro-6000-blackwell",
        "l20",
        "m4-max",
    ]
    assert not rows["h100-sxm"].time_is_lower_bound


def test_devices_without_a_published_peak_are_not_ranked_for_compute_bound_work():
    devices = [get_hardware(h) for h in ("h100-sxm", "a100-sxm-80gb", "m4-max")]
    rows = {r.hardware: r for r in rank(Workload(LLAMA8, "prefill", 16, 4096), devices, "latency", NO_OVERHEAD)}
    m4 = rows["m4-max"]
    assert m4.rank is None and m4.time_s is None and not m4.fits
    assert "compute-bound where peaks are known" in m4.why_not and "at least" in m4.why_not
    assert rows["h100-sxm"].rank == 1


def test_analysis_without_a_published_peak_says_what_its_time_rests_on():
    step = analyze_step(Workload(LLAMA8, "decode", 1, 1024), get_hardware("rtx-pro-6000-blackwell"))
    data = step.to_json()
    assert data["time_is_lower_bound"] and data["compute_peaks_unpublished"] == ["bf16"]
    assert "lower bound" in data["time_rests_on"] and data["total"]["mfu"] is None
    assert data["total"]["bound_label"].endswith("at least (compute peak unpublished)")
    assert data["memory"]["fits"]  # capacity answers need no peak
    full = analyze_step(Workload(LLAMA8, "decode", 1, 1024), get_hardware("h100-sxm")).to_json()
    assert not full["time_is_lower_bound"] and full["compute_peaks_unpublished"] == []


def test_the_serving_plan_never_proposes_fp8_where_the_kernels_take_none():
    devices = [get_hardware(h) for h in ("v100-sxm2-32gb", "t4", "tpu-v4", "h100-sxm")]
    small = get_model("llama-3.2-1b")
    best = {b.hardware: b for b in best_under_targets(small, devices, Traffic(1024, 256), 10.0, 0.2)}
    for hid in ("v100-sxm2-32gb", "t4", "tpu-v4"):
        assert best[hid].meets and best[hid].weight_dtype in ("bf16", "fp16"), hid
    assert best["tpu-v4"].kv_dtype == "bf16"  # TPU v4 has no fp8 KV cache either
    assert best["h100-sxm"].meets
    # Llama 3.1 8B in fp16 (16 GB) does not fit a 16 GB T4; fp8 weights would, but T4 takes none.
    t4 = best_under_targets(LLAMA8, [get_hardware("t4")], Traffic(1024, 256), 10.0, 0.2, tps=(1,))[0]
    assert not t4.meets and t4.weight_dtype is None


def test_the_serving_plan_does_not_claim_targets_on_lower_bounds():
    # Without a bf16 peak the prefill (TTFT) is only a lower bound: no target can be claimed met.
    devices = [get_hardware(h) for h in ("m4-max", "h100-sxm")]
    best = {b.hardware: b for b in best_under_targets(get_model("llama-3.2-1b"), devices, Traffic(1024, 256), 10, 0.2)}
    assert not best["m4-max"].meets and "publishes no bf16 peak" in best["m4-max"].binding
    assert best["h100-sxm"].meets


def test_devices_that_do_not_fit_are_listed_in_the_order_the_chart_plots():
    from roofline.advisor import rank

    w = Workload(get_model("llama-3.1-70b"), "decode", 1, 2048)
    rows = rank(w, list(load_hardware().values()), "latency", Settings(engine="auto"))
    rest = [r for r in rows if not r.fits and r.time_s is not None]
    assert len(rest) > 3 and rows[0].ranked_on == "ideal bound"  # engine tables on some devices only
    plotted = [r.ideal_time_s if r.ideal_time_s is not None else r.time_s for r in rest]
    assert plotted == sorted(plotted)


def test_per_watt_devices_that_do_not_fit_follow_the_objective_too():
    w = Workload(get_model("llama-3.1-70b"), "decode", 1, 2048)
    devices = load_hardware()
    rows = rank(w, list(devices.values()), "per-watt", Settings())
    rest = [r for r in rows if not r.rank and r.time_s is not None and devices[r.hardware].tdp_w]
    # The datasheet alone: seconds x watts, what per-watt ranks by.
    joules = [r.time_s * devices[r.hardware].tdp_w for r in rest]
    assert len(rest) > 3 and joules == sorted(joules)


def test_the_batch_lever_reads_as_more_tokens_not_as_a_slower_step():
    """Batch 1 to 4 of a memory-bound decode: the step is a little slower (the cache read of four
    sequences), and each step yields four tokens; the table says both, apart."""
    from tests.page_helpers import page

    w = Workload(LLAMA8, "decode", 1, 1024, cuda_graphs=True)
    result = diagnose(w, get_hardware("h100-sxm"))
    assert result["tokens_per_s"] == pytest.approx(1 / result["time_s"])  # one sequence, one token a step
    at = page("views/advisor_page.py", view="Diagnosis")
    table = next(d.value for d in at.dataframe if "tokens/s ×" in d.value.columns)
    assert "speed-up" not in table.columns and "step speed-up" in table.columns
    batch = table[table["lever"].str.startswith("batch")].iloc[0]
    assert batch["step speed-up"] < 1 < batch["tokens/s ×"]
    times = float(batch["lever"].split("(")[1].rstrip("×)"))  # "batch 4 (4×)": four tokens a step
    assert batch["tokens/s ×"] == pytest.approx(times * batch["step speed-up"])
    others = table[~table["lever"].str.startswith("batch")]  # one token a step, as before
    np.testing.assert_allclose(others["tokens/s ×"], others["step speed-up"])
    assert any("Step speed-up" in c.value for c in at.caption)


def test_device_names_shorten_at_word_and_bracket_boundaries():
    from dashboard.advisor_view import short_name, short_names
    from roofline.hardware import load_hardware

    assert short_name("NVIDIA H100 SXM5 80GB") == "H100 SXM5 80GB"  # short enough: only the vendor goes
    assert short_name("NVIDIA GB300 (per GPU, GB300 NVL72)") == "GB300 (per GPU, NVL72)"  # the repeat goes
    assert short_name("NVIDIA GH200 Grace Hopper (GPU, 144GB HBM3e)") == "GH200 Grace Hopper…"  # the brackets go
    assert short_name("NVIDIA RTX PRO 6000 Blackwell Workstation Edition") == "RTX PRO 6000 Blackwell…"  # whole words
    assert short_name("Supercalifragilisticexpialidocious", 10) == "Supercali…"  # one word longer than the limit
    names = [h.name for h in load_hardware().values()]
    short = short_names(names)
    assert len(set(short)) == len(names) and all(len(s) <= 26 for s in short)
    # Two that shorten alike would be one bar on the chart: they keep their names whole.
    assert short_names(["Acme X1 (fast, 48GB, edition one)", "Acme X1 (fast, 48GB, edition two)"], 12) == [
        "Acme X1 (fast, 48GB, edition one)",
        "Acme X1 (fast, 48GB, edition two)",
    ]


def test_the_top_roofs_caption_names_the_roofs_that_lie_on_each_other():
    from dashboard.advisor_view import coinciding_roofs
    from roofline.hardware import get_hardware
    from roofline.settings import Settings

    s = Settings()
    roofs = [s.ceilings(get_hardware(h), 1, True) for h in ("gb200", "gb300", "mi350x")]
    text = coinciding_roofs(roofs, "bf16")
    # 8 TB/s on all three; a bf16 peak of 2,500 TFLOP/s on the GB200 and the GB300, 2,300 on the MI350X.
    # The caption has just named them in full: short names here, or "all three".
    assert "the memory slopes of all three lie on each other (8 TB/s)" in text
    assert "the bf16 peaks of GB200 \\(per GPU, NVL72\\) and GB300 \\(per GPU, NVL72\\) too (2,500 TFLOP/s)" in text
    assert "MI350X" not in text and "NVIDIA" not in text
    two = coinciding_roofs(roofs[:2], "bf16")
    assert "memory slopes of GB200 \\(per GPU, NVL72\\) and GB300 \\(per GPU, NVL72\\) lie on each other" in two
    # 3.35 and 2.04 TB/s, 989 and 312 TFLOP/s: nothing to say.
    assert coinciding_roofs([s.ceilings(get_hardware(h), 1, True) for h in ("h100-sxm", "a100-sxm-80gb")], "bf16") == ""
