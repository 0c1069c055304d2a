"""The steady-state accuracy report as text and as CSV (``python -m roofline validate``)."""

from __future__ import annotations

import csv
from pathlib import Path

from roofline.accuracy import BREAKDOWNS, p90_shown
from roofline.validate import RESULT_FIELDS


def write_csv(results: list[dict[str, object]], path: Path, fields: tuple[str, ...] = RESULT_FIELDS) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for r in results:
            writer.writerow({k: r[k] for k in fields})


def render(report: dict[str, object]) -> str:
    lines = [
        f"{report['metric']}: {report['overall']['runs']} runs scored. {report['not_scored']}.",
        f"error = predicted / measured - 1; bias = median error (> 0: predicted slower); MoE routing: "
        f"{report.get('moe_routing', 'auto')}",
        f"{'model':<16} {'device':<9} {'engine':<7} {'runs':>4}  {'datasheet med/p90/bias':>24}  "
        f"{'tables med/p90/bias':>22} {'share':>6}",
    ]

    def cols(e: dict[str, float] | None, runs: int | None = None) -> str:
        if not e:
            return "-"
        p90 = p90_shown(e["p90_abs_error"], runs if runs is not None else e.get("runs"))
        return f"{e['median_abs_error']:.0%}/{p90}/{e['bias']:+.0%}"

    for g in report["groups"]:
        share = f"{g['table_share']:.0%}" if "table_share" in g else "-"
        n = g["runs"]
        lines.append(
            f"{g['model']:<16} {g['device']:<9} {g['engine']:<7} {n:>4}  {cols(g['datasheet'], n):>24}  "
            f"{cols(g.get('tables'), n):>22} {share:>6}"
        )
    totals = [
        ("all", report["overall"]),
        ("host-work fit split", report["host_fit_split"]),
        ("test set (the rest)", report["test_set"]),
    ]
    totals += [(f"  test set, {k}", o) for f in BREAKDOWNS for k, o in report.get(f"test_set_by_{f}", {}).items()]
    for name, o in totals:
        n = o["runs"]
        lines.append(f"{name:<34} {n:>4}  {cols(o.get('datasheet'), n):>24}  {cols(o.get('tables'), n):>22}")
    lines.append("left out: " + "; ".join(f"{n} {why}" for why, n in sorted(report["skipped"].items())))
    return "\n".join(lines)
