"""The one workload record: what the user runs, validated once.

A ``Workload`` is a model, a phase (one prefill step, one decode step, or a whole request: a
prefill then ``output_len - 1`` decode steps), the batch and lengths, the precision, the
tensor-parallel degree, the attention kernel and whether kernels are replayed from CUDA graphs.
Every analysis (step, request, memory footprint, KV capacity, device ranking) takes one.
``batch`` and ``seq_len`` may be numpy arrays: a whole sweep is one record.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from roofline.defaults import (
    ACT_DTYPES,
    ATTENTION_KERNELS,
    DEFAULT_INT4_GROUP_SIZE,
    FP8_SCALINGS,
    KV_DTYPES,
    MAX_DECODE_POINTS,
    WEIGHT_DTYPES,
    WORKLOAD_PHASES,
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


@dataclass(frozen=True)
class Precision:
    """Storage of the linear weights, the dtype the linear layers compute in, and the KV cache."""

    weight_dtype: str = "bf16"
    act_dtype: str = "bf16"
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
        check_choice(self.act_dtype, ACT_DTYPES, "activation dtype")
        check_choice(self.kv_dtype, KV_DTYPES, "KV-cache dtype")
        check_choice(self.fp8_scaling, FP8_SCALINGS, "fp8 scaling")
        check_positive_int(self.group_size, "group_size", 1 << 20)

    @property
    def has_fp8_weights(self) -> bool:
        return "fp8" in (self.weight_dtype, self.expert_weight_dtype)

    def resolved(self, model: ModelConfig) -> Precision:
        """This precision with "auto" fp8 scaling made the model's own FP8 checkpoint's (model_db's
        ``fp8_checkpoint``), per-tensor where the model records none."""
        if self.fp8_scaling != "auto":
            return self
        checkpoint = model.fp8_checkpoint
        return _scaled(self, checkpoint.scaling if checkpoint else "per-tensor")

    @property
    def act_storage(self) -> str:
        """Activations between kernels: 8- and 4-bit math still passes bf16 tensors between ops."""
        return "bf16" if self.act_dtype in ("fp8", "int8", "fp4") else self.act_dtype

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

    def on(self, hw: Hardware, need_peak: bool = True) -> tuple[Precision, list[str]]:
        """The precision as it runs on ``hw``: parts without bf16 math (V100, T4) run fp16, which
        stores the same two bytes.

        Raises ValueError where the device's formats record says its kernels do not take the
        weight or KV format, or the compute dtype (fp8 math needs fp8 kernels). A compute dtype the
        device runs but publishes no peak for is not an error: the note says so, and times are
        lower bounds from memory bandwidth. Memory questions (``need_peak=False``) only note
        what the device cannot run."""
        peaks = hw.peak_tflops.as_dict()
        notes: list[str] = []
        p = self
        bf16 = "bf16" in (p.act_dtype, p.act_storage, p.weight_dtype, p.expert_weight_dtype, p.kv_dtype)
        if bf16 and "bf16" not in peaks and "fp16" in peaks:
            swap = {
                f: "fp16"
                for f in ("weight_dtype", "expert_weight_dtype", "act_dtype", "kv_dtype")
                if getattr(p, f) == "bf16"
            }
            p = replace(p, **swap)
            notes.append(f"{hw.name} has no bf16 math: fp16 is used instead (same two bytes per value)")
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
        if need_peak and p.has_fp8_weights and p.act_dtype in ("bf16", "fp16") and "fp8" in peaks:
            notes.append(  # as roofline.serving.math_for says the engines run them
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
        """One line for a header: "weights fp8, math fp8, KV fp8" (and the experts where they differ)."""
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
            + f", math {self.act_dtype}, KV {self.kv_dtype}"
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


@lru_cache(maxsize=1024)
def _scaled(precision: Precision, scaling: str) -> Precision:
    """``precision`` with its fp8 scaling set (one object per pair: a step's ops ask for it often)."""
    return replace(precision, fp8_scaling=scaling)


def validate_tp(model: ModelConfig, tp: int) -> None:
    """TP must split the heads and the MLP evenly; KV heads split or are replicated."""
    if isinstance(tp, bool) or not isinstance(tp, int | np.integer) or tp < 1:
        raise ValueError(f"tp must be a positive integer, got {tp!r}")
    if model.num_heads % tp:
        raise ValueError(f"tp={tp} does not divide {model.id}'s {model.num_heads} attention heads")
    nkv = model.num_kv_heads
    if not model.mla and nkv % tp and tp % nkv:
        raise ValueError(f"tp={tp} and {model.id}'s {nkv} KV heads do not divide one another")
    sizes = [model.intermediate_size] + ([model.moe.expert_intermediate_size] if model.moe else [])
    for size in sizes:
        if size % tp:
            raise ValueError(f"tp={tp} does not divide {model.id}'s MLP intermediate size {size}")


def validate_attention_dp(model: ModelConfig, tp: int, attention_dp: int) -> None:
    """Attention data parallelism splits the ``tp`` devices into ``attention_dp`` equal ranks."""
    d = attention_dp
    if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
        raise ValueError(f"attention_dp must be a positive integer, got {d!r}")
    if d == 1:
        return
    if tp % d:
        raise ValueError(
            f"attention data parallel ranks (attention_dp={d}) must divide the TP degree (tp={tp}): each rank "
            "takes tp / attention_dp devices"
        )
    if model.parallel_attention:
        raise ValueError(
            f"attention_dp: {model.id} runs attention and MLP side by side on one input; attention data "
            "parallelism is modelled for sequential blocks only (use attention_dp=1)"
        )


def valid_tp(model: ModelConfig, tp: int) -> bool:
    try:
        validate_tp(model, tp)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Workload:
    """What runs. ``seq_len`` is the prompt (prefill, request) or the tokens already cached
    (decode); ``output_len`` the tokens a request generates (the first comes from the prefill)."""

    model: ModelConfig
    phase: str
    batch: int | np.ndarray = 1
    seq_len: int | np.ndarray = 1
    output_len: int = 1
    precision: Precision = field(default_factory=Precision)
    tp: int = 1
    attention: str = "flash"
    cuda_graphs: bool = False
    # Attention data parallelism (SGLang's --enable-dp-attention --dp D, TensorRT-LLM's
    # enable_attention_dp): the ``tp`` devices form ``attention_dp`` ranks, each running attention
    # (and the embedding and LM head) on its own ``batch`` sequences at TP ``tp / attention_dp``
    # and holding only their cache; the MLP and experts run over every rank's tokens at TP ``tp``.
    # ``batch`` is then one rank's sequences, and the group runs ``attention_dp`` times as many.
    attention_dp: int = 1

    def __post_init__(self) -> None:
        check_choice(self.phase, WORKLOAD_PHASES, "phase")
        check_choice(self.attention, ATTENTION_KERNELS, "attention")
        validate_tp(self.model, self.tp)
        validate_attention_dp(self.model, self.tp, self.attention_dp)
        check_positive_int(self.batch, "batch")
        check_positive_int(self.seq_len, "seq_len")
        check_positive_int(self.output_len, "output_len")
        if self.phase == "request" and np.ndim(self.seq_len):
            raise ValueError("a request takes one prompt length, not a sweep")
        longest = int(np.max(self.final_context))
        if longest > self.model.max_context:
            what = {"prefill": "seq_len", "decode": "seq_len + 1", "request": "prompt + output - 1"}[self.phase]
            raise ValueError(
                f"{what}: {longest} tokens exceed {self.model.id}'s maximum context of {self.model.max_context}"
            )

    # ---- shape of one step ----------------------------------------------------------------
    @property
    def kernel_precision(self) -> Precision:
        """The precision the step's kernels run at: "auto" fp8 scaling resolved to the model's
        own FP8 checkpoint's (``Precision.resolved``)."""
        return self.precision.resolved(self.model)

    @property
    def attention_tp(self) -> int:
        """Devices one attention rank splits its heads over (``tp`` without attention data parallelism)."""
        return self.tp // self.attention_dp

    @property
    def tokens(self) -> np.ndarray:
        """Tokens one step processes (rows of every linear layer): the prompt for a prefill,
        one per sequence for a decode step."""
        b, s = np.asarray(self.batch, float), np.asarray(self.seq_len, float)
        return b * s if self.phase == "prefill" else b * np.ones_like(s)

    @property
    def context(self) -> np.ndarray:
        """Tokens each sequence holds in its cache after one step of this phase."""
        s = np.asarray(self.seq_len, float)
        return s if self.phase == "prefill" else s + 1

    @property
    def final_context(self) -> np.ndarray:
        """Tokens each sequence holds at the end of the workload (what the cache must hold)."""
        s = np.asarray(self.seq_len, float)
        if self.phase == "request":
            return s + self.output_len - 1
        return self.context

    @property
    def produced_tokens(self) -> float:
        """Tokens a run produces (request, decode) or processes (prefill), all sequences of every
        attention rank."""
        b = float(np.max(self.batch)) * self.attention_dp
        if self.phase == "prefill":
            return b * float(np.max(self.seq_len))
        return b * (self.output_len if self.phase == "request" else 1)

    def step(self, phase: str, seq_len: int | np.ndarray | None = None, batch: int | np.ndarray | None = None):
        """The same workload as one step of ``phase`` (a request's prefill or a decode step)."""
        return replace(
            self,
            phase=phase,
            seq_len=self.seq_len if seq_len is None else seq_len,
            batch=self.batch if batch is None else batch,
            output_len=1,
        )

    def decode_points(self, max_points: int = MAX_DECODE_POINTS) -> tuple[np.ndarray, np.ndarray]:
        """(contexts, steps each stands for) of a request's ``output_len - 1`` decode steps.

        Up to ``max_points`` steps every step is evaluated; beyond, the steps are cut into
        ``max_points`` equal runs, each evaluated at its middle context (step time is smooth in
        the context, so the midpoint rule is accurate) and weighted by its length."""
        steps = self.output_len - 1
        start = int(np.max(self.seq_len))
        if steps <= 0:
            return np.zeros(0, int), np.zeros(0)
        if steps <= max_points:
            return np.arange(start, start + steps), np.ones(steps)
        edges = np.linspace(0, steps, max_points + 1)
        lengths = np.diff(np.round(edges))
        mids = start + np.floor((np.round(edges[:-1]) + np.round(edges[1:]) - 1) / 2)
        return mids.astype(int), lengths

    def on(self, hw: Hardware, need_peak: bool = True) -> tuple[Workload, list[str]]:
        """The workload as it runs on ``hw`` (fp16 for bf16 where the part lacks bf16), with notes.
        Raises ValueError naming the device where it cannot run at all (memory questions pass
        ``need_peak=False``: capacity needs no compute peak)."""
        precision = self.precision
        if precision.expert_weight_dtype is not None and self.model.moe is None:  # a dense model has no experts
            precision = replace(precision, expert_weight_dtype=None)
        precision, notes = precision.on(hw, need_peak)
        return (self if precision == self.precision else replace(self, precision=precision)), notes

    def describe(self) -> dict[str, object]:
        """The record as JSON-friendly data (scalars only)."""
        return {
            "model": self.model.id,
            "phase": self.phase,
            "batch": int(np.max(self.batch)),
            "seq_len": int(np.max(self.seq_len)),
            **({"output_len": self.output_len} if self.phase == "request" else {}),
            "tp": self.tp,
            "attention_dp": self.attention_dp,
            "attention": self.attention,
            "cuda_graphs": self.cuda_graphs,
            "precision": self.kernel_precision.to_json(),
        }
