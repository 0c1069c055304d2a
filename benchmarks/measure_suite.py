"""Time the measurement suite itself, quick and full, on the local device: the whole run and each
part of it (ceilings, sweeps, building the model, each step), with what it measured: each fit's
error on its own sweep, the share of each step inside op ranges, and how well the calibrated and
the measured roofs predict the held-out steps (figures of this machine, so not tests).

Run from the repository root: python -m benchmarks.measure_suite [--device cpu|cuda] [--model ID]
"""

from __future__ import annotations

import argparse
import time

from roofline.format import fmt_seconds
from roofline.measure.suite import run_suite


class PartTimer:
    """The suite's progress callback: how long each announced part took."""

    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.message = "start"
        self.parts: list[tuple[float, str]] = []

    def __call__(self, fraction: float, message: str) -> None:
        now = time.perf_counter()
        self.parts.append((now - self.last, self.message))
        self.last, self.message = now, message


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None)
    parser.add_argument("--model", default=None, help="a model id or config.json (default: the suite's)")
    parser.add_argument("--quick-only", action="store_true")
    args = parser.parse_args()
    for quick in (True,) if args.quick_only else (True, False):
        timer = PartTimer()
        results = run_suite(device=args.device, quick=quick, model_id=args.model, progress=timer)
        elapsed = time.perf_counter() - timer.start
        c = results.ceilings
        print(
            f"{'quick' if quick else 'full'} suite on {results.device.name}: {elapsed:.1f} s "
            f"(copy {c.memory_bandwidth_tbps * 1e3:,.1f} GB/s, "
            + ", ".join(f"{d} {v:,.2f} TFLOP/s" for d, v in c.peak_tflops.items())
            + f"; {len(results.sweeps)} sweep points, {len(results.steps)} steps)"
        )
        for seconds, message in sorted(timer.parts, reverse=True)[:6]:
            print(f"  {seconds:7.2f} s  {message}")
        for name, fit in sorted(results.calibration.fits.items()):
            print(f"  fit {name}: {fit.points} points, median error {fit.median_abs_error:.1%}")
        for step in results.steps:
            graph = fmt_seconds(step.graph.median_s) if step.graph else "n/a"
            print(
                f"  {step.phase} batch {step.batch} x {step.seq_len}: eager {fmt_seconds(step.eager.median_s)}, "
                f"graph {graph}, {step.attribution:.0%} of kernel time inside op ranges; predicted / measured: "
                f"calibrated {step.step_ratio('calibrated'):.2f}, measured roofs {step.step_ratio('measured'):.2f}"
            )


if __name__ == "__main__":
    main()
