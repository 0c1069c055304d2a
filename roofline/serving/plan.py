"""The plan: per device, the cheapest setup that meets TTFT and TPOT targets, or what binds."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from roofline.engines import prompt_words, vllm_default_words
from roofline.format import fmt_seconds
from roofline.hardware import Hardware
from roofline.models import ModelConfig
from roofline.serving.basis import measured_first
from roofline.serving.steady import ServingPoints, serving_sweep
from roofline.serving.traffic import Traffic
from roofline.settings import Settings
from roofline.workload import Precision, check_positive_int, engine_math, validate_tp


@dataclass(frozen=True)
class Best:
    """A device's best setup under the targets (or why none meets them)."""

    hardware: str
    meets: bool
    point: dict[str, object] | None
    weight_dtype: str | None
    kv_dtype: str | None
    binding: str  # what stops it doing better: the step's regime, memory capacity, or the targets
    notes: tuple[str, ...] = ()  # setups left out of the search, and why
    act_dtype: str | None = None  # the math: fp8 with fp8 weights where the device computes in fp8 (W8A8)
    fp8_scaling: str | None = None  # fp8 weights' scales, per-tensor or block (None: no fp8 weights)
    precision: Precision | None = None  # the setup's precision as the device runs it (levers run at it)
    roof_source: str | None = None  # what its times rest on (``Ceilings.source``: datasheet, engine-measured, ...)

    @property
    def weights(self) -> str | None:
        """The weight format, with its scaling where it is fp8: "fp8 (block)"."""
        return f"{self.weight_dtype} ({self.fp8_scaling})" if self.fp8_scaling else self.weight_dtype

    def to_json(self) -> dict[str, object]:
        return {
            "hardware": self.hardware,
            "meets_targets": self.meets,
            "weight_dtype": self.weight_dtype,
            "act_dtype": self.act_dtype,
            "kv_dtype": self.kv_dtype,
            "fp8_scaling": self.fp8_scaling,
            "binding": self.binding,
            "notes": list(self.notes),
            "roof_source": self.roof_source,
            **(self.point or {}),
        }


def searched_sentence(
    model: ModelConfig,
    tps: tuple[int, ...],
    fp8_scaling: str,
    chunked: bool,
    also: Precision | None = None,
    split: bool = True,
) -> str:
    """What ``best_under_targets`` searched, in words: the TP degrees, its precisions (and
    ``also``'s), fp8's scaling and how prompts ran (``chunked``: in the decodes' steps, ``split``:
    a long one over several)."""
    scaling = Precision(fp8_scaling=fp8_scaling).resolved(model).fp8_scaling
    extra = f"; and the precision set here ({also.resolved(model).label})" if also is not None else ""
    return (
        f"Searched: TP {', '.join(str(t) for t in tps) or 'none'}; bf16 or fp8 weights with bf16 or fp8 KV, fp8 "
        "weights computing in fp8 (W8A8) where the device has fp8 math and weight-only elsewhere, as the engines "
        f"run them, {scaling}-scaled (FP8 weight scaling){extra}; every batch that fits, up to the engine's sequence "
        f"cap on each device (max_num_seqs; unset, vLLM's default: {vllm_default_words('max_num_seqs')}; with "
        "whole prompts in the decodes' steps, max_batched_tokens - prompt), " + prompt_words(chunked, split) + "."
    )


def extra_precision(precision: Precision) -> Precision | None:
    """The precision to search beside the defaults (``also``): the user's own, unless it is the
    default bf16 throughout, which is searched anyway."""
    plain = Precision(fp8_scaling=precision.fp8_scaling, group_size=precision.group_size)  # int4's groups aside
    # bf16 math asked outright is what "auto" runs bf16 weights in on every device.
    same = precision if precision.act_dtype != "bf16" else replace(precision, act_dtype=plain.act_dtype)
    return None if same == plain else precision


def splittable_tps(model: ModelConfig, tps: tuple[int, ...]) -> tuple[tuple[int, ...], dict[int, str]]:
    """The TP degrees that split ``model``'s heads and MLP evenly, and why each other one does not
    (28 heads split over 1, 2 or 4 devices, not 8)."""
    ok, skipped = [], {}
    for tp in tps:
        check_positive_int(tp, "tp", 1 << 16)
        try:
            validate_tp(model, int(tp))
        except ValueError as exc:
            skipped[int(tp)] = f"TP={tp} skipped: {exc}"
        else:
            ok.append(int(tp))
    return tuple(ok), skipped


DEFAULT_PRECISIONS: tuple[tuple[str, str], ...] = (("bf16", "bf16"), ("bf16", "fp8"), ("fp8", "fp8"))


def _formats_on(precision: Precision, hw: Hardware) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(weight formats, KV formats) the precision stores on ``hw`` (fp16 where it lacks bf16)."""
    run, _ = precision.on(hw, need_peak=False)
    return (run.weight_dtype,), (run.kv_dtype,)


def best_under_targets(
    model: ModelConfig,
    devices: list[Hardware],
    traffic: Traffic,
    ttft_s: float,
    tpot_s: float,
    settings: Settings | None = None,
    prices: dict[str, float] | None = None,
    tps: tuple[int, ...] = (1, 2, 4, 8),
    precisions: tuple[tuple[str, str], ...] = DEFAULT_PRECISIONS,
    fp8_scaling: str = "auto",
    chunked: bool | None = None,
    also: Precision | None = None,
) -> list[Best]:
    """Per device, the setup (TP, batch, weight and KV dtype) meeting TTFT and TPOT that costs
    least per million output tokens all-in, every device-hour over the output tokens (where
    priced; else that gives the most tokens/s per device), ranked by that. fp8 weights compute
    as the engines run them on each device (``roofline.precision.engine_math``), scaled as ``fp8_scaling`` says (auto:
    the model's own FP8 checkpoint's, ``roofline.workload.Precision.fp8_scaling``); prompts mixed into
    the decode steps (``chunked``) or in prefill steps of their own, as ``serving_sweep`` runs them
    (None: as the settings' engine runs them by default).
    ``also``: one more precision to search beside those, as given (the user's own: int4 or fp4
    weights, say). TP degrees that do not split the model are skipped, with a note on every result
    saying why."""
    for name, value in (("TTFT target", ttft_s), ("TPOT target", tpot_s)):
        if not (isinstance(value, int | float) and np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    prices = prices or {}
    tps, skipped = splittable_tps(model, tps)
    notes = tuple(skipped.values())
    best: dict[str, tuple[float, dict, Precision]] = {}
    near: dict[str, tuple[str, float]] = {}  # the closest miss: what binds
    for tp in tps:
        searched: set[tuple[str, Precision]] = set()
        for wdtype, kvdtype in (*precisions, *([(None, None)] if also is not None else [])):
            # Only the devices whose kernels take these formats (no fp8 on V100, T4, TPU v4), each
            # group computing as the engines do on it.
            groups: dict[Precision, list[Hardware]] = {}
            for hw in devices:
                if wdtype is None:  # the extra precision, as given, unless searched already
                    precision = also.resolved(model).math_on(hw)
                    if (hw.id, precision) in searched:
                        continue
                else:
                    math = engine_math(wdtype, hw)
                    precision = Precision(wdtype, math, kvdtype, fp8_scaling=fp8_scaling).resolved(model)
                    searched.add((hw.id, precision))
                missing = hw.unsupported_formats(*_formats_on(precision, hw))
                if missing:
                    near.setdefault(hw.id, (f"its kernels take no {' or '.join(missing)}", np.inf))
                else:
                    groups.setdefault(precision, []).append(hw)
            for precision, able in groups.items():
                pts = serving_sweep(model, able, traffic, precision, tp, settings, prices, chunked=chunked)
                # No batch past the engine's sequence cap on the device (``ServingPoints.runs``).
                pts = replace(pts, fits=pts.runs)
                cost = pts.usd_per_million()["output_all_in"]  # what a request costs, not its decode share
                meets = pts.fits & (pts.ttft_s <= ttft_s) & (pts.tpot_s <= tpot_s)
                for d, hw_id in enumerate(pts.devices):
                    if np.any(meets[d]):
                        score = np.where(
                            meets[d], np.nan_to_num(cost[d], nan=0.0) if hw_id in prices else -pts.per_device[d], np.inf
                        )
                        j = int(np.argmin(score))
                        if hw_id not in best or score[j] < best[hw_id][0]:
                            best[hw_id] = (float(score[j]), pts.row(d, j), precision)
                    elif hw_id not in best:
                        near[hw_id] = _what_binds(pts, d, ttft_s, tpot_s, near.get(hw_id))
    out = []
    for hw in devices:
        if hw.id in best:
            _, row, p = best[hw.id]
            p = p.on(hw, need_peak=False)[0]  # as the device runs it: fp16 where it has no bf16 (V100, T4)
            scaling = p.fp8_scaling if p.has_fp8_weights else None
            source = (settings or Settings()).ceilings(hw, 1, True).source  # the same on every TP degree
            out.append(
                Best(hw.id, True, row, p.weight_dtype, p.kv_dtype, row["bound"], notes, p.act_dtype, scaling, p, source)
            )
        else:
            cannot = "no TP degree searched splits the model" if not tps else "it cannot run this model"
            reason = near.get(hw.id, (cannot, np.inf))[0]
            out.append(Best(hw.id, False, None, None, None, reason, notes))
    priced = [b for b in out if b.meets and b.point.get("usd_per_million_output_all_in") is not None]
    unpriced = [b for b in out if b.meets and b.point.get("usd_per_million_output_all_in") is None]
    missing = [b for b in out if not b.meets]
    priced.sort(key=lambda b: b.point["usd_per_million_output_all_in"])
    unpriced.sort(key=lambda b: -b.point["tokens_per_s_per_device"])
    # Measured roofs before the datasheet alone where the two are mixed (roofline.serving.basis).
    ranked, _ = measured_first(priced + unpriced, _on_datasheet)
    return ranked + missing


def _on_datasheet(b: Best) -> bool:
    return b.roof_source == "datasheet"


def plan_basis_mixed(best: list[Best]) -> bool:
    """Whether the setups that meet the targets rest some on measured roofs, some on the datasheet alone."""
    return measured_first([b for b in best if b.meets], _on_datasheet)[1]


def _what_binds(pts: ServingPoints, d: int, ttft_s: float, tpot_s: float, previous) -> tuple[str, float]:
    """Why no batch of this device meets the targets, and how far the nearest miss is."""
    if pts.devices[d] in pts.why_not:
        reason, gap = pts.why_not[pts.devices[d]], np.inf
    elif not np.any(pts.fits[d]):
        reason, gap = f"memory capacity: the model does not fit at TP={pts.tp}", np.inf
    else:
        fit = pts.fits[d]
        tpot_best = np.nanmin(np.where(fit, pts.tpot_s[d], np.inf))
        ttft_best = np.nanmin(np.where(fit, pts.ttft_s[d], np.inf))
        j = int(np.nanargmin(np.where(fit, pts.tpot_s[d], np.inf)))
        if tpot_best > tpot_s:
            reason = f"TPOT: {fmt_seconds(tpot_best)} at best ({pts.bound[d, j]}-bound at batch {pts.batch[j]})"
            gap = tpot_best / tpot_s
        else:
            reason = f"TTFT: {fmt_seconds(ttft_best)} at best (the prefill)"
            gap = ttft_best / ttft_s
    if previous is not None and previous[1] <= gap:
        return previous
    return reason, gap
