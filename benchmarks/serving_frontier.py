"""Time the serving frontier: every device of the database, one model, TP 1, 2, 4 and 8, every
decode batch (and the target search over precisions on top).

Run from the repository root: python -m benchmarks.serving_frontier [--model llama-3.1-8b]
"""

from __future__ import annotations

import argparse
import time

from roofline.hardware import load_hardware
from roofline.models import get_model
from roofline.serving import Traffic, best_under_targets, load_prices, serving_sweep


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="llama-3.1-8b")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    model = get_model(args.model)
    devices = list(load_hardware().values())
    prices = {k: v.usd_per_hour for k, v in load_prices().items()}
    traffic = Traffic(1024, 256)
    serving_sweep(model, devices, traffic, prices=prices)  # warm-up: imports, caches
    for tp in (1, 2, 4, 8):
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            points = serving_sweep(model, devices, traffic, tp=tp, prices=prices)
            times.append(time.perf_counter() - start)
        print(
            f"frontier, {len(devices)} devices x {points.batch.size} batches, TP={tp}: "
            f"median {sorted(times)[len(times) // 2] * 1e3:,.1f} ms"
        )
    start = time.perf_counter()
    best_under_targets(model, devices, traffic, 2.0, 0.05, prices=prices)
    print(f"target search (TP 1/2/4/8 x 3 precisions, every device): {(time.perf_counter() - start) * 1e3:,.0f} ms")


if __name__ == "__main__":
    main()
