"""``python -m roofline tables import``: fetch aiconfigurator-core (or use a wheel or folder the
user has) and convert its kernel tables into the user's kernel-table folder.

One command for a newer database: the newest wheel is downloaded with pip (no dependencies, no
install), only its parquet tables are unpacked into a temporary folder, converted, and the folder
removed. Offline: ``--source`` a wheel or an unpacked package.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import roofline.tables.convert as convert
import roofline.tables.store as store
from roofline.datafiles import shown_path


def import_database(
    source: str | Path | None = None,
    out: Path | None = None,
    devices: list[str] | None = None,
    package_spec: str = "aiconfigurator-core",
) -> dict:
    """Convert the tables of ``source`` (a .whl, an unpacked package, or None: download the newest
    ``package_spec`` with pip) into ``out`` (default: the user folder). Returns the manifest."""
    out = Path(out) if out else store.USER_DIR
    # Checked before anything is downloaded or unpacked (these had been refused seconds after it).
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out: {shown_path(out)} is a file; expected a folder (made where it is absent)")
    known = sorted(set(convert.SYSTEM_TO_HARDWARE.values()))
    if unknown := [d for d in devices or [] if d not in known]:
        raise ValueError(
            f"--devices: no kernel tables for {', '.join(map(repr, unknown))}; allowed: {', '.join(known)}"
        )
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        if source is None:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", tmp, package_spec],
                check=True,
                stdout=sys.stderr,  # pip's progress is not the command's output (--json)
            )
            wheels = sorted(tmp_path.glob("*.whl"))
            if not wheels:
                raise FileNotFoundError(f"pip downloaded no wheel of {package_spec}")
            source = wheels[0]
        if not str(source):
            raise ValueError("--source: expected an aiconfigurator-core wheel or folder, got ''")
        given = source = Path(source)
        if not given.exists():
            raise ValueError(f"--source: {shown_path(given)} does not exist (an aiconfigurator-core wheel or folder)")
        if source.suffix == ".whl":
            try:
                source = convert.unpack_wheel(source, tmp_path / "unpacked")
            except zipfile.BadZipFile:
                raise ValueError(f"--source: {source} is not a wheel (a zip file)") from None
        try:
            systems = convert.find_systems_dir(source)
        except FileNotFoundError:  # named as given, not as the temporary folder a wheel was unpacked to
            raise ValueError(
                f"--source: no aiconfigurator_core/systems/data in {shown_path(given)} (an aiconfigurator-core wheel "
                "or its unpacked package)"
            ) from None
        # Converted apart first: an import that finds nothing leaves the folder as it was.
        fresh = tmp_path / "converted"
        manifest = convert.convert(systems, fresh, devices, package_version=convert.package_version_of(systems))
        if not manifest["files"]:
            asked = f" for {', '.join(devices)}" if devices else ""
            raise ValueError(f"--source: no kernel tables{asked} in {source}; {out} is left as it was")
        manifest = _merged(manifest, out)
        shutil.copytree(fresh, out, dirs_exist_ok=True)
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    store.load_tables.cache_clear()
    return manifest


def _merged(manifest: dict, out: Path) -> dict:
    """The new manifest, with every file an earlier import listed in ``out`` that this one does
    not replace kept, each with its own source."""
    try:
        before = json.loads((out / "manifest.json").read_text())
    except (OSError, ValueError):
        return manifest
    new = {f["file"] for f in manifest["files"]}
    kept = [
        {**f, "source": f.get("source", before.get("source"))}
        for f in before.get("files", [])
        if isinstance(f, dict) and f.get("file") not in new and (out / str(f.get("file"))).exists()
    ]
    return {**manifest, "files": manifest["files"] + kept}
