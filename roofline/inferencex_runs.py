"""Whether an InferenceX run decoded speculatively, read from the configurations that ran it.

InferenceX's exports in the silicon sample do not say: a configuration with MTP (DeepSeek-R1's
multi-token-prediction head drafting tokens that the model verifies in one step) and its plain twin
export the same fields, often the same image, shape and day. Its repository says which ran:
``engine_db/inferencex_runs.toml``, written by ``scripts/inferencex_runs.py`` from
SemiAnalysisAI/InferenceX (Apache-2.0), holds every version of the single-node configurations of the
models roofline scores (each search-space entry with its ``spec-decoding``) and every commit that
added ``perf-changelog.yaml`` entries, with the configurations they reran.

A run is read in this order (``run_decoding``):

0. A DeepSeek run on more GPUs than one node, or on a rack-scale system: either (``MULTI_NODE``).
1. Measured before the first configuration with speculative decoding took effect: plain.
2. The commit that started it: the nearest whose time is ``TRIGGER_WINDOW_S`` or less before the
   measured time (the exports' measured time is the workflow's start, seconds after the merge)
   and that reran a configuration matching the run; where the source records the day only (a time
   of midnight, or a date), every such commit of that day. A configuration matches in its version
   of that moment, on model, precision, GPU, engine, image (where the row names one), prompt and
   output tokens, TP, EP and clients.
3. No such commit matches: the configurations in effect at the measured time that match the run.

Their ``spec-decoding``: all "none", plain; all one kind, that kind ("mtp"); both, "either" (the
export holds one row and does not say which ran); no configuration matching, None (not
established).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

from roofline.benchmark_clients import measured_stamp
from roofline.inferencex_scripts import INFERENCEX_MODELS
from roofline.sample_clients import recorded_clients

INFERENCEX_RUNS = Path(__file__).resolve().parent.parent / "engine_db" / "inferencex_runs.toml"
TRIGGER_WINDOW_S = 300.0
PLAIN, EITHER = "plain", "either"
# The reasons why_speculative gives start so (the report counts runs by reason).
SPECULATIVE_REASON, MAYBE_REASON = "speculative decoding", "speculative decoding or not"
_IMAGE = re.compile(r"image=([^;]+)|;\s*([\w.\-#]+(?:/[\w.\-#]+)+:[\w.\-]+)\s*$")  # a named field, or a bare last one
# A run on more GPUs than one node (or on a rack-scale system, which InferenceX runs across trays):
# its multi-node benchmarks took MTP on and off (benchmark-multinode-tmpl.yml's mtp-mode, from 2025),
# and the configurations read here are single-node ones. Only DeepSeek-R1 has an MTP head.
NODE_GPUS = 8
RACK_SYSTEMS = ("gb200", "gb300")
MTP_MODELS = ("dsr1",)
MULTI_NODE = (
    "a multi-node run: InferenceX ran its multi-node benchmarks with MTP on and off "
    "(benchmark-multinode-tmpl.yml's mtp-mode), and roofline reads its single-node configurations only"
)


@dataclass(frozen=True)
class Decoding:
    kind: str  # PLAIN, a spec-decoding name ("mtp") or EITHER
    where: str  # the configurations (and the commit) that say so
    multi_node: bool = False  # EITHER for a multi-node run (MULTI_NODE)

    @property
    def speculative(self) -> bool | None:
        """True for a speculative kind, False for plain, None for either."""
        return None if self.kind == EITHER else self.kind != PLAIN


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


@cache
def _runs() -> dict:
    with open(INFERENCEX_RUNS, "rb") as f:
        data = tomllib.load(f)
    for c in data.get("config", ()):
        c["_since"] = _time(c["since"])
        c["_until"] = _time(c["until"]) if c["until"] else None
    by_day: dict = {}
    for t in data.get("trigger", ()):
        t["_time"] = _time(t["time"])
        by_day.setdefault(t["_time"].date(), []).append(t)
    data["_by_day"] = by_day
    data["_since"] = _time(data["speculation_since"])
    return data


def _in_effect(key: str | None, when: datetime) -> list[dict]:
    return [
        c
        for c in _runs().get("config", ())
        if (key is None or c["key"] == key) and c["_since"] <= when and (c["_until"] is None or when < c["_until"])
    ]


def _number(row: dict[str, str], field: str) -> int | None:
    try:
        return int(float(row.get(field) or ""))
    except (ValueError, OverflowError):
        return None


def _kinds(configs: list[dict], row: dict[str, str], clients: int) -> tuple[set[str], set[str]]:
    """The spec-decoding values of the shapes of ``configs`` that match the run, and their keys."""
    source = row.get("silicon_data_source") or ""
    image = (m[1] or m[2]).strip().replace("#", "/") if (m := _IMAGE.search(source)) else None
    want = (
        INFERENCEX_MODELS.get(row.get("model_path", "")),
        row.get("precision"),
        (row.get("system") or "").removesuffix("_sxm"),
        row.get("backend"),
    )
    tp, ep, dp = _number(row, "tp_size"), _number(row, "moe_ep_size") or 1, _number(row, "attention_dp_size") or 1
    isl, osl = _number(row, "isl"), _number(row, "osl")
    kinds, keys = set(), set()
    for c in configs:
        if (c["model"], c["precision"], c["gpu"], c["engine"]) != want or (image and c["image"] != image):
            continue
        for s_isl, s_osl, s_tp, s_ep, _, spec, s_clients in c["shapes"]:
            if (s_isl, s_osl, s_ep) == (isl, osl, ep) and s_tp in (tp, (tp or 0) * dp) and clients in s_clients:
                kinds.add(spec)
                keys.add(c["key"])
    return kinds, keys


def run_decoding(row: dict[str, str]) -> Decoding | None:
    """Plain or speculative decoding, as the InferenceX configurations that ran ``row`` say
    (module notes); None for another source, a model InferenceX's configurations do not name, or a
    run no configuration matches."""
    text, clients = measured_stamp(row), recorded_clients(row)
    model = INFERENCEX_MODELS.get(row.get("model_path", ""))
    if text is None or clients is None or model is None:
        return None
    gpus = (_number(row, "tp_size") or 1) * max(_number(row, "attention_dp_size") or 1, 1)
    if gpus > NODE_GPUS or (row.get("system") or "") in RACK_SYSTEMS:
        return Decoding(EITHER, MULTI_NODE, multi_node=True) if model in MTP_MODELS else None
    try:
        when = _time(text if "T" in text else text + "T00:00:00Z")
    except ValueError:  # not a time: nothing to read
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    day_only = (when.hour, when.minute, when.second, when.microsecond) == (0, 0, 0, 0)  # a date, no time
    data = _runs()
    if (when + timedelta(days=1) if day_only else when) <= data["_since"]:
        first = data["speculation_since_commit"][:9]
        return Decoding(
            PLAIN,
            f"measured before InferenceX's first speculative configuration ({first}, {data['speculation_since'][:10]})",
        )
    if day_only:
        triggers = data["_by_day"].get(when.date(), [])
    else:
        # The nearest change before the measured time that reran a configuration of this run's shape
        # (two changes can land within the window: 2026-03-27 07:59:49 and 08:01:51).
        triggers = sorted(
            (
                t
                for t in data["_by_day"].get(when.date(), [])
                + data["_by_day"].get((when - timedelta(days=1)).date(), [])
                if 0.0 <= (when - t["_time"]).total_seconds() <= TRIGGER_WINDOW_S
            ),
            key=lambda t: when - t["_time"],
        )
    kinds, keys, how = set(), set(), ""
    for t in triggers:
        found = [c for key in t["keys"] for c in _in_effect(key, t["_time"])]
        k, names = _kinds(found, row, clients)
        kinds |= k
        keys |= names
        if names and not day_only:
            how = f"rerun by {t['commit'][:9]} ({t['time']})"
            break
        if names:
            how = f"rerun by {t['commit'][:9]} ({t['time']})" if len(triggers) == 1 else f"rerun on {when.date()}"
    if not keys:
        kinds, keys = _kinds(_in_effect(None, when + timedelta(days=1) if day_only else when), row, clients)
        how = f"in effect on {when.date()}"
    if not keys:
        return None
    spec = sorted(kinds - {"none"})
    kind = PLAIN if not spec else EITHER if "none" in kinds else "/".join(spec)
    return Decoding(kind, f"InferenceX's configurations {', '.join(sorted(keys))} ({how})")


def why_speculative(row: dict[str, str]) -> str | None:
    """Why a run is not scored: its configuration decoded speculatively, which roofline does not
    simulate under load and the sample records no acceptance for, or may have; None otherwise."""
    decoding = run_decoding(row)
    if decoding is None or decoding.speculative is False:
        return None
    if decoding.speculative:
        return f"{SPECULATIVE_REASON} ({decoding.kind}: its configuration set it; the row does not say)"
    if decoding.multi_node:
        return f"{MAYBE_REASON} (a multi-node run, which InferenceX ran with and without MTP)"
    return f"{MAYBE_REASON} (a plain and a speculative configuration ran its shape; the row does not say)"
