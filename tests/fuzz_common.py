"""Shared pieces of the hostile-input suites: hostile values, the CLI runner and its one rule."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck
from hypothesis import strategies as st

from roofline.cli import main

ROOT = Path(__file__).resolve().parent.parent
LLAMA_CONFIG = json.loads((ROOT / "tests" / "data" / "hf_configs" / "llama-3.1-8b.json").read_text())
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


def _replace(document: object, path: tuple, leaf: object) -> object:
    """A copy of a JSON document with the value at ``path`` (keys and indices) replaced by ``leaf``."""
    if not path:
        return leaf
    copy = json.loads(json.dumps(document))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = leaf
    return copy


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


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(["NaN", "Infinity", "-Infinity"]),
)


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "roofline", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout
    )


def cli(*args: str) -> tuple[int, str, str]:
    """The command line in this process (a subprocess start costs more than the case)."""
    return _run_cli(list(args))
