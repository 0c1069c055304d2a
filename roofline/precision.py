"""How a workload stores and computes: the linear weights' format, the dtype the linear layers
compute in (or "auto", the math the serving engines run those weights in on each device), the KV
cache's format, and the field checks every record shares."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from roofline.defaults import (
    DEFAULT_INT4_GROUP_SIZE,
    FP8_SCALINGS,
    KV_DTYPES,
    MATH_AUTO,
    MATH_CHOICES,
    WEIGHT_DTYPES,
)
from roofline.dtypes import bytes_per_element, kv_bytes_per_element, weight_bytes_per_element
from roofline.hardware import Hardware
from roofline.models import ModelConfig


def check_choice(value: str, allowed: tuple[str, ...], field_name: str) -> None:
    if value not in allowed:
        raise ValueError(f"{field_name}: {value!r} is not allowed; allowed: {', '.join(allowed)}")


def check_positive_int(value, field_name: str, limit: float = 2**53) -> None:
    """Positive, whole and finite (arrays: every element)."""
    if type(value) is int and 1 <= value <= limit:  # the common case, without numpy's overhead
        return
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf" or arr.dtype == bool:
        raise ValueError(f"{field_name} must be a positive integer, got {value!r}")
    arr = arr.astype(float)
    if np.any(~np.isfinite(arr)) or np.any(arr < 1) or np.any(arr != np.round(arr)) or np.any(arr > limit):
        raise ValueError(f"{field_name} must be a positive integer up to {limit:.0f}, got {value!r}")


# Weight formats the serving engines compute in a narrower dtype than bf16, where the device has
# that math: FP8 checkpoints run W8A8 (vLLM's Fp8LinearMethod, SGLang's and TensorRT-LLM's FP8
# GEMMs quantize the activations as they go), NVFP4 checkpoints W4A4 (ModelOpt's NVFP4 recipe
# quantizes both; on a device without fp4 math vLLM falls back to weight-only Marlin kernels).
ENGINE_MATH: dict[str, str] = {"fp8": "fp8", "nvfp4": "fp4"}


def engine_math(weight_dtype: str, hw: Hardware, expert_weight_dtype: str | None = None) -> str:
    """The dtype a serving engine computes in with these weights (and the MoE experts' format,
    where it differs) on ``hw``: ``ENGINE_MATH`` where every linear format has that one narrow
    math and the device has it and a peak for it; bf16, weight-only, in every other case."""
    return _engine_math(weight_dtype, expert_weight_dtype, hw)[0]


def _narrow(weight_dtype: str, expert_weight_dtype: str | None) -> tuple[str | None, bool]:
    """(the one narrower-than-bf16 engine math every linear format shares, or None; whether the
    formats mix a narrow one with another)."""
    narrow = {ENGINE_MATH.get(f) for f in (weight_dtype, expert_weight_dtype) if f}
    return (next(iter(narrow)) if len(narrow) == 1 else None), len(narrow) > 1


def _engine_math(weight_dtype: str, expert_weight_dtype: str | None, hw: Hardware) -> tuple[str, str]:
    """(math, why the narrow math was not taken: "" where it was, or where there is none)."""
    math, mixed = _narrow(weight_dtype, expert_weight_dtype)
    if mixed:
        formats = " and ".join(dict.fromkeys(f for f in (weight_dtype, expert_weight_dtype) if f))
        return "bf16", f"the linear layers mix {formats} weights and compute in one dtype"
    if math is None:
        return "bf16", ""
    if hw.supports_math(math) is False:
        return "bf16", f"{hw.name} has no {math} math"
    peaks = hw.peak_tflops.as_dict()
    if math not in peaks and ("bf16" in peaks or "fp16" in peaks):  # else both are lower bounds: the engines'
        return "bf16", (
            f"{hw.name} publishes no {math} peak to time W{_WA[math]} GEMMs at (set the compute dtype to {math} "
            "for them on an engine's measured kernels, where the device has them)"
        )
    return math, ""


_WA = {"fp8": "8A8", "fp4": "4A4"}  # the engines' name for each narrow math's GEMMs


@dataclass(frozen=True)
class Precision:
    """Storage of the linear weights, the dtype the linear layers compute in, and the KV cache.
    The math "auto" is the engines' for the weights on the device the precision runs on
    (``engine_math``), resolved by ``on``."""

    weight_dtype: str = "bf16"
    act_dtype: str = MATH_AUTO
    kv_dtype: str = "bf16"
    group_size: int = DEFAULT_INT4_GROUP_SIZE  # int4 weights: elements per scale
    # The routed MoE experts' weights, where they differ (gpt-oss ships MXFP4 experts beside bf16).
    expert_weight_dtype: str | None = None
    # How fp8 weights carry their scales (roofline.defaults.FP8_SCALINGS): it picks the kernels an
    # engine's tables are read at (per-tensor or block-scaled GEMMs and MoE layers). The datasheet
    # does not see it: a 128 x 128 block's one scale is 1/16,384 of its bytes. "auto" is the model's
    # own FP8 checkpoint's (Workload.kernel_precision resolves it).
    fp8_scaling: str = "auto"

    def __post_init__(self) -> None:
        check_choice(self.weight_dtype, WEIGHT_DTYPES, "weight dtype")
        if self.expert_weight_dtype is not None:
            check_choice(self.expert_weight_dtype, WEIGHT_DTYPES, "expert weight dtype")
        check_choice(self.act_dtype, MATH_CHOICES, "compute (math) dtype")
        check_choice(self.kv_dtype, KV_DTYPES, "KV-cache dtype")
        check_choice(self.fp8_scaling, FP8_SCALINGS, "fp8 scaling")
        check_positive_int(self.group_size, "group_size", 1 << 20)

    @property
    def has_fp8_weights(self) -> bool:
        return "fp8" in (self.weight_dtype, self.expert_weight_dtype)

    def unused_fields(self, model: ModelConfig | None = None) -> tuple[str, ...]:
        """The fields set away from their defaults that change nothing: an experts' format on a dense
        ``model`` (known only with the model), an fp8 scaling without fp8 weights, an int4 group
        size without int4 weights (a dense model's experts' format not counting)."""
        dense = model is not None and model.moe is None
        formats = (self.weight_dtype, None if dense else self.expert_weight_dtype)
        unused = ["expert_weight_dtype"] if dense and self.expert_weight_dtype is not None else []
        if self.fp8_scaling != "auto" and "fp8" not in formats:
            unused.append("fp8_scaling")
        if self.group_size != DEFAULT_INT4_GROUP_SIZE and "int4" not in formats:
            unused.append("group_size")
        return tuple(unused)

    def resolved(self, model: ModelConfig) -> Precision:
        """This precision as it applies to ``model``: "auto" fp8 scaling made the model's own FP8
        checkpoint's (model_db's ``fp8_checkpoint``), per-tensor where the model records none, and
        a dense model's experts' format dropped (it has none, and "auto" math must not see it)."""
        dense = model.moe is None and self.expert_weight_dtype is not None
        p = replace(self, expert_weight_dtype=None) if dense else self
        if p.fp8_scaling != "auto":
            return p
        checkpoint = model.fp8_checkpoint
        return _scaled(p, checkpoint.scaling if checkpoint else "per-tensor")

    @property
    def math_dtype(self) -> str:
        """The dtype the linear layers compute in, for building a step's ops. "auto" is bf16 on
        every device for weights without a narrower engine math (``ENGINE_MATH``) or that mix
        formats; for those with one it depends on the device, so the precision must first run
        ``on`` one."""
        if self.act_dtype != MATH_AUTO:
            return self.act_dtype
        if _narrow(self.weight_dtype, self.expert_weight_dtype)[0] is not None:
            formats = " and ".join(dict.fromkeys(f for f in (self.weight_dtype, self.expert_weight_dtype) if f))
            raise ValueError(
                f"math auto with {formats} weights depends on the device: resolve it with "
                "Precision.on(hw) or Workload.on(hw) before building the step's ops"
            )
        return "bf16"  # no narrow format, or formats that mix: bf16 on every device

    @property
    def act_storage(self) -> str:
        """Activations between kernels: 8- and 4-bit math still passes bf16 tensors between ops (as
        does the engines' math, "auto", whichever it resolves to)."""
        return "bf16" if self.act_dtype in ("fp8", "int8", "fp4", MATH_AUTO) else self.act_dtype

    @property
    def attention_dtype(self) -> str:
        return self.act_storage

    @property
    def weight_bytes(self) -> float:
        """Bytes per linear-layer weight, the format's scales and zero points included."""
        return weight_bytes_per_element(self.weight_dtype, self.group_size)

    @property
    def expert_weight_bytes(self) -> float:
        """Bytes per routed-expert weight (the weight format unless the experts have their own)."""
        return weight_bytes_per_element(self.expert_weight_dtype or self.weight_dtype, self.group_size)

    @property
    def act_bytes(self) -> float:
        return bytes_per_element(self.act_storage)

    @property
    def kv_bytes(self) -> float:
        return kv_bytes_per_element(self.kv_dtype)

    def math_on(self, hw: Hardware) -> Precision:
        """This precision with "auto" math made the engines' for its weights on ``hw``."""
        if self.act_dtype != MATH_AUTO:
            return self
        return replace(self, act_dtype=engine_math(self.weight_dtype, hw, self.expert_weight_dtype))

    def on(self, hw: Hardware, need_peak: bool = True) -> tuple[Precision, list[str]]:
        """The precision as it runs on ``hw``: parts without bf16 math (V100, T4) run fp16, which
        stores the same two bytes.

        Raises ValueError where the device's formats record says its kernels do not take the
        weight or KV format, or the compute dtype (fp8 math needs fp8 kernels). A compute dtype the
        device runs but publishes no peak for is not an error: the note says so, and times are
        lower bounds from memory bandwidth. Memory questions (``need_peak=False``) only note
        what the device cannot run."""
        peaks = hw.peak_tflops.as_dict()
        p, notes, why = self, [], ""
        if self.act_dtype == MATH_AUTO:
            math, why = _engine_math(self.weight_dtype, self.expert_weight_dtype, hw)
            p = replace(self, act_dtype=math)
        bf16 = "bf16" in (p.act_dtype, p.act_storage, p.weight_dtype, p.expert_weight_dtype, p.kv_dtype)
        if bf16 and "bf16" not in peaks and "fp16" in peaks:
            swap = {
                f: "fp16"
                for f in ("weight_dtype", "expert_weight_dtype", "act_dtype", "kv_dtype")
                if getattr(p, f) == "bf16"
            }
            p = replace(p, **swap)
            notes.append(f"{hw.name} has no bf16 math: fp16 is used instead (same two bytes per value)")
        auto = self.act_dtype == MATH_AUTO
        if need_peak and auto:
            notes += _auto_math_note(self, p.act_dtype, why, hw)
        weights = tuple(f for f in (p.weight_dtype, p.expert_weight_dtype) if f)
        missing = hw.unsupported_formats(weights, (p.kv_dtype,), p.act_dtype)
        if missing:
            f = hw.formats
            why = (
                f"{hw.id} has no kernels for {', '.join(missing)} (its formats record: weights "
                f"{', '.join(f.weights)}; KV {', '.join(f.kv)}; math {', '.join(f.math)})"
            )
            if need_peak:
                raise ValueError(why)
            notes.append(why)
        fields = (("weight dtype", p.weight_dtype), ("expert weight dtype", p.expert_weight_dtype))
        wide = [(name, f) for name, f in fields if f and weight_bytes_per_element(f, p.group_size) >= 2]
        if need_peak and wide and p.act_dtype in ("fp8", "int8", "fp4"):
            # No engine computes 8- or 4-bit math on 16-bit weights: one that quantizes at load (vLLM's
            # --quantization fp8) stores the weights in the math's format.
            target = "nvfp4 or mxfp4" if p.act_dtype == "fp4" else p.act_dtype
            formats = " and ".join(dict.fromkeys(f for _, f in wide))
            notes.append(
                f"{p.act_dtype} math with {formats} weights: a setup no engine serves (one that quantizes at load "
                f"stores the weights in the math's format); the datasheet times these GEMMs at the {p.act_dtype} "
                f"peak reading {formats} weights, an engine's tables as {formats} GEMMs: set the "
                f"{' and '.join(name for name, _ in wide)} to {target} for what an engine runs"
            )
        if need_peak and not auto and p.has_fp8_weights and p.act_dtype in ("bf16", "fp16") and "fp8" in peaks:
            notes.append(  # as engine_math says the engines run them
                f"fp8 weights with {p.act_dtype} math run weight-only (dequantized as they are read, as FP8 Marlin "
                f"does); vLLM, SGLang and TensorRT-LLM run FP8 checkpoints on {hw.name} as W8A8, in fp8 math: set "
                "the compute (math) dtype to fp8 (--act-dtype) for that"
            )
        if need_peak and p.act_dtype not in peaks:
            notes.append(
                f"{hw.name} publishes no {p.act_dtype} peak: compute time is unknown, so times are lower "
                "bounds from memory bandwidth (and link and kernel floor)"
            )
        return p, notes

    @property
    def label(self) -> str:
        """One line for a header: "weights fp8, math fp8, KV fp8" (and the experts where they differ;
        "math as the engines run it" for "auto", before a device resolves it)."""
        experts = self.expert_weight_dtype
        scaling = f"{self.fp8_scaling} scaling" if self.has_fp8_weights and self.fp8_scaling != "auto" else ""
        notes = []  # beside the fp8 part: "fp8 (block scaling; experts bf16)", "bf16 (experts fp8, block scaling)"
        if scaling and self.weight_dtype == "fp8":
            notes.append(scaling)
        if experts not in (None, self.weight_dtype):
            notes.append(f"experts {experts}" + (f", {scaling}" if scaling and self.weight_dtype != "fp8" else ""))
        return (
            f"weights {self.weight_dtype}"
            + (f" ({'; '.join(notes)})" if notes else "")
            + (", math as the engines run it" if self.act_dtype == MATH_AUTO else f", math {self.act_dtype}")
            + f", KV {self.kv_dtype}"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "weight_dtype": self.weight_dtype,
            "act_dtype": self.act_dtype,
            "kv_dtype": self.kv_dtype,
            "expert_weight_dtype": self.expert_weight_dtype or self.weight_dtype,
            "weight_bytes_per_element": self.weight_bytes,
            "group_size": self.group_size,
            "fp8_scaling": self.fp8_scaling if self.has_fp8_weights else None,  # none without fp8 weights
        }


def _auto_math_note(asked: Precision, math: str, why: str, hw: Hardware) -> list[str]:
    """What "auto" math chose on ``hw`` (``math``, after any fp16 swap; ``why``: ``_engine_math``'s
    reason for bf16), where a linear format has a narrower engine math than bf16; nothing where none has."""
    named = " and ".join(f for f in dict.fromkeys((asked.weight_dtype, asked.expert_weight_dtype)) if f in ENGINE_MATH)
    if not named:
        return []
    if not why:
        return [
            f"math {math} (auto): {named} weights run W{_WA[math]} on {hw.name}, as the serving engines run "
            "such checkpoints; set the compute (math) dtype to bf16 for weight-only"
        ]
    return [f"math {math} (auto): {why}, so the {named} weights are timed weight-only (dequantized as they are read)"]


@lru_cache(maxsize=1024)
def _scaled(precision: Precision, scaling: str) -> Precision:
    """``precision`` with its fp8 scaling set (one object per pair: a step's ops ask for it often)."""
    return replace(precision, fp8_scaling=scaling)


SUMMARY_NAMES = 6  # devices an auto-math summary names; more are counted


def auto_math_groups(precision: Precision, devices: Sequence[Hardware], moe: bool = True) -> dict[str, list[str]]:
    """The devices that can run the precision, by the math "auto" runs it in on each (after the
    fp16 swap of a part without bf16); empty unless the math is "auto" and a weight format has a
    narrower engine math than bf16 (``moe=False`` for a dense model, whose experts' format is moot)."""
    p = precision if moe else replace(precision, expert_weight_dtype=None)
    if p.act_dtype != MATH_AUTO or _narrow(p.weight_dtype, p.expert_weight_dtype) == (None, False):
        return {}
    groups: dict[str, list[str]] = {}
    for hw in devices:
        run = p.on(hw, need_peak=False)[0]
        weights = tuple(f for f in (run.weight_dtype, run.expert_weight_dtype) if f)
        if not hw.unsupported_formats(weights, (), run.act_dtype):  # a device that cannot run it is left out
            groups.setdefault(run.act_dtype, []).append(hw.name)
    return groups


def auto_math_summary(precision: Precision, devices: Sequence[Hardware], moe: bool = True) -> str:
    """``auto_math_line`` of ``auto_math_groups``."""
    return auto_math_line(auto_math_groups(precision, devices, moe))


def auto_math_line(groups: dict[str, list[str]]) -> str:
    """One line of ``auto_math_groups``: "Math (auto, ...): fp8, W8A8, on H100 SXM5 80GB; bf16,
    weight-only, on A100 SXM4 80GB." ("" where there are none)."""
    if not groups:
        return ""
    many = sum(map(len, groups.values())) > SUMMARY_NAMES  # past a few devices, counted rather than named
    parts = [
        f"{m}, {'W' + _WA[m] if m in _WA else 'weight-only'}, on "
        + (f"{len(on)} device{'s' if len(on) > 1 else ''}" if many else ", ".join(on))
        for m, on in groups.items()
    ]
    return "Math (auto, as the serving engines run these weights): " + "; ".join(parts) + "."


def maths_apart(maths: Iterable[str | None]) -> bool:
    """Whether devices compute in more than one math (fp16 on a part without bf16 is bf16's)."""
    return len({"bf16" if m == "fp16" else m for m in maths if m}) > 1
