"""Eager steps held out from a results file: decode steps of the file's model at batches and
contexts it did not measure, timed eagerly and from a CUDA graph here, beside the prediction on the
file's calibration (its fitted kernel roofs, its host cost per launch from the host-bound probe,
its kernel floor). Nothing measured here enters the prediction.

    python -m benchmarks.eager_steps --results quick.json [--batches 1 8 32 64] [--context 2048]
"""

from __future__ import annotations

import argparse
import json

import torch

from roofline.engine import evaluate
from roofline.hardware import get_hardware
from roofline.measure.model import TORCH_DTYPES, build_model
from roofline.measure.schema import load_results
from roofline.measure.step import measure_step
from roofline.models import get_model
from roofline.ops import step_ops
from roofline.settings import Settings
from roofline.workload import Precision, Workload


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", required=True, help="a results file of `measure` on this device")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    parser.add_argument("--hardware", default=None, help="the database device (default: the file's)")
    args = parser.parse_args()
    results = load_results(args.results)
    step0 = results.steps[0]
    model = get_model(step0.model)
    dtype = step0.dtype
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    hw_id = args.hardware or results.device.matched_hardware_id
    if hw_id is None:
        parser.error("the results file matched no database device: name one with --hardware")
    hw = get_hardware(hw_id)
    precision = Precision(dtype, dtype, dtype)
    if results.calibration is not None and results.calibration.hardware_id is None:
        results = results.model_copy(
            update={"calibration": results.calibration.model_copy(update={"hardware_id": hw.id})}
        )
    built = build_model(model, model.num_layers, device, TORCH_DTYPES[dtype])
    rows = []
    for batch in args.batches:
        w = Workload(model, "decode", batch, args.context, precision=precision)
        names = {op.name for op in step_ops(w)}
        run = measure_step(
            model, model.num_layers, "decode", batch, args.context, dtype, device, args.repeats, names, built
        )
        row = {"batch": batch, "context": args.context, "eager_s": run.eager.median_s, "kernels": run.kernels}
        row["graph_s"] = run.graph.median_s if run.graph else None
        for name, settings in (
            ("calibrated", Settings(calibration=results.calibration, engine="ideal")),
            ("datasheet", Settings(engine="ideal")),
        ):
            for graphs in (False, True):
                c = settings.ceilings(hw, 1, cuda_graphs=graphs, serving=False)
                row[f"{name}_{'graph' if graphs else 'eager'}_s"] = float(evaluate(step_ops(w), c).step_time_s)
        row["calibrated_eager_over_measured"] = row["calibrated_eager_s"] / row["eager_s"]
        rows.append(row)
        print(
            f"decode b{batch} ctx {args.context}: eager {row['eager_s'] * 1e3:.2f} ms measured, "
            f"{row['calibrated_eager_s'] * 1e3:.2f} ms calibrated ({row['calibrated_eager_over_measured']:.2f}x), "
            f"{row['datasheet_eager_s'] * 1e3:.2f} ms datasheet; graph "
            f"{(row['graph_s'] or float('nan')) * 1e3:.2f} ms measured, {row['calibrated_graph_s'] * 1e3:.2f} ms "
            f"calibrated; {row['kernels']} kernels"
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
