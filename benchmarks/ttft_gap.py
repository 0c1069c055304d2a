"""Where the simulated first token is early: the gap between measured and simulated mean TTFT of
the accuracy report's test runs at low load, by engine, model kind (dense or MoE) and prompt
length, and by whether the benchmark client warmed the server up before measuring (InferenceX's
did from 2026-01-22; "?" where no client is recorded), beside the same runs' TPOT ratio.

At a few clients a request's first token waits for little but its own prefill step, so the gap
there is what the simulation misses of one prefill and of one request's way through the server:
a gap that grows with the prompt points at the prefill, one that does not at a cost per request,
one that shrinks once the client warms the server up at a one-time cost of the first requests, and
the same runs' TPOT ratio says whether their decode steps come out right. Nothing here is
fitted: it reads the report that ``python -m roofline validate --report`` wrote (the shipped one
by default).

Run from the repository root: python -m benchmarks.ttft_gap [--report docs/accuracy.json] [--clients 8]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import numpy as np

from roofline.models import get_model

SHORT_PROMPT = 2048  # tokens: "short" prompts are at most this long


WARMUP_WORDS = {None: "?", 0: "none"}  # else the warm-up requests per client


def gaps(results: list[dict], most_clients: int) -> dict[tuple[str, str, str, str], dict[str, float]]:
    """Per (engine, dense or MoE, short or long prompts, the client's warm-up): runs, the median and
    10th/90th percentiles of measured - simulated mean TTFT (ms), and the median simulated/measured
    TPOT."""
    groups: dict[tuple[str, str, str, str], list[tuple[float, float]]] = defaultdict(list)
    for r in results:
        if r.get("host_fit_split") or r.get("tables_ttft_ms") is None or r["concurrency"] > most_clients:
            continue
        kind = "MoE" if get_model(r["model"]).moe is not None else "dense"
        prompts = f"<= {SHORT_PROMPT:,}" if r["isl"] <= SHORT_PROMPT else f"> {SHORT_PROMPT:,}"
        tpot = r["tables_tpot_ms"] / r["measured_tpot_ms"] if r.get("tables_tpot_ms") else np.nan
        warmup = r.get("client_warmup")
        warmup = WARMUP_WORDS.get(warmup, f"{warmup}/client")
        groups[(r["engine"], kind, prompts, warmup)].append((r["measured_ttft_ms"] - r["tables_ttft_ms"], tpot))
    out = {}
    for key, values in sorted(groups.items()):
        gap = np.array([g for g, _ in values])
        tpot = np.array([t for _, t in values])
        out[key] = {
            "runs": len(values),
            "gap_ms_p50": float(np.median(gap)),
            "gap_ms_p10": float(np.percentile(gap, 10)),
            "gap_ms_p90": float(np.percentile(gap, 90)),
            "tpot_ratio_p50": float(np.nanmedian(tpot)) if np.isfinite(tpot).any() else float("nan"),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", default="docs/accuracy.json", help="an accuracy report (JSON)")
    parser.add_argument("--clients", type=int, default=8, help="runs with at most this many clients")
    args = parser.parse_args()
    with open(args.report) as fh:
        report = json.load(fh)
    print(
        f"test runs with at most {args.clients} clients: measured - simulated mean TTFT (engine-measured kernels "
        "and host work), and simulated / measured TPOT"
    )
    print(
        f"{'engine':8} {'model':6} {'prompt tokens':14} {'warm-up':9} {'runs':>5} {'gap p50':>9} {'p10':>7} "
        f"{'p90':>7} {'TPOT':>6}"
    )
    for (engine, kind, prompts, warmup), g in gaps(report["load"]["results"], args.clients).items():
        print(
            f"{engine:8} {kind:6} {prompts:14} {warmup:9} {g['runs']:5d} {g['gap_ms_p50']:7.0f}ms "
            f"{g['gap_ms_p10']:5.0f}ms {g['gap_ms_p90']:5.0f}ms {g['tpot_ratio_p50']:6.2f}"
        )


if __name__ == "__main__":
    main()
