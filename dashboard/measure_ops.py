"""The Measure page's table of a model step's ops: each op's measured time beside its predictions
on the datasheet's, the measured and the calibrated roofs, and the line that sums them up."""

from __future__ import annotations

from dashboard.basis import basis_short
from roofline.measure.schema import StepMeasurement

ROOFS = ("datasheet", "measured", "calibrated")


def step_roofs_name(step: StepMeasurement) -> str:
    """The roofs a step's ops are compared against: calibrated where the file has them."""
    return "calibrated" if any("calibrated" in op.predicted_s for op in step.ops) else "measured"


def step_op_rows(step: StepMeasurement) -> list[dict[str, object]]:
    """Each op's measured time beside its prediction on the step's roofs (calibrated where the file
    has them) and their ratio, first, where a table's width shows them; then its predictions on the
    other roofs and the rates it reached."""
    roofs_name = step_roofs_name(step)
    order = (roofs_name, *(r for r in ROOFS if r != roofs_name))
    rows = []
    for op in step.ops:
        predicted = op.predicted_s.get(roofs_name)
        predictions = {
            f"predicted, {basis_short(r)} (µs)": op.predicted_s[r] * 1e6 for r in order if r in op.predicted_s
        }
        first = next(iter(predictions.items()), None) if predicted else None
        rows.append(
            {
                "op": op.name,
                "class": op.op_class,
                "measured (µs)": op.time_s * 1e6,
                **dict([first] if first else []),
                f"measured / predicted ({basis_short(roofs_name)})": op.time_s / predicted if predicted else None,
                **predictions,
                "GB/s": op.bytes / op.time_s / 1e9 if op.time_s else None,
                "TFLOP/s": op.flops / op.time_s / 1e12 if op.time_s else None,
                **(
                    {"kernels, measured": op.kernels, "kernels, modelled": op.modelled_launches}
                    if op.kernels is not None
                    else {}
                ),
            }
        )
    return rows


def step_op_columns(rows: list[dict[str, object]]) -> dict | None:
    """How ``step_op_rows``' columns read on the page: numbers to two decimals, the predictions and
    the ratio under short headings (the CSV keeps the long names; the help says them). The long
    headings had made their columns so wide that a 1440-px page showed the ideal bound's cut."""
    import streamlit as st

    if not rows:
        return None
    config = {}
    for col in rows[0]:
        if col in ("op", "class"):
            continue
        label, words = None, None
        if col.startswith("predicted, "):
            label, words = col.removeprefix("predicted, "), f"the op's predicted time ({col[11:-5]})"
        elif col.startswith("measured / predicted ("):
            label = f"measured / {col.removeprefix('measured / predicted (')[:-1]}"
            words = "the measured time over the prediction beside it: above 1, the op ran slower than predicted"
        config[col] = st.column_config.NumberColumn(label, format="%,.2f", help=words)
    return config


def step_error_line(step: StepMeasurement) -> str:
    """The predicted step against the measured eager step, on each set of roofs, with the ops' error."""
    parts = [
        f"{basis_short(r)} {step.step_ratio(r):.2f}× (per-op median error {step.op_error(r):.0%})"
        for r in ROOFS
        if step.op_error(r) is not None and step.step_ratio(r) is not None
    ]
    return "Predicted step time over the measured eager step: " + " · ".join(parts) + "." if parts else ""
