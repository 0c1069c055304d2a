"""Which hardware (or which change) would make a workload fast: ranking, diagnosis, what-if.

Every number here comes from the same engine as the rest of the product: a device ranking is
the workload's ops evaluated on every device at once; "fits" is ``roofline.memory.footprint``;
a lever is the workload re-evaluated with that one change; a sensitivity is the speed-up from
doubling one resource alone.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from roofline.ceilings import dtype_words
from roofline.defaults import OBJECTIVES, TP_DEGREES
from roofline.engine import (
    REGIMES,
    Ceilings,
    OpTable,
    evaluate,
    evaluate_devices,
    regime_label,
    unpublished_peaks,
)
from roofline.format import fmt_seconds
from roofline.hardware import Hardware
from roofline.inference import StepResult, analyze_request, analyze_step
from roofline.memory import Footprint, footprint
from roofline.ops import step_ops
from roofline.settings import DEFAULT_SETTINGS, Settings
from roofline.workload import Workload


def _phase_parts(w: Workload) -> list[tuple[Workload, np.ndarray | float]]:
    """(step workload, how many times each of its sweep points runs) adding up to the workload."""
    if w.phase != "request":
        return [(w, 1.0)]
    parts: list[tuple[Workload, np.ndarray | float]] = [(w.step("prefill"), 1.0)]
    contexts, steps = w.decode_points()
    if contexts.size:
        parts.append((w.step("decode", contexts), steps))
    return parts


@dataclass(frozen=True)
class WorkloadTime:
    """A workload on one device: its time, regime, memory and most expensive ops."""

    time_s: float
    tokens_per_s: float
    bound: str
    step_phase: str  # the step whose ops are shown: the request's larger part
    footprint: Footprint
    step: StepResult

    @property
    def fits(self) -> bool:
        return bool(np.all(self.footprint.fits))

    def top_ops(self, n: int = 3) -> list[dict[str, object]]:
        rows = sorted(self.step.table.rows(), key=lambda r: r["time_s"], reverse=True)[:n]
        total = self.step.time_s
        return [
            {"name": r["name"], "time_s": r["time_s"], "share": r["time_s"] / total, "bound": r["bound"]} for r in rows
        ]


def workload_time(w: Workload, hw: Hardware, settings: Settings = DEFAULT_SETTINGS) -> WorkloadTime:
    if w.phase == "request":
        r = analyze_request(w, hw, settings)
        decode_larger = r.decode is not None and r.decode_time_s > r.ttft_s
        step = r.decode if decode_larger else r.prefill
        return WorkloadTime(r.e2e_s, w.produced_tokens / r.e2e_s, step.bound, step.workload.phase, r.footprint, step)
    step = analyze_step(w, hw, settings)
    return WorkloadTime(step.time_s, w.produced_tokens / step.time_s, step.bound, w.phase, step.footprint, step)


@dataclass
class RankRow:
    hardware: str
    name: str
    time_s: float | None
    tokens_per_s: float | None
    tokens_per_s_per_device: float | None
    tokens_per_s_per_watt: float | None
    bound: str | None
    fits: bool
    memory_needed_bytes: float
    capacity_bytes: float
    smallest_tp: int | None
    why_not: str | None
    notes: tuple[str, ...] = ()
    rank: int | None = None
    roofs: str = "datasheet"  # or "calibrated": the device's measured calibration was used
    # The device publishes no peak for a compute dtype: time_s is a lower bound from memory
    # bandwidth (ranked only for work that is memory-bound where peaks are known).
    time_is_lower_bound: bool = False
    ideal_time_s: float | None = None  # on the datasheet roofs, no engine work: the ideal bound
    math: str | None = None  # the dtype the linear layers computed in on the device ("auto" resolved)
    # What the ranking compares: "expected" where every device's time rests on the same kind of
    # roofs, else "ideal bound" (an engine's measured kernels on some devices and the datasheet on
    # others would favour the ones without measurements).
    ranked_on: str = "expected"

    @property
    def bound_label(self) -> str | None:
        return regime_label(self.bound, self.time_is_lower_bound) if self.bound else None

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        data["bound_label"] = self.bound_label
        return data


def rank(
    w: Workload, hardware: list[Hardware], objective: str = "latency", settings: Settings = DEFAULT_SETTINGS
) -> list[RankRow]:
    """Every device evaluated on the workload, sorted by the objective.

    Devices that cannot run it (no kernels for its formats, no link for the TP group) or where
    it does not fit come last, each with its reason. A device that publishes no peak for a
    compute dtype has a lower-bound time (memory bandwidth, link, kernel floor): it is ranked,
    labelled, where the workload is memory-bound on most devices whose peaks are known (there the
    compute term it lacks would not decide), and left unranked with its reason otherwise. Devices
    are grouped by the precision they run (fp16 where a part lacks bf16) and each group is
    evaluated at once."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective: {objective!r} is not allowed; allowed: {', '.join(OBJECTIVES)}")
    total = np.full(len(hardware), np.nan)
    ideal_total = np.full(len(hardware), np.nan)
    regime_time = np.zeros((len(REGIMES), len(hardware)))
    runs: dict[int, tuple[Workload, list[str]] | str] = {}
    for i, hw in enumerate(hardware):
        try:
            runs[i] = w.on(hw)
        except ValueError as exc:
            runs[i] = str(exc)
    groups: dict[object, tuple[Workload, list[int]]] = {}
    roofs: dict[int, str] = {}
    unknown: dict[int, set[str]] = {}  # device -> dtypes it publishes no peak for
    for i, run in runs.items():
        if not isinstance(run, str):
            groups.setdefault(run[0].precision, (run[0], []))[1].append(i)
    for run, members in groups.values():
        ceilings = [settings.ceilings(hardware[i], run.tp, run.cuda_graphs) for i in members]
        roofs.update({i: c.source for i, c in zip(members, ceilings)})
        group_total = np.zeros(len(members))
        group_ideal = np.zeros(len(members))
        for part, steps in _phase_parts(run):
            ops = step_ops(part)
            for i, missing in zip(members, unpublished_peaks(ops, ceilings)):
                unknown.setdefault(i, set()).update(missing)
            step_time, by_regime, ideal = evaluate_devices(ops, ceilings, with_ideal=True)
            group_total += (step_time * steps).reshape(len(members), -1).sum(axis=1)
            group_ideal += (ideal * steps).reshape(len(members), -1).sum(axis=1)
            regime_time[:, members] += (by_regime * steps).reshape(len(REGIMES), len(members), -1).sum(axis=2)
        total[members] = group_total
        ideal_total[members] = group_ideal
    bounds = [
        REGIMES[int(np.argmax(regime_time[:, i]))]
        for i in range(len(hardware))
        if not unknown.get(i) and np.isfinite(total[i])
    ]
    # Lower bounds rank only where the compute term they lack would not decide.
    lower_bounds_rank = not bounds or sum(b == "compute" for b in bounds) < len(bounds) / 2
    rows = []
    for i, hw in enumerate(hardware):
        run = runs[i]
        if isinstance(run, str):
            rows.append(RankRow(hw.id, hw.name, None, None, None, None, None, False, 0.0, 0.0, None, run))
            continue
        runnable, notes = run
        fp = footprint(runnable, hw, settings)
        need, fits = float(np.max(fp.total_bytes)), bool(np.all(fp.fits))
        why = None
        time_s = float(total[i]) if np.isfinite(total[i]) else None
        lower = bool(unknown.get(i)) and time_s is not None
        if lower:
            missing = dtype_words(sorted(unknown[i]))
            if lower_bounds_rank:
                notes = [*notes, f"time is a lower bound ({fmt_seconds(time_s)} or more): no published {missing} peak"]
            else:
                why = (
                    f"no published {missing} peak and this workload is compute-bound where peaks are known: "
                    f"its time here is unknown (at least {fmt_seconds(time_s)})"
                )
                time_s, lower = None, False
        if time_s is None and why is None:
            why = f"TP={w.tp}: {hw.group_link(w.tp)[1]}"
        elif time_s is not None and not fits:
            where = f"fits at TP={fp.smallest_tp}" if fp.smallest_tp else f"no TP up to {TP_DEGREES[-1]} fits"
            why = f"needs {need / 1e9:,.1f} GB per device of {fp.capacity_bytes / 1e9:,.1f} GB usable; {where}"
        per_device = w.produced_tokens / time_s / w.tp if time_s else None
        rows.append(
            RankRow(
                hardware=hw.id,
                name=hw.name,
                time_s=time_s,
                tokens_per_s=w.produced_tokens / time_s if time_s else None,
                tokens_per_s_per_device=per_device,
                tokens_per_s_per_watt=per_device / hw.tdp_w if per_device and hw.tdp_w else None,
                bound=REGIMES[int(np.argmax(regime_time[:, i]))] if time_s else None,
                fits=fits and time_s is not None,
                memory_needed_bytes=need,
                capacity_bytes=fp.capacity_bytes,
                smallest_tp=fp.smallest_tp,
                why_not=why,
                notes=tuple(notes),
                roofs=roofs.get(i, "datasheet"),
                time_is_lower_bound=lower,
                ideal_time_s=float(ideal_total[i]) if time_s is not None and np.isfinite(ideal_total[i]) else None,
                math=runnable.precision.act_dtype,
            )
        )
    ranked = [r for r in rows if r.time_s is not None]
    basis = "expected" if len({r.roofs for r in ranked}) <= 1 else "ideal bound"
    for r in rows:
        r.ranked_on = basis

    def seconds(r: RankRow) -> float:  # what the ranking compares (0 for a device with no time)
        return r.time_s or 0.0 if basis == "expected" or r.ideal_time_s is None else r.ideal_time_s

    watts = {r.hardware: hardware[[h.id for h in hardware].index(r.hardware)].tdp_w for r in rows}
    key = {
        "latency": seconds,
        "throughput": lambda r: seconds(r) * w.tp,
        "per-watt": lambda r: seconds(r) * w.tp * (watts[r.hardware] or np.inf),
    }[objective]
    usable = sorted((r for r in rows if r.fits and (objective != "per-watt" or r.tokens_per_s_per_watt)), key=key)
    rest = sorted((r for r in rows if r not in usable), key=lambda r: (r.time_s is None, r.time_s and key(r)))
    for position, row in enumerate(usable, start=1):
        row.rank = position
    return usable + rest


def sensitivity(w: Workload, hw: Hardware, settings: Settings = DEFAULT_SETTINGS) -> dict[str, float]:
    """Speed-up of the workload from 2x of each resource alone (1.0 = that resource does not bind).
    Capacity moves no time, so its entry is always 1.0."""
    base = workload_time(w, hw, settings).time_s
    changes = {
        "compute": replace(settings, compute_scale=settings.compute_scale * 2),
        "memory_bandwidth": replace(settings, memory_scale=settings.memory_scale * 2),
        "interconnect": replace(settings, link_scale=settings.link_scale * 2),
        "launch_overhead": replace(
            settings,
            launch_overhead_s=settings.launch_overhead_s / 2,
            graph_launch_overhead_s=settings.graph_launch_overhead_s / 2,
        ),
    }
    out = {name: base / workload_time(w, hw, changed).time_s for name, changed in changes.items()}
    out["memory_capacity"] = 1.0
    return out


@dataclass(frozen=True)
class Lever:
    name: str
    time_s: float
    tokens_per_s: float
    bound: str
    fits: bool
    slower_because: str = ""  # where a change slows the step: the op that grew most, and on what roofs

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def slower_because(before: WorkloadTime, after: WorkloadTime) -> str:
    """Why a change that should help slows the step: the op whose time grew most (an op new to the
    step grows from nothing), its two times and the roofs they rest on; '' unless the step is
    slower, the two steps are of one phase, and that op's growth is at least half the step's."""
    if after.time_s <= before.time_s * 1.001 or after.step_phase != before.step_phase:
        return ""
    old = {r["name"]: r["time_s"] for r in before.step.table.rows()}
    rows = after.step.table.rows()
    growth, i = max(((r["time_s"] - old.get(r["name"], 0.0), i) for i, r in enumerate(rows)), default=(0.0, -1))
    row = rows[i] if i >= 0 else None
    if row is None or growth < 0.5 * (after.step.time_s - before.step.time_s):
        return ""
    was = fmt_seconds(old[row["name"]]) if row["name"] in old else "none"
    return f"slower: {row['name']} {was} -> {fmt_seconds(row['time_s'])} on {row['rests_on']}"


def levers(w: Workload, hw: Hardware, base: WorkloadTime, settings: Settings = DEFAULT_SETTINGS) -> list[Lever]:
    """The changes that move the regime of ``base`` (the workload's time as it is), each evaluated."""
    p, m, bound = w.precision, w.model, base.bound
    candidates: list[tuple[str, Workload, Settings]] = []
    if bound == "memory":
        candidates.append(("2× memory bandwidth", w, replace(settings, memory_scale=settings.memory_scale * 2)))
        if p.weight_dtype in ("bf16", "fp16", "fp32"):
            candidates.append(("fp8 weights", replace(w, precision=replace(p, weight_dtype="fp8")), settings))
            candidates.append(("int4 weights (W4A16)", replace(w, precision=replace(p, weight_dtype="int4")), settings))
        if p.kv_dtype in ("bf16", "fp16", "fp32"):
            candidates.append(("fp8 KV cache", replace(w, precision=replace(p, kv_dtype="fp8")), settings))
        candidates.append((f"batch {int(np.max(w.batch)) * 4} (4×)", replace(w, batch=np.max(w.batch) * 4), settings))
        if not m.mla and m.num_kv_heads > 1 and m.num_kv_heads % 2 == 0:
            fewer = m.model_copy(update={"num_kv_heads": m.num_kv_heads // 2})
            candidates.append(
                (f"{m.num_kv_heads // 2} KV heads instead of {m.num_kv_heads}", replace(w, model=fewer), settings)
            )
    elif bound == "compute":
        candidates.append(("2× peak FLOPS", w, replace(settings, compute_scale=settings.compute_scale * 2)))
        if p.math_on(hw).act_dtype in ("bf16", "fp16", "fp32") and "fp8" in hw.peak_tflops.as_dict():
            fp8 = replace(p, weight_dtype="fp8", act_dtype="fp8")
            candidates.append(("fp8 math (W8A8)", replace(w, precision=fp8), settings))
        if w.attention == "naive":
            candidates.append(("fused (Flash) attention", replace(w, attention="flash"), settings))
    elif bound == "communication":
        candidates.append(("2× interconnect bandwidth", w, replace(settings, link_scale=settings.link_scale * 2)))
        if w.tp > 1:  # with as many attention ranks as still divide it
            half = replace(w, tp=w.tp // 2, attention_dp=math.gcd(w.tp // 2, w.attention_dp))
            ranks = f" ({half.attention_dp} attention ranks)" if half.attention_dp > 1 else ""
            candidates.append((f"TP={half.tp}{ranks}", half, settings))
    else:
        if not w.cuda_graphs:
            candidates.append(("CUDA graphs", replace(w, cuda_graphs=True), settings))
        half = replace(
            settings,
            launch_overhead_s=settings.launch_overhead_s / 2,
            graph_launch_overhead_s=settings.graph_launch_overhead_s / 2,
        )
        candidates.append(("fused kernels (half the launches)", w, half))
        candidates.append((f"batch {int(np.max(w.batch)) * 4} (4×)", replace(w, batch=np.max(w.batch) * 4), settings))
    out = []
    for name, cw, cs in candidates:
        try:
            result = workload_time(cw, hw, cs)
        except ValueError:  # the change is not valid for this model or device
            continue
        # A larger batch's step is longer by design; every other lever should not slow it.
        why = "" if np.max(cw.batch) != np.max(w.batch) else slower_because(base, result)
        out.append(Lever(name, result.time_s, result.tokens_per_s, result.bound, result.fits, why))
    return out


def diagnose(w: Workload, hw: Hardware, settings: Settings = DEFAULT_SETTINGS) -> dict[str, object]:
    """The regime, the three most expensive ops and the evaluated levers, in plain words."""
    base = workload_time(w, hw, settings)
    moves = levers(w, hw, base, settings)
    lower = base.step.table.is_lower_bound
    label = regime_label(base.bound, lower)
    words = [
        f"On {hw.name} this {w.phase} is {label} "
        f"({'at least ' if lower else ''}{fmt_seconds(base.time_s)}; the {base.step_phase} step decides it)."
    ]
    if lower:
        words.append(f"Times here are lower bounds: {base.step.table.rests_on()}.")
    top = base.top_ops()
    words.append("Most expensive ops: " + "; ".join(f"{o['name']} {o['share']:.0%} ({o['bound']})" for o in top) + ".")
    for lever in moves:
        words.append(
            f"{lever.name}: {fmt_seconds(base.time_s)} -> {fmt_seconds(lever.time_s)}"
            + (f" ({lever.tokens_per_s:,.0f} tokens/s)" if "batch" in lever.name else "")
            + ("" if lever.fits else ", does not fit")
            + (f" ({lever.slower_because})" if lever.slower_because else "")
        )
    return {
        "bound": base.bound,
        "bound_label": label,
        "time_is_lower_bound": lower,
        "time_s": base.time_s,
        "tokens_per_s": base.tokens_per_s,
        "fits": base.fits,
        "top_ops": top,
        "levers": [lv.to_json() for lv in moves],
        "summary": words,
    }


def advise(
    w: Workload,
    hardware: list[Hardware],
    target: Hardware,
    objective: str = "latency",
    settings: Settings = DEFAULT_SETTINGS,
) -> dict[str, object]:
    ranking = rank(w, hardware, objective, settings)
    note = settings.roofs_note(target)  # the roofs the expected times read on the diagnosed device
    return {
        **w.describe(),
        "objective": objective,
        "engine": settings.engine,
        "engine_note": note if settings.engine != "ideal" else "",
        "ranking": [r.to_json() for r in ranking],
        "fits_anywhere": any(r.fits for r in ranking),
        "diagnosis": {"hardware": target.id, **diagnose(w, target, settings)},
        "sensitivity": sensitivity(w, target, settings),
    }


def ops_on(w: Workload, ceilings: Ceilings) -> OpTable:
    """The op table of the workload's deciding step on some ceilings (for plots)."""
    if w.phase == "request":
        contexts, _ = w.decode_points()
        step = w.step("decode", int(contexts[contexts.size // 2])) if contexts.size else w.step("prefill")
        return evaluate(step_ops(step), ceilings)
    return evaluate(step_ops(w), ceilings)
