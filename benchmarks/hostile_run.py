"""A reproducible hostile run over every entry point: the command line (in-process and as real
subprocesses), config.json files, hardware/model TOML folders, results and collectives files,
share-link records and every page's URL parameters.

The rule measured: every input gives a valid result or a clean error naming the field; never a
traceback, an uncaught page exception, a hang, NaN/Infinity in JSON, or an accepted input that
takes over 5 s or 1 GB.

    python -m benchmarks.hostile_run                          # 10,000 cases, seed 0
    python -m benchmarks.hostile_run --cases 2000 --seed 1 --only cli,pages --json out.json
    python -m benchmarks.hostile_run --repro config-00042     # rerun one case, uncaptured

Cases are generated from the seed alone (case ``entry-NNNNN`` is the same whatever ``--cases``
is), so a failing id printed in the table reproduces with ``--repro ID`` (same ``--seed``): its
files are written to ``$TMPDIR/hostile-repro/ID/`` and the command is run with its traceback shown.

Every case runs in a worker process under a 4 GB address-space limit, one case at a time, with
a watchdog that kills the worker when a case passes its timeout (a hang) and starts another.
Wall time is per case; memory is the case's peak over the worker's memory before it (the larger
of tracemalloc's peak and the resident set's high-water mark, which is reset per case).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import io
import json
import math
import os
import random
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zlib
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENTRIES = ("cli", "subprocess", "config", "toml", "results", "records", "pages")
# Share of the cases per entry point (pages are slow: a few hundred at the default size).
SHARES = {"cli": 0.40, "subprocess": 0.02, "config": 0.16, "toml": 0.14, "results": 0.16, "records": 0.085}
PAGE_SHARE = 0.03
TIMEOUTS = {"pages": 60.0, "subprocess": 40.0}
DEFAULT_TIMEOUT = 20.0
SLOW_S = 5.0
BIG_MB = 1024.0
AS_LIMIT = 4 * 2**30
RECYCLE = 400  # cases per worker before a fresh one (caches keyed by temp paths grow)

FAIL_CLASSES = ("traceback", "uncaught", "hang", "unclean_error", "nan_json", "memory_error", "crash")
FLAG_CLASSES = ("slow", "big_memory")


# ==== values a hostile user types ===============================================================
NUMBERS = [
    # the edges of the valid range: the smallest counts, a fraction's ends, round sizes
    "1",
    "2",
    "3",
    "8",
    "100",
    "4096",
    "1.0",
    "0.999999",
    "1e-12",
    "0",
    "-0",
    "-1",
    "1.5",
    "0.5",
    "1e-9",
    "nan",
    "NaN",
    "-nan",
    "inf",
    "-inf",
    "Infinity",
    "+inf",
    "1e400",
    "-1e400",
    "1e-400",
    "1e308",
    "-1e308",
    "4.9e-324",
    "9" * 400,
    "9" * 5000,
    "1" + "0" * 4400,
    "18446744073709551616",
    str(2**63),
    str(2**63 - 1),
    str(2**53),
    str(2**53 + 1),
    str(2**31),
    str(2**32),
    str(10**8),
    str(10**9),
    str(10**12),
    str(10**15),
    "1e6",
    "1e9",
    "1e15",
    "1e20",
    "65536",
    "1048576",
    "1_000",
    "0x10",
    "0b11",
    "1e",
    "--1",
    "+5",
    " 7",
    "7 ",
    "\t3\n",
    "",
    " ",
    "abc",
    "true",
    "false",
    "None",
    "null",
    "١٢",
    "１２",
    "²",
    "½",
    "Ⅻ",
    "๓",
    "1\x002",
    "1,000",
    "3.",
    ".5",
    "5e-1",
    "1.0000000000000002",
]
STRINGS = [
    "",
    " ",
    "-",
    "--json",
    "../../etc/passwd",
    "/dev/zero",
    "/dev/null",
    "/dev/full",
    "/proc/self/mem",
    "/etc",
    "/nonexistent.json",
    "x" * 5000,
    "h100-sxm ",
    "H100-SXM",
    "h100-sxm\n",
    "ḧ100",
    "💥",
    "\x00",
    "a,b,c",
    "q,v,q",
    "q,,v",
    ",",
    "gate,up,down,o,k",
    "all",
    "=",
    "h100-sxm=",
    "h100-sxm=1e400",
    "h100-sxm=nan",
    "h100-sxm=-1",
    "=5",
    "nope=3",
    "h100-sxm=3=4",
    "con",
    "%s%s%n",
    "{}",
    "[]",
    "null",
    "llama-3.1-405b",
    "tpu-v4",
]
LEAVES = [
    None,
    True,
    False,
    0,
    -1,
    1,
    2,
    3,
    7,
    1.5,
    -0.5,
    10**8,
    10**9,
    2**31,
    2**53 + 1,
    2**63,
    2**64,
    10**20,
    1e300,
    -1e300,
    1e-300,
    "",
    "12",
    "x",
    "NaN",
    [],
    {},
    [1],
    [None],
    {"a": 1},
    "@RAW:NaN",
    "@RAW:Infinity",
    "@RAW:-Infinity",
    "@RAW:1e400",
    "@RAW:" + "9" * 5000,
    "@RAW:-0",
]


def _leaf(rng: random.Random) -> object:
    if rng.random() < 0.12:
        return rng.choice([rng.randint(-(2**70), 2**70), rng.uniform(-1e6, 1e6), rng.randint(0, 10**6)])
    return rng.choice(LEAVES)


def _dumps(document: object) -> str:
    """JSON with ``"@RAW:x"`` strings written as the bare token x (NaN, 1e400, a 5,000-digit number)."""
    text = json.dumps(document, allow_nan=True)
    return re.sub(r'"@RAW:([^"]*)"', lambda m: m.group(1), text)


def _short(value: object, n: int = 60) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= n else f"{text[: n - 20]}…({len(text):,} chars)"


def _deep(depth: int, kind: str = "list") -> str:
    return ("[" * depth + "]" * depth) if kind == "list" else ('{"a":' * depth + "1" + "}" * depth)


# ==== the parser, introspected ===================================================================
def cli_commands() -> dict[str, dict]:
    """Every leaf command of ``python -m roofline``: its option strings, types and choices."""
    from roofline.cli.parser import build_parser

    found: dict[str, dict] = {}

    def walk(parser, path):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs:
            for name, child in subs[0].choices.items():
                walk(child, [*path, name])
            return
        options, positionals = {}, []
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if not action.option_strings:
                positionals.append(action.dest)
                continue
            kind = "flag" if action.nargs == 0 else "value"
            typ = getattr(action.type, "__name__", None) if action.type else None
            options[action.option_strings[0]] = {
                "kind": kind,
                "type": typ,
                "choices": list(action.choices) if action.choices else None,
                "append": isinstance(action, argparse._AppendAction),
            }
        found[" ".join(path)] = {"options": options, "positionals": positionals}

    walk(build_parser(), [])
    return found


BASELINES = {
    "hardware list": ["hardware", "list"],
    "hardware show": ["hardware", "show", "h100-sxm"],
    "matmul": ["matmul", "--m", "64", "--n", "64", "--k", "64"],
    "model list": ["model", "list"],
    "model show": ["model", "show", "llama-3.1-8b"],
    "analyze": ["analyze", "--model", "llama-3.1-8b", "--phase", "decode", "--seq-len", "1024", "--batch", "4"],
    "request": ["request", "--model", "llama-3.1-8b", "--prompt-len", "512", "--output-len", "64", "--batch", "2"],
    "advise": ["advise", "--model", "llama-3.2-1b", "--phase", "decode", "--seq-len", "256"],
    "measure": ["measure", "--device", "cpu", "--quick", "--model", "llama-3.2-1b"],
    "kv": ["kv", "--model", "llama-3.1-8b", "--batch", "8", "--context", "4096"],
    "train": ["train", "--model", "llama-3.2-1b", "--seq-len", "1024"],
    "load": ["load", "--model", "llama-3.2-1b"],
    "serve": ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "1"],
}
# Options that would run real measurements (the measure command itself is stubbed in the worker).
NEVER = {("train", "--measure"), ("load", "--measure")}
FILE_OPTIONS = {"--calibration", "--collectives", "--hardware-dir", "--model-dir", "--out"}


def _ids(folder: str) -> list[str]:
    return sorted(p.stem for p in (ROOT / folder).glob("*.toml"))


HW_IDS, MODEL_IDS = _ids("hardware_db"), _ids("model_db")


def _with(argv: list[str], option: str, value: str | None, append: bool = False) -> list[str]:
    argv = list(argv)
    if value is None:  # a flag
        return argv + [option]
    if option in argv and not append:
        argv[argv.index(option) + 1] = value
    else:
        argv += [option, value]
    return argv


def _without(argv: list[str], option: str) -> list[str]:
    if option not in argv:
        return argv
    i = argv.index(option)
    return argv[:i] + argv[i + 2 :]


def _number(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.7:
        return rng.choice(NUMBERS)
    if r < 0.85:
        return str(rng.choice([rng.randint(-(2**70), 2**70), rng.randint(1, 2**20), rng.randint(2**20, 2**53)]))
    return repr(
        rng.choice([rng.uniform(-1e9, 1e9), rng.uniform(0, 1), math.ldexp(rng.random(), rng.randint(-1074, 1023))])
    )


def _string_for(option: str, rng: random.Random) -> str:
    r = rng.random()
    if option in ("--hardware", "id") and r < 0.45:
        return rng.choice(HW_IDS)
    if option in ("--model", "--draft-model", "id") and r < 0.45:
        return rng.choice(MODEL_IDS)
    if option == "--price" and r < 0.6:
        return f"{rng.choice(HW_IDS)}={_number(rng)}"
    return (
        rng.choice(STRINGS)
        if rng.random() < 0.85
        else "".join(chr(rng.randint(1, 0x2FFF)) for _ in range(rng.randint(1, 12)))
    )


def cli_argv(rng: random.Random, commands: dict, command: str | None = None) -> tuple[list[str], str]:
    """A baseline command with one to three options made hostile (or valid but unusual)."""
    command = command or rng.choice(sorted(commands))
    spec = commands[command]
    argv = list(BASELINES.get(command, command.split()))
    if "--json" in spec["options"] and rng.random() < 0.7:
        argv.append("--json")
    changes = []
    options = [o for o in spec["options"] if (command.split()[0], o) not in NEVER and o not in ("--json",)]
    for _ in range(rng.choice((1, 1, 2, 2, 3))):
        r = rng.random()
        if r < 0.06 and spec["positionals"]:  # the positional id
            i = len(command.split())
            value = _string_for("id", rng)
            argv[i : i + 1] = [value] if i < len(argv) else [value]
            changes.append(f"id={_short(value)}")
            continue
        if r < 0.09:
            option = rng.choice(["--nope", "-x", "--", "--json=1", "--batch=", "--m=-1"])
            argv.append(option)
            changes.append(option)
            continue
        if r < 0.12 and options:
            option = rng.choice(options)
            argv = _without(argv, option)
            changes.append(f"drop {option}")
            continue
        if not options:
            continue
        option = rng.choice(options)
        o = spec["options"][option]
        if o["kind"] == "flag":
            argv = _with(argv, option, None)
            changes.append(option)
            continue
        if option in FILE_OPTIONS:
            value = rng.choice(
                [
                    "",
                    "/dev/zero",
                    "/dev/null",
                    "/nonexistent",
                    "/etc",
                    "/etc/passwd",
                    str(ROOT / "examples"),
                    str(ROOT / "examples" / "h100-sxm-quick-run.json"),
                    str(ROOT / "README.md"),
                    "x" * 5000,
                    "/proc/self/status",
                    str(ROOT / "hardware_db"),
                ]
            )
        elif o["choices"]:
            value = (
                str(rng.choice(o["choices"]))
                if rng.random() < 0.6
                else rng.choice(
                    [str(c).upper() for c in o["choices"]] + ["", "fp4", "int3", "-1", "5", " bf16", "bf16 ", "1e400"]
                )
            )
        elif o["type"] in ("positive_int", "non_negative_float", "fraction", "fraction_or_zero", "int", "float"):
            value = _number(rng)
        else:
            value = _string_for(option, rng)
        argv = _with(argv, option, value, append=o["append"] and rng.random() < 0.5)
        changes.append(f"{option}={_short(value)}")
    return argv, f"{command}: " + ", ".join(changes)


# ==== config.json ================================================================================
CONFIGS = sorted((ROOT / "tests" / "data" / "hf_configs").glob("*.json"))


def _paths(value: object, prefix: tuple = (), depth: int = 0) -> list[tuple]:
    found = [prefix] if prefix else []
    if depth > 3:
        return found
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*prefix, k), depth + 1)
    elif isinstance(value, list):
        for j, v in enumerate(value[:3]):
            found += _paths(v, (*prefix, j), depth + 1)
    return found


def _set(document: object, path: tuple, leaf: object, delete: bool = False) -> None:
    node = document
    for key in path[:-1]:
        node = node[key]
    if delete and isinstance(node, dict):
        node.pop(path[-1], None)
    else:
        node[path[-1]] = leaf


def _mutate_json(document: object, rng: random.Random, special: dict | None = None) -> tuple[dict, str]:
    """A file spec and its description: a JSON document with one to three fields made hostile,
    or made hostile as a whole (truncated, deep, huge, not UTF-8, not an object)."""
    r = rng.random()
    text = json.dumps(document)
    if r < 0.06:
        cut = rng.randint(0, max(0, len(text) - 1))
        return {"kind": "text", "text": text[:cut]}, f"truncated at {cut} of {len(text)}"
    if r < 0.10:
        depth = rng.choice([33, 100, 1000, 10_000, 100_000, 1_000_000])
        key = rng.choice(list(document)) if isinstance(document, dict) and document else "x"
        doc = dict(document) if isinstance(document, dict) else {}
        doc[key] = "@DEEP@"
        kind = rng.choice(["list", "dict"])
        return {
            "kind": "text",
            "text": json.dumps(doc).replace('"@DEEP@"', _deep(depth, kind)),
        }, f"{key} nested {depth} deep ({kind})"
    if r < 0.12:
        size = rng.choice([2**20 + 1, 17 * 2**20, 64 * 2**20])
        where = rng.choice(["pad", "string"])
        return {
            "kind": "big",
            "prefix": text[:-1] + ', "pad": "' if where == "string" else text,
            "pad": size,
            "char": "x" if where == "string" else " ",
            "suffix": '"}' if where == "string" else "",
        }, f"{size:,}-byte file ({where})"
    if r < 0.15:
        choice = rng.choice(["empty", "bom", "latin1", "array", "number", "null", "string", "dupkeys", "binary", "nul"])
        blob = {
            "empty": b"",
            "bom": b"\xef\xbb\xbf" + text.encode(),
            "latin1": text.replace("}", ', "n": "\xe9"}').encode("latin-1"),
            "array": f"[{text}]".encode(),
            "number": b"1e400",
            "null": b"null",
            "string": b'"config"',
            "dupkeys": (text[:-1] + ", " + text[1:]).encode(),
            "binary": bytes(rng.randrange(256) for _ in range(300)),
            "nul": text.encode().replace(b":", b"\x00:", 1),
        }[choice]
        return {"kind": "bytes", "b64": base64.b64encode(blob).decode()}, choice
    if r < 0.18:
        choice = rng.choice(["dir", "fifo", "zero_link", "outside_link", "missing", "dangling"])
        return {"kind": choice}, choice
    doc = json.loads(text)
    paths = _paths(doc)
    changes = []
    if special and rng.random() < 0.35:
        path, leaf = rng.choice(list(special.items()))
        path = tuple(path.split("/"))
        leaf = leaf if not callable(leaf) else leaf(rng)
        with contextlib.suppress(KeyError, IndexError, TypeError):
            _set(doc, path, leaf)
            changes.append(f"{'/'.join(path)}={_short(leaf)}")
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        path = rng.choice(paths)
        try:
            q = rng.random()
            if q < 0.1:
                _set(doc, path, None, delete=True)
                changes.append(f"del {'/'.join(map(str, path))}")
            elif q < 0.18:  # the right value at the wrong nesting
                node = doc
                for key in path:
                    node = node[key]
                wrapped = rng.choice([[node], {"value": node}, [[node]]])
                _set(doc, path, wrapped)
                changes.append(f"{'/'.join(map(str, path))} wrapped in {type(wrapped).__name__}")
            else:
                leaf = _leaf(rng)
                _set(doc, path, leaf)
                changes.append(f"{'/'.join(map(str, path))}={_short(leaf, 40)}")
        except (KeyError, IndexError, TypeError):
            pass
        paths = _paths(doc)
    if rng.random() < 0.05 and isinstance(doc, dict):
        doc[rng.choice(["unknown_field", "__proto__", ""])] = _leaf(rng)
        changes.append("an unknown key")
    return {"kind": "text", "text": _dumps(doc)}, ", ".join(changes) or "unchanged"


def config_case(rng: random.Random) -> dict:
    path = rng.choice(CONFIGS)
    document = json.loads(path.read_text())
    spec, desc = _mutate_json(document, rng)
    spec["name"] = "config.json"
    command = rng.choice(["analyze", "request", "kv", "advise", "train", "load", "serve", "measure", "model show"])
    argv = list(BASELINES[command])
    if command == "model show":
        argv[2] = "@@/config.json"
    else:
        argv = _with(argv, "--model", "@@/config.json")
    if command != "measure" and rng.random() < 0.6:
        argv.append("--json")
    if rng.random() < 0.3:  # a hostile option as well: a shape that is accepted but large
        opt = {
            "analyze": "--seq-len",
            "request": "--prompt-len",
            "kv": "--context",
            "advise": "--seq-len",
            "train": "--seq-len",
            "load": "--shards",
            "serve": "--prompt-len",
        }.get(command)
        if opt:
            argv = _with(argv, opt, rng.choice(["1", "131072", str(10**6), str(2**53)]))
    return {"mode": "cli", "argv": argv, "files": [spec], "desc": f"{path.name}: {desc}"}


# ==== TOML data folders ==========================================================================
TOML_VALUES = [
    "inf",
    "-inf",
    "nan",
    "+nan",
    "true",
    "false",
    "-1",
    "0",
    "-0.0",
    '"80"',
    '""',
    "[]",
    "{}",
    "[1, 2]",
    "1e400",
    "1e300",
    "1e-300",
    str(2**53 + 1),
    str(2**63 - 1),
    str(10**8),
    str(10**9),
    str(10**12),
    "0.5",
    "1979-05-27",
    '"x"',
    "[[[[[[[[1]]]]]]]]",
    "{ a = 1 }",
    '"' + "x" * 100_000 + '"',
    "9" * 5000,
    "0x7fffffffffffffff",
    "1_000_000_000",
]


def toml_case(rng: random.Random) -> dict:
    kind = rng.choice(["hardware", "model"])
    folder = "hardware_db" if kind == "hardware" else "model_db"
    path = rng.choice(sorted((ROOT / folder).glob("*.toml")))
    lines = path.read_text().splitlines()
    editable = [i for i, t in enumerate(lines) if "=" in t and not t.lstrip().startswith(("#", "id ", "id="))]
    changes = []
    r = rng.random()
    spec: dict
    if r < 0.08:
        choice = rng.choice(
            ["dir", "fifo", "zero_link", "outside_link", "dangling", "binary", "huge", "deep", "empty", "latin1"]
        )
        if choice == "binary":
            spec = {"kind": "bytes", "b64": base64.b64encode(bytes(rng.randrange(256) for _ in range(200))).decode()}
        elif choice == "huge":
            spec = {
                "kind": "big",
                "prefix": "\n".join(lines) + "\n# ",
                "pad": rng.choice([2**20 + 1, 30 * 2**20]),
                "char": "x",
                "suffix": "\n",
            }
        elif choice == "deep":
            depth = rng.choice([33, 1000, 100_000])
            spec = {"kind": "text", "text": "\n".join(lines) + f"\nextra = {'[' * depth}{']' * depth}\n"}
        elif choice == "empty":
            spec = {"kind": "text", "text": ""}
        elif choice == "latin1":
            spec = {
                "kind": "bytes",
                "b64": base64.b64encode(("\n".join(lines) + '\nnote = "\xe9"\n').encode("latin-1")).decode(),
            }
        else:
            spec = {"kind": choice}
        changes.append(choice)
    else:
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            i = rng.choice(editable)
            key = lines[i].split("=")[0].strip()
            q = rng.random()
            if q < 0.1:
                lines[i] = ""
                changes.append(f"del {key}")
            elif q < 0.14:
                lines.insert(i, f"{rng.choice(['unknown', key])} = 1")
                changes.append(f"extra/duplicate before {key}")
            else:
                value = rng.choice(TOML_VALUES) if rng.random() < 0.85 else str(rng.randint(-(2**64), 2**64))
                lines[i] = f"{key} = {value}"
                changes.append(f"{key} = {_short(value, 40)}")
        if rng.random() < 0.04:
            cut = rng.randint(0, len("\n".join(lines)))
            spec = {"kind": "text", "text": "\n".join(lines)[:cut]}
            changes.append(f"truncated at {cut}")
        else:
            spec = {"kind": "text", "text": "\n".join(lines) + "\n"}
    if spec["kind"] == "text":
        spec["text"] = re.sub(r"^id\s*=.*$", 'id = "mine"', spec["text"], count=1, flags=re.M)
    spec["name"] = "d/mine.toml"
    option = "--hardware-dir" if kind == "hardware" else "--model-dir"
    if kind == "hardware":
        command = rng.choice(
            ["hardware show", "hardware list", "matmul", "analyze", "request", "kv", "advise", "train", "load", "serve"]
        )
        argv = list(BASELINES[command])
        if command == "hardware show":
            argv[2] = "mine"
        elif command not in ("hardware list", "advise"):
            argv = _with(argv, "--hardware", "mine")
    else:
        command = rng.choice(
            ["model show", "model list", "analyze", "request", "kv", "advise", "train", "load", "serve"]
        )
        argv = list(BASELINES[command])
        if command == "model show":
            argv[2] = "mine"
        elif command != "model list":
            argv = _with(argv, "--model", "mine")
    argv = _with(argv, option, "@@/d")
    if rng.random() < 0.6:
        argv.append("--json")
    return {"mode": "cli", "argv": argv, "files": [spec], "desc": f"{path.name}: " + ", ".join(changes)}


# ==== results and collectives files ==============================================================
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
def make_case(entry: str, index: int, seed: int, commands: dict, pages: dict) -> dict:
    rng = random.Random(f"{seed}-{entry}-{index}")
    if entry == "cli":
        argv, desc = cli_argv(rng, commands)
        case = {"mode": "cli", "argv": argv, "files": [], "desc": desc}
    elif entry == "subprocess":
        pick = rng.random()
        case = (
            config_case(rng)
            if pick < 0.2
            else toml_case(rng)
            if pick < 0.35
            else results_case(rng)
            if pick < 0.5
            else None
        )
        if case is None or case["mode"] != "cli" or case["argv"][0] == "measure":
            # a real process is not stubbed: measure would measure, so it is left to the in-process cases
            argv, desc = cli_argv(rng, commands, rng.choice(sorted(c for c in commands if c != "measure")))
            case = {"mode": "cli", "argv": argv, "files": [], "desc": desc}
        case["argv"] = [a.replace("\x00", "") for a in case["argv"]]
        case["mode"] = "subprocess"
        case["stdout"] = rng.choice(["pipe"] * 8 + ["closed", "full"])
        if case["stdout"] != "pipe":
            case["desc"] += f" (stdout {case['stdout']})"
    elif entry == "config":
        case = config_case(rng)
    elif entry == "toml":
        case = toml_case(rng)
    elif entry == "results":
        case = results_case(rng)
    elif entry == "records":
        case = records_case(rng)
    elif entry == "pages":
        case = page_case(rng, pages)
    else:
        raise ValueError(entry)
    case["id"] = f"{entry}-{index:05d}"
    case["entry"] = entry
    return case


def plan(total: int, only: list[str]) -> dict[str, int]:
    counts = {}
    shares = {e: (PAGE_SHARE if e == "pages" else SHARES[e]) for e in only}
    if "pages" in only:
        counts["pages"] = max(8, round(total * PAGE_SHARE)) if len(only) > 1 else total
    rest = total - counts.get("pages", 0)
    others = [e for e in only if e != "pages"]
    weight = sum(shares[e] for e in others) or 1
    for e in others:
        counts[e] = max(1, round(rest * shares[e] / weight))
    return counts


# ==== the worker =================================================================================
class _WouldMeasure(Exception):
    """The measure command passed its checks and would now measure: counted as a valid result."""


def _stub_measurements() -> None:
    import types

    def would_measure(*args, **kwargs):
        raise _WouldMeasure()

    for name, attr in (
        ("roofline.measure.suite", "run_suite"),
        ("roofline.measure.training", "measure"),
        ("roofline.measure.loading", "measure"),
    ):
        module = types.ModuleType(name)
        setattr(module, attr, would_measure)
        sys.modules[name] = module


def materialize(case: dict, folder: Path) -> None:
    for spec in case.get("files", []):
        path = folder / spec["name"]
        path.parent.mkdir(parents=True, exist_ok=True)
        kind = spec["kind"]
        if kind == "text":
            path.write_text(spec["text"], encoding="utf-8", errors="surrogatepass")
        elif kind == "bytes":
            path.write_bytes(base64.b64decode(spec["b64"]))
        elif kind == "big":
            with open(path, "w", encoding="utf-8") as f:
                f.write(spec["prefix"])
                chunk = spec["char"] * 2**20
                for _ in range(spec["pad"] // 2**20):
                    f.write(chunk)
                f.write(spec["char"] * (spec["pad"] % 2**20))
                f.write(spec["suffix"])
        elif kind == "dir":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "zero_link":
            path.symlink_to("/dev/zero")
        elif kind == "outside_link":
            path.symlink_to("/etc/passwd")
        elif kind == "dangling":
            path.symlink_to(folder / "nowhere")
        elif kind == "missing":
            pass


def _argv(case: dict, folder: Path) -> list[str]:
    return [a.replace("@@", str(folder)) for a in case["argv"]]


def _strict_json(text: str) -> str | None:
    """None when the text is strict JSON; else what is wrong."""

    def refuse(constant):
        raise ValueError(f"{constant} in JSON output")

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError as exc:
        return str(exc)[:120]
    return None


def classify_cli(argv: list[str], code, out: str, err: str) -> tuple[str, str]:
    if "Traceback" in err:
        lines = [line for line in err.strip().splitlines() if line.strip()]
        return "traceback", lines[-1][:200] if lines else "Traceback"
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning:")]
    if code == 0:
        if "--json" in argv and "-h" not in argv and "--help" not in argv and out.strip():
            problem = _strict_json(out)
            if problem:
                return "nan_json", problem
        return "valid", ""
    if code == 2 and len(lines) == 1 and lines[0].startswith("error:"):
        return "clean_error", lines[0][:200]
    if code == 1 and not lines:  # a closed pipe ends quietly
        return "valid", "closed pipe"
    return "unclean_error", f"exit {code}: " + (" | ".join(lines)[:200] or "(no message)")


class Meter:
    """Wall time and the peak memory a case adds over the worker's memory before it: the rise of
    the resident set's high-water mark (reset per case through /proc/self/clear_refs), and with
    ``--tracemalloc`` also the peak of Python's traced allocations (exact, but 4x slower)."""

    tracing = False

    def __init__(self) -> None:
        import tracemalloc

        self.tracemalloc = tracemalloc
        self.clear_refs = os.path.exists("/proc/self/clear_refs")

    @staticmethod
    def _status(field: str) -> float:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) / 1024
        return 0.0

    def __enter__(self):
        if self.tracing:
            self.tracemalloc.reset_peak()
            self.traced0 = self.tracemalloc.get_traced_memory()[0]
        reset = False
        if self.clear_refs:
            with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
                f.write("5")
                reset = True
        self.rss0 = self._status("VmRSS:") if reset else self._status("VmHWM:")
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.t0
        rss = self._status("VmHWM:") - self.rss0
        traced = (self.tracemalloc.get_traced_memory()[1] - self.traced0) / 2**20 if self.tracing else 0.0
        self.mb = max(traced, rss, 0.0)
        return False


def run_cli_inprocess(case: dict, folder: Path) -> dict:
    from roofline.cli import main
    from roofline.datafiles import PROBLEMS

    argv = _argv(case, folder)
    PROBLEMS.clear()
    out, err = io.StringIO(), io.StringIO()
    outcome = None
    with Meter() as meter:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
            except _WouldMeasure:
                code = 0
            except MemoryError:
                outcome = ("memory_error", "MemoryError")
            except RecursionError as exc:
                outcome = ("traceback", f"RecursionError: {str(exc)[:150]}")
            except BaseException as exc:  # noqa: BLE001 - anything escaping main is the finding
                if isinstance(exc, KeyboardInterrupt):
                    raise
                tb = traceback.extract_tb(exc.__traceback__)
                where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
                outcome = ("traceback", f"{type(exc).__name__}: {str(exc)[:150]}{where}")
    PROBLEMS.clear()
    if outcome is None:
        outcome = classify_cli(argv, code, out.getvalue(), err.getvalue())
    return {"outcome": outcome[0], "message": outcome[1], "wall": meter.wall, "mb": meter.mb}


def _limit_child() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
    os.setsid()


def run_subprocess(case: dict, folder: Path, timeout: float) -> dict:
    argv = _argv(case, folder)
    mode = case.get("stdout", "pipe")
    out_path, err_path = folder / "_stdout", folder / "_stderr"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROOFLINE_")}
    env["PYTHONPATH"] = str(ROOT)
    with open(err_path, "wb") as err_file:
        if mode == "full":
            stdout = open("/dev/full", "wb")
        elif mode == "closed":
            r, w = os.pipe()
            os.close(r)
            stdout = os.fdopen(w, "wb")
        else:
            stdout = open(out_path, "wb")
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "roofline", *argv],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=err_file,
                env=env,
                preexec_fn=_limit_child,
            )
        finally:
            stdout.close()
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = 0  # reaped here: keep Popen from waiting again
        wall = time.perf_counter() - t0
    mb = usage.ru_maxrss / 1024
    err = err_path.read_text(errors="replace")
    out = out_path.read_text(errors="replace") if mode == "pipe" else ""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGKILL and wall >= timeout:
            return {"outcome": "hang", "message": f"killed after {timeout:.0f} s", "wall": wall, "mb": mb}
        return {"outcome": "crash", "message": f"killed by signal {sig}", "wall": wall, "mb": mb}
    code = os.WEXITSTATUS(status)
    if "MemoryError" in err:
        return {"outcome": "memory_error", "message": "MemoryError", "wall": wall, "mb": mb}
    # a closed pipe must end quietly (exit 1, nothing said); /dev/full is a one-line error
    outcome, message = classify_cli(argv, code, out, err)
    return {"outcome": outcome, "message": message, "wall": wall, "mb": mb}


def run_parse_results(case: dict, folder: Path) -> dict:
    from roofline.measure.schema import ResultsError, parse_results

    path = folder / "results.json"
    try:
        data = path.read_bytes() if path.is_file() else b""
    except OSError:
        data = b""
    if not path.is_file():
        return {"outcome": "skip", "message": "not a file: the CLI cases cover it", "wall": 0.0, "mb": 0.0}
    text = data.decode("utf-8", errors="surrogateescape")
    outcome = ("valid", "")
    with Meter() as meter:
        try:
            results = parse_results(text, "upload.json")
            problem = _strict_json(results.to_json())
            if problem:
                outcome = ("nan_json", problem)
        except ResultsError as exc:
            outcome = (
                ("clean_error", str(exc).splitlines()[0][:200])
                if "upload.json" in str(exc)
                else ("unclean_error", str(exc)[:200])
            )
        except MemoryError:
            outcome = ("memory_error", "MemoryError")
        except Exception as exc:  # noqa: BLE001
            outcome = ("traceback", f"{type(exc).__name__}: {str(exc)[:150]}")
    return {"outcome": outcome[0], "message": outcome[1], "wall": meter.wall, "mb": meter.mb}


def run_decode(case: dict) -> dict:
    from roofline.datafiles import DataError
    from roofline.hardware import Hardware
    from roofline.models import ModelConfig
    from roofline.records import decode_record

    schema = ModelConfig if case["param"] == "cmodel" else Hardware
    what = f"URL parameter `{case['param']}`"
    outcome = ("valid", "")
    with Meter() as meter:
        try:
            record = decode_record(case["text"], schema, what)
            numbers = list(_numbers(record.model_dump()))
            if not all(math.isfinite(n) for n in numbers):
                outcome = ("nan_json", "a decoded record holds a non-finite number")
            else:  # what the pages and `model show` / `hardware show` first make of it
                from roofline.api import hardware_summary, model_summary

                summary = model_summary(record) if schema is ModelConfig else hardware_summary(record)
                problem = _strict_json(json.dumps(summary, default=str))
                if problem:
                    outcome = ("nan_json", f"its summary: {problem}")
        except DataError as exc:
            outcome = (
                ("clean_error", str(exc)[:200]) if case["param"] in str(exc) else ("unclean_error", str(exc)[:200])
            )
        except MemoryError:
            outcome = ("memory_error", "MemoryError")
        except Exception as exc:  # noqa: BLE001
            outcome = ("traceback", f"{type(exc).__name__}: {str(exc)[:150]}")
    return {"outcome": outcome[0], "message": outcome[1], "wall": meter.wall, "mb": meter.mb}


def _numbers(value: object):
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield float(value) if abs(value) < 1e308 or isinstance(value, float) else math.inf
    elif isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _numbers(v)


def run_page(case: dict, timeout: float) -> dict:
    from streamlit.testing.v1 import AppTest

    outcome = ("valid", "")
    with Meter() as meter:
        try:
            at = AppTest.from_file(str(ROOT / case["page"]), default_timeout=timeout)
            for key, values in case["params"].items():
                at.query_params[key] = values if len(values) > 1 else values[0]
            at.run()
            if at.exception:
                first = at.exception[0]
                message = (first.message or "").splitlines()[0] if first.message else ""
                outcome = ("uncaught", f"{first.proto.type or 'Exception'}: {message[:160]}")
            else:
                texts = [e.value for e in [*at.warning, *at.error] if isinstance(e.value, str)]
                refused = [t for t in texts if "URL parameter" in t or "cmodel" in t or "cdevice" in t]
                if refused:
                    outcome = ("clean_error", refused[0].splitlines()[0][:200])
        except RuntimeError as exc:
            outcome = (
                ("hang", str(exc)[:160])
                if "timeout" in str(exc).lower() or "timed out" in str(exc).lower()
                else ("uncaught", f"RuntimeError: {str(exc)[:150]}")
            )
        except MemoryError:
            outcome = ("memory_error", "MemoryError")
        except Exception as exc:  # noqa: BLE001
            outcome = ("uncaught", f"{type(exc).__name__}: {str(exc)[:150]}")
    return {"outcome": outcome[0], "message": outcome[1], "wall": meter.wall, "mb": meter.mb}


_WARM: set = set()


def warm_up(case: dict) -> None:
    """Run a plain command, or the page with no parameters, once per worker before timing a case:
    the first import of a page's or a command's modules is not the case's cost."""
    key = case["page"] if case["mode"] == "page" else case["mode"]
    if key in _WARM or case["mode"] in ("subprocess",):
        return
    _WARM.add(key)
    with (
        contextlib.suppress(Exception),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        if case["mode"] == "page":
            from streamlit.testing.v1 import AppTest

            AppTest.from_file(str(ROOT / case["page"]), default_timeout=60).run()
        elif case["mode"] == "cli":
            from roofline.cli import main

            for argv in (["hardware", "list"], ["model", "list"], BASELINES["analyze"]):
                main(argv)
        elif case["mode"] == "parse_results":
            from roofline.measure.schema import parse_results

            parse_results(json.dumps(EXAMPLES["h100-sxm-quick-run.json"]), "warm-up")
        elif case["mode"] == "decode":
            import roofline.records  # noqa: F401


def run_case(case: dict, scratch: Path, timeout: float) -> dict:
    folder = scratch / case["id"]
    if folder.exists():
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    try:
        warm_up(case)
        materialize(case, folder)
        mode = case["mode"]
        if mode == "cli":
            return run_cli_inprocess(case, folder)
        if mode == "subprocess":
            return run_subprocess(case, folder, timeout)
        if mode == "parse_results":
            return run_parse_results(case, folder)
        if mode == "decode":
            return run_decode(case)
        if mode == "page":
            return run_page(case, timeout)
        raise ValueError(mode)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def worker_main(conn, scratch: str, tracing: bool = False) -> None:
    """One worker: a 4 GB address space, cases one at a time from the pipe."""
    if tracing:
        import tracemalloc

        tracemalloc.start(1)
        Meter.tracing = True
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
    for key in [k for k in os.environ if k.startswith("ROOFLINE_")]:
        del os.environ[key]
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    _stub_measurements()
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)
    generated = None  # the parser's commands and the pages' keys, read once: cases are made here, not sent
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        task, timeout = message
        try:
            if generated is None:
                generated = (cli_commands(), page_keys())
            case = make_case(task["entry"], task["index"], task["seed"], *generated)
            result = run_case(case, Path(scratch), timeout)
            result["input"] = _show_input(case)
        except BaseException as exc:  # noqa: BLE001 - the harness's own fault, reported as such
            result = {
                "outcome": "crash",
                "message": f"harness: {type(exc).__name__}: {str(exc)[:150]}",
                "wall": 0.0,
                "mb": 0.0,
            }
        conn.send(result)


# ==== the dispatcher =============================================================================
class Slot:
    def __init__(self, ctx, scratch: Path, tracing: bool) -> None:
        self.ctx, self.scratch, self.tracing = ctx, scratch, tracing
        self.proc = None
        self.used = 0

    def start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=worker_main, args=(child, str(self.scratch), self.tracing), daemon=True)
        self.proc.start()
        child.close()
        self.used = 0

    def stop(self, kill: bool = False) -> None:
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            with contextlib.suppress(OSError, BrokenPipeError):
                self.conn.send(None)
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self.proc = None

    def run(self, case: dict, timeout: float) -> dict:
        if self.proc is None or self.used >= RECYCLE:
            self.stop()
            self.start()
        self.used += 1
        t0 = time.perf_counter()
        try:
            self.conn.send((case, timeout))
            # the worker's own start (imports) is not the case's fault: allow for it generously
            if self.conn.poll(timeout + (30 if self.used == 1 else 10)):
                return self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            if self.proc is not None:
                self.proc.join(2)
            code = self.proc.exitcode if self.proc else None
            self.stop(kill=True)
            return {
                "outcome": "crash",
                "message": f"worker died (exit {code})",
                "wall": time.perf_counter() - t0,
                "mb": 0.0,
            }
        self.stop(kill=True)
        return {
            "outcome": "hang",
            "message": f"no answer in {timeout:.0f} s",
            "wall": time.perf_counter() - t0,
            "mb": 0.0,
        }


def execute(cases: list[dict], jobs: int, progress: bool, tracing: bool = False) -> list[dict]:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    scratch = Path(tempfile.mkdtemp(prefix="hostile-"))
    results: list[dict | None] = [None] * len(cases)
    # page cases first (slow, so they spread over the workers), then the rest in order
    order = sorted(range(len(cases)), key=lambda i: cases[i]["entry"] != "pages")
    lock = threading.Lock()
    position = [0]
    done = [0]
    t_start = time.perf_counter()

    def loop() -> None:
        slot = Slot(ctx, scratch, tracing)
        try:
            while True:
                with lock:
                    if position[0] >= len(order):
                        return
                    i = order[position[0]]
                    position[0] += 1
                case = cases[i]
                timeout = TIMEOUTS.get(case["entry"], DEFAULT_TIMEOUT)
                results[i] = slot.run(case, timeout)
                with lock:
                    done[0] += 1
                    if progress and (done[0] % 250 == 0 or done[0] == len(cases)):
                        print(
                            f"  {done[0]:,}/{len(cases):,} cases, {time.perf_counter() - t_start:.0f} s",
                            file=sys.stderr,
                            flush=True,
                        )
        finally:
            slot.stop()

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shutil.rmtree(scratch, ignore_errors=True)
    return results  # type: ignore[return-value]


# ==== the report =================================================================================
def _show_input(case: dict) -> str:
    if case["mode"] in ("cli", "subprocess"):
        args = " ".join(shlex.quote(_short(a, 50)) for a in case["argv"])
        return f"python -m roofline {args}  [{_short(case['desc'], 160)}]"
    return _short(case["desc"], 220)


def summarize(cases: list[dict], results: list[dict], regenerate) -> dict:
    """Counts per entry point; ``regenerate(task)`` rebuilds a case whose worker could not describe
    it (a hang or a crash)."""
    summary: dict = {}
    for case, result in zip(cases, results):
        if result["outcome"] == "skip":
            continue
        entry = summary.setdefault(
            case["entry"],
            {
                "cases": 0,
                "valid": 0,
                "clean_error": 0,
                **{c: 0 for c in FAIL_CLASSES},
                **{c: 0 for c in FLAG_CLASSES},
                "slowest_accepted_s": 0.0,
                "slowest_accepted": None,
                "peak_accepted_mb": 0.0,
                "peak_accepted": None,
                "slowest_any_s": 0.0,
                "total_wall_s": 0.0,
                "failures": defaultdict(list),
            },
        )
        entry["cases"] += 1
        outcome = result["outcome"]
        entry[outcome] += 1
        shown = result.get("input") or (_show_input(regenerate(case)) if outcome in FAIL_CLASSES else "")
        record = {
            "id": case["id"],
            "input": shown,
            "message": result["message"],
            "wall_s": round(result["wall"], 3),
            "mb": round(result["mb"], 1),
        }
        if outcome in FAIL_CLASSES:
            entry["failures"][outcome].append(record)
        entry["slowest_any_s"] = max(entry["slowest_any_s"], result["wall"])
        entry["total_wall_s"] += result["wall"]
        if outcome == "valid":
            if result["wall"] > entry["slowest_accepted_s"]:
                entry["slowest_accepted_s"], entry["slowest_accepted"] = result["wall"], record
            if result["mb"] > entry["peak_accepted_mb"]:
                entry["peak_accepted_mb"], entry["peak_accepted"] = result["mb"], record
            if result["wall"] > SLOW_S:
                entry["slow"] += 1
                entry["failures"]["slow"].append(record)
            if result["mb"] > BIG_MB:
                entry["big_memory"] += 1
                entry["failures"]["big_memory"].append(record)
    return summary


COLUMNS = [
    ("cases", "cases"),
    ("valid", "valid"),
    ("clean_error", "clean err"),
    ("traceback", "traceback"),
    ("uncaught", "page exc"),
    ("hang", "hang"),
    ("unclean_error", "bad error"),
    ("nan_json", "NaN JSON"),
    ("memory_error", "MemoryError"),
    ("crash", "crash"),
    ("slow", ">5 s"),
    ("big_memory", ">1 GB"),
]


def render(summary: dict, examples: int, wall: float, seed: int) -> str:
    header = ["entry point"] + [title for _, title in COLUMNS] + ["slowest ok s", "peak ok MB"]
    rows = []
    totals = Counter()
    for name in ENTRIES:
        if name not in summary:
            continue
        s = summary[name]
        rows.append(
            [name]
            + [f"{s[key]:,}" for key, _ in COLUMNS]
            + [f"{s['slowest_accepted_s']:.2f}", f"{s['peak_accepted_mb']:.1f}"]
        )
        totals.update({key: s[key] for key, _ in COLUMNS})
    rows.append(
        ["total"]
        + [f"{totals[key]:,}" for key, _ in COLUMNS]
        + [
            f"{max((s['slowest_accepted_s'] for s in summary.values()), default=0):.2f}",
            f"{max((s['peak_accepted_mb'] for s in summary.values()), default=0):.1f}",
        ]
    )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    out = [
        f"hostile run: seed {seed}, {totals['cases']:,} cases in {wall:.0f} s",
        "",
        line(header),
        line(["-" * w for w in widths]),
    ]
    out += [line(r) for r in rows[:-1]] + [line(["-" * w for w in widths]), line(rows[-1])]
    failures = [
        (name, cls, summary[name]["failures"][cls])
        for name in ENTRIES
        if name in summary
        for cls in (*FAIL_CLASSES, *FLAG_CLASSES)
        if summary[name]["failures"].get(cls)
    ]
    if failures:
        out += ["", f"failing inputs (first {examples} per class; rerun one with --seed {seed} --repro ID):"]
        for name, cls, items in failures:
            kinds = Counter(_kind(item["message"]) for item in items)
            out.append(
                f"\n[{name}] {cls}: {len(items)} case(s); by message: "
                + "; ".join(f"{n}× {k}" for k, n in kinds.most_common(6))
            )
            for item in items[:examples]:
                out.append(f"  {item['id']}  {item['wall_s']:.2f} s  {item['mb']:.0f} MB  {item['message']}")
                out.append(f"      {item['input']}")
    else:
        out += ["", "no failing inputs"]
    out += [
        "",
        "MB: the peak a case adds over its worker's memory (subprocess: the child's whole peak RSS); "
        f"a case over {SLOW_S:g} s or {BIG_MB:g} MB that was accepted counts under >5 s / >1 GB.",
    ]
    return "\n".join(out)


def _kind(message: str) -> str:
    """A message with its numbers and quoted values blanked: failures grouped by cause."""
    message = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", message)
    return re.sub(r"\d[\d_.e+-]*", "N", message)[:90]


def repro(case: dict) -> int:
    folder = Path(tempfile.gettempdir()) / "hostile-repro" / case["id"]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    materialize(case, folder)
    print(f"case {case['id']}: {case['desc']}")
    print(f"files in {folder}" if case.get("files") else "no files")
    if case["mode"] in ("cli", "subprocess"):
        argv = _argv(case, folder)
        print("command: python -m roofline " + shlex.join(argv))
        _stub_measurements()
        from roofline.cli import main

        try:
            return main(argv)
        except _WouldMeasure:
            print("(measure passed its checks; it would measure now)")
            return 0
    if case["mode"] == "parse_results":
        from roofline.measure.schema import parse_results

        print(f"parse_results(open({str(folder / 'results.json')!r}).read(), 'upload.json')")
        parse_results((folder / "results.json").read_text(errors="surrogateescape"), "upload.json")
        print("parsed")
        return 0
    if case["mode"] == "decode":
        from roofline.hardware import Hardware
        from roofline.models import ModelConfig
        from roofline.records import decode_record

        print(f"decode_record({_short(case['text'], 200)!r}, ...)")
        print(decode_record(case["text"], ModelConfig if case["param"] == "cmodel" else Hardware, case["param"]))
        return 0
    from urllib.parse import urlencode

    print(f"page {case['page']}?{urlencode(case['params'], doseq=True)[:2000]}")
    result = run_page(case, 120)
    print(result)
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / case["page"]), default_timeout=120)
    for key, values in case["params"].items():
        at.query_params[key] = values if len(values) > 1 else values[0]
    at.run()
    for e in at.exception:
        print(e.message)
        print("\n".join(e.stack_trace))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hostile_run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases in all (default 10,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=",".join(ENTRIES), help="entry points, comma-separated: " + ",".join(ENTRIES))
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--json", default=None, metavar="FILE", help="write the summary and every failing input here")
    parser.add_argument("--examples", type=int, default=5, help="failing inputs listed per class (default 5)")
    parser.add_argument(
        "--tracemalloc", action="store_true", help="also trace Python's allocations per case (4x slower)"
    )
    parser.add_argument("--repro", default=None, metavar="ID", help="rerun one case (e.g. config-00042) uncaptured")
    args = parser.parse_args(argv)
    only = [e.strip() for e in args.only.split(",") if e.strip()]
    unknown = [e for e in only if e not in ENTRIES]
    if unknown:
        parser.error(f"--only: unknown {', '.join(unknown)} (known: {', '.join(ENTRIES)})")
    commands = cli_commands()
    missing = sorted(set(commands) - set(BASELINES))
    if missing:
        print(f"note: no baseline for {', '.join(missing)}: its cases start from the bare command", file=sys.stderr)
    pages = page_keys()
    if args.repro:
        entry, _, index = args.repro.rpartition("-")
        if entry not in ENTRIES or not index.isdigit():
            parser.error(f"--repro: expected ENTRY-NNNNN, got {args.repro!r}")
        return repro(make_case(entry, int(index), args.seed, commands, pages))
    counts = plan(args.cases, only)
    # the workers make each case from (entry, index, seed): nothing large crosses the pipes
    cases = [{"entry": e, "index": i, "seed": args.seed, "id": f"{e}-{i:05d}"} for e in only for i in range(counts[e])]
    print(f"{len(cases):,} cases: " + ", ".join(f"{e} {n:,}" for e, n in counts.items()), file=sys.stderr)
    t0 = time.perf_counter()
    results = execute(cases, args.jobs, progress=True, tracing=args.tracemalloc)
    wall = time.perf_counter() - t0
    summary = summarize(cases, results, lambda t: make_case(t["entry"], t["index"], t["seed"], commands, pages))
    print(render(summary, args.examples, wall, args.seed))
    if args.json:
        document = {
            "seed": args.seed,
            "cases": len(cases),
            "wall_s": wall,
            "entries": {
                name: {k: (dict(v) if isinstance(v, defaultdict) else v) for k, v in s.items()}
                for name, s in summary.items()
            },
        }
        Path(args.json).write_text(json.dumps(document, indent=1, default=str))
    failed = sum(s[c] for s in summary.values() for c in (*FAIL_CLASSES, *FLAG_CLASSES))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
