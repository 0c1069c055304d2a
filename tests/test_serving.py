"""Serving: frontier points, the chunked-prefill step, speculative decoding, disaggregation and
cost by hand; the frontier's and the target search's properties; prices; CLI and page."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from roofline.hardware import get_hardware, load_hardware
from roofline.models import get_model
from roofline.ops import step_ops
from roofline.serving import (
    Traffic,
    best_under_targets,
    disaggregation,
    expected_accepted,
    load_prices,
    mixed_step_ops,
    parse_price,
    serving_sweep,
    speculative,
)
from roofline.workload import Precision, Workload, engine_math

ROOT = Path(__file__).resolve().parent.parent
H100 = get_hardware("h100-sxm")
LLAMA = get_model("llama-3.1-8b")


def test_a_frontier_point_by_hand():
    # Batch 1, no chunking: a decode step reads the 16.06 GB of weights and 1,152 cached tokens'
    # KV (1,024 + 256/2, 131,072 B each = 151 MB) at 3.35 TB/s: 4.84 ms; every 256 tokens the
    # 1,024-token prefill (16.4 TFLOP at 989 TFLOP/s, ~17 ms) stalls the sequence: +0.07 ms.
    pts = serving_sweep(LLAMA, [H100], Traffic(1024, 256), batches=np.array([1, 64]), chunked=False)
    weights = 8_030_261_248 * 2
    kv = 1152 * 131_072
    memory_time = (weights + kv) / 3.35e12
    prefill = 2 * 8.03e9 * 1024 / 989.4e12
    assert pts.tpot_s[0, 0] == pytest.approx(memory_time + prefill / 256, rel=0.05)
    # tokens/s per group = batch / TPOT; per user = 1 / TPOT; per device = per group / TP.
    assert pts.tokens_per_s[0, 1] == pytest.approx(64 / pts.tpot_s[0, 1])
    assert pts.per_user[0, 1] == pytest.approx(1 / pts.tpot_s[0, 1]) and pts.per_device[0, 1] == pts.tokens_per_s[0, 1]
    assert pts.ttft_s[0, 0] == pytest.approx(prefill, rel=0.1)  # the prefill alone
    row = pts.row(0, 0)
    assert row["bound"] == "memory" and 0.8 < row["mbu"] <= 1.0  # decode is judged by MBU


def test_the_chunked_prefill_step_for_one_chunk():
    # 4 decoding sequences (1,152 cached) and a 16-token chunk of 1,024-token prompts.
    w = Workload(LLAMA, "decode", 4, 1152)
    ops = {op.name: op for op in mixed_step_ops(w, 4, 16, 1024)}
    qkv = ops["QKV projection"]
    assert qkv.meta["m"] == 20  # one pass over the weights for 4 + 16 rows
    assert qkv.flops == 2 * 20 * 4096 * (32 + 2 * 8) * 128
    decode = ops["attention (fused decode)"]
    assert decode.flops == 2 * 32 * 4 * 1153 * 256  # 4 queries x 1,153 keys x (128 + 128) per head
    chunk = ops["attention (FlashAttention), prefill chunk"]
    prefill = next(op for op in step_ops(Workload(LLAMA, "prefill", 1, 1024)) if op.meta.get("kind") == "attention")
    assert chunk.flops == pytest.approx(prefill.flops * 16 / 1024)
    # It reads the prompt's cache so far: half the prompt on average, 2 x 8 x 128 x 2 B per token per layer.
    assert chunk.kv_bytes == pytest.approx(prefill.kv_bytes * 16 / 1024 + 512 * 4096)
    assert "logits (LM head)" in ops and ops["logits (LM head)"].meta["m"] == 4  # the decoding sequences only


def test_speculative_expected_tokens_and_where_it_stops_paying():
    # (1 - a^(k+1)) / (1 - a): a = 0.8, k = 4: (1 - 0.32768) / 0.2 = 3.3616.
    assert expected_accepted(0.8, 4) == pytest.approx(3.3616)
    assert expected_accepted(0.0, 4) == 1.0 and expected_accepted(1.0, 4) == 5.0
    # Short sequences, a large batch: the verify step of 5 positions per sequence is compute-bound,
    # costs ~5 steps, and at a = 0.3 (1.43 tokens per verify) speculation slows decoding.
    short = Traffic(64, 64)
    r = speculative(LLAMA, H100, short, np.array([1, 2048]), k=4, alpha=0.3)
    assert r["speedup"][0] > 1.0 and r["verify_bound"][0] == "memory"
    assert r["speedup"][1] < 1.0 and r["verify_bound"][1] == "compute"
    # A draft model's own k steps come off the gain.
    with_draft = speculative(LLAMA, H100, short, np.array([1]), 4, 0.3, draft=get_model("llama-3.2-1b"))
    assert with_draft["speedup"][0] < r["speedup"][0]


def test_the_no_gain_line_is_labelled_where_the_curve_is_not():
    """The curve starts above 1 (batch 1 gains) and ends below it: the label sits under the line at
    the left; where even batch 1 loses (acceptance 0: one token per verify), above it."""
    from roofline.plots.serving import speculative_figure

    batches = np.array([1, 16, 2048])
    gains = speculative_figure(speculative(LLAMA, H100, Traffic(64, 64), batches, 4, 0.3), "")
    loses = speculative_figure(speculative(LLAMA, H100, Traffic(64, 64), batches, 4, 0.0), "")
    (a,), (b,) = gains.layout.annotations, loses.layout.annotations
    assert a.text == b.text == "no gain"
    assert (a.xanchor, a.yanchor, a.x) == ("left", "top", 0) and (b.xanchor, b.yanchor, b.x) == ("left", "bottom", 0)
    # The markers' colours are in the legend: the verify step's regimes, memory-bound then compute-bound.
    assert [t.name for t in gains.data[1:]] == ["verify step memory-bandwidth-bound", "verify step compute-bound"]


def test_disaggregated_kv_transfer_for_one_prompt():
    # Llama 3.1 8B, bf16 KV: 2 x 32 layers x 8 heads x 128 x 2 B = 131,072 B per token; a
    # 1,024-token prompt's cache is 134,217,728 B; over NVLink 4 at 450 GB/s per direction: 298.3 us.
    out = disaggregation(LLAMA, H100, Traffic(1024, 256), 32)
    pools = out["prefill and decode pools"]
    assert pools["kv_bytes_per_prompt"] == 134_217_728
    assert pools["kv_transfer_s"] == pytest.approx(134_217_728 / 450e9)
    one = out["one pool (chunked prefill)"]
    assert pools["tpot_s"] < one["tpot_s"]  # decode steps no longer carry prompt chunks
    slow_link = disaggregation(LLAMA, H100, Traffic(1024, 256), 32, link_bytes_per_s=12.5e9)  # 100 Gb/s
    assert slow_link["prefill and decode pools"]["kv_transfer_s"] == pytest.approx(134_217_728 / 12.5e9)


def test_the_frontier_is_a_frontier():
    devices = [get_hardware(h) for h in ("h100-sxm", "mi300x", "l40s", "b200")]
    pts = serving_sweep(LLAMA, devices, Traffic(2048, 512))
    unchunked = serving_sweep(LLAMA, devices, Traffic(2048, 512), chunked=False)  # several devices, one group
    # Without chunking a new prompt's first token waits only for its prefill step: its own while at
    # most one prompt waits an output step (batch <= 512), then with the others waiting beside it.
    assert unchunked.tpot_s.shape == pts.tpot_s.shape
    alone = unchunked.batch <= 512
    assert np.allclose(unchunked.ttft_s[:, alone], unchunked.ttft_s[:, :1])
    fits = unchunked.fits & np.isfinite(unchunked.ttft_s)
    for d in range(len(devices)):
        assert np.all(np.diff(unchunked.ttft_s[d, fits[d]]) >= -1e-12)
    mask = pts.frontier()
    for d in range(len(devices)):
        x, y = pts.per_device[d][mask[d]], pts.per_user[d][mask[d]]
        order = np.argsort(x)
        assert np.all(np.diff(y[order]) <= 1e-12)  # more throughput per device costs per-user speed
        for j in np.flatnonzero(mask[d]):  # no fitting point beats a frontier point on both
            fit = pts.fits[d]
            beats = (pts.per_device[d] > pts.per_device[d, j]) & (pts.per_user[d] > pts.per_user[d, j]) & fit
            assert not np.any(beats)


@pytest.mark.parametrize("tighter", [(2.0, 0.03), (0.5, 0.05), (0.2, 0.02)])
def test_tighter_targets_never_lower_the_cost(tighter):
    devices = [get_hardware(h) for h in ("h100-sxm", "h200-sxm", "l40s")]
    prices = {"h100-sxm": 6.155, "h200-sxm": 6.305, "l40s": 2.25}
    loose = {b.hardware: b for b in best_under_targets(LLAMA, devices, Traffic(1024, 256), 2.0, 0.05, prices=prices)}
    tight = best_under_targets(LLAMA, devices, Traffic(1024, 256), *tighter, prices=prices)
    for b in tight:
        if b.meets:
            assert loose[b.hardware].meets
            cost, looser = b.point["usd_per_million_output_all_in"], loose[b.hardware].point
            assert cost >= looser["usd_per_million_output_all_in"] - 1e-12


def test_what_binds_when_no_setup_meets_the_targets():
    best = {
        b.hardware: b for b in best_under_targets(LLAMA, [H100, get_hardware("l4")], Traffic(1024, 256), 2.0, 0.0005)
    }
    assert not best["h100-sxm"].meets and best["h100-sxm"].binding.startswith("TPOT:")
    # On one device a 0.5 ms TPOT needs more bandwidth, not more FLOPS.
    one = best_under_targets(LLAMA, [H100], Traffic(1024, 256), 2.0, 0.0005, tps=(1,))[0]
    assert "memory-bound at batch 1" in one.binding
    huge = {
        b.hardware: b
        for b in best_under_targets(get_model("llama-3.1-405b"), [get_hardware("l4")], Traffic(), 2, 0.05, tps=(1,))
    }
    assert "memory capacity" in huge["l4"].binding


def test_the_plan_runs_fp8_weights_as_the_engines_do():
    a100 = get_hardware("a100-sxm-80gb")
    # W8A8 where the device computes in fp8; FP8 Marlin (weight-only, bf16 math) on Ampere.
    assert (engine_math("fp8", H100), engine_math("fp8", a100), engine_math("bf16", H100)) == ("fp8", "bf16", "bf16")
    plans = best_under_targets(
        LLAMA, [H100, a100], Traffic(1024, 256), 2.0, 0.05, tps=(1,), precisions=(("fp8", "fp8"),)
    )
    best = {b.hardware: b for b in plans}
    assert best["h100-sxm"].act_dtype == "fp8" and best["a100-sxm-80gb"].act_dtype == "bf16"
    assert best["h100-sxm"].to_json()["act_dtype"] == "fp8"
    # The H100's plan is a point of the W8A8 frontier: the fp8 peak halves its prefill.
    w8a8 = serving_sweep(LLAMA, [H100], Traffic(1024, 256), Precision("fp8", "fp8", "fp8"), 1)
    weight_only = serving_sweep(LLAMA, [H100], Traffic(1024, 256), Precision("fp8", "bf16", "fp8"), 1)
    j = int(np.flatnonzero(w8a8.batch == best["h100-sxm"].point["batch"])[0])
    assert best["h100-sxm"].point["ttft_s"] == pytest.approx(w8a8.ttft_s[0, j])
    assert w8a8.ttft_s[0, j] < weight_only.ttft_s[0, j]
    # A V100 has no bf16: its plan names the fp16 it runs.
    v100 = best_under_targets(get_model("llama-3.2-1b"), [get_hardware("v100-sxm2-32gb")], Traffic(1024, 256), 10, 0.2)
    assert (v100[0].weight_dtype, v100[0].act_dtype) == ("fp16", "fp16")


def test_prices_carry_their_source_and_date():
    prices = load_prices()
    assert {"h100-sxm", "h200-sxm", "b200", "tpu-v6e"} <= set(prices)
    devices = load_hardware()
    for device, price in prices.items():
        assert device in devices and price.usd_per_hour > 0
        assert price.source.url.startswith("https://") and price.as_of and price.provider
    assert parse_price("h100-sxm=2.5") == ("h100-sxm", 2.5)
    for bad in ("h100-sxm", "h100-sxm=-1", "h100-sxm=inf", "=3", "h100-sxm=nan"):
        with pytest.raises(ValueError, match="--price"):
            parse_price(bad)


def test_serve_cli_json_and_errors():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "roofline",
            "serve",
            "--model",
            "llama-3.1-8b",
            "--hardware",
            "h100-sxm",
            "--hardware",
            "l40s",
            "--tp",
            "1",
            "--tp",
            "2",
            "--price",
            "l40s=1.5",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert {"best", "frontier", "levers", "prices", "targets"} <= set(data)
    assert data["prices"]["l40s"] == {"usd_per_hour": 1.5, "source": "--price"}
    assert "2026-02" in data["prices"]["h100-sxm"]["source"]
    assert {p["tp"] for p in data["frontier"]} == {1, 2}
    assert {"speculative_decoding", "disaggregation"} <= set(data["levers"])
    for args, message in (
        (["--price", "nope=3"], "unknown device 'nope'"),
        (["--price", "h100-sxm=abc"], "--price: expected"),
        (["--spec-alpha", "1.5"], "expected a number in [0, 1]"),
        (["--prompt-len", "200000"], "exceed Llama 3.1 8B's maximum context"),
        # Each error names the option given, not the engine's name for it ("seq_len + 1", "length range").
        (["--prompt-len", "131072", "--output-len", "1"], "--prompt-len + --output-len (or their --*-max): 131,073"),
        (["--prompt-len", "100", "--prompt-max", "10", "--rate", "5"], "--prompt-max: expected at least --prompt-len"),
        (["--output-max", "1", "--rate", "5"], "--output-max: expected at least --output-len (256 tokens), got 1"),
        (
            ["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1", "--ramp-up-end-rps", "1e12"],
            "--ramp-up-end-rps: expected a rate of at most 1e+09 requests/s",
        ),
    ):
        bad = subprocess.run(
            [sys.executable, "-m", "roofline", "serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert bad.returncode == 2 and message in bad.stderr, bad.stderr


def test_serving_page():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "views/serving_page.py"), default_timeout=60).run()
    assert not at.exception and not at.error
    assert [c.key for c in at.get("plotly_chart")] == ["frontier_chart"]  # the Frontier view, open by default
    # Under the frontier, how far its steady-state TPOT was off on the accuracy report's test runs, per device.
    said = " ".join(c.value for c in at.caption)
    assert "Published bias of this steady-state TPOT" in said and "NVIDIA H100 SXM5 80GB TPOT " in said
    # In short paragraphs: how to read it, what it rests on (and its bias), what it leaves out.
    notes = [c.value for c in at.caption]
    read = next(i for i, c in enumerate(notes) if c.startswith("Each line is one device"))
    assert "Published bias" in notes[read + 1] and notes[read + 2].startswith("Left out: batches that do not fit")
    assert all(len(notes[read + k]) < 700 for k in range(3))
    for view, charts in (("One point", ["point_roofline"]), ("Techniques", ["spec_chart"]), ("Cheapest setup", [])):
        at = AppTest.from_file(str(ROOT / "views/serving_page.py"), default_timeout=60)
        at.query_params["view"] = view
        at.run()
        assert not at.exception and not at.error and [c.key for c in at.get("plotly_chart")] == charts
        if view == "One point":
            link = next(md.value for md in at.markdown if "Open this batch on the LLM inference page" in md.value)
            assert "/llm?model=llama-3.1-8b&hw=h100-sxm&batch=" in link
    at.number_input(key="tpot_ms").set_value(10.0).run()
    assert not at.exception
    table = next(d.value for d in at.dataframe if "meets" in d.value.columns)  # beside the prices editor
    assert set(table.columns) >= {"device", "meets", "$ per M output (all-in)", "what binds"}
    # Shown under a short heading (the CSV keeps the long name), its meaning in the help.
    shown = json.loads(next(d for d in at.dataframe if "meets" in d.value.columns).proto.columns)
    assert (
        shown["$ per M output (all-in)"]["label"] == "$/M output"
        and "all-in" in shown["$ per M output (all-in)"]["help"]
    )
    assert not at.warning  # some device meets TPOT <= 10 ms
    at.number_input(key="tpot_ms").set_value(0.1).run()  # no device decodes a token in 0.1 ms
    # What stops each setup in view: after the device, what it rests on, its cost and whether it meets them.
    assert "No device meets" in at.warning[0].value and list(table.columns[:5])[-1] == "what binds"


def test_a_fractional_prefill_chunk_is_a_token_count_not_a_batch():
    # 4 decoding sequences and 16.5 prompt tokens per step on average (steady state: c = B x
    # prompt / output need not be whole): the linear layers see 20.5 rows, the LM head 4.
    w = Workload(LLAMA, "decode", 4, 1152)
    ops = {op.name: op for op in mixed_step_ops(w, 4, 16.5, 1024)}
    qkv = ops["QKV projection"]
    assert qkv.meta["m"] == 20.5
    assert qkv.flops == 2 * 20.5 * 4096 * (32 + 2 * 8) * 128
    assert ops["logits (LM head)"].meta["m"] == 4
    chunk = ops["attention (FlashAttention), prefill chunk"]
    prefill = next(op for op in step_ops(Workload(LLAMA, "prefill", 1, 1024)) if op.meta.get("kind") == "attention")
    assert chunk.flops == pytest.approx(prefill.flops * 16.5 / 1024)


def test_every_prompt_and_output_length_from_128_to_8192_sweeps():
    # Prompt / output pairs whose chunk B x prompt / output is fractional (1,000 / 128 = 7.8125
    # per sequence), output longer than the prompt included.
    lengths = [128, 256, 1000, 1024, 4096, 8192]
    batches = np.array([1, 3, 16, 64, 256])
    tpot = {}
    for prompt in lengths:
        for output in lengths:
            pts = serving_sweep(LLAMA, [H100], Traffic(prompt, output), batches=batches)
            assert np.all(np.isfinite(pts.tpot_s)) and np.all(np.isfinite(pts.ttft_s))
            assert np.all(pts.tpot_s > 0) and np.all(pts.ttft_s > 0)
            assert np.all(np.diff(pts.tpot_s[0]) > 0)  # a larger batch never steps faster
            assert np.all(np.diff(pts.tokens_per_s[0]) > 0)  # ... and never yields fewer tokens/s
            tpot[prompt, output] = pts.tpot_s[0]
    for output in lengths:  # a longer prompt: more chunk tokens per step and a longer cache
        for shorter, longer in zip(lengths, lengths[1:]):
            assert np.all(tpot[longer, output] > tpot[shorter, output])


def test_serve_cli_with_a_prompt_that_makes_a_fractional_chunk():
    for lengths in (["--prompt-len", "1000"], ["--prompt-len", "1024", "--output-len", "8192"]):
        out = subprocess.run(
            [sys.executable, "-m", "roofline", "serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm"]
            + lengths
            + ["--json"],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert out.returncode == 0, out.stderr
        assert "Traceback" not in out.stderr
        data = json.loads(out.stdout)
        assert data["prompt_len"] == int(lengths[1])


def test_tp_degrees_that_do_not_split_the_heads_are_skipped_with_a_note():
    # Qwen2.5 7B: 28 heads (28 % 8 = 4), 4 KV heads, MLP 18,944 wide: TP 1, 2 and 4 split it, 8 does not.
    qwen = get_model("qwen2.5-7b")
    best = best_under_targets(qwen, [H100], Traffic(1024, 256), 2.0, 0.05, tps=(1, 2, 4, 8))
    assert best[0].meets and best[0].point["tp"] in (1, 2, 4)
    assert best[0].notes == ("TP=8 skipped: tp=8 does not divide qwen2.5-7b's 28 attention heads",)
    assert best[0].to_json()["notes"] == list(best[0].notes)
    # Falcon 7B's 71 heads split over one device only; with no TP left there is nothing to search.
    falcon = get_model("falcon-7b")
    none = best_under_targets(falcon, [H100], Traffic(1024, 256), 2.0, 0.05, tps=(2, 4))
    assert not none[0].meets and none[0].binding == "no TP degree searched splits the model"
    assert len(none[0].notes) == 2


@pytest.mark.parametrize("model", ["qwen2.5-7b", "phi-4", "falcon-7b", "smollm2-135m"])
def test_serve_cli_searches_on_past_a_tp_that_does_not_split_the_heads(model):
    out = subprocess.run(
        [sys.executable, "-m", "roofline", "serve", "--model", model, "--hardware", "h100-sxm", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    data = json.loads(out.stdout)
    assert data["skipped_tp"] and all(why.startswith(f"TP={tp} skipped") for tp, why in data["skipped_tp"].items())
    assert data["best"][0]["meets_targets"] and str(data["best"][0]["tp"]) not in data["skipped_tp"]


def test_a_request_that_fills_the_context_exactly_is_planned_and_one_more_token_is_refused():
    """vLLM takes prompt + max_tokens up to max_model_len; the frontier refused a 131,071-token
    prompt with one output token on a 131,072-token model (its mean cache rounded up past it)."""
    llama, h100 = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    pts = serving_sweep(llama, [h100], Traffic(131_071, 1), batches=[1])
    assert pts.runs[0][0]
    with pytest.raises(ValueError, match="prompt \\+ output: 131,073 tokens exceed"):
        serving_sweep(llama, [h100], Traffic(131_072, 1), batches=[1])
