"""Hostile input, generated: every command-line entry point, the data-file loaders, the results
and collectives parser, the share-link records, config.json and every page's URL parameters.

The rule everywhere: the only outcomes are a valid result or a clean error (one line naming the
field). A traceback, a NaN or Infinity in JSON output, or a hang is a failure. Over 14,000
generated cases per run (every key of every shipped config.json and every field of a linked
model record set to each hostile value, plus the sampled ones), bounded so the file takes well
under a minute.
"""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.datafiles import PROBLEMS, DataError, load_dirs
from roofline.hardware import Hardware
from roofline.measure.schema import ResultsError, parse_results
from roofline.models import ModelConfig
from tests.fuzz_common import (
    FAST,
    ROOT,
    _check_cli,
    _numbers,
    _replace,
    _with,
    json_leaf,
    number_text,
)

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


# ---- results files, share-link records, config.json ---------------------------------------------
EXAMPLE = json.loads((ROOT / "examples" / "h100-sxm-kernel-sweeps.json").read_text())


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
