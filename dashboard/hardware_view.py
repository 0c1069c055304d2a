"""What the Hardware page works out beyond laying out: which devices its comparison holds."""

from __future__ import annotations

from collections.abc import Sequence

from roofline.plots.style import MAX_COMPARED


def with_device(chosen: Sequence[str], device_id: str, replaces: str | None = None) -> list[str]:
    """The comparison with ``device_id`` added (a device the user just made is what they want to
    compare), in place of ``replaces`` (the custom device it supersedes), keeping at most
    MAX_COMPARED devices: the newest goes in last, in place of the last when the list is full."""
    kept = [h for h in chosen if h not in (device_id, replaces)]
    return [*kept[: MAX_COMPARED - 1], device_id]
