"""Where the converted kernel tables live, and loading them (numpy only; cached).

Search order: ``$ROOFLINE_KERNEL_DB``, the user folder ``python -m roofline tables import`` writes
(``~/.local/share/roofline/kernel_db``), then the files shipped in the repository's ``kernel_db/``.
A file in an earlier folder hides one of the same name in a later one.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np

SHIPPED_DIR = Path(__file__).resolve().parents[2] / "kernel_db"
USER_DIR = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "roofline" / "kernel_db"


def search_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("ROOFLINE_KERNEL_DB"):
        dirs.append(Path(os.environ["ROOFLINE_KERNEL_DB"]))
    dirs += [USER_DIR, SHIPPED_DIR]
    return [d for d in dirs if (d / "manifest.json").exists()]


MAX_MANIFEST_BYTES = 4 * 2**20
_ENTRY_KEYS = ("file", "device", "engine", "version")


def _manifest(folder: Path) -> dict | None:
    """A folder's manifest, or None with the reason in ``PROBLEMS`` (the command line prints it as
    a warning, the Hardware page lists it): a malformed or wrong-shaped one hides nothing of the
    folders after it."""
    from roofline.datafiles import DataError, read_regular_file, report_problem, shown_path, strict_json

    path = folder / "manifest.json"
    try:
        manifest = strict_json(read_regular_file(path, MAX_MANIFEST_BYTES))
    except DataError as exc:
        report_problem(f"{exc}; its kernel tables are not read")
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        report_problem(f"{shown_path(path)}: not readable JSON ({exc}); its kernel tables are not read")
        return None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    good = isinstance(files, list) and all(
        isinstance(f, dict) and all(isinstance(f.get(k), str) for k in _ENTRY_KEYS) for f in files
    )
    if not good or not all(isinstance(manifest.get(k), str) for k in ("source", "licence")):
        report_problem(
            f"{shown_path(path)}: expected an object with 'source', 'licence' and 'files' (each with "
            f"{', '.join(map(repr, _ENTRY_KEYS))}), as `python -m roofline tables import` writes; its kernel tables "
            "are not read"
        )
        return None
    return manifest


def entries(unusable: frozenset[str] = frozenset()) -> list[dict]:
    """Every (device, engine, version) file available, first folder winning, with its source; a
    file whose path is in ``unusable`` is passed over for one of its name in a later folder."""
    seen: dict[str, dict] = {}
    for d in search_dirs():
        if (manifest := _manifest(d)) is None:
            continue
        for f in manifest["files"]:
            if f["file"] not in seen and (d / f["file"]).exists() and str(d / f["file"]) not in unusable:
                seen[f["file"]] = {
                    **f,
                    "path": str(d / f["file"]),
                    "source": f.get("source", manifest["source"]),  # an entry kept from an earlier import: its own
                    "licence": manifest["licence"],
                }
    return list(seen.values())


def _version_key(v: str) -> tuple:
    from roofline.tables.convert import _version_key as key

    return key(v)


def find(device: str, engine: str, version: str | None = None) -> dict | None:
    """The manifest entry for ``device`` and ``engine``: ``version`` if given and present, else
    the newest (the closest older one when ``version`` is newer than any, the oldest newer one
    otherwise). A chosen file with no usable time is no table (said once, by ``load_tables``): the
    choice is made again without it, so the next folder's file of its name stands. Only the file
    chosen is read."""
    unusable: set[str] = set()
    while True:
        found = [e for e in entries(frozenset(unusable)) if e["device"] == device and e["engine"] == engine]
        if not found:
            return None
        chosen = _choose(found, version)
        if load_tables(chosen["path"]):
            return chosen
        unusable.add(chosen["path"])


def _choose(found: list[dict], version: str | None) -> dict:
    if version is not None:
        exact = [e for e in found if e["version"] == version]
        if exact:
            return exact[0]
        older = [e for e in found if _version_key(e["version"]) <= _version_key(version)]
        if older:
            return max(older, key=lambda e: _version_key(e["version"]))
        return min(found, key=lambda e: _version_key(e["version"]))
    return max(found, key=lambda e: _version_key(e["version"]))


@lru_cache(maxsize=32)
def load_tables(path: str) -> dict[str, dict[str, np.ndarray]]:
    """table name -> column name -> array, from one converted file: only the rows with a finite,
    positive time; {} for a file that cannot be read (cut short by an interrupted import or a full
    disk) or holds no such row, with the reason in ``PROBLEMS``."""
    import zipfile

    from roofline.datafiles import report_problem, shown_path

    out: dict[str, dict[str, np.ndarray]] = {}
    try:
        with np.load(path, allow_pickle=False) as z:
            for key in z.files:
                table, column = key.split("/", 1)
                out.setdefault(table, {})[column] = z[key]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        report_problem(f"{shown_path(Path(path))}: not a readable kernel-table file ({exc}); its tables are not read")
        return {}
    for table, columns in list(out.items()):
        latency = columns.get("latency_ms")
        rows = {len(c) for c in columns.values()}
        if latency is None or len(rows) != 1 or latency.dtype.kind not in "iuf":
            del out[table]
            continue
        keep = np.isfinite(latency) & (latency > 0)
        if not keep.all():
            out[table] = {name: c[keep] for name, c in columns.items()}
        if not keep.any():
            del out[table]
    if not out:
        report_problem(f"{shown_path(Path(path))}: no kernel time in it (finite and above 0); its tables are not read")
        return {}
    moe = out.get("moe")
    if moe is not None and "distribution" not in moe:  # converted when only balanced routing was kept
        moe["distribution"] = np.full(len(moe["latency_ms"]), "balanced")
    return out
