"""``python -m roofline tables import``: fetch aiconfigurator-core (or use a wheel or folder the
user has) and convert its kernel tables into the user's kernel-table folder.

One command for a newer database: the newest wheel is downloaded with pip (no dependencies, no
install), only its parquet tables are unpacked into a temporary folder, converted, and the folder
removed. Offline: ``--source`` a wheel or an unpacked package.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import roofline.tables.convert as convert
import roofline.tables.store as store


def import_database(
    source: str | Path | None = None,
    out: Path | None = None,
    devices: list[str] | None = None,
    package_spec: str = "aiconfigurator-core",
) -> dict:
    """Convert the tables of ``source`` (a .whl, an unpacked package, or None: download the newest
    ``package_spec`` with pip) into ``out`` (default: the user folder). Returns the manifest."""
    out = Path(out) if out else store.USER_DIR
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
        source = Path(source)
        if source.suffix == ".whl":
            source = convert.unpack_wheel(source, tmp_path / "unpacked")
        systems = convert.find_systems_dir(source)
        manifest = convert.convert(systems, out, devices, package_version=convert.package_version_of(systems))
    store.load_tables.cache_clear()
    return manifest
