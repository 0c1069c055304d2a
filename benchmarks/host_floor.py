"""The floor of each engine's measured TPOT at small batches, against the kernels a decode step launches.

For every engine version, device, model and TP of the accuracy report's steady-state runs at 16
clients or fewer, the run with the least measured TPOT is the floor; beside it the kernels the op
model counts in one decode step of that run (its batch, its mid-run context, its precision, its
TP) and the floor per kernel. Where host work sets the floor and it is paid per kernel launched
(eager dispatch), the last column holds still across models; where it is paid per step, the
floor itself does.

What it showed on the report of 2026-11-29: TensorRT-LLM 1.0.0rc3 on H100 (aiconfigurator's gap
analysis) floors at 2.73 ms for Llama 3.1 8B, 6.21 ms for Qwen3-32B and 11.43 ms for
Qwen3-235B-A22B at TP 8: 6.0 to 6.4 us for each of the 452, 964 and 1,884 kernels of their
steps. The engine's host work is fitted as one figure per step on Qwen3-32B (6.2 ms), so the
8B model is predicted at 6.33 ms against floors of 3.29 and 2.73 ms at TP 4 and 8 (1.9x and
2.3x), and gpt-oss-120b under TensorRT-LLM 1.2.0rc2 on B200 (688 kernels) floors at 2.48 ms where
6.22 ms is expected. Under TensorRT-LLM at TP 8, over the groups whose version the sample
records, the floor per kernel spans 3.3 to 8.6 us (by version and device) where the floor itself
spans 2.3 to 14.6 ms; a group whose version it does not record (version "?") may mix versions.

    python -m benchmarks.host_floor [--report docs/accuracy.json] [--clients 16]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.ops import step_ops
from roofline.silicon_sample import load_silicon_sample, precision_for
from roofline.workload import Workload


def launches(row: dict, result: dict) -> int:
    """Kernel launches of one decode step of the run, as the op model counts them."""
    model = get_model(result["model"])
    context = result["isl"] + result["osl"] // 2
    w = Workload(
        model,
        "decode",
        result["concurrency"],
        context,
        precision=precision_for(row, model),
        tp=result["tp"],
        cuda_graphs=False,
    )
    run, _ = w.on(get_hardware(result["device"]))
    return sum(op.count * op.launches for op in step_ops(run))


def floors(results: list[dict], rows: dict[str, dict], clients: int = 16) -> list[dict]:
    """One floor per engine version, device, model and TP: the run with the least measured TPOT
    among the steady-state results at ``clients`` or fewer, with its step's kernels."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in results:
        if r["concurrency"] <= clients and r.get("tables_tpot_ms"):
            groups[(r["engine"], r.get("engine_version") or "?", r["device"], r["model"], r["tp"])].append(r)
    out = []
    for key in sorted(groups):
        floor = min(groups[key], key=lambda r: r["measured_tpot_ms"])
        if floor["id"] not in rows:  # a report of another sample: its precision is not known here
            continue
        n = launches(rows[floor["id"]], floor)
        out.append(
            dict(zip(("engine", "version", "device", "model", "tp"), key))
            | {
                "runs": len(groups[key]),
                "floor_ms": floor["measured_tpot_ms"],
                "ideal_ms": floor["datasheet_tpot_ms"],
                "expected_ms": floor["tables_tpot_ms"],
                "kernels": n,
                "us_per_kernel": floor["measured_tpot_ms"] * 1e3 / n,
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", default="docs/accuracy.json")
    parser.add_argument("--clients", type=int, default=16, help="the most clients of a run counted (default 16)")
    args = parser.parse_args()
    results = json.loads(Path(args.report).read_text())["steady"]["results"]
    rows = {r["id"]: r for r in load_silicon_sample()}
    print(
        f"{'engine':8} {'version':14} {'device':9} {'model':18} {'tp':>2} {'runs':>4} {'floor ms':>8} "
        f"{'ideal ms':>8} {'expected':>8} {'kernels':>7} {'us/kernel':>9}"
    )
    for f in floors(results, rows, args.clients):
        print(
            f"{f['engine']:8} {f['version'][:14]:14} {f['device']:9} {f['model'][:18]:18} {f['tp']:>2} {f['runs']:>4} "
            f"{f['floor_ms']:8.2f} {f['ideal_ms']:8.2f} {f['expected_ms']:8.2f} {f['kernels']:7d} "
            f"{f['us_per_kernel']:9.2f}"
        )


if __name__ == "__main__":
    main()
