"""Convert aiconfigurator-core's measured kernel tables into compact per (device, engine, version) files.

    python scripts/import_kernel_tables.py [--source WHEEL_OR_FOLDER] [--out DIR] [--devices h100-sxm ...]

Without --source the newest wheel is downloaded with pip (no dependencies). The repository's
``kernel_db/`` was written with:

    python scripts/import_kernel_tables.py --source aiconfigurator_core-0.12.0-cp311-abi3-manylinux_2_28_x86_64.whl \\
        --out kernel_db --devices h100-sxm h200-sxm b200 b300 gb200
"""

from __future__ import annotations

import argparse
from pathlib import Path

from roofline.tables.importer import import_database


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", help="an aiconfigurator-core wheel or unpacked package (default: pip download)")
    parser.add_argument("--out", type=Path, help="output folder (default: the user's kernel-table folder)")
    parser.add_argument("--devices", nargs="*", help="hardware ids or aiconfigurator system names (default: all)")
    args = parser.parse_args()
    manifest = import_database(args.source, args.out, args.devices)
    total = sum(f["bytes"] for f in manifest["files"])
    print(f"{len(manifest['files'])} files, {total / 1e6:.1f} MB, from {manifest['source']} ({manifest['licence']})")


if __name__ == "__main__":
    main()
