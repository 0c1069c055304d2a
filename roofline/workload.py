"""The one workload record: what the user runs, validated once.

A ``Workload`` is a model, a phase (one prefill step, one decode step, or a whole request: a
prefill then ``output_len - 1`` decode steps), the batch and lengths, the precision, the
tensor-parallel degree, the attention kernel and whether kernels are replayed from CUDA graphs.
Every analysis (step, request, memory footprint, KV capacity, device ranking) takes one.
``batch`` and ``seq_len`` may be numpy arrays: a whole sweep is one record.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from roofline.defaults import ATTENTION_KERNELS, MAX_DECODE_POINTS, WORKLOAD_PHASES
from roofline.hardware import Hardware
from roofline.models import ModelConfig
from roofline.precision import ENGINE_MATH, Precision, check_choice, check_positive_int, engine_math

__all__ = [
    "ENGINE_MATH",
    "Precision",
    "Workload",
    "check_choice",
    "check_positive_int",
    "engine_math",
    "valid_tp",
    "validate_attention_dp",
    "validate_tp",
]


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
