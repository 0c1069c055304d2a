"""Results files, share-link records and page URLs: hostile documents and parameters."""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import random
import re
import zlib

from benchmarks.hostile.cli_cases import BASELINES, HW_IDS, MODEL_IDS, _with
from benchmarks.hostile.file_cases import _mutate_json, _paths, _set
from benchmarks.hostile.values import NUMBERS, ROOT, STRINGS, _dumps, _leaf, _short

EXAMPLES = {p.name: json.loads(p.read_text()) for p in sorted((ROOT / "examples").glob("*.json"))}


def _collectives_doc() -> dict:
    doc = json.loads(json.dumps(EXAMPLES["h100-sxm-quick-run.json"]))
    doc.update(mode="collectives", sweeps=[], steps=[], calibration=None, ceilings=None)
    doc["collectives"] = {
        "op": "all_reduce",
        "backend": "nccl",
        "world_size": 8,
        "points": [
            {"message_bytes": 2.0**k, "time_s": 1e-5 * 2 ** (k / 4), "bus_bandwidth_gbps": 10.0 * k}
            for k in range(10, 31, 4)
        ],
    }
    return doc


RESULT_DOCS = {**EXAMPLES, "collectives.json": _collectives_doc()}
RESULT_SPECIAL = {
    "ceilings/peak_tflops": lambda rng: rng.choice(
        [{}, {"bf16": 1e300}, {"bf16": -1.0}, {"bf16": 0}, {"x": 1.0}, [], "@RAW:NaN"]
    ),
    "ceilings/memory_bandwidth_tbps": lambda rng: rng.choice([1e300, 0, -1, 1e-300, "@RAW:Infinity"]),
    "calibration/fits": lambda rng: rng.choice([{}, [], None, {"linear_m1": {}}]),
    "calibration/memory_bytes": lambda rng: rng.choice([1e300, 0, -1, 2**64, "@RAW:1e400"]),
    "calibration/hardware_id": lambda rng: rng.choice(["", "nope", "h100-sxm", "tpu-v4", "x" * 5000, None, 1]),
    "collectives/world_size": lambda rng: rng.choice([0, 1, 2, 10**9, 2**63, -1, 1.5]),
    "collectives/points": lambda rng: rng.choice(
        [[], [{}], [{"message_bytes": 1e300, "time_s": 1e-300, "bus_bandwidth_gbps": 1e300}]]
    ),
    "sweeps": lambda rng: rng.choice([[], {}, None, [{}] * 3]),
    "version": lambda rng: rng.choice([1, 3, "2", 2.0, None]),
}


def _results_file(rng: random.Random) -> tuple[dict, str, str]:
    name = rng.choice(sorted(RESULT_DOCS))
    document = RESULT_DOCS[name]
    if rng.random() < 0.02:  # past the kernel count limit
        doc = json.loads(json.dumps(document))
        doc["sweeps"] = (doc["sweeps"] or [{}]) * (20_001 // max(1, len(doc["sweeps"] or [1])) + 1)
        return {"kind": "text", "text": json.dumps(doc)}, name, f"{len(doc['sweeps'])} sweep points"
    spec, desc = _mutate_json(document, rng, special=RESULT_SPECIAL)
    return spec, name, desc


def results_case(rng: random.Random) -> dict:
    spec, name, desc = _results_file(rng)
    spec["name"] = "results.json"
    if rng.random() < 0.55 and spec["kind"] in ("text", "bytes", "big"):  # the parser takes text, not a path
        return {"mode": "parse_results", "files": [spec], "desc": f"{name}: {desc}"}
    option = "--collectives" if name == "collectives.json" and rng.random() < 0.8 else "--calibration"
    command = rng.choice(
        ["analyze", "request", "kv", "train", "serve", "advise"]
        if option == "--calibration"
        else ["analyze", "request", "advise"]
    )
    argv = _with(list(BASELINES[command]), option, "@@/results.json")
    if command in ("analyze", "request") and rng.random() < 0.5:
        argv = _with(argv, "--tp", rng.choice(["2", "8"]))
    if rng.random() < 0.6:
        argv.append("--json")
    return {"mode": "cli", "argv": argv, "files": [spec], "desc": f"{option} {name}: {desc}"}


# ==== share-link records (cmodel, cdevice) =======================================================
def _toml_record(folder: str, stem: str) -> dict:
    """The record as the dashboard encodes it (``encode_record``'s JSON), before any mutation."""
    return json.loads(_record_json(folder, stem))


@functools.cache
def _record_json(folder: str, stem: str) -> str:
    import tomllib

    from roofline.hardware import Hardware
    from roofline.models import ModelConfig

    schema = ModelConfig if folder == "model_db" else Hardware
    record = schema.model_validate(tomllib.loads((ROOT / folder / f"{stem}.toml").read_text()))
    return json.dumps(record.model_dump(mode="json", by_alias=True, exclude_none=True))


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


@functools.cache
def _bomb(size: int) -> str:
    """A few kilobytes that inflate to ``size`` bytes of spaces."""
    return _encode(b" " * size)


def record_text(rng: random.Random, param: str) -> tuple[str, str]:
    """A hostile ``cmodel``/``cdevice`` value: a valid encoding of a hostile record, or garbage."""
    r = rng.random()
    if r < 0.15:
        choice = rng.choice(
            ["garbage", "b64-not-zlib", "zlib-not-json", "bomb", "long", "empty-json", "list", "NaN", "unicode"]
        )
        text = {
            "garbage": "".join(rng.choice("abcXYZ019-_=+/%") for _ in range(rng.randint(0, 64))),
            "b64-not-zlib": base64.urlsafe_b64encode(b"hello world").decode(),
            "zlib-not-json": _encode(b"\xff\xfe not json"),
            "bomb": _bomb(rng.choice([10**6, 10**7])),
            "long": "A" * rng.choice([8193, 100_000]),
            "empty-json": _encode(b"{}"),
            "list": _encode(b"[1, 2, 3]"),
            "NaN": _encode(b'{"id": NaN}'),
            "unicode": "💥" * 10,
        }[choice]
        return text, choice
    folder, ids = ("model_db", MODEL_IDS) if param == "cmodel" else ("hardware_db", HW_IDS)
    stem = rng.choice(ids)
    doc = _toml_record(folder, stem)
    changes = []
    if r < 0.22:
        changes.append("unchanged")
    else:
        paths = [p for p in _paths(doc) if p and p[0] != "sources"]
        for _ in range(rng.choice((1, 1, 2, 3))):
            path = rng.choice(paths)
            leaf = (
                rng.choice([10**8, 10**9, 2**53, 2**63, 1e300, 1e-300, 0, -1, 0.5, "@RAW:NaN", "@RAW:1e400"])
                if rng.random() < 0.6
                else _leaf(rng)
            )
            with contextlib.suppress(KeyError, IndexError, TypeError):
                _set(doc, path, leaf, delete=rng.random() < 0.08)
                changes.append(f"{'/'.join(map(str, path))}={_short(leaf, 30)}")
            paths = [p for p in _paths(doc) if p and p[0] != "sources"]
    if rng.random() < 0.5:
        doc["id"] = rng.choice(["mine", stem, "h100-sxm", "llama-3.1-8b", "", "x" * 300, "../x", "💥"])
    return _encode(_dumps(doc).encode()), f"{stem}: " + ", ".join(changes)


def records_case(rng: random.Random) -> dict:
    param = rng.choice(["cmodel", "cdevice"])
    text, desc = record_text(rng, param)
    return {"mode": "decode", "param": param, "text": text, "desc": f"{param} {desc}"}


# ==== pages ======================================================================================
def page_keys() -> dict[str, list[str]]:
    pages = {}
    for path in sorted((ROOT / "views").glob("*_page.py")):
        source = path.read_text()
        keys = set(re.findall(r'key="([A-Za-z0-9_]+)"', source))
        keys |= set(
            re.findall(r'"([a-z0-9_]+)":\s*(?:int_in|float_in|one_of|some_of|boolean|devices_param|state\.)', source)
        )
        keys = {k for k in keys if not k.startswith(("cmodel_", "cdevice_"))}
        # A key per picked device (the Serving page's prices, price_<device id>, in a module it imports).
        for module in re.findall(r"^from dashboard\.(\w+) import", source, re.M):
            if re.search(r'key=f"\{PRICE_PARAM\}\{hid\}"', (ROOT / "dashboard" / f"{module}.py").read_text()):
                keys |= {f"price_{hid}" for hid in ("h100-sxm", "l40s", "mi300x")}
        if "VIEW_PARAM" in source:  # the open tab (dashboard/tabs.py)
            keys.add("view")
        pages[f"views/{path.name}"] = sorted(keys | {"cmodel", "cdevice"})
    return pages


def page_case(rng: random.Random, pages: dict) -> dict:
    page = rng.choice(sorted(pages))
    params: dict[str, list[str]] = {}
    for _ in range(rng.choice((1, 1, 2, 2, 3, 4))):
        key = rng.choice(pages[page])
        if key in ("cmodel", "cdevice") or rng.random() < 0.04:
            text, desc = record_text(rng, key if key in ("cmodel", "cdevice") else rng.choice(["cmodel", "cdevice"]))
            params[key if key in ("cmodel", "cdevice") else "cmodel"] = [text]
            continue
        values = []
        for _ in range(rng.choice((1, 1, 1, 2, 3)) if rng.random() < 0.9 else rng.randint(13, 40)):
            q = rng.random()
            values.append(
                rng.choice(NUMBERS) if q < 0.45 else rng.choice(HW_IDS + MODEL_IDS) if q < 0.7 else rng.choice(STRINGS)
            )
        params[key] = [v.replace("\x00", "") for v in values]
    desc = "&".join(f"{k}={_short(v, 30)}" for k, vs in params.items() for v in vs[:3])
    return {"mode": "page", "page": page, "params": params, "desc": f"{page}?{desc}"}


# ==== the plan ===================================================================================
