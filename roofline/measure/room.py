"""Room for a measurement on this host, checked before anything is built: the memory a run will
hold (its predicted peak, with a quarter spare for what the prediction leaves out: the
interpreter, the allocator's slack) against the memory available now, and the disk a checkpoint
will take against the free space where it is written. A run that does not fit is refused with
both figures, rather than swapping the host or being killed halfway through."""

from __future__ import annotations

import os
import shutil

from roofline.format import fmt_bytes

SPARE = 1.25  # the predicted peak x this must be available


def available_ram_bytes() -> float:
    """Memory available to a new process now (Linux's MemAvailable; free pages elsewhere)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def check_ram(need_bytes: float, what: str, available_bytes: float | None = None) -> None:
    """Refuse ``what`` when its predicted peak, with SPARE, exceeds the memory available."""
    have = available_ram_bytes() if available_bytes is None else available_bytes
    if need_bytes * SPARE > have:
        raise ValueError(
            f"{what}: its predicted peak of {fmt_bytes(need_bytes)} (with a quarter spare, "
            f"{fmt_bytes(need_bytes * SPARE)}) is more than the {fmt_bytes(have)} this host has available; "
            "measure a smaller model (SmolLM2 or Llama 3.2 1B, say)"
        )


def check_disk(need_bytes: float, folder: str, what: str, free_bytes: float | None = None) -> None:
    """Refuse ``what`` when the files it writes under ``folder`` exceed the free space there."""
    have = shutil.disk_usage(folder).free if free_bytes is None else free_bytes
    if need_bytes > have:
        raise ValueError(
            f"{what}: its checkpoint files take {fmt_bytes(need_bytes)}, more than the {fmt_bytes(have)} free in "
            f"{folder} (set TMPDIR to a folder with room)"
        )
