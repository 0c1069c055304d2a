"""Each measured point simulated at its load and set beside the measurement: per metric and
statistic the measured value, the predicted one and their ratio. Nothing is fitted."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from roofline.serving.measured.record import METRICS, STATS, MeasuredError, MeasuredRun


def requests_for(run: MeasuredRun, seed: int = 0, default_requests: int = 1000, most_requests: int = 200_000):
    """The simulated requests at a point's load: its rate or clients, its number of requests,
    and prompts and outputs of its mean lengths (the files record means, not the lengths)."""
    from roofline.serving.simulation.load import Lengths, Load, make_requests

    for value, name in ((run.prompt_tokens_mean, "prompt"), (run.output_tokens_mean, "output")):
        if not value:
            raise MeasuredError(f"{run.label}: the file records no mean {name} length; the load cannot be simulated")
        if value < 1:  # every request has a token of each: its totals and its count do not agree
            raise MeasuredError(
                f"{run.label}: the file's mean {name} length is {value:.3g} tokens, below one token a request (its "
                "token totals over its completed requests); the load cannot be simulated"
            )
    count = min(run.requests or default_requests, most_requests)
    prompt = Lengths(max(1, round(run.prompt_tokens_mean)))
    output = Lengths(max(1, round(run.output_tokens_mean)))
    if run.arrival == "concurrency":
        load = Load("concurrency", count, prompt, output, concurrency=run.concurrency, seed=seed, ramp_s=run.ramp_s)
    else:
        load = Load(
            run.arrival,
            count,
            prompt,
            output,
            rate_per_s=run.rate_per_s,
            burstiness=run.burstiness,
            seed=seed,
            rate_ramp=run.rate_ramp,
        )
    return make_requests(load)


def simulator(
    model,
    hw,
    precision=None,
    tp: int = 1,
    settings=None,
    chunked_prefill: bool | None = None,
    seed: int = 0,
    default_requests: int = 1000,
):
    """``simulate_fn`` for ``compare``: each point's load through the serving simulation (a point
    whose file records no number of requests sends ``default_requests``), the step times computed
    once and shared by the points."""
    from roofline.serving.simulation.api import simulate_serving
    from roofline.serving.simulation.metrics import summary

    shared = {}

    def simulate_fn(run: MeasuredRun) -> dict[str, object]:
        try:
            requests = requests_for(run, seed, default_requests)
            sim = simulate_serving(model, hw, requests, precision, tp, settings, chunked_prefill, shared.get("times"))
        except MeasuredError:
            raise
        except ValueError as exc:
            raise MeasuredError(f"{run.label or 'the measured point'}: {exc}") from None
        shared["times"] = sim.times
        return summary(sim.run)

    return simulate_fn


def _gap(predicted: float | None, measured: float | None) -> dict[str, float | None]:
    ratio = predicted / measured if predicted is not None and measured else None
    return {"measured": measured, "predicted": predicted, "ratio": ratio}


def compare(
    measured_runs: Iterable[MeasuredRun], simulate_fn: Callable[[MeasuredRun], dict]
) -> list[dict[str, object]]:
    """For each measured point, the simulation at the same load and, per metric and statistic,
    the measured and predicted values and their ratio (predicted / measured; None where either
    is missing). Nothing is fitted: the prediction never sees the measurement."""
    out = []
    for run in measured_runs:
        predicted = simulate_fn(run)
        rows = [
            {"metric": metric, "stat": stat} | _gap((predicted.get(metric) or {}).get(stat), run.latency[metric][stat])
            for metric in METRICS
            for stat in STATS
        ]
        throughput = [
            {"metric": key} | _gap(predicted.get(key), getattr(run, key))
            for key in ("request_throughput_per_s", "output_throughput_tokens_per_s")
        ]
        out.append(
            {
                "point": run.label,
                "measured": run.to_json(),
                "latency": rows,
                "throughput": throughput,
                "predicted_summary": {
                    k: predicted.get(k) for k in ("requests", "completed", "duration_s", "preemptions", "roofs")
                },
            }
        )
    return out


def curve(comparisons: list[dict[str, object]], metric: str, stat: str) -> list[dict[str, object]]:
    """One metric and statistic of ``compare``'s points in order of load, open-loop points (by
    requests per second) before closed-loop ones (by clients): the measured points a rate or
    concurrency curve draws beside the predicted ones."""
    if metric not in METRICS or stat not in STATS:
        raise ValueError(f"curve: expected a metric in {METRICS} and a statistic in {STATS}, got {metric!r}, {stat!r}")
    rows = []
    for point in comparisons:
        m = point["measured"]
        row = next(r for r in point["latency"] if (r["metric"], r["stat"]) == (metric, stat))
        closed = m["arrival"] == "concurrency"
        rows.append(
            {
                "point": point["point"],
                "load": m["concurrency"] if closed else m["rate_per_s"],
                "load_unit": "clients" if closed else "requests/s",
                "measured": row["measured"],
                "predicted": row["predicted"],
                "ratio": row["ratio"],
            }
        )
    return sorted(rows, key=lambda r: (r["load_unit"] == "clients", r["load"]))
