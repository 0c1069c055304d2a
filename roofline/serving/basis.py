"""Rankings of devices whose times rest on different roofs.

A device with engine-measured (or calibrated) kernel roofs gets times its engine reaches; a device
on the datasheet alone gets its ideal bound, faster than any real kernel. One ranking of both would
put the devices never measured ahead for that reason alone (the Which hardware? page ranks such a
mix on the ideal bound instead; a serving ranking, simulated run by run, has no second basis to
rank on). So where a ranking mixes the two, the devices on measured roofs come first, in the
ranking's own order, and those on the datasheet alone after them, in theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

MIXED_BASIS_WORDS = (
    "devices on measured roofs are ranked first and those on the datasheet alone after them, each in the "
    "ranking's order: an ideal bound is faster than any measured kernel, so one ranking of both would favour the "
    "devices never measured"
)


def measured_first(items: Sequence[T], on_datasheet: Callable[[T], bool]) -> tuple[list[T], bool]:
    """``items`` with those on measured roofs first where some rest on the datasheet alone and some
    do not (each group in its given order), and whether they were mixed."""
    ideal = [bool(on_datasheet(x)) for x in items]
    if all(ideal) or not any(ideal):
        return list(items), False
    return [x for x, i in zip(items, ideal) if not i] + [x for x, i in zip(items, ideal) if i], True
