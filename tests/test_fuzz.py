"""Hostile input, generated: every command-line entry point, the data-file loaders, the results
and collectives parser, the share-link records, config.json and every page's URL parameters.

The rule everywhere: the only outcomes are a valid result or a clean error (one line naming the
field). A traceback, a NaN or Infinity in JSON output, or a hang is a failure. Over 1,000
generated cases per run, bounded so the file takes well under a minute.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline.cli import main
from roofline.datafiles import PROBLEMS, DataError, load_dirs
from roofline.hardware import Hardware
from roofline.measure.schema import ResultsError, parse_results
from roofline.models import ModelConfig

ROOT = Path(__file__).resolve().parent.parent
FAST = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# Values a hostile user types where a number belongs.
HOSTILE_NUMBERS = [
    "0",
    "-1",
    "1.5",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "1e400",
    "-1e400",
    "1e-400",
    "9" * 400,
    "18446744073709551616",
    str(2**63),
    str(2**31),
    "1_000",
    "0x10",
    "",
    " ",
    "abc",
    "true",
    "None",
    "1e308",
    "4.9e-324",
    "١٢",  # Arabic-Indic digits
]
number_text = st.one_of(
    st.sampled_from(HOSTILE_NUMBERS),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=12),
)

# Valid commands; each case replaces one or two option values with hostile ones.
BASELINES = {
    "analyze": [
        "analyze",
        "--model",
        "llama-3.1-8b",
        "--hardware",
        "h100-sxm",
        "--phase",
        "decode",
        "--batch",
        "4",
        "--seq-len",
        "1024",
        "--json",
    ],
    "request": [
        "request",
        "--model",
        "llama-3.1-8b",
        "--hardware",
        "h100-sxm",
        "--batch",
        "2",
        "--prompt-len",
        "512",
        "--output-len",
        "64",
        "--json",
    ],
    "kv": ["kv", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "8", "--context", "4096", "--json"],
    "advise": ["advise", "--model", "llama-3.2-1b", "--phase", "decode", "--batch", "1", "--seq-len", "256", "--json"],
    "matmul": ["matmul", "--m", "64", "--n", "64", "--k", "64", "--hardware", "h100-sxm", "--json"],
}
NUMERIC_OPTIONS = {
    "analyze": [
        "--batch",
        "--seq-len",
        "--tp",
        "--group-size",
        "--launch-overhead-us",
        "--graph-launch-overhead-us",
        "--memory-utilization",
        "--block-size",
        "--max-batched-tokens",
        "--max-num-seqs",
        "--non-torch-gb",
        "--cuda-graph-gb",
    ],
    "request": ["--batch", "--prompt-len", "--output-len", "--tp", "--launch-overhead-us", "--memory-utilization"],
    "kv": ["--batch", "--context", "--tp", "--memory-utilization", "--block-size", "--max-num-seqs", "--non-torch-gb"],
    "advise": ["--batch", "--seq-len", "--output-len", "--tp", "--memory-utilization", "--launch-overhead-us"],
    "matmul": ["--m", "--n", "--k", "--kernel-floor-us"],
}
CHOICE_OPTIONS = {
    "analyze": ["--model", "--hardware", "--phase", "--weight-dtype", "--act-dtype", "--kv-dtype", "--attention"],
    "request": ["--model", "--hardware", "--weight-dtype", "--kv-dtype"],
    "kv": ["--model", "--hardware", "--kv-dtype", "--weight-dtype"],
    "advise": ["--model", "--phase", "--objective", "--weight-dtype"],
    "matmul": ["--hardware", "--dtype", "--out-dtype"],
}
choice_text = st.one_of(
    st.sampled_from(["", "../../etc/passwd", "h100-sxm ", "H100-SXM", "x" * 5000, "llama-3.1-405b", "fp4", "int4"]),
    st.text(max_size=20),
)


def _strict_json(text: str) -> object:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in JSON output")

    return json.loads(text, parse_constant=refuse)


def _run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors and --help
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _check_cli(argv: list[str]) -> None:
    code, out, err = _run_cli(argv)
    assert code in (0, 2), (argv, code, err[-500:])
    if code == 2:
        first = err.strip().splitlines()[0] if err.strip() else ""
        assert first.startswith("error:"), (argv, err[-500:])
        assert "Traceback" not in err
    elif "--json" in argv:
        _strict_json(out)


def _with(argv: list[str], option: str, value: str) -> list[str]:
    argv = list(argv)
    if option in argv:
        argv[argv.index(option) + 1] = value
    else:
        argv += [option, value]
    return argv


@settings(max_examples=400, **FAST)
@given(
    command=st.sampled_from(sorted(BASELINES)),
    picks=st.lists(st.tuples(st.integers(0, 100), number_text), min_size=1, max_size=2),
)
def test_cli_numbers(command, picks):
    argv = BASELINES[command]
    for index, value in picks:
        options = NUMERIC_OPTIONS[command]
        argv = _with(argv, options[index % len(options)], value)
    _check_cli(argv)


@settings(max_examples=200, **FAST)
@given(command=st.sampled_from(sorted(BASELINES)), index=st.integers(0, 100), value=choice_text)
def test_cli_choices_and_ids(command, index, value):
    options = CHOICE_OPTIONS[command]
    _check_cli(_with(BASELINES[command], options[index % len(options)], value))


# ---- data files --------------------------------------------------------------------------------
HOSTILE_TOML_VALUES = ["inf", "-inf", "nan", "true", "false", "-1", "0", '"80"', "[]", "{}", "1e400", str(2**64)]


def _fields(text: str) -> list[str]:
    return [line.split("=")[0].strip() for line in text.splitlines() if "=" in line and not line.startswith("#")]


H100 = (ROOT / "hardware_db" / "h100-sxm.toml").read_text()
LLAMA = (ROOT / "model_db" / "llama-3.1-8b.toml").read_text()


@settings(max_examples=150, **FAST)
@given(
    kind=st.sampled_from(["hardware", "model"]),
    line=st.integers(0, 200),
    value=st.one_of(st.sampled_from(HOSTILE_TOML_VALUES), st.text(max_size=10).map(json.dumps)),
    junk=st.one_of(st.none(), st.binary(max_size=40)),
)
def test_a_bad_data_file_is_reported_and_the_rest_load(tmp_path_factory, kind, line, value, junk):
    folder = tmp_path_factory.mktemp("data")
    source, schema, shipped = (
        (H100, Hardware, "hardware_db") if kind == "hardware" else (LLAMA, ModelConfig, "model_db")
    )
    lines = source.splitlines()
    editable = [i for i, text in enumerate(lines) if "=" in text and not text.startswith(("#", "id ", "id="))]
    i = editable[line % len(editable)]
    lines[i] = f"{lines[i].split('=')[0].strip()} = {value}"
    text = "\n".join(lines).replace('id = "h100-sxm"', 'id = "mine"').replace('id = "llama-3.1-8b"', 'id = "mine"')
    data = text.encode() + (junk or b"")
    (folder / "mine.toml").write_bytes(data)
    PROBLEMS.clear()
    records = load_dirs((ROOT / shipped, folder), schema, kind)
    assert len(records) >= 24  # the shipped records load whatever the extra file holds
    if "mine" not in records:
        assert len(PROBLEMS) == 1 and "mine.toml" in PROBLEMS[0], PROBLEMS
    else:
        record = records["mine"]
        for number in _numbers(record.model_dump()):
            assert math.isfinite(number)
    PROBLEMS.clear()


def _numbers(value: object):
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield float(value)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _numbers(v)


# ---- results files, share-link records, config.json ---------------------------------------------
EXAMPLE = json.loads((ROOT / "examples" / "h100-sxm-kernel-sweeps.json").read_text())
json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(["NaN", "Infinity", "-Infinity"]),
)


def _paths(value: object, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(value, dict):
        for k, v in list(value.items())[:12]:
            found += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for j, v in enumerate(value[:3]):
            found += _paths(v, (*prefix, j))
    return found


RESULT_PATHS = _paths(EXAMPLE)


def _replace(document: object, path: tuple, leaf: object) -> object:
    if not path:
        return leaf
    copy = json.loads(json.dumps(document))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = leaf
    return copy


@settings(max_examples=250, **FAST)
@given(where=st.integers(0, 10_000), leaf=json_leaf, raw=st.booleans())
def test_results_files_parse_or_are_refused_cleanly(where, leaf, raw):
    document = _replace(EXAMPLE, RESULT_PATHS[where % len(RESULT_PATHS)], leaf)
    text = json.dumps(document)
    if raw and isinstance(leaf, str) and leaf in ("NaN", "Infinity", "-Infinity"):
        text = text.replace(f'"{leaf}"', leaf)  # the bare constant, as Python's json writes it
    try:
        results = parse_results(text, "upload.json")
    except ResultsError as exc:
        assert "upload.json" in str(exc)
    else:
        for number in _numbers(json.loads(results.to_json())):
            assert math.isfinite(number)


@settings(max_examples=120, **FAST)
@given(text=st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_share_link_records_decode_or_are_refused_cleanly(text):
    from roofline.records import decode_record

    for schema in (ModelConfig, Hardware):
        try:
            decode_record(text, schema, "URL parameter `cmodel`")
        except DataError as exc:
            assert "cmodel" in str(exc)


CONFIG = json.loads((ROOT / "tests" / "data" / "hf_configs" / "llama-3.1-8b.json").read_text())
CONFIG_KEYS = sorted(CONFIG)


@settings(max_examples=150, **FAST)
@given(key=st.sampled_from(CONFIG_KEYS), leaf=json_leaf)
def test_config_json_parses_or_is_refused_cleanly(key, leaf):
    from roofline.hf_config import parse_hf_config

    try:
        model = parse_hf_config(json.dumps(CONFIG | {key: leaf}), "config.json")
    except DataError as exc:
        assert "config.json" in str(exc)
    else:
        assert all(math.isfinite(n) for n in _numbers(model.model_dump()))


# ---- page URLs ----------------------------------------------------------------------------------
PAGES = {
    "views/roofline_page.py": ["m", "n", "k", "hw", "dtypes", "gemm_dtype", "launch_us", "llm", "llm_batch", "llm_seq"],
    "views/llm_page.py": ["batch", "prompt", "output", "hw", "model", "tp", "mem_util", "wdtype", "graphs"],
    "views/advisor_page.py": ["batch", "seq", "output", "tp", "x_compute", "x_capacity", "device", "phase"],
    "views/kv_page.py": ["batch", "context", "block", "mbt", "tp", "mem_util", "hw", "kvdtype", "model"],
    "views/hardware_page.py": ["vendor", "compare", "cdevice"],
    "views/measure_page.py": ["mode", "mdevice", "mmodel", "cmodel"],
    "views/serving_page.py": ["model", "hw", "prompt", "output", "ttft_ms", "tpot_ms", "tp", "spec_k", "spec_alpha"],
    "views/training_page.py": ["model", "seq", "mb", "gb", "prec", "method", "targets", "dp", "zero", "hostram"],
}
url_value = st.one_of(st.sampled_from(HOSTILE_NUMBERS + ["h100-sxm", "tpu-v4", "x" * 3000]), st.text(max_size=10))


@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_urls(page):
    from streamlit.testing.v1 import AppTest

    @settings(max_examples=25, **FAST)
    @given(picks=st.lists(st.tuples(st.sampled_from(PAGES[page]), st.lists(url_value, min_size=1, max_size=2))))
    def run(picks):
        at = AppTest.from_file(str(ROOT / page), default_timeout=60)
        for key, values in picks:
            at.query_params[key] = values if len(values) > 1 else values[0]
        at.run()
        assert not at.exception, (picks, [e.message for e in at.exception])

    run()
