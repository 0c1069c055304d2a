"""Which hardware (or which change) would make a workload fast: ranking, diagnosis, what-if.

Every number here comes from the same engine as the rest of the product: a device ranking is
the workload's ops evaluated on every device at once; a lever is the workload re-evaluated
with that one change; a sensitivity is the speed-up from doubling one resource alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from roofline.engine import REGIME_LABELS, REGIMES, Ceilings, evaluate, evaluate_devices
from roofline.hardware import Hardware
from roofline.inference import DEFAULT_SETTINGS, Settings, analyze_request, analyze_step
from roofline.kvcache import TP_DEGREES
from roofline.llm import Precision, StepConfig, kv_cache_bytes_per_device, step_ops, weight_bytes_per_device
from roofline.models import ModelConfig

PHASES = ("prefill", "decode", "request")
OBJECTIVES = ("latency", "throughput", "per-watt")


@dataclass(frozen=True)
class Workload:
    """What the user runs. ``seq_len`` is the prompt (prefill, request) or the cached context (decode)."""

    model: ModelConfig
    phase: Literal["prefill", "decode", "request"]
    batch: int
    seq_len: int
    output_len: int = 128
    precision: Precision = field(default_factory=Precision)
    tp: int = 1
    attention: str = "flash"

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"phase: {self.phase!r} is not allowed; allowed: {', '.join(PHASES)}")
        if self.phase != "request":
            self.step(self.phase)  # validates batch, lengths, TP

    def step(self, phase: str, seq_len: int | np.ndarray | None = None) -> StepConfig:
        return StepConfig(
            self.model,
            phase,
            self.batch,
            self.seq_len if seq_len is None else seq_len,
            self.precision,
            self.tp,
            self.attention,
        )

    @property
    def tokens(self) -> int:
        """Tokens produced (request, decode) or processed (prefill) per run, all sequences."""
        if self.phase == "prefill":
            return self.batch * self.seq_len
        return self.batch * (self.output_len if self.phase == "request" else 1)

    @property
    def final_context(self) -> int:
        if self.phase == "prefill":
            return self.seq_len
        if self.phase == "decode":
            return self.seq_len + 1
        return self.seq_len + self.output_len - 1


def _phase_ops(w: Workload) -> list[tuple[list, float]]:
    """(ops, weight) pairs whose weighted step times add up to the workload's time."""
    if w.phase != "request":
        return [(step_ops(w.step(w.phase)), 1.0)]
    parts = [(step_ops(w.step("prefill")), 1.0)]
    if w.output_len > 1:
        contexts = np.arange(w.seq_len, w.seq_len + w.output_len - 1)
        parts.append((step_ops(w.step("decode", contexts)), 1.0))
    return parts


def workload_time(w: Workload, hw: Hardware, settings: Settings = DEFAULT_SETTINGS) -> dict[str, object]:
    """Time, regime, memory fit and the three most expensive ops of a workload on one device."""
    if w.phase == "request":
        r = analyze_request(w.model, hw, w.batch, w.seq_len, w.output_len, w.precision, w.tp, w.attention, settings)
        time_s, fits = r["e2e_s"], r["memory"]["fits"]
        mid = w.seq_len + max(0, w.output_len - 2) // 2
        main_phase = "prefill" if w.output_len == 1 or r["ttft_s"] >= r["e2e_s"] - r["ttft_s"] else "decode"
        step = analyze_step(w.step(main_phase, w.seq_len if main_phase == "prefill" else mid), hw, settings)
    else:
        step = analyze_step(w.step(w.phase), hw, settings)
        time_s, fits = step["total"]["time_s"], step["memory"]["fits"]
    top = sorted(step["ops"], key=lambda r: r["time_s"], reverse=True)[:3]
    share = step["total"]["time_s"]
    return {
        "time_s": time_s,
        "tokens_per_s": w.tokens / time_s,
        "bound": step["total"]["bound"],
        "step_phase": step["phase"],
        "fits": fits,
        "top_ops": [
            {"name": r["name"], "time_s": r["time_s"], "share": r["time_s"] / share, "bound": r["bound"]} for r in top
        ],
    }


def memory_needed_bytes(w: Workload, tp: int) -> float:
    """Weights plus the KV cache of the whole run, per device (activations are small beside them)."""
    weights = weight_bytes_per_device(w.model, w.precision, tp)
    kv = kv_cache_bytes_per_device(w.model, w.precision, tp, w.batch, w.final_context)
    return float(weights + kv)


def smallest_tp(w: Workload, hw: Hardware, settings: Settings) -> int | None:
    for tp in TP_DEGREES:
        try:
            StepConfig(w.model, "decode", 1, 1, w.precision, tp)
        except ValueError:
            continue
        if memory_needed_bytes(w, tp) <= settings.capacity_bytes(hw):
            return tp
    return None


def rank(
    w: Workload, hardware: list[Hardware], objective: str = "latency", settings: Settings = DEFAULT_SETTINGS
) -> list[dict[str, object]]:
    """Every device evaluated at once on the workload, sorted by the objective.

    Devices that cannot run it (no peak for the compute dtype, no link figure for TP > 1) or
    where it does not fit come last, with the reason.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective: {objective!r} is not allowed; allowed: {', '.join(OBJECTIVES)}")
    ceilings = [settings.ceilings(hw) for hw in hardware]
    total = np.zeros(len(hardware))
    regime_time = np.zeros((len(REGIMES), len(hardware)))
    for ops, weight in _phase_ops(w):
        step_time, by_regime = evaluate_devices(ops, ceilings)
        axes = tuple(range(1, step_time.ndim))
        total += weight * (step_time.sum(axis=axes) if axes else step_time)
        regime_time += by_regime.sum(axis=tuple(range(2, by_regime.ndim))) if by_regime.ndim > 2 else by_regime
    rows = []
    for i, hw in enumerate(hardware):
        need = memory_needed_bytes(w, w.tp)
        capacity = settings.capacity_bytes(hw)
        fits = need <= capacity
        why = None
        if not np.isfinite(total[i]):
            missing = w.precision.act not in hw.peak_tflops.as_dict()
            why = f"no {w.precision.act} peak" if missing else "no interconnect figure for TP > 1"
        elif not fits:
            tp = smallest_tp(w, hw, settings)
            why = f"needs {need / 1e9:,.1f} GB per device of {capacity / 1e9:,.1f} GB; " + (
                f"fits at TP={tp}" if tp else f"no TP up to {TP_DEGREES[-1]} fits"
            )
        time_s = float(total[i]) if np.isfinite(total[i]) else None
        throughput = w.tokens / time_s / w.tp if time_s else None  # per device
        rows.append(
            {
                "hardware": hw.id,
                "name": hw.name,
                "time_s": time_s,
                "tokens_per_s": w.tokens / time_s if time_s else None,
                "tokens_per_s_per_device": throughput,
                "tokens_per_s_per_watt": throughput / hw.tdp_w if throughput and hw.tdp_w else None,
                "bound": REGIMES[int(np.argmax(regime_time[:, i]))] if time_s else None,
                "fits": bool(fits and time_s is not None),
                "memory_needed_bytes": need,
                "capacity_bytes": capacity,
                "smallest_tp": smallest_tp(w, hw, settings),
                "why_not": why,
            }
        )
    key = {
        "latency": lambda r: r["time_s"],
        "throughput": lambda r: -r["tokens_per_s_per_device"],
        "per-watt": lambda r: -(r["tokens_per_s_per_watt"] or 0.0),
    }[objective]
    usable = sorted((r for r in rows if r["fits"] and (objective != "per-watt" or r["tokens_per_s_per_watt"])), key=key)
    rest = [r for r in rows if r not in usable]
    rest.sort(key=lambda r: (r["time_s"] is None, r["time_s"] or 0.0))
    for position, row in enumerate(usable + rest, start=1):
        row["rank"] = position if row in usable else None
    return usable + rest


def sensitivity(w: Workload, hw: Hardware, settings: Settings = DEFAULT_SETTINGS) -> dict[str, float]:
    """Speed-up of the workload from 2x of each resource alone (1.0 = that resource does not bind).
    Capacity moves no time; its entry is 1.0 unless doubling it is what makes the workload fit."""
    base = workload_time(w, hw, settings)["time_s"]
    out = {}
    for name, change in (
        ("compute", {"compute_scale": 2.0}),
        ("memory_bandwidth", {"memory_scale": 2.0}),
        ("interconnect", {"link_scale": 2.0}),
        ("launch_overhead", {}),
    ):
        if name == "launch_overhead":
            scaled = replace(
                settings,
                launch_overhead_s=settings.launch_overhead_s / 2,
                graph_launch_overhead_s=settings.graph_launch_overhead_s / 2,
            )
        else:
            scaled = replace(settings, **{k: getattr(settings, k) * v for k, v in change.items()})
        out[name] = base / workload_time(w, hw, scaled)["time_s"]
    out["memory_capacity"] = 1.0
    return out


def _lever(name: str, w: Workload, hw: Hardware, settings: Settings) -> dict[str, object] | None:
    try:
        result = workload_time(w, hw, settings)
    except ValueError:
        return None
    return {
        "name": name,
        "time_s": result["time_s"],
        "tokens_per_s": result["tokens_per_s"],
        "bound": result["bound"],
        "fits": result["fits"],
    }


def levers(w: Workload, hw: Hardware, bound: str, settings: Settings = DEFAULT_SETTINGS) -> list[dict[str, object]]:
    """The changes that move this regime, each evaluated on the workload."""
    p, m = w.precision, w.model
    candidates: list[tuple[str, Workload, Settings]] = []
    if bound == "memory":
        candidates.append(("2x memory bandwidth", w, replace(settings, memory_scale=settings.memory_scale * 2)))
        if p.weight in ("bf16", "fp16", "fp32"):
            candidates.append(("fp8 weights", replace(w, precision=replace(p, weight="fp8")), settings))
            candidates.append(("int4 weights (W4A16)", replace(w, precision=replace(p, weight="int4")), settings))
        if p.kv in ("bf16", "fp16", "fp32"):
            candidates.append(("fp8 KV cache", replace(w, precision=replace(p, kv="fp8")), settings))
        candidates.append((f"batch {w.batch * 4} (4x)", replace(w, batch=w.batch * 4), settings))
        if not m.mla and m.num_kv_heads > 1 and m.num_kv_heads % 2 == 0:
            fewer = m.model_copy(update={"num_kv_heads": m.num_kv_heads // 2})
            candidates.append(
                (f"{m.num_kv_heads // 2} KV heads instead of {m.num_kv_heads}", replace(w, model=fewer), settings)
            )
    elif bound == "compute":
        candidates.append(("2x peak FLOPS", w, replace(settings, compute_scale=settings.compute_scale * 2)))
        if p.act in ("bf16", "fp16", "fp32") and "fp8" in hw.peak_tflops.as_dict():
            candidates.append(("fp8 math (W8A8)", replace(w, precision=replace(p, weight="fp8", act="fp8")), settings))
        if w.attention == "naive":
            candidates.append(("fused (Flash) attention", replace(w, attention="flash"), settings))
    elif bound == "communication":
        candidates.append(("2x interconnect bandwidth", w, replace(settings, link_scale=settings.link_scale * 2)))
        if w.tp > 1:
            candidates.append((f"TP={w.tp // 2}", replace(w, tp=w.tp // 2), settings))
    else:
        if not settings.cuda_graphs:
            candidates.append(("CUDA graphs", w, replace(settings, cuda_graphs=True)))
        candidates.append(
            (
                "fused kernels (half the launches)",
                w,
                replace(
                    settings,
                    launch_overhead_s=settings.launch_overhead_s / 2,
                    graph_launch_overhead_s=settings.graph_launch_overhead_s / 2,
                ),
            )
        )
        candidates.append((f"batch {w.batch * 4} (4x)", replace(w, batch=w.batch * 4), settings))
    out = []
    for name, cw, cs in candidates:
        result = _lever(name, cw, hw, cs)
        if result:
            out.append(result)
    return out


def diagnose(w: Workload, hw: Hardware, settings: Settings = DEFAULT_SETTINGS) -> dict[str, object]:
    """The regime, the three most expensive ops and the evaluated levers, in plain words."""
    base = workload_time(w, hw, settings)
    bound = base["bound"]
    moves = levers(w, hw, bound, settings)
    words = [
        f"On {hw.name} this {w.phase} is {REGIME_LABELS[bound]} "
        f"({base['time_s'] * 1e3:,.2f} ms; the {base['step_phase']} step decides it)."
    ]
    ops = "; ".join(f"{o['name']} {o['share']:.0%} ({o['bound']})" for o in base["top_ops"])
    words.append(f"Most expensive ops: {ops}.")
    for lever in moves:
        words.append(
            f"{lever['name']}: {base['time_s'] * 1e3:,.2f} ms -> {lever['time_s'] * 1e3:,.2f} ms"
            + (f" ({lever['tokens_per_s']:,.0f} tokens/s)" if "batch" in lever["name"] else "")
            + ("" if lever["fits"] else ", does not fit")
        )
    return {
        "bound": bound,
        "bound_label": REGIME_LABELS[bound],
        "time_s": base["time_s"],
        "fits": base["fits"],
        "top_ops": base["top_ops"],
        "levers": moves,
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
    return {
        "model": w.model.id,
        "phase": w.phase,
        "batch": w.batch,
        "seq_len": w.seq_len,
        "output_len": w.output_len if w.phase == "request" else None,
        "tp": w.tp,
        "objective": objective,
        "ranking": ranking,
        "fits_anywhere": any(r["fits"] for r in ranking),
        "diagnosis": {"hardware": target.id, **diagnose(w, target, settings)},
        "sensitivity": sensitivity(w, target, settings),
    }


def ops_on(w: Workload, ceilings: Ceilings):
    """The op table of the workload's deciding step on some ceilings (for plots)."""
    if w.phase == "request":
        mid = w.seq_len + max(0, w.output_len - 2) // 2
        return evaluate(step_ops(w.step("decode", mid)), ceilings)
    return evaluate(step_ops(w.step(w.phase)), ceilings)
