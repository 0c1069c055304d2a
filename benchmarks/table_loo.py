"""Leave-one-out error of the kernel-table prediction on the database's own points.

Every measured point with measured neighbours on both sides along an interpolated axis (m, n, k for
GEMM; batch, length, heads, KV heads for attention; batch, length for MLA decode and prefill;
tokens and heads for MLA decode's absorbed products; tokens for a fused MoE layer) is predicted
from those two neighbours alone, in log space, as the predictor reads the table; its error is
|predicted / measured - 1|. The neighbours are twice as far apart as in the full table, so this is
an upper bound for a query between two measured points. Pooled over axes and categories (dtype,
head dim, KV dtype, window, expert shape) per device, engine and table.

Beside it, the floor under interpolation at tile boundaries: where the table measured two sizes
less than 2% apart (the GEMM tables measure m = 63 and 64, 127, 128 and 129, ...), how much their
latencies differ. A smooth law predicts both alike; a tile boundary or the measurement's noise is
what separates them, and no interpolation does better than that at those points (elsewhere it can).

Run from the repository root: python -m benchmarks.table_loo [--json] [--device h100-sxm]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from roofline.tables import TablePredictor, store
from roofline.tables.grid import leave_one_out_log_errors, near_pair_log_differences
from roofline.tables.predict import LAYOUT

TABLES = ("gemm", "context_attention", "generation_attention", "generation_mla", "context_mla", "mla_bmm", "moe")


def loo_rows(devices: list[str] | None = None) -> list[dict[str, object]]:
    rows = []
    for entry in sorted(store.entries(), key=lambda e: (e["device"], e["engine"])):
        if entry["engine"] == "nccl" or (devices and entry["device"] not in devices):
            continue
        p = TablePredictor(entry)
        for table in TABLES:
            per_axis: dict[str, list[np.ndarray]] = {}
            floor: list[np.ndarray] = []
            axes = LAYOUT[table][1]
            for keys in p.categories(table):
                grid = p.grid(table, keys)
                for a, err in leave_one_out_log_errors(grid).items():
                    per_axis.setdefault(axes[a], []).append(np.abs(np.expm1(err)))
                floor.extend(np.abs(np.expm1(d)) for d in near_pair_log_differences(grid).values())
            if not per_axis:
                continue
            pooled = np.concatenate([e for errs in per_axis.values() for e in errs])
            near = np.concatenate(floor) if floor else np.zeros(0)
            rows.append(
                {
                    "device": entry["device"],
                    "engine": entry["engine"],
                    "version": entry["version"],
                    "table": table,
                    "points": int(pooled.size),
                    "median_error": float(np.median(pooled)),
                    "p90_error": float(np.percentile(pooled, 90)),
                    "near_pairs": int(near.size),
                    "near_pair_median": float(np.median(near)) if near.size else None,
                    "near_pair_p90": float(np.percentile(near, 90)) if near.size else None,
                    "by_axis": {
                        axis: {
                            "points": int(sum(e.size for e in errs)),
                            "median_error": float(np.median(np.concatenate(errs))),
                            "p90_error": float(np.percentile(np.concatenate(errs), 90)),
                        }
                        for axis, errs in per_axis.items()
                    },
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--device", action="append", default=None)
    args = parser.parse_args()
    rows = loo_rows(args.device)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    head = f"{'device':<10} {'engine':<8} {'version':<11} {'table':<21} {'points':>7} {'median':>7} {'p90':>7}"
    print(head + f" {'floor':>13}  by axis (median/p90)")
    for r in rows:
        axes = "  ".join(f"{a} {v['median_error']:.1%}/{v['p90_error']:.1%}" for a, v in r["by_axis"].items())
        floor = f"{r['near_pair_median']:.1%}/{r['near_pair_p90']:.1%}" if r["near_pairs"] else "—"
        print(
            f"{r['device']:<10} {r['engine']:<8} {r['version']:<11} {r['table']:<21} {r['points']:>7} "
            f"{r['median_error']:>7.1%} {r['p90_error']:>7.1%} {floor:>13}  {axes}"
        )


if __name__ == "__main__":
    main()
