"""Files a command writes, checked before it runs: a command that takes minutes (``validate``,
``measure``, ``profile``) says that its output cannot be written at once, not after its work."""

from __future__ import annotations

import os
from pathlib import Path

from roofline.cli.args import CliError
from roofline.datafiles import shown_path


def require_writable(option: str, path: str | Path | None) -> None:
    """Raise a ``CliError`` naming ``option`` unless ``path`` names a file that can be written: not
    empty, not a folder, in a folder that exists and may be written. None (not asked for) passes."""
    if path is None:
        return
    shown = shown_path(path)
    try:
        out = Path(path)
        if not str(path) or out.is_dir():
            raise CliError(f"{option}: expected a file to write, got {shown!r}")
        if out.exists() and not os.access(out, os.W_OK):
            raise CliError(f"{option}: cannot write {shown} (the file may not be written)")
        parent = out.resolve().parent
        writable = parent.is_dir() and os.access(parent, os.W_OK)
    except OSError as exc:
        raise CliError(f"{option}: cannot write {shown} ({exc.strerror or exc})") from None
    if not writable:
        raise CliError(f"{option}: cannot write {shown} (folder {shown_path(parent)} is missing or not writable)")
