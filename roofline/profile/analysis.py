"""A profile on a device's roofs: each op's intensity, achieved rate, the roof at its intensity
and its regime; the step's time split by regime (the idle gaps are overhead, measured); the top
ops by time; and what would move the step. Plain data, for the page, the CLI and ``--json``."""

from __future__ import annotations

from roofline.calibration import linear_bucket
from roofline.engine import REGIME_LABELS, REGIMES, Ceilings
from roofline.profile.record import Profile, ProfiledOp, calibration_class


def _peak(ceilings: Ceilings, dtype: str) -> float:
    """The peak of the op's dtype, else FP32's, else the slowest published (a CPU profile on a
    device whose datasheet has no such dtype still gets a roof, and says which)."""
    if ceilings.has_peak(dtype):
        return ceilings.peak(dtype)
    if ceilings.has_peak("fp32"):
        return ceilings.peak("fp32")
    return min(ceilings.peak_flops_per_s.values())


def dispatch_floor_s(profile: Profile, ceilings: Ceilings, level: str = "aten", rank: int | None = None) -> float:
    """The least time one dispatch takes: the device's kernel floor (on a CPU profile, the
    measured dispatch of the cheapest op), or less where this profile measured a dispatch faster
    (a kernel shorter than the floor, a view cheaper than an add), so the floor stays a floor."""
    per = [o.time_s / o.launches for o in profile.level(level, rank) if o.launches > 0 and o.time_s > 0]
    return min([ceilings.kernel_floor_s, *per])


def op_terms(op: ProfiledOp, ceilings: Ceilings, floor_s: float | None = None) -> dict[str, float]:
    """The op's time on each roof, as the engine prices an op (``roofline.engine``): its FLOPs at
    the peak, its bytes at the memory bandwidth, and its dispatches (kernels on a GPU, innermost
    host ops on a CPU) at the least time one takes (``floor_s``, default the device's kernel floor;
    ``dispatch_floor_s`` gives a profile's)."""
    floor_s = ceilings.kernel_floor_s if floor_s is None else floor_s
    return {
        "compute": op.flops / _peak(ceilings, op.dtype),
        "memory": op.bytes / ceilings.memory_bandwidth_bytes_per_s,
        "overhead": op.launches * floor_s,
    }


def op_regime(op: ProfiledOp, ceilings: Ceilings, floor_s: float | None = None) -> str:
    """Communication for collectives; overhead for an op that computes and moves nothing (its
    time is all dispatch) or too little to outlast the floor of its dispatches (an add on a
    hundred numbers takes a dispatch, not bandwidth); else the roof its FLOPs and bytes meet first."""
    if op.op_class == "communication":
        return "communication"
    if op.flops <= 0 and op.bytes <= 0:
        return "overhead"
    terms = op_terms(op, ceilings, floor_s)
    return max(terms, key=terms.get)


def calibrated_s(op: ProfiledOp, ceilings: Ceilings) -> float | None:
    """The op's time on the calibration's achievable roofs (fitted on kernels measured on the
    device), where the calibration has a fit for its class; None otherwise."""
    cal = ceilings.roof_source
    if getattr(cal, "kind", None) != "calibrated" or op.count <= 0:
        return None
    op_class, shape = calibration_class(op)
    if op_class == "linear":
        op_class = linear_bucket(shape.get("m", 1))
    fit = cal.fits.get(op_class)
    if fit is None:
        return None
    return float(fit.predict(op.flops / op.count, op.bytes / op.count)) * op.count


def op_rows(profile: Profile, ceilings: Ceilings, level: str = "aten", rank: int | None = None) -> list[dict]:
    """One row per op of ``level``, longest first: measured time beside the roof's bound."""
    rows = []
    wall = profile.wall_s if rank is None else next(r.wall_s for r in profile.ranks if r.rank == rank)
    floor_s = dispatch_floor_s(profile, ceilings, level, rank)
    for op in profile.level(level, rank):
        peak = _peak(ceilings, op.dtype)
        bw = ceilings.memory_bandwidth_bytes_per_s
        bound_s = max(op_terms(op, ceilings, floor_s).values())
        link = ceilings.link_bandwidth_bytes_per_s
        if op.op_class == "communication" and link:  # a collective rests on the link, not on memory
            bound_s = op.comm_bytes / link + op.count * ceilings.collective_latency_s
        calibrated = calibrated_s(op, ceilings) if level == "aten" else None
        bound_s = calibrated if calibrated is not None else bound_s
        source = ceilings.source if ceilings.roof_source is None else "peak and bandwidth"
        intensity = op.intensity
        roof = min(peak, bw * intensity) if intensity is not None else peak
        rows.append(
            {
                "name": op.name,
                "shapes": op.shapes,
                "op_class": op.op_class,
                "dtype": op.dtype,
                "count": op.count,
                "time_s": op.time_s,
                "share_of_step": op.time_s / wall if wall > 0 else 0.0,
                "flops": op.flops,
                "bytes": op.bytes,
                "comm_bytes": op.comm_bytes,
                "intensity": intensity,
                "achieved_tflops": op.achieved_flops_per_s / 1e12,
                "roof_tflops": roof / 1e12,
                "roof_time_s": bound_s,  # the calibrated time where the roofs carry a fit for its class
                "roofs": "calibrated" if calibrated is not None else source,
                "fraction_of_roof": bound_s / op.time_s if op.time_s > 0 else None,
                "bound": op_regime(op, ceilings, floor_s),
            }
        )
    return rows


def regime_split(profile: Profile, ceilings: Ceilings, rank: int | None = None) -> dict[str, float]:
    """The step's wall time by regime, per step: the aten ops' measured time by their regime,
    scaled to the time the device was busy, and the idle gaps as overhead. Adds up to the wall time."""
    summary = profile.ranks[0] if rank is None else next(r for r in profile.ranks if r.rank == rank)
    split = dict.fromkeys(REGIMES, 0.0)
    floor_s = dispatch_floor_s(profile, ceilings, "aten", summary.rank)
    for op in profile.level("aten", summary.rank):
        split[op_regime(op, ceilings, floor_s)] += op.time_s
    measured = sum(split.values())
    scale = summary.busy_s / measured if measured > 0 else 0.0
    split = {r: v * scale for r, v in split.items()}
    split["overhead"] += summary.idle_s
    return split


def advice(split: dict[str, float], top: list[dict], activity: str = "cuda") -> list[str]:
    """What would move the step, from the regime that holds most of its time (``activity``: whose
    time the ops carry, a GPU's kernels or a CPU's ops)."""
    total = sum(split.values())
    if total <= 0:
        return ["nothing ran in the profiled steps"]
    ranked = sorted(split.items(), key=lambda kv: kv[1], reverse=True)
    out = []
    tips = {
        "overhead": (
            "the device sits idle between ops: the host's dispatch sets the pace. CUDA graphs or "
            "torch.compile cut the per-op cost; a larger batch does more work per launch."
            if activity == "cuda"
            else "each op's dispatch, not its work, sets the pace: fewer, larger ops (torch.compile fuses "
            "them) or a larger batch doing more work per op."
        ),
        "memory": "more bandwidth (HBM3e parts), fewer bytes (lower-precision weights and KV, "
        "fused kernels), or a larger batch to reuse each weight read.",
        "compute": "a faster peak (a newer part, FP8 or BF16 instead of FP32 math) or fewer FLOPs.",
        "communication": "faster links, fewer or overlapped collectives, or less tensor "
        "parallelism; the skew between ranks is time waiting for the slowest.",
    }
    for regime, seconds in ranked:
        if seconds / total < 0.1:
            break
        out.append(f"{REGIME_LABELS[regime]} {seconds / total:.0%} of the step: {tips[regime]}")
    if top:
        head = top[0]
        out.append(
            f"the longest op, {head['name']} ({head['share_of_step']:.0%} of the step), "
            f"is {REGIME_LABELS[head['bound']]}"
            + (f" at {head['fraction_of_roof']:.0%} of its roof" if head["fraction_of_roof"] else "")
        )
    return out


def summarize(profile: Profile, ceilings: Ceilings, level: str = "aten", top: int = 10) -> dict:
    """Everything the page and ``--json`` show: ranks, the regime split, the top ops, advice."""
    rows = op_rows(profile, ceilings, level)
    split = regime_split(profile, ceilings)
    return {
        "label": profile.label,
        "source": profile.source,
        "activity": profile.activity,
        "device": profile.device.name,
        "roofs": {"name": ceilings.name, "source": ceilings.source},
        "steps": profile.steps,
        "wall_s": profile.wall_s,
        "busy_s": profile.busy_s,
        "idle_s": profile.idle_s,
        "flops": sum(op.flops for op in profile.level("aten")),
        "flop_counter_flops": profile.flop_counter_flops,
        "ranks": [r.model_dump() for r in profile.ranks],
        "skew_s": profile.skew_s,
        "regime_split_s": split,
        "step_bound": max(split, key=split.get),
        "level": level,
        "top_ops": rows[:top],
        "ops": rows,
        "what_would_move_it": advice(split, rows, profile.activity),
        "notes": profile.notes,
    }
