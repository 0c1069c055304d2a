"""Measured serving results: the three benchmarks' files read into one record per point, hostile
files refused with a message that names the field, and each point compared with the simulation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from roofline.serving.measured import (
    MAX_MEASURED_BYTES,
    METRICS,
    STATS,
    MeasuredError,
    MeasuredRun,
    compare,
    curve,
    parse_measured,
    read_measured,
    requests_for,
)

DATA = Path(__file__).parent / "data" / "serving_results"
VLLM = DATA / "vllm_bench_serve.json"
VLLM_APPEND = DATA / "vllm_bench_serve_append.jsonl"
GUIDELLM = DATA / "guidellm_benchmarks.json"
AIPERF = DATA / "aiperf_profile_export.json"


def test_vllm_bench_serve_result():
    (run,) = read_measured(VLLM)
    assert (run.format, run.arrival, run.rate_per_s, run.concurrency, run.burstiness) == (
        "vllm",
        "poisson",
        4.0,
        None,
        1,
    )
    assert run.requests == 200
    assert run.prompt_tokens_mean == 102400 / 200 == 512 and run.output_tokens_mean == 25600 / 200 == 128
    # ms to seconds; median_* is the p50
    assert run.latency["ttft_s"] == pytest.approx({"mean": 0.0246, "p50": 0.0221, "p90": 0.0318, "p99": 0.0482})
    assert run.latency["tpot_s"]["p99"] == pytest.approx(0.00705)
    assert run.latency["itl_s"]["p99"] == pytest.approx(0.0147)
    assert run.latency["e2e_s"] == pytest.approx({"mean": 0.84, "p50": 0.8335, "p90": 0.8724, "p99": 0.9219})
    assert (run.request_throughput_per_s, run.output_throughput_tokens_per_s) == (3.858, 493.8)
    assert (run.model, run.backend) == ("meta-llama/Llama-3.1-8B-Instruct", "vllm")
    assert run.missing == ()


def test_vllm_appended_results_are_points_and_say_what_they_lack():
    first, second = read_measured(VLLM_APPEND)
    # request_rate "inf" with --max-concurrency 16: a closed loop of 16 clients
    assert (first.arrival, first.concurrency, first.rate_per_s) == ("concurrency", 16, None)
    assert (second.arrival, second.rate_per_s, second.concurrency) == ("poisson", 10.0, None)
    assert first.label.startswith("point 1 of 2") and second.label.startswith("point 2 of 2")
    assert first.prompt_tokens_mean == 1024 and first.output_tokens_mean == 256
    # default --metric-percentiles 99 and --percentile-metrics ttft,tpot,itl: no p90, no end-to-end
    assert first.latency["ttft_s"] == pytest.approx({"mean": 0.061, "p50": 0.055, "p90": None, "p99": 0.118})
    assert second.latency["ttft_s"]["mean"] == pytest.approx(0.040)
    assert set(first.missing) == {"ttft_s.p90", "tpot_s.p90", "itl_s.p90"} | {f"e2e_s.{s}" for s in STATS}


def test_vllm_rate_inf_without_a_cap_is_every_request_at_once():
    data = json.loads(VLLM.read_text()) | {"request_rate": "inf", "max_concurrency": None}
    (run,) = parse_measured(json.dumps(data))
    assert (run.arrival, run.concurrency) == ("concurrency", 200)
    assert any("at once" in note for note in run.notes)


def test_guidellm_report_sweep():
    sync, poisson = read_measured(GUIDELLM)
    assert (sync.format, sync.arrival, sync.concurrency) == ("guidellm", "concurrency", 1)
    assert (poisson.arrival, poisson.rate_per_s) == ("poisson", 5.0)
    assert sync.requests == 60 and poisson.requests == 150
    assert sync.prompt_tokens_mean == 256 and sync.output_tokens_mean == 128
    assert poisson.latency["ttft_s"] == pytest.approx({"mean": 0.025, "p50": 0.022, "p90": 0.034, "p99": 0.060})
    # inter_token_latency_ms is the per-request TPOT; request_latency is already in seconds
    assert poisson.latency["tpot_s"] == pytest.approx({"mean": 0.0046, "p50": 0.0045, "p90": 0.005, "p99": 0.0056})
    assert poisson.latency["e2e_s"] == pytest.approx({"mean": 0.61, "p50": 0.60, "p90": 0.66, "p99": 0.74})
    assert poisson.missing == tuple(f"itl_s.{s}" for s in STATS)
    assert (poisson.request_throughput_per_s, poisson.output_throughput_tokens_per_s) == (4.95, 634.0)
    assert (poisson.model, poisson.backend) == ("meta-llama/Llama-3.1-8B-Instruct", "openai_http")


def test_guidellm_0_3_report_layout():
    data = json.loads(GUIDELLM.read_text())
    for bench in data["benchmarks"]:
        config = bench.pop("config")
        bench["args"] = {"strategy": config["strategy"], "strategy_index": 0}
        bench["worker"] = {"backend_type": "openai_http", "backend_model": "old/model"}
        bench["request_totals"] = bench["metrics"].pop("request_totals")
    sync, poisson = parse_measured(json.dumps(data))
    assert (sync.concurrency, poisson.rate_per_s, poisson.requests) == (1, 5.0, 150)
    assert (poisson.model, poisson.backend) == ("old/model", "openai_http")


def test_aiperf_profile_export():
    (run,) = read_measured(AIPERF)
    # the profiling phase, not the warmup
    assert (run.format, run.arrival, run.concurrency, run.requests) == ("aiperf", "concurrency", 32, 500)
    assert run.prompt_tokens_mean == 1024 and run.output_tokens_mean == 255
    assert run.latency["ttft_s"] == pytest.approx({"mean": 0.095, "p50": 0.088, "p90": 0.140, "p99": 0.210})
    assert run.latency["tpot_s"]["p99"] == pytest.approx(0.0096)  # inter_token_latency
    assert run.latency["itl_s"]["p99"] == pytest.approx(0.017)  # inter_chunk_latency
    assert run.latency["e2e_s"]["mean"] == pytest.approx(2.21)
    assert (run.request_throughput_per_s, run.output_throughput_tokens_per_s) == (14.2, 3620.0)
    assert (run.model, run.backend) == ("Qwen/Qwen3-8B", "chat")
    assert run.missing == ()


def test_aiperf_units_and_older_loadgen_config():
    data = json.loads(AIPERF.read_text())
    data["time_to_first_token"] = {"unit": "us", "avg": 95000.0, "p99": 210000.0}
    data["input_config"] = {"endpoint": {"model_names": ["m"], "type": "chat"}, "loadgen": {"request_rate": 3.5}}
    (run,) = parse_measured(json.dumps(data))
    assert run.latency["ttft_s"] == pytest.approx({"mean": 0.095, "p50": None, "p90": None, "p99": 0.21})
    assert (run.arrival, run.rate_per_s, run.model) == ("poisson", 3.5, "m")


def _guidellm_with(change) -> str:
    data = json.loads(GUIDELLM.read_text())
    change(data)
    return json.dumps(data)


def _aiperf_with(change) -> str:
    data = json.loads(AIPERF.read_text())
    change(data)
    return json.dumps(data)


def _vllm_with(**fields) -> str:
    return json.dumps(json.loads(VLLM.read_text()) | fields)


HOSTILE = [
    (VLLM.read_text()[:500], "not JSON"),
    (VLLM.read_text().replace("24.6", "NaN"), "NaN is not allowed"),
    (VLLM.read_text().replace("24.6", "Infinity"), "Infinity is not allowed"),
    (_vllm_with(mean_ttft_ms="fast"), r"mean_ttft_ms: expected a non-negative number, got 'fast'"),
    (_vllm_with(p99_tpot_ms=True), "p99_tpot_ms: expected a non-negative number"),
    (_vllm_with(mean_itl_ms=-1.0), "mean_itl_ms: expected a non-negative number"),
    (_vllm_with(mean_e2el_ms=10**400), "mean_e2el_ms: expected a non-negative number"),
    (_vllm_with(completed=0), "completed: no request completed"),
    (_vllm_with(completed=2.5), "completed: expected a whole number"),
    (_vllm_with(request_rate="fast"), "request_rate: expected a number or 'inf'"),
    (_vllm_with(request_rate=0), "request_rate: expected a rate above 0 requests/s or 'inf', got 0"),
    (_vllm_with(burstiness=0), r"burstiness: expected a factor above 0 \(1: Poisson\), got 0"),
    (_vllm_with(model_id=["x"]), "model_id: expected text"),
    (
        _guidellm_with(
            lambda d: d["benchmarks"][1]["metrics"]["time_to_first_token_ms"]["successful"].update(mean="x")
        ),
        r"benchmarks\[1\]\.metrics\.time_to_first_token_ms\.successful\.mean: expected a non-negative number",
    ),
    (
        _guidellm_with(lambda d: d["benchmarks"][0]["config"]["strategy"].update(type_="trace")),
        r"benchmarks\[0\]\.config\.strategy\.type_: strategy 'trace' cannot be simulated",
    ),
    (
        _guidellm_with(lambda d: d["benchmarks"][1]["config"]["strategy"].pop("rate")),
        r"benchmarks\[1\]\.config\.strategy\.rate: missing",
    ),
    (_guidellm_with(lambda d: d["benchmarks"].__setitem__(0, 7)), r"benchmarks\[0\]: expected an object"),
    (_aiperf_with(lambda d: d["request_latency"].update(unit="fortnights")), "request_latency.unit: expected one of"),
    (_aiperf_with(lambda d: d["input_config"].pop("phases")), "load .* is not recorded"),
    (_aiperf_with(lambda d: d["input_config"]["phases"][1].update(type="user_centric")), "phase 'user_centric'"),
    ("[" * 100 + "]" * 100, "nested deeper than 32"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper than 32"),
    ('{"results": [1, 2, 3]}', "supported: vllm bench serve.*GuideLLM.*aiperf"),
    ("[]", "supported:"),
    ("", "not JSON"),
    (b"\xff\xfe{}", "not UTF-8"),
]


@pytest.mark.parametrize(("text", "message"), HOSTILE, ids=[message[:40] for _, message in HOSTILE])
def test_hostile_files_are_refused_naming_the_field(text, message):
    with pytest.raises(MeasuredError, match=message):
        parse_measured(text, "upload.json")


def test_huge_files_are_refused_before_parsing(tmp_path):
    with pytest.raises(MeasuredError, match="16 MiB"):
        parse_measured(b" " * (MAX_MEASURED_BYTES + 1))
    path = tmp_path / "huge.json"
    with path.open("wb") as f:
        f.truncate(MAX_MEASURED_BYTES + 1)
    with pytest.raises(ValueError, match="more than"):
        read_measured(path)
    with pytest.raises(ValueError, match="not a regular file"):
        read_measured(tmp_path)


def test_measured_loads_become_simulated_requests():
    (run,) = read_measured(AIPERF)
    requests = requests_for(run)
    assert requests.concurrency == 32 and requests.count == 500
    assert set(requests.prompt_tokens.tolist()) == {1024} and set(requests.output_tokens.tolist()) == {255}
    (open_loop,) = read_measured(VLLM)
    requests = requests_for(open_loop)
    assert requests.concurrency is None and requests.count == 200
    assert requests.arrival_s[0] == 0 and 200 / requests.arrival_s[-1] == pytest.approx(4.0, rel=0.25)
    # A file whose token totals over its completed requests come to less than a token a request (10^12
    # completed) had been simulated as 1-token requests and its gap printed: refused, the mean named.
    from dataclasses import replace

    from roofline.serving.measured import MeasuredError

    with pytest.raises(MeasuredError, match="mean prompt length is 1.02e-07 tokens, below one token a request"):
        requests_for(replace(open_loop, prompt_tokens_mean=1.024e-07))


def test_compare_takes_ratios_and_fits_nothing():
    (run,) = read_measured(VLLM)
    seen: list[MeasuredRun] = []

    def simulate_fn(point: MeasuredRun) -> dict:
        seen.append(point)
        return {m: {s: 2 * (v or 0) for s, v in point.latency[m].items()} for m in METRICS} | {
            "request_throughput_per_s": 3.858,
            "output_throughput_tokens_per_s": None,
        }

    (result,) = compare([run], simulate_fn)
    assert seen == [run]
    assert all(row["ratio"] == pytest.approx(2.0) for row in result["latency"])
    ttft_p99 = next(r for r in result["latency"] if (r["metric"], r["stat"]) == ("ttft_s", "p99"))
    assert ttft_p99 == pytest.approx(
        {"metric": "ttft_s", "stat": "p99", "measured": 0.0482, "predicted": 0.0964, "ratio": 2}
    )
    assert [r["ratio"] for r in result["throughput"]] == [1.0, None]


def test_compare_with_the_simulation_gives_finite_ratios():
    from roofline.hardware import get_hardware
    from roofline.models import get_model
    from roofline.serving.measured import simulator

    runs = read_measured(GUIDELLM)
    results = compare(runs, simulator(get_model("llama-3.1-8b"), get_hardware("h100-sxm")))
    assert [r["point"] for r in results] == [run.label for run in runs]
    for result in results:
        assert result["predicted_summary"]["completed"] == result["measured"]["requests"]
        for row in result["latency"] + result["throughput"]:
            if row["measured"] is not None:
                assert row["predicted"] > 0 and math.isfinite(row["ratio"]) and row["ratio"] > 0
            else:
                assert row["ratio"] is None
    # the synchronous point: one request at a time, so no queueing and TTFT near its p50
    ttft = {r["stat"]: r["predicted"] for r in results[0]["latency"] if r["metric"] == "ttft_s"}
    assert ttft["p99"] == pytest.approx(ttft["p50"], rel=0.05)


def test_curve_orders_the_points_by_load():
    runs = read_measured(VLLM_APPEND) + read_measured(VLLM)  # 16 clients, 10 and 4 requests/s
    results = compare(runs, lambda run: {"ttft_s": {"p99": 0.1}})
    rows = curve(results, "ttft_s", "p99")
    assert [(r["load"], r["load_unit"]) for r in rows] == [(4.0, "requests/s"), (10.0, "requests/s"), (16, "clients")]
    assert rows[0]["measured"] == pytest.approx(0.0482) and rows[0]["ratio"] == pytest.approx(0.1 / 0.0482)
    assert [r["measured"] for r in curve(results, "ttft_s", "p90")] == [pytest.approx(0.0318), None, None]
    with pytest.raises(ValueError, match="expected a metric"):
        curve(results, "goodput", "p99")


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    from roofline.cli import main

    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


SERVE = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm"]


def test_serve_measured_prints_the_gap_per_metric(capsys):
    code, out, err = _cli(SERVE + ["--measured", str(VLLM_APPEND)], capsys)
    assert code == 0, err
    assert "predicted / measured" in out and "point 2 of 2: 10 requests/s (Poisson)" in out
    assert "TTFT       p99" in out and "not in the file: ttft_s.p90" in out
    code, out, err = _cli(SERVE + ["--measured", str(AIPERF), "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["format"] == "aiperf" and data["fitted"] is False and len(data["points"]) == 1
    assert all(math.isfinite(row["ratio"]) for row in data["points"][0]["latency"])


def test_serve_measured_refuses_a_bad_file(tmp_path, capsys):
    bad = tmp_path / "result.json"
    bad.write_text('{"mean_ttft_ms": NaN, "completed": 3}')
    code, out, err = _cli(SERVE + ["--measured", str(bad)], capsys)
    assert code == 2 and "NaN is not allowed" in err and not out
    with pytest.raises(SystemExit):
        _cli(SERVE + ["--measured", str(VLLM), "--rate", "3"], capsys)
    assert "not allowed with argument" in capsys.readouterr().err
    long_prompts = tmp_path / "long.json"
    long_prompts.write_text(VLLM.read_text().replace('"total_input_tokens": 102400', '"total_input_tokens": 40000000'))
    code, out, err = _cli(SERVE + ["--measured", str(long_prompts)], capsys)
    assert code == 2 and "4 requests/s (Poisson): prompt + output" in err and "maximum context" in err
