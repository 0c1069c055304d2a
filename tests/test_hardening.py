"""One regression test per hostile input that once gave a traceback, a hang or a silent wrong
answer: URLs with inf or 1e400, NaN options, integers past int64, bad files in a data folder
(malformed, a directory, a FIFO, links to /dev/zero or out of the folder, deep nesting, binary,
inf, true as a number), non-regular results files, oversized uploads and huge contexts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.fuzz_common import LLAMA_CONFIG, ROOT, run


# ---- URLs ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path, key, value, default",
    [
        ("views/roofline_page.py", "m", "inf", 4096),
        ("views/roofline_page.py", "m", "9" * 5000, 4096),
        ("views/llm_page.py", "batch", "inf", None),
        ("views/llm_page.py", "batch", "nan", None),
        ("views/advisor_page.py", "seq", "1e400", None),
        ("views/kv_page.py", "context", "-inf", 8192),
    ],
)
def test_a_url_number_the_page_cannot_use_falls_back_to_the_default(path, key, value, default):
    at = AppTest.from_file(str(ROOT / path), default_timeout=60)
    at.query_params[key] = value
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    warning = next(w.value for w in at.warning if f"`{key}`" in w.value)
    assert "using the default" in warning and len(warning) < 300  # a 5,000-digit value is not echoed whole
    widget = at.number_input(key=key)
    assert widget.value == (default if default is not None else widget.proto.default)


def test_a_repeated_url_parameter_uses_its_last_good_value():
    at = AppTest.from_file(str(ROOT / "views/llm_page.py"), default_timeout=60)
    at.query_params["batch"] = ["3", "inf"]
    at.run()
    assert not at.exception and any("`batch`" in w.value for w in at.warning)


def test_a_device_that_cannot_join_the_tp_group_is_said_not_raised():
    at = AppTest.from_file(str(ROOT / "views/llm_page.py"), default_timeout=60)
    at.query_params["hw"] = ["h100-sxm", "tpu-v4"]
    at.query_params["tp"] = "2"
    at.run()
    assert not at.exception


# ---- command line -------------------------------------------------------------------------------
BASE = ["analyze", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--phase", "decode", "--seq-len", "64"]


@pytest.mark.parametrize(
    "args, expected",
    [
        ([*BASE, "--launch-overhead-us", "nan"], "--launch-overhead-us: expected a finite number >= 0, got 'nan'"),
        ([*BASE, "--launch-overhead-us", "inf"], "--launch-overhead-us: expected a finite number >= 0, got 'inf'"),
        ([*BASE, "--batch", "18446744073709551616"], "--batch: expected an integer up to 2^53"),
        (["matmul", "--m", "1" + "0" * 400, "--n", "1", "--k", "1"], "--m: expected an integer up to 2^53"),
        (["matmul", "--m", "9" * 5000, "--n", "1", "--k", "1"], "--m: expected a positive integer"),
        ([*BASE, "--batch", "true"], "--batch: expected a positive integer, got 'true'"),
        ([*BASE, "--collectives", "/dev/zero"], "/dev/zero: not a regular file"),
        ([*BASE, "--calibration", "/dev/zero"], "/dev/zero: not a regular file"),
        ([*BASE, "--calibration", "/nonexistent.json"], "/nonexistent.json: no such file"),
        # A name with a newline in it is shown escaped: the error stays on one line.
        (["profile", "--json", "--trace", "h100-sxm\n"], "'h100-sxm\\n': no such file"),
    ],
)
def test_cli_refuses_in_one_line(args, expected):
    out = run(*args, timeout=30)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and expected in out.stderr, out.stderr


def test_json_output_never_holds_nan_or_infinity():
    out = run(*BASE, "--batch", "1", "--json")
    json.loads(out.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the JSON output"))


# ---- data folders -------------------------------------------------------------------------------
H100 = (ROOT / "hardware_db" / "h100-sxm.toml").read_text()


def _device(folder: Path, name: str, **fields: str) -> None:
    text = H100.replace('id = "h100-sxm"', f'id = "{name}"')
    for key, value in fields.items():
        text = "\n".join(f"{key} = {value}" if line.startswith(f"{key} =") else line for line in text.splitlines())
    (folder / f"{name}.toml").write_text(text)


@pytest.fixture
def hostile_folder(tmp_path: Path) -> Path:
    """One good device and every kind of bad file beside it."""
    _device(tmp_path, "my-gpu")
    _device(tmp_path, "inf-memory", memory_gb="inf")
    _device(tmp_path, "bool-year", launch_year="true")
    _device(tmp_path, "400-digits", memory_gb="1" + "0" * 400)  # TOML integers have no size limit
    (tmp_path / "broken.toml").write_text('id = "broken"\nname = [')
    (tmp_path / "folder.toml").mkdir()
    (tmp_path / "dangling.toml").symlink_to(tmp_path / "nowhere")
    (tmp_path / "zero.toml").symlink_to("/dev/zero")
    (tmp_path / "outside.toml").symlink_to("/etc/hostname")
    os.mkfifo(tmp_path / "fifo.toml")
    (tmp_path / "binary.toml").write_bytes(b"\xff\xfe\x00junk")
    (tmp_path / "deep.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000)
    (tmp_path / "huge.toml").write_text("# " + "x" * (2 << 20))
    return tmp_path


BAD = {
    "inf-memory.toml": "finite number",
    "bool-year.toml": "got a boolean",
    "400-digits.toml": "a 401-digit integer is too large (at most 2^53)",
    "broken.toml": "malformed TOML",
    "folder.toml": "not a regular file",
    "dangling.toml": "no such file",
    "zero.toml": "not a regular file",
    "outside.toml": "a link out of its folder",
    "fifo.toml": "not a regular file",
    "binary.toml": "not UTF-8",
    "deep.toml": "nested deeper than 32 levels",
    "huge.toml": "more than this file can hold",
}


def test_bad_files_in_a_folder_are_each_named_and_the_rest_work(hostile_folder):
    # A FIFO or /dev/zero read as a file would block or fill memory: they are named as not regular files.
    out = run("kv", "--model", "llama-3.1-8b", "--hardware", "my-gpu", "--hardware-dir", str(hostile_folder), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["max_batch"] > 0  # the good file in the same folder works
    warnings = out.stderr.strip().splitlines()
    assert len(warnings) == len(BAD)
    for name, reason in BAD.items():
        line = next(w for w in warnings if name in w)
        assert line.startswith("warning: ") and reason in line, line
    shipped = run("hardware", "show", "h100-sxm", "--json", "--hardware-dir", str(hostile_folder))
    assert shipped.returncode == 0 and json.loads(shipped.stdout)["id"] == "h100-sxm"


def test_the_hardware_page_lists_the_bad_files(hostile_folder, monkeypatch):
    monkeypatch.setenv("ROOFLINE_HARDWARE_DIR", str(hostile_folder))
    from dashboard.data import hardware_db
    from roofline import datafiles
    from roofline.hardware import _load_dirs

    def forget() -> None:
        hardware_db.clear()
        _load_dirs.cache_clear()
        datafiles.PROBLEMS.clear()

    forget()
    try:
        at = AppTest.from_file(str(ROOT / "views/hardware_page.py"), default_timeout=60)
        at.run()
        assert not at.exception
        text = next(w.value for w in at.warning if "could not be used" in w.value)
        assert f"{len(BAD)} data file(s)" in text and "fifo.toml" in text
        assert "my-gpu" in at.dataframe[0].value.to_csv()
    finally:
        forget()


def test_a_missing_env_folder_is_reported_not_fatal(tmp_path):
    env = {**os.environ, "ROOFLINE_HARDWARE_DIR": str(tmp_path / "missing")}
    out = subprocess.run(
        [sys.executable, "-m", "roofline", "hardware", "show", "h100-sxm"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0 and "ROOFLINE_HARDWARE_DIR" in out.stderr and "ignored" in out.stderr
    named = run("hardware", "list", "--hardware-dir", str(tmp_path / "missing"))
    assert named.returncode == 2 and "folder does not exist" in named.stderr
    (tmp_path / "a.toml").write_text("")
    file = run("hardware", "list", "--hardware-dir", str(tmp_path / "a.toml"))
    assert file.returncode == 2 and "hardware folder is a file, not a folder" in file.stderr


def test_a_huge_max_context_is_refused_or_sampled_not_enumerated(tmp_path):
    text = (ROOT / "model_db" / "llama-3.1-8b.toml").read_text()

    def write(name: str, context: int) -> None:
        body = text.replace('id = "llama-3.1-8b"', f'id = "{name}"')
        lines = (f"max_context = {context}" if ln.startswith("max_context") else ln for ln in body.splitlines())
        (tmp_path / f"{name}.toml").write_text("\n".join(lines))

    write("too-long", 2**25)  # past the schema's 2^24: the file is named and skipped
    write("long", 2**24)  # the longest allowed: the capacity curve is sampled, not one point per token
    out = run("kv", "--model", "long", "--model-dir", str(tmp_path), "--hardware", "h100-sxm", "--json")
    assert out.returncode == 0, out.stderr
    assert "too-long.toml: field 'max_context'" in out.stderr and "less than or equal to 16777216" in out.stderr
    data = json.loads(out.stdout)
    assert len(data["curve"]) < 200 and data["curve"][-1]["context"] == 2**24
    assert data["curve"][-1]["max_batch"] == 0 and all(p["max_batch"] >= 0 for p in data["curve"])


# ---- uploads and results files ------------------------------------------------------------------
def test_upload_limits_are_enforced_and_stated():
    from roofline.measure.schema import MAX_OPS, MAX_RESULTS_BYTES, ResultsError, parse_results

    config = (ROOT / ".streamlit" / "config.toml").read_text()
    assert f"maxUploadSize = {MAX_RESULTS_BYTES // 2**20}" in config
    page = (ROOT / "dashboard" / "measured.py").read_text() + (ROOT / "views" / "measure_page.py").read_text()
    assert page.count("max_upload_size=MAX_RESULTS_BYTES // 2**20") == 2
    example = json.loads((ROOT / "examples" / "h100-sxm-kernel-sweeps.json").read_text())
    example["sweeps"] = example["sweeps"] * (MAX_OPS // len(example["sweeps"]) + 1)
    with pytest.raises(ResultsError, match=f"holds at most {MAX_OPS:,}"):
        parse_results(json.dumps(example), "many.json")
    with pytest.raises(ResultsError, match="Infinity is not allowed"):
        parse_results(json.dumps(example).replace('"time_s": 2.2', '"time_s": Infinity, "x": 2.2', 1), "inf.json")


@pytest.mark.skipif(
    os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") > 64e9, reason="this host could hold 2 layers of 405B"
)
def test_measure_refuses_a_model_the_cpu_cannot_hold_before_allocating():
    pytest.importorskip("torch")
    out = run("measure", "--device", "cpu", "--quick", "--model", "llama-3.1-405b", timeout=120)
    assert out.returncode == 2 and "does not fit this device even one layer at a time" in out.stderr


# ---- small things -------------------------------------------------------------------------------
def test_negative_zero_prints_as_zero():
    from roofline.format import fmt_bytes, fmt_flops, fmt_seconds

    assert fmt_seconds(-0.0) == "0 ns" and fmt_bytes(-0.0) == "0 B" and fmt_flops(-0.0) == "0 FLOP"
    assert fmt_flops(2.043e9) == "2.04 GFLOP" and fmt_flops(2.043e9, 4) == "2.043 GFLOP"
    assert fmt_seconds(-0.002) == "-2 ms"
    # A fitted kernel floor of 2e-19 s (the H200 quick run's large-GEMM class) is a zero, not "1.97e-10 ns".
    assert fmt_seconds(1.97e-19) == "0 ns" and fmt_seconds(-3e-13) == "0 ns" and fmt_seconds(5e-10) == "0.5 ns"


def test_a_small_rate_never_reads_zero():
    """A 131,000-token prompt with one output token on an 8B: 0.14 tokens/s had read "0" on the LLM
    page and "0.1" on the command line; a huge batch's rate per user "0.0"."""
    from roofline.format import fmt_amount

    assert [fmt_amount(x) for x in (0.1417, 0.0004231, 41.72, 99.94, 99.96, 674.3, 1011.2, 0.0, -0.0, 4.2e-5)] == [
        "0.142",
        "0.000423",
        "41.7",
        "99.9",
        "100",
        "674",
        "1,011",
        "0",
        "0",
        "< 0.0001",  # never an exponent
    ]


def test_long_times_print_in_minutes_hours_and_days_never_in_exponents():
    from roofline.format import fmt_seconds

    assert fmt_seconds(599) == "599 s" and fmt_seconds(600) == "10 min" and fmt_seconds(599.7) == "10 min"
    assert fmt_seconds(1000) == "16.7 min"  # 1,000 / 60
    assert fmt_seconds(7200) == "2 h" and fmt_seconds(-10_000) == "-2.78 h"  # 10,000 / 3,600
    assert fmt_seconds(259_200) == "3 days"  # 72 h
    assert fmt_seconds(4.35e5) == "5.03 days"  # the ideal bound of a million-token prompt at batch 65,536
    assert fmt_seconds(1e9) == "11,574 days"  # 1e9 / 86,400
    assert fmt_seconds(999.6 * 86_400) == "1,000 days"  # rounds to 1,000: not "1e+03 days"
    assert fmt_seconds(float("inf")) == "inf s"


def test_a_custom_device_name_is_shown_as_text_not_markdown():
    from dashboard.share import md_escape
    from roofline.hardware import Hardware, get_hardware
    from roofline.records import encode_record

    name = "[click me](https://evil.example) **big** :red[x] $x^2$"
    device = Hardware.model_validate(
        get_hardware("h100-sxm").model_dump(exclude_none=True) | {"id": "evil", "name": name}
    )
    at = AppTest.from_file(str(ROOT / "views/llm_page.py"), default_timeout=60)
    at.query_params.update(cdevice=encode_record(device), hw=["evil"], tp="2", model="llama-3.1-405b")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    shown = [e.value for kind in ("markdown", "caption", "warning", "info", "success") for e in at.get(kind)]
    with_name = [text for text in shown if "click me" in text]
    assert with_name and all(md_escape(name) in text for text in with_name), with_name
    assert md_escape(name).count("](") == 0 and "\\[click me\\]\\(https\\://" in md_escape(name)


def test_a_huge_config_pasted_into_the_panel_is_an_error_at_once():
    """Pasted into "Your model", 10^8 layers held the shared server for 21 s at 5.7 GB."""
    at = AppTest.from_file(str(ROOT / "views/kv_page.py"), default_timeout=60).run()
    for config in (
        LLAMA_CONFIG | {"num_hidden_layers": 10**8},
        LLAMA_CONFIG | {"model_type": ["[x](http://e.example)"]},
    ):
        at.text_area(key="cmodel_paste").set_value(json.dumps(config)).run()
        at.button(key="cmodel_use").click().run()  # it held the server 21 s building 10^8 layers
        assert not at.exception
        errors = [e.value for e in at.error]
        assert len(errors) == 1 and "](http" not in errors[0], errors
        assert "config.json: field" in errors[0].replace("\\", "")  # escaped: shown as text


def test_a_url_value_is_shown_as_text_in_its_warning():
    at = AppTest.from_file(str(ROOT / "views/llm_page.py"), default_timeout=60)
    at.query_params["model"] = "[click](https://evil.example)"
    at.run()
    assert not at.exception
    warning = next(w.value for w in at.warning if "`model`" in w.value)
    assert "](https" not in warning and "\\[click\\]\\(https\\://evil" in warning


def test_a_custom_name_with_markup_is_refused_where_charts_would_read_it():
    """Chart titles and hovers read <a href=…> as a link: such a name is refused with a word."""
    from roofline.hardware import Hardware, get_hardware
    from roofline.records import encode_record

    h100 = get_hardware("h100-sxm").model_dump(exclude_none=True)
    device = Hardware.model_validate(h100 | {"id": "evil", "name": "<a href='https://evil.example'>H100</a>"})
    at = AppTest.from_file(str(ROOT / "views/llm_page.py"), default_timeout=60)
    at.query_params.update(cdevice=encode_record(device), hw=["h100-sxm"])
    at.run()
    assert not at.exception and "evil" not in (at.session_state["cdevice"].id if "cdevice" in at.session_state else "")
    assert any("`cdevice`" in w.value and "markup" in w.value for w in at.warning)
    at.text_area(key="cmodel_paste").set_value(json.dumps(LLAMA_CONFIG | {"_name_or_path": "<b>big</b>"})).run()
    at.button(key="cmodel_use").click().run()
    assert not at.exception and any("markup" in e.value for e in at.error)


def test_a_results_file_without_a_read_only_pass_is_shown_not_crashed():
    """``read_bandwidth_tbps`` is optional in a results file: the command line says it was not
    measured and the Measure page leaves its row out (it showed 0.0 GB/s)."""
    import json

    from dashboard.measure_view import ceiling_rows
    from roofline.cli.render import measure
    from roofline.measure.schema import parse_results

    data = json.loads((ROOT / "examples" / "h100-sxm-quick-run.json").read_text())
    data["ceilings"].pop("read_bandwidth_tbps", None)
    results = parse_results(json.dumps(data))
    assert "read not measured" in measure(results)
    assert not any("read-only" in row["ceiling"] for row in ceiling_rows(results.ceilings, None))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["profile", "--hf-config", ""], "--hf-config: expected a value"),
        (["profile", "--model", ""], "--model: expected a value"),
        (["profile", "--trace", ""], "--trace: expected trace files"),
        (["profile", "--trace", "t.json", "--max-trace-mib", "1000000000"], "--max-trace-mib: at most 1,024 MiB"),
    ],
)
def test_profile_refuses_empty_and_huge_options(argv, message, capsys):
    """Cases the hostile run found: an empty --hf-config fell through to a model id of None."""
    from roofline.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "args, expected",
    [
        # 0 GB/s read as "no link given" and fell back to the device's own.
        (("serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--kv-link-gb-per-s", "0"), "> 0, got '0'"),
        # 3,000 steps ran 84 s and then failed on the trace's event cap: refused before anything runs.
        (("profile", "--steps", "3000"), "expected at most 100 steps, got 3000"),
        # Without chunked prefill a 1,024-token prompt never fits a 1,000-token step: the run raised.
        (
            ("serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--max-batched-tokens", "1000")
            + ("--no-chunked-prefill", "--rate", "1", "--requests", "5"),
            "max_batched_tokens: 1,000 is below the longest prompt (1,024 tokens)",
        ),
    ],
)
def test_a_setting_that_cannot_run_is_refused_before_it_runs(args, expected):
    out = run(*args)
    assert out.returncode == 2 and expected in out.stderr and "Traceback" not in out.stderr
