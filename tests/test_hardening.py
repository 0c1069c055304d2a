"""One regression test per hostile input that once gave a traceback, a hang or a silent wrong
answer: URLs with inf or 1e400, NaN options, integers past int64, bad files in a data folder
(malformed, a directory, a FIFO, links to /dev/zero or out of the folder, deep nesting, binary,
inf, true as a number), non-regular results files, oversized uploads and huge contexts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "roofline", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout
    )


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
    start = time.monotonic()
    out = run("kv", "--model", "llama-3.1-8b", "--hardware", "my-gpu", "--hardware-dir", str(hostile_folder), "--json")
    assert time.monotonic() - start < 30  # no FIFO or /dev/zero was read
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
    start = time.monotonic()
    out = run("measure", "--device", "cpu", "--quick", "--model", "llama-3.1-405b", timeout=120)
    assert out.returncode == 2 and "does not fit this device even one layer at a time" in out.stderr
    assert time.monotonic() - start < 60


# ---- config.json: sizes and types checked before anything is built ------------------------------
LLAMA_CONFIG = json.loads((ROOT / "tests" / "data" / "hf_configs" / "llama-3.1-8b.json").read_text())


def _cli(*args: str) -> tuple[int, str, str]:
    """The command line in this process (the subprocess start costs more than the case)."""
    import contextlib
    import io

    from roofline.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("layers", [10**8, 10**9, 1025])
def test_a_config_with_a_huge_layer_count_is_refused_at_once(tmp_path, layers):
    """10^8 layers took 41 s and 5.5 GB (10^9: MemoryError) before the sizes were checked."""
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(LLAMA_CONFIG | {"num_hidden_layers": layers}))
    start = time.monotonic()
    code, out, err = _cli("kv", "--model", str(path), "--hardware", "h100-sxm", "--json")
    assert time.monotonic() - start < 10  # it took 41 s; a guard, loose enough for a busy machine
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"field 'num_hidden_layers' must be an integer from 1 to 1,024 (or null), got {layers}" in err


@pytest.mark.parametrize(
    "key, value, allowed",
    [
        ("model_type", ["llama"], "must be text"),
        ("sliding_window", "4096", "must be an integer from 1 to 16,777,216"),
        ("layer_types", 7, "must be a list"),
        ("no_rope_layers", 7, "must be a list"),
        ("tie_word_embeddings", "yes", "must be true or false"),
        ("hidden_size", 1e300, "must be an integer from 1 to 65,536"),
        ("vocab_size", -1, "must be an integer from 1 to 1,048,576"),
        ("max_position_embeddings", 2**25, "must be an integer from 1 to 16,777,216"),
        ("text_config", 3, "must be an object"),
        ("layer_types", ["full_attention"] * 5, "must be a list of one entry per layer (32, num_hidden_layers), not 5"),
    ],
)
def test_a_config_field_of_the_wrong_type_is_named(tmp_path, key, value, allowed):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(LLAMA_CONFIG | {key: value}))
    code, out, err = _cli("analyze", "--model", str(path), "--phase", "decode", "--seq-len", "64")
    assert code == 2 and "Traceback" not in err
    assert err.startswith(f"error: {path}: field '{key}' {allowed}"), err


def test_a_config_nested_in_text_config_names_the_nested_field():
    from roofline.datafiles import DataError
    from roofline.hf_config import model_from_hf_config

    scout = json.loads((ROOT / "tests" / "data" / "hf_configs" / "llama-4-scout.json").read_text())
    scout["text_config"]["no_rope_layers"] = 3
    with pytest.raises(DataError, match="field 'text_config.no_rope_layers' must be a list"):
        model_from_hf_config(scout)


def test_models_and_hf_config_do_not_import_each_other():
    for module, other in (("roofline/hf_config.py", "roofline.models"), ("roofline/model_schema.py", "roofline.")):
        text = (ROOT / module).read_text()
        assert f"from {other}models import" not in text and "import roofline.models" not in text


# ---- custom models in a link --------------------------------------------------------------------
def test_a_linked_model_with_a_context_past_the_limit_is_a_warning_on_every_reload():
    """A max_context above 2^24 crashed the Training page, and the link kept crashing it."""
    import base64
    import zlib

    from roofline.models import get_model

    record = get_model("llama-3.2-1b").model_dump(exclude_none=True) | {"id": "long-one", "max_context": 2**25}
    text = base64.urlsafe_b64encode(zlib.compress(json.dumps(record).encode())).decode().rstrip("=")
    for _ in range(2):
        at = AppTest.from_file(str(ROOT / "views/training_page.py"), default_timeout=60)
        at.query_params["cmodel"] = text
        at.query_params["model"] = "long-one"
        at.run()
        assert not at.exception, [e.message for e in at.exception]
        warnings = " ".join(w.value for w in at.warning).replace("\\", "")
        assert "`cmodel`" in warnings and "max_context" in warnings and "16777216" in warnings
        assert at.selectbox(key="model").value == "llama-3.1-8b"


# ---- measured roofs: bounded, and applied only where they were measured -------------------------
def _collectives_file(folder: Path, name: str, kind: str, backend: str, matched: str | None = None, **point) -> Path:
    data = {
        "schema": "roofline.measure",
        "version": 2,
        "mode": "collectives",
        "device": {"name": name, "kind": kind, "torch_version": "2.13", "date": "2026-01-01"},
        "collectives": {
            "backend": backend,
            "world_size": 2,
            "points": [
                {"message_bytes": 4096, "time_s": 1e-4, "bus_bandwidth_gbps": 0.5},
                {"message_bytes": 2**20, "time_s": 1e-3, "bus_bandwidth_gbps": 5.0} | point,
            ],
        },
    }
    if matched:
        data["device"]["matched_hardware_id"] = matched
    path = folder / f"{backend}-{kind}.json"
    path.write_text(json.dumps(data))
    return path


TP8 = ["analyze", "--model", "llama-3.1-70b", "--phase", "decode", "--seq-len", "1024", "--tp", "8", "--json"]


def _total(code_out_err: tuple[int, str, str]) -> tuple[float, dict]:
    code, out, err = code_out_err
    assert code == 0, err
    data = json.loads(out)
    return data["total"]["time_s"], data


def test_a_cpu_gloo_all_reduce_is_not_applied_to_a_gpu_unless_forced(tmp_path):
    """It was applied to an H100 with no word: TP=8 decode went from 1.52 to 134 ms."""
    gloo = _collectives_file(tmp_path, "CPU x86", "cpu", "gloo")
    plain, _ = _total(_cli(*TP8, "--hardware", "h100-sxm"))
    kept, data = _total(_cli(*TP8, "--hardware", "h100-sxm", "--collectives", str(gloo)))
    assert kept == plain
    said = data["measured_roofs"]["collectives"]
    assert said["applied_to"] == [] and said["not_applied_to"] == ["h100-sxm"] and not said["forced"]
    assert "gloo" in said["why_not"] and "--force-collectives" in said["why_not"]
    forced, data = _total(_cli(*TP8, "--hardware", "h100-sxm", "--collectives", str(gloo), "--force-collectives"))
    assert forced > plain and data["measured_roofs"]["collectives"]["applied_to"] == ["h100-sxm"]
    assert data["measured_roofs"]["collectives"]["forced"]
    code, text, _ = _cli(*TP8[:-1], "--hardware", "h100-sxm", "--collectives", str(gloo))
    assert code == 0 and "all-reduce" in text and "not applied" in text


def test_an_nccl_all_reduce_applies_to_its_own_device_only(tmp_path):
    nccl = _collectives_file(tmp_path, "NVIDIA H100 80GB HBM3", "cuda", "nccl", "h100-sxm", bus_bandwidth_gbps=50.0)
    for device, applied in (("h100-sxm", True), ("b200", False)):
        plain, _ = _total(_cli(*TP8, "--hardware", device))
        measured, data = _total(_cli(*TP8, "--hardware", device, "--collectives", str(nccl)))
        assert (measured != plain) == applied
        assert data["measured_roofs"]["collectives"]["applied_to"] == ([device] if applied else [])


def test_a_calibration_for_another_device_is_said_not_applied():
    cal = str(ROOT / "examples" / "h100-sxm-kernel-sweeps.json")
    base = ["analyze", "--model", "llama-3.1-8b", "--phase", "decode", "--seq-len", "1024"]
    plain, _ = _total(_cli(*base, "--hardware", "b200", "--json"))
    kept, data = _total(_cli(*base, "--hardware", "b200", "--calibration", cal, "--json"))
    said = data["measured_roofs"]["calibration"]
    assert kept == plain and said["applied_to"] == [] and said["not_applied_to"] == ["b200"]
    assert "h100-sxm" in said["why_not"]
    code, text, _ = _cli(*base, "--hardware", "b200", "--calibration", cal)
    assert code == 0 and "Calibrated roofs" in text and "not applied" in text and "datasheet roofs on b200" in text
    _, data = _total(_cli(*base, "--hardware", "h100-sxm", "--calibration", cal, "--json"))
    assert data["measured_roofs"]["calibration"]["applied_to"] == ["h100-sxm"]


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("bus_bandwidth_gbps", 1e300, "bus_bandwidth_gbps': Input should be less than or equal to 100000"),
        ("time_s", 1e300, "time_s': Input should be less than or equal to 10"),
    ],
)
def test_an_absurd_all_reduce_is_refused_by_the_schema(tmp_path, field, value, message):
    path = _collectives_file(tmp_path, "H100", "cuda", "nccl", "h100-sxm", **{field: value})
    code, out, err = _cli(*TP8, "--hardware", "h100-sxm", "--collectives", str(path))
    assert code == 2 and out == "" and message in err and "Traceback" not in err


def test_empty_peaks_and_huge_figures_in_a_results_file_are_refused():
    from roofline.measure.schema import ResultsError, parse_results

    example = json.loads((ROOT / "examples" / "h100-sxm-quick-run.json").read_text())
    for path, value, message in (
        (("ceilings", "peak_tflops"), {}, "peak_tflops': Dictionary should have at least 1 item"),
        (("ceilings", "memory_bandwidth_tbps"), 1e300, "memory_bandwidth_tbps': Input should be less than or equal"),
        (("calibration", "fits"), {}, "fits': Dictionary should have at least 1 item"),
    ):
        broken = json.loads(json.dumps(example))
        broken[path[0]][path[1]] = value
        with pytest.raises(ResultsError, match=message):
            parse_results(json.dumps(broken), "r.json")


def test_the_llm_page_says_a_gloo_all_reduce_is_not_applied_and_applies_it_when_forced(tmp_path):
    from roofline.measure.schema import load_results

    gloo = load_results(_collectives_file(tmp_path, "CPU x86", "cpu", "gloo"))

    def run_page(force: bool) -> tuple[str, str]:
        at = AppTest.from_file(str(ROOT / "views/llm_page.py"), default_timeout=60)
        at.query_params.update(hw=["h100-sxm"], tp="8", model="llama-3.1-70b")
        at.session_state["measure_results"] = gloo
        at.run()
        at.radio(key="measured_source").set_value("the Measure page's results").run()
        if force:
            at.checkbox(key="measured_force_link").check().run()
        assert not at.exception, [e.message for e in at.exception]
        caption = next(c.value for c in at.caption if c.value.startswith("Roofs:"))
        return {m.label: m.value for m in at.metric}["TPOT"], caption.replace("\\", "")

    kept, said = run_page(False)
    forced, said_forced = run_page(True)
    assert "not applied" in said and "gloo" in said and "datasheet link on h100-sxm" in said
    assert "applied to h100-sxm (forced" in said_forced and kept != forced


# ---- small things -------------------------------------------------------------------------------
def test_negative_zero_prints_as_zero():
    from roofline.format import fmt_bytes, fmt_flops, fmt_seconds

    assert fmt_seconds(-0.0) == "0 ns" and fmt_bytes(-0.0) == "0 B" and fmt_flops(-0.0) == "0 FLOP"
    assert fmt_seconds(-0.002) == "-2 ms"


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
        start = time.monotonic()
        at.button(key="cmodel_use").click().run()
        assert time.monotonic() - start < 15 and not at.exception  # it held the server 21 s
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
