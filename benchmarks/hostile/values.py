"""Hostile values: the numbers, strings and leaves the cases are made of, and the run's limits."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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
