"""Command-line cases: every subcommand's options, read from the real parser, given hostile values."""

from __future__ import annotations

import argparse
import math
import random

from benchmarks.hostile.values import NUMBERS, ROOT, STRINGS, _short


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
        if " ".join(path) not in NOT_GENERATED:
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
# Commands over whole datasets or the network, not a single input: `tables import` downloads and
# converts a database from PyPI; `validate` scores the whole silicon sample (a minute and more).
# Their bad inputs are tests of their own (tests/test_tables.py, tests/test_validate.py).
NOT_GENERATED = {"tables import", "validate"}
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
