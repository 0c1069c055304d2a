"""Measurements of resident memory run in a fresh child process, so the peak starts clean."""

from __future__ import annotations

import os
import subprocess
import sys

# glibc hands large blocks back to the system at once and never trims in the background: freed
# memory leaves the resident set when Python frees it, so the peak read is the program's own.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}


def run_child(module: str, args: list[str], what: str, timeout_s: float) -> str:
    """``python -m module *args`` in a child process with ``MALLOC_ENV``; its standard output.
    A failure raises RuntimeError naming ``what`` and the child's last error line."""
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, **MALLOC_ENV},
    )
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit status {proc.returncode}"
        raise RuntimeError(f"{what} failed: {last}")
    return proc.stdout
