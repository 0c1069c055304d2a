"""Time the request-level serving simulation: 10,000 requests through one H100 running Llama 3.1
8B, the same through four replicas behind each router, a 20-rate sweep of one device, and the
capacity ranking of every device in the database.

Run from the repository root: python -m benchmarks.serving_simulation
"""

from __future__ import annotations

import os
import time

import numpy as np

from roofline.hardware import get_hardware, load_hardware
from roofline.models import get_model
from roofline.serving import load_prices
from roofline.serving.simulation.api import simulate_serving
from roofline.serving.simulation.capacity import rank_capacity, saturation_rate
from roofline.serving.simulation.load import Lengths, Load, make_requests
from roofline.serving.simulation.metrics import Targets, summary
from roofline.serving.simulation.steptime import step_times
from roofline.settings import Settings
from roofline.workload import Precision


def main() -> None:
    model, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    settings = Settings().for_device(hw)  # vLLM's token budget and sequence cap on an H100
    t = time.perf_counter()
    times = step_times(model, hw, Precision(), 1, settings, settings.max_batched_tokens, settings.max_num_seqs)
    print(f"step-time tables: {time.perf_counter() - t:.2f} s")

    load = Load("poisson", 10_000, Lengths(1024), Lengths(256), rate_per_s=20.0)
    requests = make_requests(load)
    runs_s = []
    for _ in range(3):  # the same run three times: the machine is shared, so the fastest is the least disturbed
        t = time.perf_counter()
        sim = simulate_serving(model, hw, requests, times=times)
        runs_s.append(time.perf_counter() - t)
    s = summary(sim.run)
    print(
        f"10,000 requests at 20/s: {min(runs_s):.2f} s, fastest of 3 ({', '.join(f'{r:.2f}' for r in runs_s)}; "
        f"{sim.run.steps:,} steps; "
        f"p50 TTFT {s['ttft_s']['p50'] * 1e3:.1f} ms, p50 TPOT {s['tpot_s']['p50'] * 1e3:.2f} ms)"
    )

    fleet_load = Load("poisson", 10_000, Lengths(1024), Lengths(256), rate_per_s=80.0)
    for router in ("round-robin", "random", "least-loaded"):
        t = time.perf_counter()
        sim = simulate_serving(model, hw, make_requests(fleet_load), times=times, replicas=4, router=router)
        s = summary(sim.run)
        print(
            f"10,000 requests at 80/s over 4 replicas, {router}: {time.perf_counter() - t:.2f} s "
            f"(p50/p99 TTFT {s['ttft_s']['p50'] * 1e3:.1f}/{s['ttft_s']['p99'] * 1e3:.1f} ms)"
        )

    def run_at(spec: Load):
        return simulate_serving(model, hw, make_requests(spec), times=times).run

    t = time.perf_counter()
    saturation = saturation_rate(run_at, Lengths(1024), Lengths(256), settings.max_num_seqs, 0)
    rates = np.geomspace(saturation / 30, saturation * 1.3, 20)
    for rate in rates:
        run_at(Load("poisson", 300, Lengths(1024), Lengths(256), rate_per_s=float(rate)))
    print(f"20-rate sweep of one device, 300 requests a rate, and its saturation: {time.perf_counter() - t:.2f} s")

    devices = list(load_hardware().values())
    prices = {k: v.usd_per_hour for k, v in load_prices().items()}
    t = time.perf_counter()
    workers = min(os.cpu_count() or 1, 8)  # as `serve --capacity` runs it
    found, why_not = rank_capacity(
        model,
        devices,
        Lengths(1024),
        Lengths(256),
        Targets(ttft_s=2.0, tpot_s=0.05),
        prices=prices,
        requests=300,
        workers=workers,
    )
    print(
        f"capacity ranking of {len(devices)} devices (300 requests a probe, {workers} processes): "
        f"{time.perf_counter() - t:.2f} s ({len(found)} ranked, {len(why_not)} could not run it)"
    )


if __name__ == "__main__":
    main()
