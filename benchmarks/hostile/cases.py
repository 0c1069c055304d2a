"""One case from (entry, index, seed), and how many cases each entry point gets."""

from __future__ import annotations

import random
import sys

from benchmarks.hostile.cli_cases import cli_argv
from benchmarks.hostile.data_cases import page_case, records_case, results_case
from benchmarks.hostile.file_cases import config_case, toml_case
from benchmarks.hostile.values import PAGE_SHARE, SHARES


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

    # Measuring or profiling for real would time this machine, not the input handling: every
    # check before it runs as it is; the run itself is stubbed.
    for name, attrs in (
        ("roofline.measure.suite", ("run_suite",)),
        ("roofline.measure.training", ("measure",)),
        ("roofline.measure.loading", ("measure",)),
        ("roofline.profile.models", ("project_step", "transformers_step")),
    ):
        module = types.ModuleType(name)
        for attr in attrs:
            setattr(module, attr, would_measure)
        sys.modules[name] = module
