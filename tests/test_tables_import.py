"""``tables import`` into a folder that already holds tables: a bad source, or one that converts
nothing, leaves it as it was; a second import keeps the first's files beside its own."""

from __future__ import annotations

import json

import pytest

from roofline.tables.importer import import_database
from tests.table_fixtures import GEMM_1024, write_engine


def test_a_file_that_is_not_a_wheel_is_said_so(tmp_path):
    fake = tmp_path / "fake.whl"
    fake.write_text("not a zip")
    with pytest.raises(ValueError, match=r"--source: .*fake\.whl is not a wheel \(a zip file\)"):
        import_database(fake, tmp_path / "out")


def test_an_import_keeps_the_tables_it_does_not_replace(tmp_path):
    pkg, out = tmp_path / "pkg", tmp_path / "out"
    write_engine(pkg, "h100_sxm", "vllm", {("gemm", "gemm_perf.parquet"): GEMM_1024})
    write_engine(pkg, "b200_sxm", "vllm", {("gemm", "gemm_perf.parquet"): GEMM_1024})
    first = import_database(pkg, out, ["h100-sxm"])
    assert [f["file"] for f in first["files"]] == ["h100-sxm/vllm-9.9.9.npz"]
    listed = (out / "manifest.json").read_text()
    # A device the source does not hold: nothing converted, the folder as it was.
    # A device the database has no tables for at all is refused before the source is read.
    with pytest.raises(ValueError, match="--devices: no kernel tables for 'mi300x'; allowed: a100-sxm-80gb, b200"):
        import_database(pkg, out, ["mi300x"])
    assert (out / "manifest.json").read_text() == listed
    # One the database has, which this source does not hold: nothing converted, the folder as it was.
    with pytest.raises(ValueError, match="no kernel tables for l40s in .*left as it was"):
        import_database(pkg, out, ["l40s"])
    assert (out / "manifest.json").read_text() == listed
    # Another device: both listed, the first with its own source.
    second = import_database(pkg, out, ["b200"])
    files = {f["file"]: f for f in json.loads((out / "manifest.json").read_text())["files"]}
    assert set(files) == {"b200/vllm-9.9.9.npz", "h100-sxm/vllm-9.9.9.npz"} == {f["file"] for f in second["files"]}
    assert files["h100-sxm/vllm-9.9.9.npz"]["source"] == first["source"]
    assert all((out / name).exists() for name in files)


@pytest.mark.parametrize(
    "text, said",
    [("defaults: [", "not readable YAML"), ("- 1\n- 2\n", "expected a mapping with 'defaults'")],
    ids=["broken", "a-list"],
)
def test_a_bad_versions_file_is_named_and_the_folder_left_as_it_was(tmp_path, text, said):
    """A source whose query_versions.yaml is broken YAML or not a mapping had ended in a YAML
    parser's or an AttributeError's traceback."""
    pytest.importorskip("yaml")
    pkg, out = tmp_path / "pkg", tmp_path / "out"
    write_engine(pkg, "h100_sxm", "vllm", {("gemm", "gemm_perf.parquet"): GEMM_1024})
    (pkg / "systems" / "query_versions.yaml").write_text(text)
    with pytest.raises(ValueError, match=rf"query_versions\.yaml: {said}"):
        import_database(pkg, out, ["h100-sxm"])
    assert not (out / "manifest.json").exists()
