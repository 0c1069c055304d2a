"""Fit each serving engine's host work per step on the declared split of the silicon sample.

The split (``engine_db/engines.toml``): every scoreable run of Qwen/Qwen3-32B on H100 SXM, the one
model and device that vLLM, SGLang and TensorRT-LLM all ran. Each run is simulated once as
``python -m roofline validate --load`` does (its engine's scheduler and kernel tables, a closed
loop at its concurrency) with no host work; a run's TPOT with host work (a per step, b per
sequence) is then that TPOT plus a + b x C where the run's engine version runs it between steps,
and the longer of the two where it overlaps it (C: the run's concurrency, the sequences of its
decode steps).
(a, b) minimise the median |log(predicted / measured)| over the split's runs; where the split
cannot tell them apart (an overlapped engine whose host work is shorter than the device's step
fits equally well with any smaller figure), the least host work within ``TIE`` of the best fit
is taken. The split's runs are then simulated again with the fitted figures, for the error
printed; a fit that does not improve on no host work at all is not taken. Paste the figures, and
the split's range of concurrencies (``sequences``: beyond it a per-sequence figure is extrapolated),
into ``engine_db/engines.toml``; ``python -m roofline validate --load`` reports the rest apart.

    python -m benchmarks.fit_engine_host
"""

from __future__ import annotations

import numpy as np

from roofline.engines import HOST_FIT_SPLIT, engine_profile, fit_host_work, in_host_fit_split
from roofline.validate import load_silicon_sample, why_not_scored
from roofline.validate_load import simulate_row

SPLIT_MODEL, SPLIT_SYSTEM = HOST_FIT_SPLIT


def split_rows(engine: str) -> list[dict[str, str]]:
    return [
        r
        for r in load_silicon_sample()
        if why_not_scored(r) is None and r["backend"] == engine and in_host_fit_split(r) and r.get("silicon_tpot_ms")
    ]


def fit(engine: str) -> dict[str, float]:
    base = engine_profile(engine)
    bare = base.model_copy(update={"host_step_us": 0.0, "host_per_seq_us": 0.0})
    rows = split_rows(engine)
    cache: dict = {}
    runs = [simulate_row(r, cache, profile=bare) for r in rows]
    sim = np.array([r["tables_tpot_ms"] for r in runs]) * 1e-3
    measured = np.array([r["measured_tpot_ms"] for r in runs]) * 1e-3
    c = np.array([r["concurrency"] for r in runs], float)
    overlaps = np.array([base.overlaps(r.get("backend_version") or None) for r in rows])
    step_s, seq_s = fit_host_work(sim, measured, c, overlaps)
    fitted = base.model_copy(update={"host_step_us": step_s * 1e6, "host_per_seq_us": seq_s * 1e6})
    check = [simulate_row(r, {}, profile=fitted) for r in rows]
    err = np.array([r["tables_tpot_ms"] / r["measured_tpot_ms"] - 1 for r in check])
    without = float(np.median(np.abs(sim / measured - 1)))
    if np.median(np.abs(err)) >= without:  # no better than no host work: not taken
        step_s = seq_s = 0.0
        err = sim / measured - 1
    return {
        "runs": len(runs),
        "host_step_us": step_s * 1e6,
        "host_per_seq_us": seq_s * 1e6,
        "split_median_abs_error": float(np.median(np.abs(err))),
        "split_bias": float(np.median(err)),
        "without_host_median_abs_error": without,
        "sequences": [int(c.min()), int(c.max())],  # the split's concurrencies: beyond them, extrapolated
    }


def main() -> None:
    for engine in ("vllm", "sglang", "trtllm"):
        r = fit(engine)
        print(
            f"{engine:<7} {r['runs']:>4} runs of {SPLIT_MODEL} on {SPLIT_SYSTEM}: "
            f"host_step_us = {r['host_step_us']:g}, host_per_seq_us = {r['host_per_seq_us']:g}; "
            "TPOT median |error| on the split "
            f"{r['without_host_median_abs_error']:.1%} without host work -> {r['split_median_abs_error']:.1%} "
            f"(bias {r['split_bias']:+.1%}); sequences = {r['sequences']}"
        )


if __name__ == "__main__":
    main()
