"""Measured results on the analytic pages: a calibration (achievable roofs per op class, fitted
on kernel sweeps measured on one device) and a measured all-reduce, taken from an uploaded
results file or from the Measure page's run in this session.

A calibration applies to the device it was measured on and nowhere else; the pages say which
roofs each device used (``roofs_caption``).
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from roofline.calibration import Calibration
from roofline.format import fmt_seconds
from roofline.measure.schema import MAX_OPS, MAX_RESULTS_BYTES, Collectives, Results, ResultsError, parse_results

RESULTS_KEY = "measure_results"  # where the Measure page keeps its results (a Results)
SOURCE_KEY = "measure_results_source"  # where they came from: run, upload or example
_UPLOAD, _PARSED, _ERROR = "measured_upload", "measured_upload_parsed", "measured_upload_error"
_CHOICES = ("none", "the Measure page's results", "an uploaded file")


@dataclass(frozen=True)
class Measured:
    calibration: Calibration | None
    collectives: Collectives | None
    origin: str  # which results: "uploaded roofline_measure.json", "measured on this machine"


def _uploaded() -> tuple[Results | None, str]:
    """The uploaded results file, parsed once per upload (and forgotten when removed)."""
    file = st.file_uploader(
        f"Results file (JSON, up to {MAX_RESULTS_BYTES // 2**20} MB and {MAX_OPS:,} kernels and ops)",
        type=["json"],
        max_upload_size=MAX_RESULTS_BYTES // 2**20,
        key=_UPLOAD,
        help="Written by `python -m roofline measure --out results.json` or "
        "`torchrun … -m roofline.measure.collectives --out …`.",
    )
    if file is None:
        st.session_state.pop(_PARSED, None)
        st.session_state.pop(_ERROR, None)
        return None, ""
    if st.session_state.get(_PARSED, (None,))[0] != file.file_id:
        try:
            st.session_state[_PARSED] = (file.file_id, parse_results(file.getvalue(), file.name))
            st.session_state.pop(_ERROR, None)
        except ResultsError as exc:
            st.session_state[_PARSED] = (file.file_id, None)
            st.session_state[_ERROR] = str(exc)
    if st.session_state.get(_ERROR):
        st.error(f"Not used: {st.session_state[_ERROR]}")
    return st.session_state[_PARSED][1], f"uploaded {file.name}"


def measured_panel() -> Measured:
    """A sidebar panel choosing measured results; what it found and what it will use is said there."""
    with st.sidebar.expander("Measured roofs (calibration, all-reduce)"):
        session: Results | None = st.session_state.get(RESULTS_KEY)
        choices = [c for c in _CHOICES if c != _CHOICES[1] or session is not None]
        choice = st.radio(
            "Use",
            choices,
            key="measured_source",
            help="A calibration replaces the datasheet roofs of the device it was measured on with the achievable "
            "roofs fitted per op class; a measured all-reduce replaces the datasheet link.",
        )
        if choice == _CHOICES[1]:
            results, origin = session, f"measured on {session.device.name}"
        elif choice == _CHOICES[2]:
            results, origin = _uploaded()
        else:
            results, origin = None, ""
        if results is None:
            return Measured(None, None, "")
        cal, coll = results.calibration, results.collectives
        if cal is None and coll is None:
            st.warning("These results hold neither a calibration nor an all-reduce: nothing to use.")
        if cal is not None:
            st.caption(
                f"Calibration of {cal.device} ({len(cal.fits)} op classes): applies to "
                + (f"`{cal.hardware_id}` only." if cal.hardware_id else "no database device (none matched).")
            )
        if coll is not None:
            st.caption(
                f"All-reduce over {coll.world_size} ranks ({coll.backend}): "
                f"{coll.link_bandwidth_bytes_per_s / 1e9:,.1f} GB/s, {fmt_seconds(coll.latency_s)} per collective."
            )
        return Measured(cal, coll, origin)


def roofs_caption(measured: Measured, device_ids: list[str]) -> str | None:
    """Which roofs each device used, once measured results are chosen."""
    if measured.calibration is None and measured.collectives is None:
        return None
    parts = []
    cal = measured.calibration
    if cal is not None:
        on = [d for d in device_ids if d == cal.hardware_id]
        parts.append(
            f"calibrated roofs ({measured.origin}) on `{on[0]}`; datasheet roofs elsewhere"
            if on
            else f"the calibration ({measured.origin}) is for `{cal.hardware_id or cal.device}`, not shown here: "
            "datasheet roofs"
        )
    if measured.collectives is not None:
        parts.append("the link is the measured all-reduce")
    return "Roofs: " + "; ".join(parts) + "."
