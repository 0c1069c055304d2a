"""A training setup: the model, shapes, precision, optimizer, memory levers and sharding, and
the parameters it trains.

QLoRA stores the frozen linear weights in NF4 with double-quantized scales,
4 + 8/64 + 32/(64 x 256) = 4.127 bits (Dettmers et al. 2023, §3). bitsandbytes' 8-bit AdamW keeps
2 B plus one fp32 absmax per 256-element block per state, and fp32 states for tensors under 4,096
elements.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from roofline.dtypes import bytes_per_element
from roofline.models import ModelConfig
from roofline.workload import check_choice, check_positive_int

TRAIN_PRECISIONS: tuple[str, ...] = ("mixed", "amp", "fp32", "pure-bf16")
OPTIMIZERS: tuple[str, ...] = ("adamw", "adamw-8bit", "sgd-momentum", "adafactor")
RECOMPUTE: tuple[str, ...] = ("none", "selective", "full")
METHODS: tuple[str, ...] = ("full", "lora", "qlora")
LORA_TARGETS: tuple[str, ...] = ("q", "k", "v", "o", "gate", "up", "down")
ZERO_STAGES: tuple[int, ...] = (0, 1, 2, 3)
NF4_BITS = 4 + 8 / 64 + 32 / (64 * 256)  # QLoRA's NF4 with double-quantized absmax (§3)
ADAM8_BYTES = 2 + 2 * 4 / 256  # two uint8 states, one fp32 absmax per 256-element block each
ADAM8_MIN_ELEMENTS = 4096  # bitsandbytes keeps fp32 states for smaller tensors (min_8bit_size)
LOSS_BYTES_PER_LOGIT = 4 + 4  # the fp32 copy of the logits and the log-probabilities saved


@dataclass(frozen=True)
class TrainSetup:
    """One training configuration: model, shapes, precision, optimizer, memory levers, sharding."""

    model: ModelConfig
    seq_len: object = 2048  # int or numpy array (a sweep)
    micro_batch: object = 1  # sequences per device per forward/backward
    global_batch: int | None = None  # sequences per optimizer step over all data-parallel devices
    precision: str = "mixed"
    compute_dtype: str = "bf16"  # the 16-bit dtype of mixed precision and autocast (bf16 in pure-bf16)
    optimizer: str = "adamw"
    fused_optimizer: bool = True
    recompute: str = "none"
    flash_attention: bool = True
    method: str = "full"
    lora_rank: int = 16
    lora_targets: tuple[str, ...] | None = None  # None: default_lora_targets(model)
    dp: int = 1  # data-parallel devices
    zero: int = 0  # 0: none; 1 optimizer state; 2 + gradients; 3 + weights (FSDP full shard)
    offload_optimizer: bool = False
    # Mixed precision only: accumulate gradients in fp32 (Megatron's bf16 default, DeepSpeed's
    # fp32 gradient partitions) instead of keeping them in 16 bits.
    fp32_grads: bool = False
    # Norm kernels that keep only their input and statistics (CUDA); False: PyTorch's decomposed
    # RMSNorm (a CPU), which also keeps the normalised x.
    fused_norms: bool = True
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        check_choice(self.precision, TRAIN_PRECISIONS, "precision")
        check_choice(self.compute_dtype, ("bf16", "fp16"), "compute dtype")
        if self.precision == "pure-bf16" and self.compute_dtype != "bf16":
            raise ValueError("compute dtype: pure-bf16 keeps weights, gradients and optimizer state in bf16")
        if self.fp32_grads and self.precision != "mixed":  # amp and fp32 keep fp32 gradients, pure-bf16 bf16 ones
            raise ValueError(f"fp32_grads: sets mixed precision's gradients; {self.precision} fixes its own")
        check_choice(self.optimizer, OPTIMIZERS, "optimizer")
        check_choice(self.recompute, RECOMPUTE, "recompute")
        check_choice(self.method, METHODS, "method")
        check_positive_int(self.seq_len, "seq_len", 1 << 24)
        check_positive_int(self.micro_batch, "micro_batch", 1 << 20)
        check_positive_int(self.dp, "dp", 1 << 16)
        check_positive_int(self.lora_rank, "lora_rank", 1 << 16)
        if self.global_batch is not None:
            check_positive_int(self.global_batch, "global_batch", 1 << 30)
        if self.zero not in ZERO_STAGES or isinstance(self.zero, bool):
            raise ValueError(f"zero: {self.zero!r} is not allowed; allowed: 0, 1, 2, 3")
        if self.lora_targets is None:
            object.__setattr__(self, "lora_targets", default_lora_targets(self.model))
        if self.method != "full":  # full fine-tuning trains every matrix: no targets to check
            m = self.model
            allowed = lora_target_choices(m)
            if not self.lora_targets:
                raise ValueError("lora_targets: name at least one of " + ", ".join(allowed))
            for target in self.lora_targets:
                check_choice(target, LORA_TARGETS, "lora target")
            if len(set(self.lora_targets)) < len(self.lora_targets):  # one adapter a matrix: "q,q" is not two
                twice = sorted({t for t in self.lora_targets if self.lora_targets.count(t) > 1})
                raise ValueError(f"lora_targets: {', '.join(twice)} named more than once; a matrix takes one adapter")
            absent = [t for t in self.lora_targets if t not in allowed]
            if absent:
                why = " (the q, k, v of MLA attention are not modelled)" if m.mla else ""
                raise ValueError(
                    f"lora_targets: {m.name} has no {', '.join(absent)} matrix to adapt{why}; "
                    f"allowed for {m.name}: {', '.join(allowed)}"
                )
        if np.any(np.asarray(self.seq_len) > self.model.max_context):
            raise ValueError(f"seq_len exceeds {self.model.name}'s maximum context of {self.model.max_context:,}")

    # ---- derived ---------------------------------------------------------------------------
    @property
    def act_bytes(self) -> float:
        return 4.0 if self.precision == "fp32" else bytes_per_element(self.compute_dtype)

    @property
    def weight_bytes(self) -> float:
        """Bytes per element of the trained weights and their gradients as the step holds them:
        16-bit in mixed precision (beside an fp32 master copy) and in pure bf16, fp32 otherwise."""
        return 2.0 if self.precision in ("mixed", "pure-bf16") else 4.0

    @property
    def optimizer_dtype_bytes(self) -> float:
        """Bytes per element the optimizer's state and its update run in: the dtype of the
        parameters it updates (PyTorch's optimizers allocate their state like the parameter), the
        fp32 master copy in mixed precision, bf16 in pure bf16."""
        return 2.0 if self.precision == "pure-bf16" else 4.0

    @property
    def accumulation_steps(self) -> int:
        """Micro-batches per optimizer step on each device to reach ``global_batch``."""
        if self.global_batch is None:
            return 1
        per_step = int(np.max(self.micro_batch)) * self.dp
        return max(1, -(-self.global_batch // per_step))

    @property
    def persistent_grads(self) -> bool:
        """Whether the gradients (a ZeRO-2/3 partition: what the step keeps of them) outlive the
        step's forward pass: when accumulating over micro-batches, and always in mixed precision
        (its frameworks allocate one gradient buffer). ZeRO-2 alone does not make them persist: its
        partition is filled by backward's reduce-scatters and freed after the optimizer step."""
        return self.precision == "mixed" or self.accumulation_steps > 1


# ---- parameters ------------------------------------------------------------------------------
def linear_shapes(m: ModelConfig) -> dict[str, tuple[int, int, int]]:
    """(in, out, count over the model) of every linear matrix LoRA can target."""
    h, hd, L = m.hidden_size, m.head_dim, m.num_layers
    shapes: dict[str, tuple[int, int, int]] = {}
    if not m.mla:
        shapes["q"] = (h, m.num_heads * hd, L)
        shapes["k"] = (h, m.num_kv_heads * hd, L)
        shapes["v"] = (h, m.num_kv_heads * hd, L)
    shapes["o"] = (m.num_heads * m.v_head_dim, h, L)
    # MLP matrices: the dense MLP, each routed expert and the shared experts (one entry per kind:
    # routed and shared experts may have the same width).
    mlps = [("dense", m.intermediate_size, m.dense_mlp_layers)]
    if m.moe:
        mlps.append(("experts", m.moe.expert_intermediate_size, m.moe_layers * m.moe.num_experts))
        if m.moe.shared_experts:
            width = m.moe.shared_expert_intermediate_size or m.moe.expert_intermediate_size
            mlps.append(("shared", width, m.moe_layers * m.moe.shared_experts))
    mlps = [(kind, width, count) for kind, width, count in mlps if count]
    names = ("gate", "up", "down") if m.mlp == "gated" else ("up", "down")
    for kind, width, count in mlps:
        suffix = "" if len(mlps) == 1 else f"@{kind}"
        for name in names:
            shapes[name + suffix] = (width, h, count) if name == "down" else (h, width, count)
    return shapes


def lora_target_choices(m: ModelConfig) -> tuple[str, ...]:
    """The matrices of ``m`` LoRA can adapt, in ``LORA_TARGETS`` order: no q, k, v on MLA models
    (not modelled), no gate on a dense (ungated) MLP."""
    present = {key.split("@")[0] for key in linear_shapes(m)}
    return tuple(t for t in LORA_TARGETS if t in present)


def default_lora_targets(m: ModelConfig) -> tuple[str, ...]:
    """PEFT's default for Llama-style attention, q and v; on MLA models, whose q, k, v are not
    modelled, the attention output projection."""
    return ("o",) if m.mla else ("q", "v")


def lora_params(m: ModelConfig, rank: int, targets: tuple[str, ...]) -> int:
    """Adapter parameters: r x (in + out) for every targeted matrix (A is r x in, B is out x r)."""
    total = 0
    for key, (n_in, n_out, count) in linear_shapes(m).items():
        if key.split("@")[0] in targets:
            total += rank * (n_in + n_out) * count
    return total


def global_batch_problem(global_batch: int | None, micro_batch: int, dp: int) -> str | None:
    """Why a global batch cannot be run as whole micro-batches on every data-parallel device (the
    step would process more sequences than it says), or None."""
    per_step = int(micro_batch) * int(dp)
    if global_batch is None or global_batch % per_step == 0:
        return None
    return (
        f"a global batch of {global_batch} sequences does not split into micro-batches of {micro_batch} on "
        f"{dp} device(s): give a multiple of {per_step} (micro-batch x data-parallel devices)"
    )


def lora_matrices_per_token(m: ModelConfig, targets: tuple[str, ...]) -> list[tuple[str, int, int, int, float]]:
    """(kind, in, out, instances over the model, share of the tokens each sees) of every adapted
    matrix kind: each layer's projection sees every token, each routed expert's the top-k share
    of the experts a token is sent to."""
    out = []
    experts_only = bool(m.moe) and not m.dense_mlp_layers and not m.moe.shared_experts  # keys carry no "@"
    for key, (n_in, n_out, count) in linear_shapes(m).items():
        name, _, kind = key.partition("@")
        if name in targets:
            routed = kind == "experts" or (not kind and experts_only and name in ("gate", "up", "down"))
            share = m.moe.experts_per_token / m.moe.num_experts if routed else 1.0
            out.append((key if kind or not routed else f"{key}@experts", n_in, n_out, count, share))
    return out


def linear_weight_params(m: ModelConfig) -> int:
    """Parameters in linear matrices (what QLoRA stores in NF4): all but embeddings and norms."""
    counts = m.param_counts()
    return counts["total"] - counts["embedding"] - m.norm_params() * (m.num_layers * m.norms_per_layer + 1)


def small_tensor_params(m: ModelConfig) -> int:
    """Parameters in tensors under 4,096 elements (norm scales, biases): bitsandbytes keeps their
    optimizer state in fp32."""
    per_norm = m.norm_params() if m.hidden_size < ADAM8_MIN_ELEMENTS else 0
    return per_norm * (m.num_layers * m.norms_per_layer + 1)


@dataclass(frozen=True)
class Params:
    total: int
    trainable: int
    frozen: int
    optimizer_matrices: list[tuple[int, int]]  # (n, m) of each trainable matrix, for Adafactor


def params(s: TrainSetup) -> Params:
    m = s.model
    total = m.param_counts()["total"]
    if s.method == "full":
        matrices = [(n_in, n_out) for n_in, n_out, count in linear_shapes(m).values() for _ in range(count)]
        matrices += [(m.vocab_size, m.hidden_size)] * (1 if m.tied_embeddings else 2)  # embedding, LM head
        return Params(total, total, 0, matrices)
    adapters = lora_params(m, s.lora_rank, s.lora_targets)
    matrices = []
    for key, (n_in, n_out, count) in linear_shapes(m).items():
        if key.split("@")[0] in s.lora_targets:
            matrices += [(s.lora_rank, n_in), (n_out, s.lora_rank)] * count
    return Params(total + adapters, adapters, total, matrices)
