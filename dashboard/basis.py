"""What a time or rate on a page rests on, in words: the datasheet's ideal bound, an engine's
measured kernels, a calibration fitted on the user's measured kernels, or a measurement."""

from __future__ import annotations

from collections.abc import Iterable

BASIS_LABELS = {
    "datasheet": "ideal bound (datasheet roofs)",
    "calibrated": "calibrated roofs (fitted on measured kernels)",
    "engine-measured": "engine-measured roofs (kernels timed inside a serving engine)",
    "measured": "measured roofs",
}


BASIS_SHORT = {
    "datasheet": "ideal bound",
    "calibrated": "calibrated",
    "engine-measured": "engine-measured",
    "measured": "measured roofs",
}


def basis_short(source: str) -> str:
    """The few words a metric tile has room for."""
    return BASIS_SHORT.get(source, source)


def basis_label(source: str) -> str:
    """``source`` is a Ceilings' ``source``: datasheet, calibrated or measured."""
    return BASIS_LABELS.get(source, f"{source} roofs")


def is_ideal(source: str) -> bool:
    return source == "datasheet"


def rests_on_sentence(sources: Iterable[str]) -> str:
    """One sentence for a caption: what the figures beside it rest on."""
    kinds = sorted(set(sources)) or ["datasheet"]
    if kinds == ["datasheet"]:
        return (
            "Times and rates are ideal bounds on datasheet roofs: real kernels reach less, so expect slower steps "
            "(calibrate on the Measure page for achievable figures)."
        )
    return "Times and rates rest on " + " and ".join(basis_label(k) for k in kinds) + "."
