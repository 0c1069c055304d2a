"""Hostile config.json files and linked model records: every key mutated is a model or a named error."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.datafiles import DataError
from roofline.models import ModelConfig
from tests.fuzz_common import (
    FAST,
    ROOT,
    _numbers,
    _replace,
    _run_cli,
    _strict_json,
    json_leaf,
)

CONFIG_DIR = ROOT / "tests" / "data" / "hf_configs"
CONFIG = json.loads((CONFIG_DIR / "llama-3.1-8b.json").read_text())
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


# ---- every key of every shipped config.json, mutated ---------------------------------------------
SHIPPED_CONFIGS = {path.stem: json.loads(path.read_text()) for path in sorted(CONFIG_DIR.glob("*.json"))}
# Wrong JSON types, huge, negative, fractional and per-layer-list values, and NaN (in a dict: the
# loader's own check; in the file: the strict parser's).
MUTATIONS: list[object] = [
    None,
    True,
    -1,
    -(10**8),
    0,
    1.5,
    10**8,
    2**53 + 1,
    10**30,
    1e300,
    float("nan"),
    "4096",
    "",
    "x" * 5000,
    [],
    [1] * 5000,
    ["full_attention"] * 3,
    {},
    {"a": 1},
]


def _config_keys(config: dict) -> list[tuple[str, ...]]:
    """Every key of a config, and every key of its text_config."""
    keys = [(k,) for k in config]
    nested = config.get("text_config")
    if isinstance(nested, dict):
        keys += [("text_config", k) for k in nested]
    return keys


CONFIG_CASES = [
    (name, where, value)
    for name, config in SHIPPED_CONFIGS.items()
    for where in _config_keys(config)
    for value in MUTATIONS
]


def test_every_key_of_every_shipped_config_mutated_is_a_model_or_a_named_error():
    """Over 10,000 cases: each key of the 22 shipped config.json files set to each hostile value.
    The loader returns a model with finite, bounded numbers or a DataError; a field the reader
    checks is named in the error. How long each case takes, the hostile run times
    (``python -m benchmarks.hostile_run``)."""
    from roofline.hf_config import INT_RANGES, model_from_hf_config

    assert len(CONFIG_CASES) > 10_000
    for name, where, value in CONFIG_CASES:
        try:
            model = model_from_hf_config(_replace(SHIPPED_CONFIGS[name], where, value), origin=f"{name}.json")
        except DataError as exc:
            assert str(exc).startswith(f"{name}.json: "), (name, where, exc)
            key = where[-1]
            if key in INT_RANGES and (isinstance(value, bool) or not isinstance(value, int)) and value is not None:
                assert f"'{'.'.join(where)}'" in str(exc) or "model_type" in str(exc), (name, where, value, exc)
        else:
            numbers = list(_numbers(model.model_dump()))
            assert all(math.isfinite(n) and abs(n) <= 2**53 for n in numbers), (name, where, value)
            # The old behaviour (10^8 layers built, 41 s) fails here, before any clock would.
            assert model.num_layers <= 1024 and model.max_context <= 2**24


@settings(max_examples=120, **FAST)
@given(case=st.sampled_from(CONFIG_CASES))
def test_a_mutated_config_on_the_command_line_is_a_result_or_a_one_line_error(tmp_path_factory, case):
    """The same mutations through ``--model cfg.json``: exit 0 with strict JSON, or exit 2 with
    one line naming the file; never a traceback."""
    name, where, value = case
    path = tmp_path_factory.mktemp("cfg") / "cfg.json"
    path.write_text(json.dumps(_replace(SHIPPED_CONFIGS[name], where, value)))  # a NaN as the bare constant
    code, out, err = _run_cli(["kv", "--model", str(path), "--hardware", "h100-sxm", "--context", "4096", "--json"])
    assert code in (0, 2), (case, err[-500:])
    if code == 2:
        assert err.startswith(f"error: {path}") and "Traceback" not in err, (case, err[-500:])
        if isinstance(value, float) and math.isnan(value):
            assert "NaN is not allowed" in err
    else:
        _strict_json(out)


def test_every_field_of_a_linked_model_mutated_decodes_or_is_refused():
    """A ``cmodel`` link is a model record: each field of shipped records set to each hostile value
    decodes to a record the pages can draw (within the limits) or is a DataError naming the link."""
    import base64
    import zlib

    from roofline.models import get_model
    from roofline.records import decode_record

    cases = 0
    for model_id in ("llama-3.1-8b", "deepseek-v3", "gemma-3-27b", "llama-4-scout"):
        record = get_model(model_id).model_dump(exclude_none=True)
        for key in [k for k in record if k != "sources"] + ["sliding_window", "attention_chunk_size"]:
            for value in MUTATIONS:
                raw = json.dumps(record | {key: value}).encode()
                text = base64.urlsafe_b64encode(zlib.compress(raw)).decode().rstrip("=")
                cases += 1
                try:
                    model = decode_record(text, ModelConfig, "URL parameter `cmodel`")
                except DataError as exc:
                    assert "`cmodel`" in str(exc)
                else:
                    assert model.max_context <= 2**24 and model.num_layers <= 1024
                    assert all(math.isfinite(n) for n in _numbers(model.model_dump()))
    assert cases > 1_000


# ---- measured results: absurd figures, and where they apply -------------------------------------
