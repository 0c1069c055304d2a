"""Which versions of InferenceX's benchmark scripts were in effect on a run's measured date.

``engine_db/inferencex_kv.toml`` (the KV-cache format each script version set) and
``engine_db/inferencex_setup.toml`` (each version's deciding lines), written by
``scripts/inferencex_kv.py`` from SemiAnalysisAI/InferenceX (Apache-2.0), list every version of
every script by commit date, with the commits that removed one. ``scripts_in_effect`` picks, for a
run's model, precision, GPU and engine, the versions of each script's latest day on or before the
run's date, leaving out a script removed by then (``removed_on``).
"""

from __future__ import annotations

import tomllib
from datetime import date as _date
from functools import cache
from pathlib import Path

INFERENCEX_KV = Path(__file__).resolve().parent.parent / "engine_db" / "inferencex_kv.toml"
INFERENCEX_SETUP = INFERENCEX_KV.with_name("inferencex_setup.toml")
# The sample's names -> InferenceX's script names (its DeepSeek runs are DeepSeek-R1-0528, which
# some exports name DeepSeek-V3: the same architecture).
INFERENCEX_MODELS = {
    "meta-llama/Llama-3.1-70B": "70b",
    "deepseek-ai/DeepSeek-R1": "dsr1",
    "deepseek-ai/DeepSeek-V3": "dsr1",
    "openai/gpt-oss-120b": "gptoss",
    "moonshotai/Kimi-K2.5": "kimik2.5",
}
REMOVED = ("removed", "")  # a commit that removed a script (inferencex_kv.toml, inferencex_setup.toml)
RESTORED_WITHIN_DAYS = 7  # a script removed and back within this many days was never gone (a branch)


@cache
def inferencex_kv_scripts() -> tuple[dict, ...]:
    with open(INFERENCEX_KV, "rb") as f:
        return tuple(tomllib.load(f).get("script", ()))


def removed_on(versions: list, date: str) -> bool:
    """Whether a script was removed on ``date``: its last change on or before that day removed it,
    and no version came back within ``RESTORED_WITHIN_DAYS``. A commit's date does not tell when a
    change reached the main branch of a history with branches (InferenceX's 70B scripts are
    "removed" on 2025-10-29 and back the next day), while a removal that lasts is real (its B200
    SGLang and vLLM Slurm scripts were removed on 2025-10-01, "we never used slurm for b200 vllm or
    b200 sglang", and back on 2025-12-31)."""
    past = [d for d, _, _ in versions if d <= date]
    if not past:
        return False
    last = max(past)
    if not all(digest in REMOVED for d, _, digest in versions if d == last):
        return False
    back = [d for d, _, digest in versions if d > last and digest not in REMOVED]
    return not back or (_date.fromisoformat(min(back)) - _date.fromisoformat(last)).days > RESTORED_WITHIN_DAYS


def scripts_in_effect(scripts: tuple[dict, ...], key: tuple, date: str) -> dict[str, list]:
    """For every script of ``key`` (model, precision, GPU, engine as InferenceX names them) not
    removed on ``date``, its versions of the latest day on or before ``date`` (two on one day must
    agree where they are read)."""
    found = {}
    for script in scripts:
        if (script["model"], script["precision"], script["gpu"], script["engine"]) != key:
            continue
        if removed_on(script["versions"], date):
            continue
        before = [v for v in script["versions"] if v[2] not in REMOVED and v[0] <= date]
        if before:
            found[script["path"]] = [v for v in before if v[0] == max(d for d, _, _ in before)]
    return found


def where_read(date: str, found: dict[str, list]) -> str:
    listed = "; ".join(f"{path} at {vs[-1][1][:9]} ({vs[-1][0]})" for path, vs in sorted(found.items()))
    return f"InferenceX's script on {date}: {listed}"
