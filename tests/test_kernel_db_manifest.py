"""A kernel-table folder named by ``$ROOFLINE_KERNEL_DB`` whose manifest is malformed: it had stopped
every command (a JSON error with no file named, or a KeyError traceback); now the folder is skipped
with a warning naming the file, and the shipped tables still answer."""

from __future__ import annotations

import pytest

from roofline.cli import main

ANALYZE = ["analyze", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--phase", "decode", "--seq-len", "1024"]


@pytest.mark.parametrize(
    "text, said",
    [
        ("{bad", "manifest.json: not readable JSON (Expecting property name"),
        ('{"files": [], "source": "x"}', "manifest.json: expected an object with 'source', 'licence' and 'files'"),
        ("[1, 2]", "manifest.json: expected an object with 'source', 'licence' and 'files'"),
        ('{"source": "x", "licence": "y", "files": [{"file": 1}]}', "(each with 'file', 'device', 'engine'"),
        ('{"source": "x", "licence": "y", "files": [], "n": NaN}', "not readable JSON (NaN is not allowed"),
    ],
)
def test_a_malformed_manifest_is_skipped_and_named(text, said, tmp_path, monkeypatch, capsys):
    from roofline.datafiles import PROBLEMS
    from tests.table_fixtures import clear_caches

    clear_caches()  # the tables are read afresh, from the folders as they are now
    before = PROBLEMS[:]
    PROBLEMS.clear()  # this test's reports alone (the command line prints the list it imported)
    (tmp_path / "manifest.json").write_text(text)
    monkeypatch.setenv("ROOFLINE_KERNEL_DB", str(tmp_path))
    plain = main([*ANALYZE, "--json"])
    out, err = capsys.readouterr()
    assert plain == 0 and "Traceback" not in err
    assert f"warning: {tmp_path / 'manifest.json'}" in err and said in err and "kernel tables are not read" in err
    PROBLEMS[:] = before
    clear_caches()
    assert '"roof_source"' in out and "vLLM" in out  # the shipped tables answered


def test_tables_import_names_the_source_as_given(tmp_path, capsys):
    """A wheel without the tables had been reported under the temporary folder it was unpacked to
    ("no aiconfigurator_core/systems/data under /tmp/tmp…/unpacked"), a missing path as a folder
    without data, and an empty one as ".": each now names --source as given."""
    import zipfile

    wheel = tmp_path / "other-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("other/__init__.py", "")
    out = tmp_path / "db"
    cases = [
        (str(wheel), f"--source: no aiconfigurator_core/systems/data in {wheel} (an aiconfigurator-core wheel"),
        (str(tmp_path / "missing"), f"--source: {tmp_path / 'missing'} does not exist"),
        ("", "--source: expected an aiconfigurator-core wheel or folder, got ''"),
    ]
    for source, said in cases:
        assert main(["tables", "import", "--source", source, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert said in err and "/unpacked" not in err and "Traceback" not in err
    assert not out.exists()  # nothing written


def _shadowing_folder(tmp_path, write) -> str:
    """A folder whose manifest names the shipped H100 vLLM file, with ``write(path)`` in its place."""
    import json

    from roofline.tables import store

    entry = next(e for e in store.entries() if e["device"] == "h100-sxm" and e["engine"] == "vllm")
    name = entry["file"]
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    write(tmp_path / name, entry["path"])
    manifest = {
        "source": "x",
        "licence": "y",
        "files": [{k: entry[k] for k in ("file", "device", "engine", "version")}],
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return name


def _cut(path, shipped):
    path.write_bytes(open(shipped, "rb").read()[:5000])  # an interrupted import


def _no_time(path, shipped):
    import numpy as np

    with np.load(shipped) as z:
        columns = {k: z[k] for k in z.files}
    for key in columns:
        if key.endswith("/latency_ms"):
            columns[key] = np.full(columns[key].shape, np.nan)
    np.savez(path, **columns)


@pytest.mark.parametrize(("write", "said"), [(_cut, "not a readable kernel-table file"), (_no_time, "no kernel time")])
def test_a_broken_table_file_is_named_and_the_next_of_its_name_answers(write, said, tmp_path, monkeypatch, capsys):
    """A file cut short had stopped every command (BadZipFile); one of NaN times was taken as
    engine-measured while every op fell back to the datasheet. Each is named once, and the shipped
    file of the same name answers, as engine-measured."""
    from roofline.datafiles import PROBLEMS
    from tests.table_fixtures import clear_caches

    clear_caches()
    before = PROBLEMS[:]
    PROBLEMS.clear()
    name = _shadowing_folder(tmp_path, write)
    monkeypatch.setenv("ROOFLINE_KERNEL_DB", str(tmp_path))
    clear_caches()
    assert main([*ANALYZE, "--json"]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err and f"warning: {tmp_path / name}: {said}" in err and "tables are not read" in err
    PROBLEMS[:] = before
    clear_caches()
    assert '"roofs": "engine-measured"' in out and "vLLM 0.24.0 kernels, h100-sxm" in out


def test_tables_import_checks_its_folder_and_devices_before_unpacking(tmp_path, capsys, monkeypatch):
    """A file as --out had been refused ("File exists") after seconds of unpacking, and an unknown
    device without the list of those the database has."""
    from roofline.tables import importer

    monkeypatch.setattr(importer.convert, "unpack_wheel", lambda *a: pytest.fail("unpacked before checking"))
    wheel = tmp_path / "aiconfigurator_core-1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    taken = tmp_path / "a-file"
    taken.write_text("")
    assert main(["tables", "import", "--source", str(wheel), "--out", str(taken)]) == 2
    assert f"--out: {taken} is a file; expected a folder" in capsys.readouterr().err
    assert main(["tables", "import", "--source", str(wheel), "--devices", "nosuch", "h100-sxm"]) == 2
    err = capsys.readouterr().err
    assert "--devices: no kernel tables for 'nosuch'; allowed: " in err and "h100-sxm" in err
