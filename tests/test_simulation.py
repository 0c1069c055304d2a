"""The request-level serving simulation: a schedule worked by hand, a closed loop whose first
token is the batch's prefill, and the laws any queue obeys (Little's law, latency rising with
load, the limits at no load and past capacity, conservation of tokens, reproducible seeds)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.serving.simulation.load import Lengths, Load, Requests, make_requests
from roofline.serving.simulation.metrics import Targets, in_system_mean, per_request, summary
from roofline.serving.simulation.run import simulate
from roofline.serving.simulation.scheduler import EngineKnobs
from roofline.serving.simulation.steptime import StepTimes, Table1, Table2, step_times
from roofline.serving.simulation.traces import read_trace
from roofline.settings import Settings
from roofline.workload import Precision

MS = 1e-3


def flat_times(step_s: float = MS) -> StepTimes:
    """Every step costs ``step_s``, whatever it holds (the parts other than rows cost nothing)."""
    g = np.array([1.0, 1e6])
    zero = np.full((2, 2), 1e-30)
    return StepTimes(
        roofs="test",
        rows=Table1(g, np.full(2, step_s)),
        logits=Table1(g, np.full(2, 1e-30)),
        decode_attention=Table2(g, g, zero),
        chunk_attention=Table2(g, g, zero),
    )


def test_two_requests_scheduled_step_by_step():
    """Budget 8 tokens a step, blocks of 4 tokens. A: prompt 10, 3 outputs; B: prompt 5, 2 outputs;
    both at t = 0.
    step 1: A takes 8 of its 10 prompt tokens (the budget); B waits.
    step 2: A's last 2 prompt tokens -> A's first token; B admitted with 5 of the 6 left -> B's first.
    step 3: both decode -> A's 2nd token, B's 2nd and last (B done at 3 ms).
    step 4: A decodes its 3rd and last token (done at 4 ms)."""
    requests = Requests(np.zeros(2), np.array([10, 5]), np.array([3, 2]))
    knobs = EngineKnobs(max_num_batched_tokens=8, max_num_seqs=4, block_size=4)
    run = simulate(requests, flat_times(), kv_blocks=100, knobs=knobs)
    assert run.first_token_s == pytest.approx([2 * MS, 2 * MS])
    assert run.finish_s == pytest.approx([4 * MS, 3 * MS])
    assert run.steps == 4 and list(run.step_tokens) == [8, 7, 2, 1]
    r = per_request(run)
    assert r["tpot_s"] == pytest.approx([1 * MS, 1 * MS])  # (4 - 2) / 2 and (3 - 2) / 1


def test_a_full_budget_waits_for_the_next_step():
    """Without chunked prefill a prompt larger than the budget left waits whole."""
    requests = Requests(np.zeros(2), np.array([6, 6]), np.array([1, 1]))
    knobs = EngineKnobs(max_num_batched_tokens=8, chunked_prefill=False)
    run = simulate(requests, flat_times(), kv_blocks=100, knobs=knobs)
    assert run.first_token_s == pytest.approx([1 * MS, 2 * MS])


@pytest.fixture(scope="module")
def h100_8b() -> StepTimes:
    return step_times(get_model("llama-3.1-8b"), get_hardware("h100-sxm"), Precision(), 1, Settings(), 8192, 256)


def test_a_closed_loop_of_identical_requests_waits_for_their_joint_prefill(h100_8b):
    """C clients send the same 1,024-token prompt at t = 0: one step prefills all C prompts, so
    every first token comes after that step: rows of C x 1,024 tokens, C sampled rows, and C
    chunk attentions with nothing cached."""
    c = 8
    load = Load("concurrency", c, Lengths(1024), Lengths(16), concurrency=c)
    run = simulate(make_requests(load), h100_8b, kv_blocks=10_000, knobs=EngineKnobs())
    prefill = h100_8b.rows.at(c * 1024) + h100_8b.logits.at(c) + c * h100_8b.chunk_attention_s(1024, 0)
    assert per_request(run)["ttft_s"] == pytest.approx(np.full(c, prefill), rel=1e-9)
    # Eight prompts together take longer than one alone: the first token waits for the others.
    alone = h100_8b.rows.at(1024) + h100_8b.logits.at(1) + h100_8b.chunk_attention_s(1024, 0)
    assert prefill > 4 * alone


def _poisson(rate: float, n: int = 1500, seed: int = 3) -> Requests:
    return make_requests(Load("poisson", n, Lengths(512), Lengths(128), rate_per_s=rate, seed=seed))


def _run(times, rate, n=1500, blocks=20_000, seed=3):
    return simulate(_poisson(rate, n, seed), times, kv_blocks=blocks, knobs=EngineKnobs())


def test_littles_law(h100_8b):
    """Mean requests in the server (from the per-step log of running and waiting) equals the
    arrival rate times the mean time in the system."""
    run = _run(h100_8b, 30.0)
    s = summary(run)
    arrival_rate = (run.arrival_s.size - 1) / (run.arrival_s.max() - run.arrival_s.min())
    from_log = s["mean_running"] + s["mean_waiting"]
    assert from_log == pytest.approx(arrival_rate * s["e2e_s"]["mean"], rel=0.1)
    start, end = float(run.arrival_s.min()), float(np.nanmax(run.finish_s))
    assert in_system_mean(run, start, end) * (end - start) == pytest.approx(np.nansum(run.finish_s - run.arrival_s))


def test_latency_rises_with_the_rate_and_the_limits_hold(h100_8b):
    rates = [0.05, 5.0, 20.0, 40.0, 80.0]
    runs = [_run(h100_8b, r, n=600) for r in rates]
    ttft = [summary(r)["ttft_s"]["p50"] for r in runs]
    e2e = [summary(r)["e2e_s"]["p90"] for r in runs]
    assert all(b >= a * (1 - 1e-9) for a, b in zip(ttft, ttft[1:])), ttft
    assert all(b >= a * (1 - 1e-9) for a, b in zip(e2e, e2e[1:])), e2e
    # At a trickle each prompt meets an empty server: TTFT is one prefill, TPOT one decode step.
    low = summary(runs[0])
    prefill = h100_8b.rows.at(512) + h100_8b.logits.at(1) + h100_8b.chunk_attention_s(512, 0)
    assert low["ttft_s"]["p50"] == pytest.approx(prefill, rel=0.01)
    decode = h100_8b.rows.at(1) + h100_8b.logits.at(1) + h100_8b.decode_attention_s(1, 512 + 64)
    assert low["tpot_s"]["p50"] == pytest.approx(decode, rel=0.03)


def test_past_capacity_the_queue_grows_and_tpot_does_not(h100_8b):
    """Requests arrive faster than the server finishes them: each later request waits longer for
    its first token, while the batch is full and the time per output token stays put."""
    run = _run(h100_8b, 400.0, n=3000)
    r = per_request(run)
    middle, late = slice(1200, 1800), slice(2400, 3000)
    assert np.median(r["ttft_s"][late]) > 1.5 * np.median(r["ttft_s"][middle])
    assert np.median(r["tpot_s"][late]) == pytest.approx(np.median(r["tpot_s"][middle]), rel=0.1)
    # The queue builds up while requests keep arriving.
    last = run.arrival_s.max()
    at = np.searchsorted(run.step_end_s, [last / 4, last / 2, last])
    queue = run.step_waiting[np.minimum(at, run.step_waiting.size - 1)]
    assert queue[2] > queue[1] > queue[0] > 0, queue
    below = per_request(_run(h100_8b, 5.0, n=600))["ttft_s"]
    assert np.median(below[400:]) == pytest.approx(np.median(below[100:300]), rel=0.1)  # no queue


def test_tokens_are_conserved_and_the_cache_never_overflows(h100_8b):
    """With a cache of 600 blocks (9,600 tokens) for 16 requests of up to 1,600 tokens each, the
    scheduler must preempt; still every request gets exactly its output tokens."""
    load = Load("concurrency", 64, Lengths(256, 1024), Lengths(64, 576), concurrency=16, seed=7)
    run = simulate(make_requests(load), h100_8b, kv_blocks=600, knobs=EngineKnobs())
    assert run.preemptions.sum() > 0
    assert np.all(np.isfinite(run.finish_s)) and np.all(run.finish_s >= run.first_token_s)
    assert np.all(run.first_token_s > run.arrival_s)
    # Every token after the first is one inter-token gap.
    assert run.itl_weight.sum() == pytest.approx(float(np.sum(run.output_tokens - 1)))
    assert run.step_kv_used.max() <= 1.0 + 1e-12


def test_a_request_larger_than_the_cache_is_rejected_not_run(h100_8b):
    requests = Requests(np.array([0.0, 0.0]), np.array([100, 5000]), np.array([10, 10]))
    run = simulate(requests, h100_8b, kv_blocks=64, knobs=EngineKnobs())
    assert list(run.rejected) == [False, True] and np.isfinite(run.finish_s[0]) and np.isnan(run.finish_s[1])
    assert summary(run)["rejected"] == 1


def test_a_seed_reproduces_a_run_exactly(h100_8b):
    a, b = _run(h100_8b, 50.0, n=400, seed=11), _run(h100_8b, 50.0, n=400, seed=11)
    c = _run(h100_8b, 50.0, n=400, seed=12)
    assert np.array_equal(a.finish_s, b.finish_s) and np.array_equal(a.itl_s, b.itl_s)
    assert not np.array_equal(a.finish_s, c.finish_s)


def test_goodput_counts_requests_within_targets(h100_8b):
    run = _run(h100_8b, 20.0, n=300)
    r = per_request(run)
    loose, tight = Targets(ttft_s=10.0, tpot_s=1.0), Targets(ttft_s=float(np.median(r["ttft_s"])))
    assert summary(run, loose)["met_targets"] == 1.0
    assert summary(run, tight)["met_targets"] == pytest.approx(0.5, abs=0.02)


def test_loads_are_drawn_as_the_benchmarks_define_them():
    poisson = make_requests(Load("poisson", 20_000, Lengths(10), Lengths(5, 7), rate_per_s=4.0, seed=1))
    gaps = np.diff(poisson.arrival_s)
    assert poisson.arrival_s[0] == 0 and gaps.mean() == pytest.approx(0.25, rel=0.03)
    assert gaps.std() == pytest.approx(0.25, rel=0.05)  # exponential: std = mean
    assert set(np.unique(poisson.output_tokens)) == {5, 6, 7}
    bursty = make_requests(Load("gamma", 20_000, Lengths(10), Lengths(5), rate_per_s=4.0, burstiness=0.25, seed=1))
    assert np.diff(bursty.arrival_s).std() == pytest.approx(0.25 / np.sqrt(0.25), rel=0.1)  # gamma: mean / sqrt(k)
    closed = make_requests(Load("concurrency", 10, Lengths(10), Lengths(5), concurrency=3))
    # The clients' first requests at t = 0, the rest sent as requests finish (NaN until then).
    assert closed.concurrency == 3 and list(closed.arrival_s[:3]) == [0.0, 0.0, 0.0]
    assert np.all(np.isnan(closed.arrival_s[3:]))
    # Ramped over 3 s as aiperf ramps 1 to 3 clients: one more every 3 / (3 - 1) = 1.5 s.
    ramped = make_requests(Load("concurrency", 10, Lengths(10), Lengths(5), concurrency=3, ramp_s=3.0))
    assert list(ramped.arrival_s[:3]) == [0.0, 1.5, 3.0]


@pytest.mark.parametrize(
    "load, message",
    [
        (dict(kind="rate"), "load: 'rate' is not allowed"),
        (dict(kind="poisson", rate_per_s=float("nan")), "rate must be a number"),
        (dict(kind="poisson", rate_per_s=0.0), "rate must be a number"),
        (dict(kind="concurrency", concurrency=0), "concurrency must be an integer"),
        (dict(kind="poisson", rate_per_s=1.0, requests=10**7), "requests must be an integer"),
    ],
)
def test_bad_loads_are_named(load, message):
    args = dict(kind="poisson", requests=10, prompt=Lengths(10), output=Lengths(5)) | load
    with pytest.raises(ValueError, match=message):
        Load(**args)


def test_a_trace_file(tmp_path):
    path = tmp_path / "trace.jsonl"
    rows = [
        {"timestamp": 2000, "input_length": 100, "output_length": 10},
        {"timestamp": 1000, "input_length": 50, "output_length": 5},
        {"arrival_s": 1.5e3, "prompt_tokens": 70, "output_tokens": 7},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    trace = read_trace(path)
    assert list(trace.arrival_s) == [0.0, 500.0, 1000.0]  # seconds, sorted, from the first
    assert list(trace.prompt_tokens) == [50, 70, 100]
    path.write_text(json.dumps({"timestamp": 1e7, "input_length": 1, "output_length": 1}))
    assert read_trace(path).arrival_s[0] == 0.0


@pytest.mark.parametrize(
    "line, message",
    [
        ("not json", "trace line 1: neither a JSON object .a JSONL trace. nor a CSV header"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 1', "trace line 2: not JSON"),
        ("[1, 2]", "expected an object"),
        ('{"timestamp": 0, "input_length": 5}', "missing output_tokens or output_length"),
        ('{"timestamp": NaN, "input_length": 5, "output_length": 1}', "not JSON"),
        ('{"timestamp": 0, "input_length": -5, "output_length": 1}', "input_length must be an integer"),
        ('{"timestamp": 0, "input_length": 1e30, "output_length": 1}', "input_length must be an integer"),
    ],
)
def test_a_bad_trace_line_is_named(tmp_path, line, message):
    path = tmp_path / "t.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ValueError, match=message):
        read_trace(path)


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    from roofline.cli import main

    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


SERVE = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm"]


def test_serve_simulates_a_closed_loop_with_outputs_longer_than_prompts(capsys):
    code, out, err = _cli(
        SERVE + ["--concurrency", "4", "--requests", "8", "--prompt-len", "128", "--output-len", "2048", "--json"],
        capsys,
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["completed"] == 8 and data["load"]["kind"] == "concurrency"
    assert data["tpot_s"]["p50"] > 0 and data["ttft_s"]["p50"] > 0
    # engine "auto": vLLM's kernels on the H100, and its host work per step.
    rests_on = data["engine"]["what_the_times_rest_on"]
    assert "engine-measured roofs (vLLM 0.24.0 kernels)" in rests_on and "vLLM host work" in rests_on
    assert len(data["series"]["time_s"]) == len(data["series"]["waiting"]) > 0


def test_serve_simulates_w8a8_fp8_faster_than_bf16(capsys):
    runs = {}
    for dtype in ("bf16", "fp8"):
        argv = SERVE + ["--rate", "4", "--requests", "60", "--weight-dtype", dtype, "--act-dtype", dtype, "--json"]
        code, out, err = _cli(argv, capsys)
        assert code == 0, err
        runs[dtype] = json.loads(out)
    assert runs["fp8"]["tpot_s"]["p50"] < runs["bf16"]["tpot_s"]["p50"]


def test_serve_reads_a_trace(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    path.write_text(
        "\n".join(json.dumps({"timestamp": i * 100, "input_length": 300, "output_length": 20}) for i in range(30))
    )
    code, out, err = _cli(SERVE + ["--trace", str(path), "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["completed"] == 30


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--rate", "0"], "--rate: expected a positive number"),
        (["--rate", "1", "--hardware", "a100-sxm-80gb"], "give exactly one --hardware"),
        (["--rate", "1", "--tp", "1", "--tp", "2"], "give at most one --tp"),
        (["--rate", "1", "--requests", "300000"], "--requests: at most 200,000"),
        (["--concurrency", "2", "--prompt-len", "131000"], "exceed Llama 3.1 8B's maximum context"),
        (["--trace", "/nonexistent.jsonl"], "is not a file"),
    ],
)
def test_serve_simulation_refuses_clearly(extra, message, capsys):
    code, out, err = _cli(SERVE + extra, capsys)
    assert code == 2 and message in err and "Traceback" not in err


def test_capacity_arithmetic_by_hand():
    from roofline.serving.simulation.capacity import Capacity

    c = Capacity("x", 2, 10.0, 12.0, 0.1, 0.02, 1000.0, "TPOT", 90, 3.6, "datasheet")
    # Two devices at $3.60 an hour each: $0.002 a second for 1,000 tokens a second: $2 per million.
    assert c.usd_per_million_output_tokens == pytest.approx(2.0)
    assert c.replicas_for(25.0) == 3 and c.to_json(25.0)["devices_for_target"] == 6


def test_capacity_puts_out_the_output_tokens_of_the_rate_it_sustains():
    # A rate within the targets is carried whole: tokens/s = rate x output length, which a long run at
    # that rate shows in its steady middle (a finite run's span would count the drain of its last
    # requests, reading about a quarter low).
    from roofline.serving.simulation.api import simulate_serving
    from roofline.serving.simulation.capacity import max_rate

    m, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    c = max_rate(m, hw, Lengths(512), Lengths(128), Targets(ttft_s=1.0, tpot_s=12 * MS), requests=300)
    assert c.rate_per_s > 0 and c.output_tokens_per_s == pytest.approx(c.rate_per_s * 128)
    load = Load("poisson", 2000, Lengths(512), Lengths(128), rate_per_s=c.rate_per_s, seed=1)
    run = simulate_serving(m, hw, make_requests(load)).run
    lo, hi = np.percentile(run.finish_s, [25, 75])
    middle = (run.finish_s >= lo) & (run.finish_s < hi)
    assert run.output_tokens[middle].sum() / (hi - lo) == pytest.approx(c.output_tokens_per_s, rel=0.1)
    # A request that can never fit the KV cache is rejected and puts out nothing: 17,328 cache tokens
    # and prompts of up to 30,000 turn about half away.
    tight = Settings(memory_utilization=0.255)
    c = max_rate(m, hw, Lengths(256, 30000), Lengths(32), Targets(ttft_s=5.0, tpot_s=1.0), settings=tight, requests=200)
    offered = make_requests(Load("poisson", 200, Lengths(256, 30000), Lengths(32), rate_per_s=c.rate_per_s))
    admitted = ~simulate_serving(m, hw, offered, settings=tight).run.rejected
    assert 0.3 < admitted.mean() < 0.7
    assert c.output_tokens_per_s == pytest.approx(c.rate_per_s * 32 * admitted.mean())


def test_capacity_rises_with_looser_targets_and_faster_memory():
    from roofline.serving.simulation.capacity import max_rate

    m, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    prompt, output = Lengths(512), Lengths(128)

    def rate(tpot_ms: float, settings: Settings | None = None) -> float:
        return max_rate(
            m, hw, prompt, output, Targets(ttft_s=1.0, tpot_s=tpot_ms * MS), settings=settings, requests=300
        ).rate_per_s

    tight, loose = rate(8.0), rate(12.0)
    assert 0 < tight <= loose
    assert rate(8.0, Settings(memory_scale=2.0)) > tight  # decode is memory-bound: more bandwidth, more rate
    assert rate(3.0) == 0.0  # below one sequence's decode step (4.6 ms) no rate meets the target


def test_serve_capacity_ranks_devices(capsys):
    code, out, err = _cli(
        [
            "serve",
            "--model",
            "llama-3.1-8b",
            "--hardware",
            "h100-sxm",
            "--hardware",
            "a100-sxm-80gb",
            "--hardware",
            "l20",
            "--capacity",
            "--requests",
            "200",
            "--target-rate",
            "50",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    data = json.loads(out)
    ranked = [r["hardware"] for r in data["ranking"]]
    assert sorted(ranked) == ["a100-sxm-80gb", "h100-sxm", "l20"]
    assert all(r["replicas_for_target"] >= 1 for r in data["ranking"])
    # The L20 publishes no compute peak: its times are lower bounds, and its row says so.
    assert ["lower bounds" in r["roofs"] for r in data["ranking"]] == [h == "l20" for h in ranked]


def test_a_device_without_a_published_peak_simulates_lower_bounds(capsys):
    code, out, err = _cli(
        ["serve", "--model", "llama-3.1-8b", "--hardware", "l20", "--rate", "2", "--requests", "20", "--json"], capsys
    )
    assert code == 0, err
    rests_on = json.loads(out)["engine"]["what_the_times_rest_on"]
    assert "lower bounds" in rests_on and "L20" in rests_on


def test_serve_sweep_prints_latency_against_rate(capsys):
    code, out, err = _cli(SERVE + ["--sweep", "--prompt-len", "256", "--output-len", "32", "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    rates = [p["rate_per_s"] for p in data["points"]]
    assert len(rates) == 12 and rates == sorted(rates) and rates[-1] == pytest.approx(2 * data["saturation_rate_per_s"])
    ttft = [p["p50_ttft_s"] for p in data["points"]]
    assert ttft[-1] > ttft[0] > 0  # past saturation the first token waits in the queue
