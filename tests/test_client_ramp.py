"""A closed loop's clients started together or one at a time (aiperf's
``--concurrency-ramp-duration``): the schedule worked by hand, what being in step does to TTFT
and TPOT, and the ramp through the command line, aiperf's result files and the Serving page."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.serving.measured import parse_measured, requests_for
from roofline.serving.simulation.load import Lengths, Load, make_requests
from roofline.serving.simulation.metrics import per_request
from roofline.serving.simulation.run import simulate
from roofline.serving.simulation.scheduler import EngineKnobs
from roofline.serving.simulation.steptime import StepTimes, step_times
from roofline.settings import Settings
from roofline.workload import Precision
from tests.test_simulation import MS, flat_times

ROOT = Path(__file__).resolve().parent.parent
AIPERF = ROOT / "tests/data/serving_results/aiperf_profile_export.json"


def test_the_clients_start_as_aiperfs_linear_ramp_starts_them():
    """aiperf ramps the clients from 1 to C in steps of one over the duration: client k of 1..C
    starts at (k - 1) / (C - 1) x the duration, the last at the duration itself."""
    five = make_requests(Load("concurrency", 12, Lengths(8), Lengths(4), concurrency=5, ramp_s=2.0))
    assert list(five.arrival_s[:5]) == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert np.isnan(five.arrival_s[5:]).all()  # sent as requests end
    one = make_requests(Load("concurrency", 3, Lengths(8), Lengths(4), concurrency=1, ramp_s=2.0))
    assert one.arrival_s[0] == 0.0


@pytest.mark.parametrize(
    "load, message",
    [
        (dict(kind="poisson", rate_per_s=1.0, ramp_s=2.0), "ramp_s: the clients' ramp is a closed loop's"),
        (dict(kind="concurrency", concurrency=2, ramp_s=-1.0), "ramp_s must be a number"),
        (dict(kind="concurrency", concurrency=2, ramp_s=float("inf")), "ramp_s must be a number"),
    ],
)
def test_a_bad_ramp_is_named(load, message):
    with pytest.raises(ValueError, match=message):
        Load(requests=4, prompt=Lengths(8), output=Lengths(4), **load)


def test_a_client_that_finishes_before_the_last_one_starts_sends_on_at_once():
    """Two clients, the second to start at 5.5 ms; steps of 1 ms; prompts of 4 tokens, 2 outputs,
    so a request takes 2 steps (its prefill samples the first token, one decode the second).
    Five requests: client A runs 0-2 ms, then 2-4 ms and 4-6 ms, each sent as the last ends, ahead
    of B's start. B arrives at 5.5 ms, during A's decode: its prefill runs 6-7, its decode 7-8. A's
    fourth, sent at 6 ms as its third ends, is a moment late for the step composed then: its
    prefill runs 7-8 beside B's decode, its decode 8-9. The load's requests are one budget, as
    aiperf counts them: with four, A's third ends when every request is sent (B's included), and A
    stops; with three, A takes the last request at 4 ms, before B's start, and B never starts."""
    knobs = EngineKnobs(block_size=4)
    load = Load("concurrency", 5, Lengths(4), Lengths(2), concurrency=2, ramp_s=5.5 * MS)
    run = simulate(make_requests(load), flat_times(), kv_blocks=100, knobs=knobs)
    assert run.arrival_s == pytest.approx([0.0, 2 * MS, 4 * MS, 5.5 * MS, 6 * MS])
    assert run.first_token_s == pytest.approx([1 * MS, 3 * MS, 5 * MS, 7 * MS, 8 * MS])
    assert run.finish_s == pytest.approx([2 * MS, 4 * MS, 6 * MS, 8 * MS, 9 * MS])
    four = simulate(make_requests(replace(load, requests=4)), flat_times(), kv_blocks=100, knobs=knobs)
    assert four.arrival_s == pytest.approx([0.0, 2 * MS, 4 * MS, 5.5 * MS])
    assert four.finish_s == pytest.approx([2 * MS, 4 * MS, 6 * MS, 8 * MS])
    three = simulate(make_requests(replace(load, requests=3)), flat_times(), kv_blocks=100, knobs=knobs)
    assert three.arrival_s == pytest.approx([0.0, 2 * MS, 4 * MS])
    assert three.finish_s == pytest.approx([2 * MS, 4 * MS, 6 * MS])


@pytest.fixture(scope="module")
def h100_8b() -> StepTimes:
    return step_times(get_model("llama-3.1-8b"), get_hardware("h100-sxm"), Precision(), 1, Settings(), 8192, 256)


def test_clients_in_step_wait_for_each_others_prefill_and_spread_out_they_do_not(h100_8b):
    """Eight clients on identical requests: started together, every round's prompts arrive at once
    and every TTFT is the eight prompts' joint prefill, round after round; started over one
    request's time, each prompt comes alone (TTFT about one prompt's prefill) and lands between
    the other clients' tokens (TPOT higher than the decodes' alone)."""
    c, n = 8, 80
    knobs = EngineKnobs()
    together = per_request(
        simulate(
            make_requests(Load("concurrency", n, Lengths(1024), Lengths(64), concurrency=c)), h100_8b, 50_000, knobs
        )
    )
    joint = h100_8b.rows.at(c * 1024) + h100_8b.logits.at(c) + c * h100_8b.chunk_attention_s(1024, 0)
    assert together["ttft_s"] == pytest.approx(np.full(n, joint), rel=1e-9)  # every round in step
    cycle = float(np.mean(together["e2e_s"]))
    spread = Load("concurrency", n, Lengths(1024), Lengths(64), concurrency=c, ramp_s=cycle)
    apart = per_request(simulate(make_requests(spread), h100_8b, 50_000, knobs))
    alone = h100_8b.rows.at(1024) + h100_8b.logits.at(1) + h100_8b.chunk_attention_s(1024, 0)
    assert np.median(apart["ttft_s"]) < 2 * alone < joint / 2
    assert np.mean(apart["tpot_s"]) > np.mean(together["tpot_s"])


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    from roofline.cli import main

    try:
        code = main(argv)
    except SystemExit as stop:  # argparse refuses a value before the command runs
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


SERVE = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--prompt-len", "512", "--output-len", "32"]


def test_serve_ramps_the_clients(capsys):
    argv = SERVE + ["--concurrency", "4", "--requests", "40", "--ramp-s", "0.5"]
    code, out, err = _cli(argv + ["--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["load"]["ramp_s"] == 0.5 and data["completed"] == 40
    code, out, err = _cli(argv, capsys)
    assert code == 0 and "4 concurrent clients started one at a time over 500 ms" in out
    # Behind the least-loaded router too, which spends one budget across the fleet; the routers that
    # simulate each replica's share apart would spend one each, and refuse.
    code, out, err = _cli(argv + ["--replicas", "2", "--router", "least-loaded", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["completed"] == 40
    for router in ("round-robin", "random"):
        code, out, err = _cli(argv + ["--replicas", "2", "--router", router], capsys)
        assert code == 2 and "spends one budget of requests across the fleet" in err and "Traceback" not in err
    code, out, err = _cli(argv + ["--router", "random", "--json"], capsys)  # one replica: nothing to split
    assert code == 0, err


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--rate", "2", "--ramp-s", "3"],
            "--ramp-s: the clients' ramp is a closed loop's; give it with --concurrency",
        ),
        (["--sweep", "--ramp-s", "3"], "--ramp-s: the clients' ramp is a closed loop's"),
        (["--concurrency", "2", "--ramp-s", "-1"], "argument --ramp-s: expected a finite number >= 0"),
        (["--concurrency", "2", "--ramp-s", "nan"], "argument --ramp-s: expected a finite number >= 0"),
        (["--concurrency", "2", "--ramp-s", "1e8"], "argument --ramp-s: expected seconds in [0, 10000000]"),
    ],
)
def test_serve_refuses_a_bad_ramp_clearly(extra, message, capsys):
    code, out, err = _cli(SERVE + extra, capsys)
    assert code == 2 and message in err and "Traceback" not in err


def _aiperf(change) -> str:
    data = json.loads(AIPERF.read_text())
    change(data)
    return json.dumps(data)


def test_an_aiperf_ramp_is_read_and_simulated():
    def ramp(value):
        return _aiperf(lambda d: d["input_config"]["phases"][1].update(concurrency_ramp=value))

    (run,) = parse_measured(ramp(12.4))
    assert run.ramp_s == 12.4 and run.label == "32 concurrent, started over 12.4 s"
    (run,) = parse_measured(ramp({"duration": 6.2, "strategy": "LINEAR"}))  # aiperf's names in any case
    assert run.ramp_s == 6.2
    starts = requests_for(run).arrival_s[:32]
    assert starts[0] == 0.0 and starts[-1] == pytest.approx(6.2) and np.all(np.diff(starts) > 0)
    # Older exports: loadgen.concurrency_ramp_duration.
    old = _aiperf(lambda d: d.update(input_config={"loadgen": {"concurrency": 4, "concurrency_ramp_duration": 3.0}}))
    (run,) = parse_measured(old)
    assert (run.arrival, run.concurrency, run.ramp_s) == ("concurrency", 4, 3.0)
    # A ramp of a rate is not simulated, and the point says so.
    poisson = _aiperf(lambda d: d["input_config"]["phases"][1].update(type="poisson", rate=5.0, rate_ramp=10))
    (run,) = parse_measured(poisson)
    assert (run.arrival, run.ramp_s) == ("poisson", 0.0)
    assert "input_config.phases[1].rate_ramp: the ramp is not simulated (the target rate is)" in run.notes
    # No ramp recorded: every client at once.
    (run,) = parse_measured(AIPERF.read_text())
    assert run.ramp_s == 0.0 and np.all(requests_for(run).arrival_s[:32] == 0.0)


@pytest.mark.parametrize(
    "value, message",
    [
        (
            {"duration": 5, "strategy": "exponential"},
            r"concurrency_ramp.strategy: ramp 'exponential' cannot be simulated",
        ),
        ({"strategy": "linear"}, r"concurrency_ramp.duration: expected seconds in \[0, 1e7\], got None"),
        ("30s", r"concurrency_ramp: expected seconds in \[0, 1e7\], got '30s'"),
        (True, r"concurrency_ramp: expected seconds"),
        (-2, r"concurrency_ramp: expected seconds"),
    ],
)
def test_an_aiperf_ramp_that_cannot_be_simulated_is_named(value, message):
    from roofline.serving.measured.record import MeasuredError

    with pytest.raises(MeasuredError, match=message):
        parse_measured(_aiperf(lambda d: d["input_config"]["phases"][1].update(concurrency_ramp=value)))


def _serving(**params):
    from tests.page_helpers import page

    return page("views/serving_page.py", hw="h100-sxm", view="Under load", **params)


def test_the_serving_page_says_when_its_clients_are_in_step_and_ramps_them():
    at = _serving(load_kind="concurrency", load_conc="8", load_n="80")
    assert not at.exception and not at.warning, [e.message for e in at.exception]
    said = " ".join(c.value for c in at.caption)
    assert "The 8 clients start together and every request has the same lengths, so they stay in step" in said
    in_step = at.number_input(key="load_ramp")
    assert in_step.value == 0.0
    in_step.set_value(20.0).run()
    assert not at.exception
    said = " ".join(c.value for c in at.caption)
    assert "The 8 clients start one at a time over 20 s, as aiperf's --concurrency-ramp-duration starts them" in said
    # In the URL: the view is shared with its ramp.
    shared = _serving(load_kind="concurrency", load_conc="8", load_n="80", load_ramp="20")
    assert not shared.exception and not shared.warning
    assert shared.number_input(key="load_ramp").value == 20.0
    # A rate has no clients to ramp: no input, no such caption.
    at = _serving(load_kind="rate", load_ramp="20")
    assert not at.exception
    assert not [n for n in at.number_input if n.key == "load_ramp"]
    assert "clients start" not in " ".join(c.value for c in at.caption)


def test_validate_scores_the_runs_with_their_clients_out_of_step_when_asked(capsys):
    """--clients out-of-step: each run's clients start one at a time over one request's time (as
    simulated with them together): on fixed lengths each prompt then arrives on its own, so the
    first token comes sooner and the other clients' prefills land between a request's tokens."""
    from roofline.cli import main
    from roofline.validate import load_silicon_sample, why_not_scored
    from roofline.validate_load import score_load, simulate_row

    rows = [r for r in load_silicon_sample() if why_not_scored(r) is None and r["model_path"].endswith("8B-Instruct")]
    row = next(r for r in rows if float(r["batch_size"]) >= 16 and r["osl"] == "128")
    together = simulate_row(row, {}, tables=False)
    assert simulate_row(row, {}, tables=False, clients="together") == together
    apart = simulate_row(row, {}, tables=False, clients="out-of-step")
    assert apart["datasheet_ttft_ms"] < together["datasheet_ttft_ms"] / 2
    assert apart["datasheet_tpot_ms"] > together["datasheet_tpot_ms"]
    with pytest.raises(ValueError, match="clients: expected one of together, out-of-step"):
        score_load(rows[:1], clients="apart")
    assert main(["validate", "--load", "--every", "400", "--clients", "out-of-step", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["clients_start"] == "out-of-step"
    for extra in (["--report", "/tmp/x.json"], ["--memory"], []):
        assert main(["validate", "--clients", "out-of-step", *extra]) == 2
        assert "--clients: only with --load" in capsys.readouterr().err


def test_requests_turned_away_never_count_as_in_the_server():
    """A cache of 8 blocks turns away the longer requests; with a ramp, some of them are never
    sent before the run ends. Neither kind was ever in the server: the mean in it stays finite."""
    from roofline.serving.simulation.metrics import in_system_mean

    for seed in range(40):
        load = Load("concurrency", 30, Lengths(8, 200), Lengths(1, 8), concurrency=2, ramp_s=1.0, seed=seed)
        run = simulate(make_requests(load), flat_times(), 8, EngineKnobs())
        assert run.rejected.any()
        end = float(np.nanmax(run.finish_s))
        assert np.isfinite(in_system_mean(run, 0.0, end))


def test_serve_measured_sends_requests_n_where_the_file_records_no_count(tmp_path, capsys):
    data = json.loads(AIPERF.read_text())
    data.pop("request_count")
    data["input_config"]["phases"][1].pop("requests")
    path = tmp_path / "aiperf.json"
    path.write_text(json.dumps(data))
    argv = ["serve", "--model", "qwen3-8b", "--hardware", "h100-sxm", "--measured", str(path), "--json"]
    code, out, err = _cli(argv + ["--requests", "40"], capsys)
    assert code == 0, err
    assert json.loads(out)["points"][0]["predicted_summary"]["requests"] == 40


@pytest.mark.parametrize("clients, requests, ramp_s", [(1, 5, 1.0), (3, 40, 0.003), (8, 200, 0.05), (8, 30, 1e3)])
def test_a_ramped_closed_loop_keeps_its_clients_and_its_budget(clients, requests, ramp_s):
    """Every request arrives once, in index order; never more in flight than clients started by
    then; the arrivals are the starts still within the budget and the earliest finishes."""
    load = Load("concurrency", requests, Lengths(4, 40), Lengths(1, 12), concurrency=clients, ramp_s=ramp_s, seed=7)
    run = simulate(make_requests(load), flat_times(), kv_blocks=10_000, knobs=EngineKnobs())
    a, f = run.arrival_s, run.finish_s
    assert not np.isnan(a).any() and not np.isnan(f).any() and np.all(np.diff(a) >= 0)
    starts = np.arange(clients) * (ramp_s / (clients - 1)) if clients > 1 else np.zeros(1)
    for t in np.unique(np.concatenate([a, f])):
        in_flight = np.count_nonzero((a <= t) & (f > t))
        assert in_flight <= np.count_nonzero(starts <= t)
    # Each arrival after the first is either a client's start or a finish (its client's next).
    later = a[1:]
    assert np.all(np.isin(later, np.concatenate([starts, f])))


def test_an_open_loops_rate_ramps_as_vllm_bench_serve_ramps_it():
    """Request i of N at start + (end - start) x i / (N - 1) requests/s (linear) or start x (end /
    start) ^ (i / (N - 1)) (exponential). Evenly spaced, each gap is 1 / its request's rate, and the
    first request arrives at 0: linear 1 -> 3 over 3 requests gaps 1/2 then 1/3 s; exponential
    1 -> 4 gaps 1/2 then 1/4 s."""
    linear = Load("constant", 3, Lengths(8), Lengths(4), rate_per_s=3.0, rate_ramp=("linear", 1.0, 3.0))
    assert make_requests(linear).arrival_s == pytest.approx([0.0, 0.5, 0.5 + 1 / 3])
    exponential = replace(linear, rate_per_s=4.0, rate_ramp=("exponential", 1.0, 4.0))
    assert make_requests(exponential).arrival_s == pytest.approx([0.0, 0.5, 0.75])
    # Poisson along a ramp from 1 to 9 requests/s: the last gaps average about 1/9 s, the first 1 s.
    poisson = make_requests(
        Load("poisson", 20_001, Lengths(8), Lengths(4), rate_per_s=9.0, seed=2, rate_ramp=("linear", 1.0, 9.0))
    )
    gaps = np.diff(poisson.arrival_s)
    assert gaps[-2000:].mean() == pytest.approx(1 / 8.6, rel=0.1)  # rates 8.2 to 9 there
    assert gaps[:2000].mean() == pytest.approx(1 / 1.4, rel=0.1)  # rates 1 to 1.8
    # No ramp: the same draws as before it existed.
    plain = make_requests(Load("poisson", 50, Lengths(8), Lengths(4), rate_per_s=9.0, seed=2))
    assert np.diff(plain.arrival_s) == pytest.approx(np.random.default_rng(2).exponential(1 / 9, 50)[1:])


@pytest.mark.parametrize(
    "ramp, message",
    [
        (("quadratic", 1.0, 2.0), "rate_ramp: 'quadratic' is not allowed; allowed: linear, exponential"),
        (("linear", 3.0, 2.0), r"the start rate \(3/s\) is above the end rate \(2/s\)"),
        (("linear", 0.0, 2.0), "rate_ramp start"),
    ],
)
def test_a_bad_rate_ramp_is_named(ramp, message):
    with pytest.raises(ValueError, match=message):
        Load("poisson", 4, Lengths(8), Lengths(4), rate_per_s=2.0, rate_ramp=ramp)
    with pytest.raises(ValueError, match="a ramp of the rate is an open loop's"):
        Load("concurrency", 4, Lengths(8), Lengths(4), concurrency=2, rate_ramp=("linear", 1.0, 2.0))


def test_serve_ramps_the_rate_and_refuses_what_vllm_refuses(capsys):
    argv = SERVE + ["--requests", "60", "--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1"]
    code, out, err = _cli(argv + ["--ramp-up-end-rps", "20", "--json"], capsys)
    assert code == 0, err
    load = json.loads(out)["load"]
    assert load["kind"] == "poisson" and load["rate_ramp"] == {
        "strategy": "linear",
        "start_per_s": 1.0,
        "end_per_s": 20.0,
    }
    code, out, err = _cli(argv + ["--ramp-up-end-rps", "20"], capsys)
    assert "Poisson arrivals at a rate ramped linearly from 1 to 20 requests/s" in out
    for extra, message in (
        (["--ramp-up-end-rps", "20", "--rate", "3"], "not with --rate"),
        (["--ramp-up-end-rps", "20", "--concurrency", "3"], "not with --concurrency"),
        ([], "give both --ramp-up-start-rps and --ramp-up-end-rps"),
        (["--ramp-up-end-rps", "0.5"], "expected a rate above 0 and at most the end rate (0.5), got 1"),
    ):
        code, out, err = _cli(argv + extra, capsys)
        assert code == 2 and message in err and "Traceback" not in err, err
    code, out, err = _cli(SERVE + ["--rate", "3", "--ramp-up-end-rps", "9"], capsys)
    assert code == 2 and "give them with --ramp-up-strategy" in err


def test_a_vllm_run_whose_rate_ramped_is_simulated_with_its_ramp(tmp_path):
    from roofline.serving.measured.record import MeasuredError

    base = json.loads((ROOT / "tests/data/serving_results/vllm_bench_serve.json").read_text())
    ramped = base | {
        "request_rate": "inf",
        "ramp_up_strategy": "exponential",
        "ramp_up_start_rps": 2,
        "ramp_up_end_rps": 8,
    }
    (run,) = parse_measured(json.dumps(ramped))
    assert (run.arrival, run.rate_per_s, run.rate_ramp) == ("poisson", 8.0, ("exponential", 2.0, 8.0))
    arrivals = requests_for(run).arrival_s
    assert np.all(np.diff(arrivals) >= 0) and arrivals.size == run.requests
    for bad, message in (
        ({"ramp_up_strategy": "steps"}, "ramp_up_strategy: expected one of linear, exponential"),
        ({"ramp_up_start_rps": 9}, r"ramp_up_start_rps: expected a rate above 0 and at most ramp_up_end_rps \(8\)"),
        ({"ramp_up_end_rps": None}, "ramp_up_end_rps: missing"),
    ):
        with pytest.raises(MeasuredError, match=message):
            parse_measured(json.dumps(ramped | bad))
