"""validate --sample with files that are not a silicon sample, and rows that are not runs."""

from __future__ import annotations

import csv
import gzip
import os
import subprocess
import sys

import pytest

from roofline.sample_checks import NOT_A_RUN_REASON, why_figures_not_a_run
from roofline.silicon_sample import load_silicon_sample, why_not_scored
from roofline.tables import store

RUN = "qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_vllm_agg_1024x1024_c32_tp2_epnone_37"


def _validate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "roofline", "validate", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: d / "none.csv", "no such file"),
        (lambda d: d, "is a folder"),
        (lambda d: (d / "abc.csv").write_text("a,b,c\n1,2,3\n") and d / "abc.csv", "no column id, model_path"),
        (lambda d: (d / "x.bin").write_bytes(bytes(range(128, 256))) and d / "x.bin", "is not a CSV or .csv.gz"),
        (lambda d: (d / "x.csv.gz").write_bytes(b"not gzip") and d / "x.csv.gz", "is not a CSV or .csv.gz"),
    ],
)
def test_a_file_that_is_not_a_sample_is_refused_by_name(tmp_path, make, message):
    path = make(tmp_path)
    out = _validate("--sample", str(path))
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "--sample" in out.stderr and message in out.stderr
    assert "cannot write the output" not in out.stderr


def _shipped_row() -> tuple[list[str], dict[str, str]]:
    path = next(d for d in store.search_dirs() if (d / "silicon_sample.csv.gz").exists()) / "silicon_sample.csv.gz"
    with gzip.open(path, "rt", newline="") as f:
        reader = csv.DictReader(f)
        row = next(r for r in reader if r["id"] == RUN)
        return list(reader.fieldnames), row


@pytest.mark.parametrize(
    "field, value",
    [("silicon_tpot_ms", "-7"), ("silicon_tpot_ms", "0"), ("silicon_ttft_ms", "0"), ("tp_size", "2.5"), ("isl", "0")],
)
def test_a_row_that_is_not_a_run_is_left_out_with_its_reason(tmp_path, field, value):
    columns, row = _shipped_row()
    assert why_not_scored(row) is None and why_figures_not_a_run(row) is None  # the run as published
    bad = dict(row, **{field: value})
    assert why_figures_not_a_run(bad) == NOT_A_RUN_REASON
    path = tmp_path / "one.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows([row, dict(bad, id="bad")])
    assert [r["id"] for r in load_silicon_sample(path)] == [RUN, "bad"]
    out = _validate("--sample", str(path), "--json")
    assert out.returncode == 0, out.stderr
    assert "RuntimeWarning" not in out.stderr and "nan%" not in out.stdout
    import json

    report = json.loads(out.stdout)
    assert [r["id"] for r in report["results"]] == [RUN]
    assert report["skipped"] == {NOT_A_RUN_REASON: 1}


def test_a_missing_input_or_output_path_is_named_not_blamed_on_stdout(tmp_path):
    missing = tmp_path / "no" / "x.csv"
    for args, said in (
        (["tables", "import", "--source", str(tmp_path / "none")], f"--source: {tmp_path / 'none'} does not exist"),
        (["validate", "--csv", str(missing)], f"--csv: cannot write {missing} (folder {missing.parent} is missing"),
        (["validate", "--load", "--csv", str(missing)], f"--csv: cannot write {missing}"),
        (["validate", "--report", str(tmp_path)], f"--report: expected a file to write, got '{tmp_path}'"),
        (["profile", "--trace", str(missing), "--out", str(missing)], f"--out: cannot write {missing}"),
    ):
        out = subprocess.run([sys.executable, "-m", "roofline", *args], capture_output=True, text=True, timeout=300)
        assert out.returncode == 2 and said in out.stderr and "cannot write the output" not in out.stderr, out.stderr


def test_an_output_that_cannot_be_written_is_refused_before_the_minutes_of_work(tmp_path, monkeypatch):
    """validate scores for minutes and profile traces a model: a file they cannot write is named
    before any of that starts, not after it (nothing here is scored: the scoring would fail the test)."""
    import argparse

    import roofline.validate as validate_module
    from roofline.cli.args import CliError
    from roofline.cli.kernel_tables import cmd_validate

    def scored(*args, **kwargs):
        raise AssertionError("scored before the output was checked")

    monkeypatch.setattr(validate_module, "validate", scored)
    monkeypatch.setattr(validate_module, "load_silicon_sample", scored)
    cases = [("csv", tmp_path / "gone" / "x.csv"), ("report", tmp_path), ("report", tmp_path / "gone" / "r.json")]
    if os.geteuid() != 0:  # root may write into a read-only folder
        read_only = tmp_path / "read-only"
        read_only.mkdir()
        read_only.chmod(0o500)
        cases.append(("csv", read_only / "x.csv"))
    defaults = dict(kv_dtype=None, range_ratio=None, clients=None, launch_overhead_us=None, moe_routing=None)
    defaults |= dict(memory=False, explain=None, no_tables=False, every=None, sample=None, json=False, load=False)
    for option, path in cases:
        args = argparse.Namespace(**(defaults | {"csv": None, "report": None, option: path}))
        try:
            cmd_validate(args)
        except CliError as exc:
            assert str(exc).startswith(f"--{option}: ") and str(path) in str(exc)
        else:
            raise AssertionError(f"--{option} {path} was taken")
