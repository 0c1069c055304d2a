"""A tiny aiconfigurator-like database, converted and installed in place of the shipped tables."""

from __future__ import annotations

from pathlib import Path

import pytest

import roofline.tables.store as store
from roofline.roofs import kernel_tables

# Each fake engine's parquet files: (family folder, file name) -> rows.
GEMM_1024 = [{"gemm_dtype": "bfloat16", "m": 1, "n": 1024, "k": 1024, "latency": 0.01}]


def write_engine(pkg: Path, system: str, engine: str, files: dict[tuple[str, str], list[dict]], version="9.9.9"):
    """One engine's tables on one system, under ``pkg/systems/data``."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    for (family, fname), rows in files.items():
        folder = pkg / "systems" / "data" / system / family / engine / version
        folder.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_parquet(folder / fname)


def install_converted(tmp_path: Path, monkeypatch) -> Path:
    """Convert ``tmp_path/pkg`` into ``tmp_path/db`` and make it the only kernel-table folder read
    (caches cleared); returns the folder."""
    from roofline.tables.convert import convert, find_systems_dir

    out = tmp_path / "db"
    convert(find_systems_dir(tmp_path / "pkg"), out, package_version="0.0-test")
    monkeypatch.setenv("ROOFLINE_KERNEL_DB", str(out))
    monkeypatch.setattr(store, "SHIPPED_DIR", tmp_path / "nowhere")
    monkeypatch.setattr(store, "USER_DIR", tmp_path / "nowhere")
    kernel_tables.cache_clear()
    store.load_tables.cache_clear()
    return out


def clear_caches() -> None:
    kernel_tables.cache_clear()
    store.load_tables.cache_clear()
