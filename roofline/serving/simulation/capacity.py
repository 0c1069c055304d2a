"""Capacity by rate: the largest request rate a device setup sustains while the p90 (or p99)
TTFT and TPOT stay within targets, what a token costs at that rate, and how many replicas a
target rate needs.

Latency does not fall as the rate rises (a property the tests check), so the largest rate
within the targets is found by bisection in log space between a trickle and the server's
saturation throughput (a closed loop that keeps ``max_num_seqs`` requests in flight). Every
probe is one simulated benchmark of ``requests`` Poisson arrivals with the same seed, so probes
differ only in their rate. Like the benchmarks it mirrors, a run is finite: at the saturation
rate a queue grows without bound in the long run, and a run of ``requests`` sees only its start.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from roofline.hardware import Hardware
from roofline.models import ModelConfig
from roofline.serving.basis import measured_first
from roofline.serving.simulation.api import most_in_flight, simulate_serving
from roofline.serving.simulation.load import Lengths, Load, make_requests
from roofline.serving.simulation.metrics import Targets, per_request
from roofline.serving.simulation.steptime import StepTimes, step_times
from roofline.settings import Settings
from roofline.workload import Precision

PROBES = 9  # bisection steps: the rate is known to within (saturation / trickle)^(1 / 2^9)


@dataclass(frozen=True)
class Capacity:
    """One device setup's largest rate within the targets."""

    hardware: str
    tp: int
    rate_per_s: float  # 0: not even a trickle meets the targets
    saturation_per_s: float  # requests per second a full server completes
    ttft_s: float | None  # at that rate, at the percentile
    tpot_s: float | None
    output_tokens_per_s: float
    binding: str  # which target stops a higher rate
    percentile: int
    usd_per_hour: float | None  # one device
    roofs: str

    @property
    def roof_source(self) -> str:
        """What its times rest on (``Ceilings.source``), the first words of ``roofs``."""
        return self.roofs.split(" roofs")[0]

    @property
    def usd_per_million_output_tokens(self) -> float | None:
        if self.usd_per_hour is None or self.output_tokens_per_s <= 0:
            return None
        return self.usd_per_hour * self.tp / 3600 / self.output_tokens_per_s * 1e6

    def replicas_for(self, rate_per_s: float) -> int | None:
        """Replicas (each of ``tp`` devices) that carry ``rate_per_s`` behind an even router."""
        return math.ceil(rate_per_s / self.rate_per_s) if self.rate_per_s > 0 else None

    def to_json(self, target_rate_per_s: float | None = None) -> dict[str, object]:
        data = {
            "hardware": self.hardware,
            "tp": self.tp,
            "max_rate_per_s": self.rate_per_s,
            "saturation_rate_per_s": self.saturation_per_s,
            f"p{self.percentile}_ttft_s": self.ttft_s,
            f"p{self.percentile}_tpot_s": self.tpot_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "binding": self.binding,
            "usd_per_hour_per_device": self.usd_per_hour,
            "usd_per_million_output_tokens": self.usd_per_million_output_tokens,
            "roofs": self.roofs,
        }
        if target_rate_per_s is not None:
            data["replicas_for_target"] = self.replicas_for(target_rate_per_s)
            data["devices_for_target"] = (
                None if self.replicas_for(target_rate_per_s) is None else self.replicas_for(target_rate_per_s) * self.tp
            )
        return data


def _percentiles(run, percentile: int) -> tuple[float, float]:
    r = per_request(run)
    ttft, tpot = r["ttft_s"], r["tpot_s"]
    p = lambda x: float(np.percentile(x[np.isfinite(x)], percentile)) if np.isfinite(x).any() else math.inf  # noqa: E731
    return p(ttft), p(tpot)


def saturation_rate(run_at, prompt: Lengths, output: Lengths, concurrency: int, seed: int) -> float:
    """Requests per second a server completes when ``concurrency`` requests are always in flight:
    the completions between the first and the third quarter of a run of 4 x ``concurrency``
    requests over the time between them (the ramp-up and the drain left out)."""
    n = 4 * concurrency
    run = run_at(Load("concurrency", n, prompt, output, concurrency=concurrency, seed=seed))
    finish = np.sort(run.finish_s[np.isfinite(run.finish_s)])
    if finish.size < 4:
        return 0.0
    first, third = finish[finish.size // 4], finish[3 * finish.size // 4]
    return float((3 * finish.size // 4 - finish.size // 4) / (third - first)) if third > first else 0.0


def max_rate(
    model: ModelConfig,
    hw: Hardware,
    prompt: Lengths,
    output: Lengths,
    targets: Targets,
    precision: Precision | None = None,
    tp: int = 1,
    settings: Settings | None = None,
    percentile: int = 90,
    requests: int = 1000,
    seed: int = 0,
    usd_per_hour: float | None = None,
    times: StepTimes | None = None,
    chunked: bool | None = None,
    burstiness: float = 1.0,
) -> Capacity:
    """The largest Poisson rate (gamma arrivals of shape ``burstiness`` where it is not 1) at which
    the ``percentile`` TTFT and TPOT meet ``targets``, with chunked prefill or without."""
    if percentile not in (50, 90, 99):
        raise ValueError(f"percentile must be 50, 90 or 99, got {percentile!r}")
    settings = (settings or Settings()).for_device(hw)
    precision = precision or Precision()
    if times is None:
        times = step_times(model, hw, precision, tp, settings, settings.max_batched_tokens, settings.max_num_seqs)

    def run_at(load: Load):
        return simulate_serving(model, hw, make_requests(load), precision, tp, settings, chunked, times=times).run

    saturation = saturation_rate(run_at, prompt, output, most_in_flight(settings, hw), seed)

    def probe(rate: float) -> tuple[bool, float, float, float, str]:
        kind = "poisson" if burstiness == 1 else "gamma"
        run = run_at(Load(kind, requests, prompt, output, rate_per_s=rate, burstiness=burstiness, seed=seed))
        ttft, tpot = _percentiles(run, percentile)
        over_ttft = targets.ttft_s is not None and ttft > targets.ttft_s
        over_tpot = targets.tpot_s is not None and tpot > targets.tpot_s
        # A rate the server sustains is carried whole: it puts out the output tokens of every
        # request it admits (one that can never fit the KV cache is rejected and counts nothing).
        # A finite run's tokens over its span, first arrival to last finish, would count the time
        # the last requests take to drain as idle: 1,000 requests at 10/s read 25% low.
        admitted = ~np.asarray(run.rejected, bool)
        tokens_per_s = rate * float(np.asarray(run.output_tokens)[admitted].sum()) / max(len(admitted), 1)
        binding = "TTFT" if over_ttft else "TPOT" if over_tpot else ""
        return not (over_ttft or over_tpot), ttft, tpot, tokens_per_s, binding

    if saturation <= 0:
        return Capacity(
            hw.id, tp, 0.0, 0.0, None, None, 0.0, "nothing completes", percentile, usd_per_hour, times.roofs
        )
    lo, hi = saturation / 1000, saturation
    # The server's full throughput first: where the targets hold there, they hold at every lower
    # rate (latency does not fall as the rate rises), and the trickle need not be run.
    ok_hi, *rest = probe(hi)
    if ok_hi:
        return Capacity(
            hw.id,
            tp,
            hi,
            saturation,
            rest[0],
            rest[1],
            rest[2],
            "saturation (the targets hold at the server's full throughput)",
            percentile,
            usd_per_hour,
            times.roofs,
        )
    ok, ttft, tpot, tokens, binding = probe(lo)
    if not ok:
        why = f"{binding} at a trickle ({saturation / 1000:.3g} requests/s)"
        return Capacity(hw.id, tp, 0.0, saturation, ttft, tpot, 0.0, why, percentile, usd_per_hour, times.roofs)
    best = (lo, ttft, tpot, tokens)
    binding = rest[3]
    for _ in range(PROBES):
        mid = math.sqrt(lo * hi)
        ok, ttft, tpot, tokens, why = probe(mid)
        if ok:
            lo, best = mid, (mid, ttft, tpot, tokens)
        else:
            hi, binding = mid, why
    rate, ttft, tpot, tokens = best
    return Capacity(hw.id, tp, rate, saturation, ttft, tpot, tokens, binding, percentile, usd_per_hour, times.roofs)


def _setup_capacity(job: tuple) -> Capacity | str:
    """One device setup's capacity, or why it cannot run the model (a process pool's task):
    ``job`` is (model, hw, tp, price, the other ``max_rate`` arguments by name)."""
    from roofline.workload import Workload

    model, hw, tp, price, common = job
    try:
        run, _ = Workload(model, "decode", 1, 1, precision=common["precision"], tp=tp, cuda_graphs=True).on(hw)
        if tp > 1 and hw.group_link(tp)[0] is None:
            raise ValueError(f"TP={tp}: {hw.group_link(tp)[1]}")
        return max_rate(model, hw, tp=tp, usd_per_hour=price, **(common | {"precision": run.precision}))
    except ValueError as exc:
        return str(exc)


def rank_capacity(
    model: ModelConfig,
    devices: list[Hardware],
    prompt: Lengths,
    output: Lengths,
    targets: Targets,
    precision: Precision | None = None,
    tps: tuple[int, ...] = (1,),
    settings: Settings | None = None,
    prices: dict[str, float] | None = None,
    percentile: int = 90,
    requests: int = 1000,
    seed: int = 0,
    workers: int = 1,
    chunked: bool | None = None,
    burstiness: float = 1.0,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[Capacity], dict[str, str]]:
    """Every device at every TP degree that can run the model: its capacity, best first (the
    cheapest per million output tokens where prices are known, then the highest rate), and why
    each other setup could not run. ``workers`` > 1 spreads the setups over that many processes
    (each setup's simulations are independent; the results are the same). ``progress`` is told
    (setups done, setups) as each finishes."""
    settings = settings or Settings()
    precision = precision or Precision()
    prices = prices or {}
    common = {
        "prompt": prompt,
        "output": output,
        "targets": targets,
        "precision": precision,
        "settings": settings,
        "percentile": percentile,
        "requests": requests,
        "seed": seed,
        "chunked": chunked,
        "burstiness": burstiness,
    }
    jobs = [(model, hw, tp, prices.get(hw.id), common) for hw in devices for tp in tps]
    if workers > 1 and len(jobs) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            done = pool.map(_setup_capacity, jobs, chunksize=max(1, len(jobs) // (4 * workers)))
            answers = _counted(done, len(jobs), progress)
    else:
        answers = _counted(map(_setup_capacity, jobs), len(jobs), progress)
    found, why_not = [], {}
    for (_, hw, tp, *_rest), answer in zip(jobs, answers):
        if isinstance(answer, str):
            why_not[f"{hw.id} TP={tp}"] = answer
        else:
            found.append(answer)
    return ranked(found), why_not


def _counted(answers: Iterable, total: int, progress: Callable[[int, int], None] | None) -> list:
    out = []
    for answer in answers:
        out.append(answer)
        if progress is not None:
            progress(len(out), total)
    return out


def ranked(found: list[Capacity]) -> list[Capacity]:
    """The ranking's order (``ranking_key``), the setups on measured roofs before those on the datasheet
    alone where they are mixed (``roofline.serving.basis``); setups that meet no target last."""
    found = sorted(found, key=ranking_key)
    meet = [c for c in found if c.rate_per_s > 0]
    return measured_first(meet, on_datasheet)[0] + [c for c in found if c.rate_per_s <= 0]


def on_datasheet(c: Capacity) -> bool:
    """Whether the setup's times rest on the datasheet alone (its ideal bound)."""
    return c.roof_source == "datasheet"


def mixed_basis(found: list[Capacity]) -> bool:
    """Whether the setups that meet the targets rest some on measured roofs, some on the datasheet alone."""
    return measured_first([c for c in found if c.rate_per_s > 0], on_datasheet)[1]


def ranking_key(c: Capacity) -> tuple:
    """The ranking's order: setups that meet the targets, the cheapest per token first, then the fastest."""
    return (
        c.rate_per_s <= 0,
        c.usd_per_million_output_tokens is None,
        c.usd_per_million_output_tokens or 0.0,
        -c.rate_per_s,
    )
