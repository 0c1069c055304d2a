"""Measured results on the analytic pages: a calibration (achievable roofs per op class, fitted
on kernel sweeps measured on one device) and a measured all-reduce, taken from an uploaded
results file or from the Measure page's run in this session.

A calibration applies to the device it was measured on and nowhere else; the pages say which
roofs each device used (``roofs_caption``).
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from dashboard.share import md_escape
from roofline.calibration import Calibration
from roofline.format import fmt_seconds
from roofline.measure.schema import MAX_OPS, MAX_RESULTS_BYTES, Collectives, Results, ResultsError, parse_results
from roofline.measured_roofs import MeasuredRoofs

RESULTS_KEY = "measure_results"  # where the Measure page keeps its results (a Results)
SOURCE_KEY = "measure_results_source"  # where they came from: run, upload or example
_UPLOAD, _PARSED, _ERROR = "measured_upload", "measured_upload_parsed", "measured_upload_error"
_CHOICES = ("none", "the Measure page's results", "an uploaded file")


@dataclass(frozen=True)
class Measured:
    calibration: Calibration | None
    collectives: Collectives | None
    origin: str  # which results: "uploaded roofline_measure.json", "measured on this machine"
    roofs: MeasuredRoofs = MeasuredRoofs()  # where each applies (the same answer as the command line's)

    def settings_fields(self) -> dict[str, object]:
        """``Settings`` fields: the calibration, and the measured link for the device it belongs to."""
        return self.roofs.settings_fields()


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
        st.error(f"Not used: {md_escape(st.session_state[_ERROR])}")
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
        force = coll is not None and st.checkbox(
            "Apply the all-reduce to every device",
            key="measured_force_link",
            help="A measured all-reduce applies to the device it was measured on (a GPU with NCCL) and nowhere "
            "else. Tick this to use it on every device anyway; the pages then say it was forced.",
        )
        roofs = MeasuredRoofs(
            calibration=cal,
            calibration_origin=origin,
            collectives=results if coll is not None else None,
            collectives_origin=origin,
            force_collectives=force,
            force_hint="the panel's checkbox",
        )
        if cal is None and coll is None:
            st.warning("These results hold neither a calibration nor an all-reduce: nothing to use.")
        if cal is not None:
            st.caption(
                f"Calibration of {md_escape(cal.device)} ({len(cal.fits)} op classes): applies to "
                + (f"{md_escape(cal.hardware_id)} only." if cal.hardware_id else "no database device (none matched).")
            )
        if coll is not None:
            target, why = roofs.collectives_target()
            st.caption(
                f"All-reduce over {coll.world_size} ranks ({md_escape(coll.backend)}, "
                f"{md_escape(results.device.name)}): {coll.link_bandwidth_bytes_per_s / 1e9:,.1f} GB/s, "
                f"{fmt_seconds(coll.latency_s)} per collective. "
                + (
                    f"Applies to {md_escape(target)} only."
                    if target not in (None, "*")
                    else md_escape(why[:1].upper() + why[1:]) + "."
                )
            )
        return Measured(cal, coll, origin, roofs)


def roofs_caption(measured: Measured, device_ids: list[str], tp: int | None = None) -> str | None:
    """Which measured roofs each device used, and why not where they were not, and where the
    all-reduce's ranks are not the page's ``tp`` (the pages' header line; the command line prints
    the same sentences)."""
    if not measured.roofs.any:
        return None
    lines = [line[0].lower() + line[1:].rstrip(".") for line in measured.roofs.lines(device_ids, [tp] if tp else [])]
    return "Roofs: " + md_escape("; ".join(lines)) + "."
