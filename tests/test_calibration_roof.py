"""A class's fitted bandwidth is held at the device's measured memory roof where the fit's slope
goes past it (sizes too short for their transfer to outweigh a kernel's fixed cost), and the
Measure page says so of a file fitted before that."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from roofline.calibration import fit_calibration, fit_class
from roofline.measure.readings import fitted_above_roof_note
from roofline.measure.schema import KernelPoint, load_results

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "h100-sxm-quick-run.json"


def _norm(tokens: int, time_s: float) -> KernelPoint:
    moved = 2 * tokens * 4096 * 2.0
    return KernelPoint(
        op_class="norm", name="rms_norm", shape={"tokens": tokens}, flops=0.0, bytes=moved, time_s=time_s
    )


def test_a_slope_past_the_roof_is_held_at_it():
    # 5 µs fixed, then 1 MB and 34 MB at a marginal 3.65 TB/s: the fit reads the slope as bandwidth.
    points = [_norm(1, 4.84e-6), _norm(64, 5.04e-6), _norm(2048, 13.94e-6)]
    free = fit_class(points)
    assert free.bandwidth_bytes_per_s > 3.5e12
    held = fit_class(points, memory_roof_bytes_per_s=2.989e12)
    assert held.bandwidth_bytes_per_s == pytest.approx(2.989e12, rel=1e-6)
    assert held.median_abs_error < 0.1  # still predicts the sizes swept within 10%
    # A roof the fit stays under changes nothing.
    assert fit_class(points, memory_roof_bytes_per_s=10e12) == free


def test_the_example_file_refits_to_its_stored_calibration_and_only_over_roof_classes_move():
    results = load_results(EXAMPLE)
    stored = results.calibration.fits
    free = fit_calibration(results.sweeps, "x", "y").fits
    # The refit times every swept kernel as the stored fit does. (Its parameters may drift along a
    # direction the points do not constrain: the large GEMMs are compute-bound, and their fitted
    # bandwidth moved 0.3% from one numpy release to the next with every error unchanged.)
    for name, fit in free.items():
        pts = [pt for pt in results.sweeps if pt.op_class == name]
        args = (
            np.array([pt.flops for pt in pts]),
            np.array([pt.bytes for pt in pts]),
            np.array([pt.parallel for pt in pts]),
        )
        assert fit.predict(*args) == pytest.approx(stored[name].predict(*args), rel=1e-4), name
        assert fit.median_abs_error == pytest.approx(stored[name].median_abs_error, abs=1e-6), name
    roof = max(results.ceilings.memory_bandwidth_tbps, results.ceilings.read_bandwidth_tbps) * 1e12
    held = fit_calibration(results.sweeps, "x", "y", memory_roof_bytes_per_s=roof).fits
    moved = {k for k in held if held[k] != free[k]}
    assert moved == {"norm", "residual", "attention_decode"}
    assert held["norm"].bandwidth_bytes_per_s == pytest.approx(roof)
    # Decode attention's fastest point itself beats the copy roof: held at that point's own rate.
    fastest = max(p.bytes / p.time_s for p in results.sweeps if p.op_class == "attention_decode")
    assert held["attention_decode"].bandwidth_bytes_per_s == pytest.approx(fastest)


def test_the_page_names_a_stored_fit_above_the_measured_roof_and_not_a_refitted_one():
    results = load_results(EXAMPLE)
    note = fitted_above_roof_note(results)
    assert note.startswith("Fitted above the measured memory roof (2,989 GB/s): ")
    assert "norm 3,675 GB/s (its largest point 34 MB in 13.9 µs, 2,408 GB/s)" in note
    roof = max(results.ceilings.memory_bandwidth_tbps, results.ceilings.read_bandwidth_tbps) * 1e12
    refit = fit_calibration(results.sweeps, "x", "y", memory_roof_bytes_per_s=roof)
    assert fitted_above_roof_note(results.model_copy(update={"calibration": refit})) == ""


def test_the_calibration_table_marks_a_fitted_slope_beside_its_share_of_the_datasheet():
    """The H100 example's norm fit reads 3,675 GB/s, 110% of the datasheet's 3.35 TB/s: the table
    says it is a slope (the note under it says why) rather than show a rate past the datasheet."""
    from dashboard.measure_view import calibration_rows
    from roofline.hardware import get_hardware
    from roofline.settings import Settings

    results = load_results(EXAMPLE)
    rows = {r["class"]: r for r in calibration_rows(results, Settings().ceilings(get_hardware("h100-sxm")))}
    assert rows["norm"]["% of datasheet bandwidth"] == "110% (a slope: see below)"
    assert rows["linear_m1"]["% of datasheet bandwidth"] == "87%"  # 2,907 GB/s: under the measured roof


def test_a_step_op_table_sets_the_prediction_it_compares_beside_the_measurement():
    """The shipped H100 quick run has calibrated roofs: its op table reads measured, predicted on
    the calibrated roofs, their ratio, then the other roofs' predictions, so the comparison shows
    at a table's first width. Embedding gather: 2.77 µs measured, 4.80 µs predicted, 0.58."""
    from dashboard.measure_ops import step_op_rows
    from roofline.measure.schema import load_results

    rows = step_op_rows(load_results("examples/h100-sxm-quick-run.json").steps[0])
    assert list(rows[0])[:7] == [
        "op",
        "class",
        "measured (µs)",
        "predicted, calibrated (µs)",
        "measured / predicted (calibrated)",
        "predicted, ideal bound (µs)",
        "predicted, measured roofs (µs)",
    ]
    first = rows[0]
    assert first["op"] == "embedding gather"
    ratio = first["measured / predicted (calibrated)"]
    assert (
        ratio
        == pytest.approx(first["measured (µs)"] / first["predicted, calibrated (µs)"])
        == pytest.approx(0.577, abs=1e-3)
    )


def test_a_step_op_table_heads_its_predictions_short():
    """On the page the predictions and the ratio read under short headings (a 1440-px page had shown
    the ideal bound's column cut); the names, kept in the CSV, are in the help."""
    from dashboard.measure_ops import step_op_columns, step_op_rows
    from roofline.measure.schema import load_results

    rows = step_op_rows(load_results("examples/h100-sxm-quick-run.json").steps[0])
    config = step_op_columns(rows)
    labels = {c: config[c]["label"] for c in config if config[c]["label"]}
    assert labels == {
        "predicted, calibrated (µs)": "calibrated (µs)",
        "measured / predicted (calibrated)": "measured / calibrated",
        "predicted, ideal bound (µs)": "ideal bound (µs)",
        "predicted, measured roofs (µs)": "measured roofs (µs)",
    }
    assert config["predicted, ideal bound (µs)"]["help"] == "the op's predicted time (ideal bound)"
    assert "op" not in config and config["measured (µs)"]["type_config"]["format"] == "%,.2f"
    assert step_op_columns([]) is None
