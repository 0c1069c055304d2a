"""Time the measurement suite itself, quick and full, on the local device.

Run from the repository root: python -m benchmarks.measure_suite [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import time

from roofline.measure.suite import run_suite


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None)
    args = parser.parse_args()
    for quick in (True, False):
        start = time.perf_counter()
        results = run_suite(device=args.device, quick=quick)
        elapsed = time.perf_counter() - start
        c = results.ceilings
        print(
            f"{'quick' if quick else 'full'} suite on {results.device.name}: {elapsed:.1f} s "
            f"(copy {c.memory_bandwidth_tbps * 1e3:,.1f} GB/s, "
            + ", ".join(f"{d} {v:,.2f} TFLOP/s" for d, v in c.peak_tflops.items())
            + ")"
        )


if __name__ == "__main__":
    main()
