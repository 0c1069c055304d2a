"""config.json and TOML cases: every key of the shipped examples mutated to hostile values."""

from __future__ import annotations

import base64
import contextlib
import json
import random
import re

from benchmarks.hostile.cli_cases import BASELINES, _with
from benchmarks.hostile.values import ROOT, _deep, _dumps, _leaf, _short

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
