"""Training memory and the training step: what fits, what binds, which lever fixes it.

Memory per device, term by term:

- **weights** as the step holds them: mixed precision (Megatron, DeepSpeed) keeps 16-bit
  weights, 16-bit gradients and an fp32 master copy (2 + 2 + 4 bytes per trainable parameter);
  PyTorch autocast (``amp``) keeps fp32 weights and gradients and saves 16-bit copies of the
  weights for backward; fp32 keeps fp32 everything. LoRA freezes the base at its dtype and trains
  adapters of rank r on the chosen matrices; QLoRA stores the frozen linear weights in NF4 with
  double-quantized scales, 4 + 8/64 + 32/(64 x 256) = 4.127 bits (Dettmers et al. 2023, §3).
- **optimizer state** per trainable parameter: AdamW m and v in fp32 (8 B); bitsandbytes 8-bit
  AdamW 2 B plus one fp32 absmax per 256-element block per state (2 + 8/256 = 2.031 B; tensors
  under 4,096 elements keep fp32 states); SGD with momentum 4 B; Adafactor without momentum a row
  and a column factor per matrix, 4(n + m) B (Shazeer and Stern 2018).
- **ZeRO / FSDP** over ``dp`` devices (Rajbhandari et al. 2019, §3.1): stage 1 shards the
  optimizer state and master weights, stage 2 the gradients too, stage 3 (FSDP full shard) the
  weights too, with one layer's weights gathered at a time. Offload moves the optimizer state
  and master weights to host memory.
- **activations** saved for backward, counted tensor by tensor for the architecture (the
  accounting of Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models", §4, applied to pre-norm RoPE models without dropout): per layer the layer input,
  both normalised inputs, Q, K and V, the attention output (the kernel's and the contiguous copy
  the output projection reads), the residual, and the MLP's gate, up, SiLU(gate) and product
  (gated) or its up and GELU output (dense); FlashAttention adds its fp32 log-sum-exp per head
  and row, a naive kernel the s x s probabilities per head. Selective recomputation drops the
  attention core's saved outputs (and the probabilities), full recomputation keeps only each
  layer's input and rebuilds one layer at a time in backward.
- **logits**: the LM head's output, its fp32 copy for the loss and the log-probabilities the loss
  saves, then their gradient.

The peak is found along the step: the end of forward (every activation and the loss), the
backward pass (activations freed layer by layer as gradients appear; it peaks at one of its
ends) and the optimizer step (all gradients; an unfused, for-each optimizer also allocates
temporaries the size of the trainable parameters). Gradients persist across micro-batches when
accumulating, and always in mixed precision (its frameworks allocate one gradient buffer).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from roofline.dtypes import bytes_per_element
from roofline.models import ModelConfig
from roofline.workload import check_choice, check_positive_int

TRAIN_PRECISIONS: tuple[str, ...] = ("mixed", "amp", "fp32")
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
    compute_dtype: str = "bf16"  # the 16-bit dtype of mixed precision and autocast
    optimizer: str = "adamw"
    fused_optimizer: bool = True
    recompute: str = "none"
    flash_attention: bool = True
    method: str = "full"
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = ("q", "v")
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
        if self.method != "full":
            if not self.lora_targets:
                raise ValueError("lora_targets: name at least one of " + ", ".join(LORA_TARGETS))
            for target in self.lora_targets:
                check_choice(target, LORA_TARGETS, "lora target")
            if self.model.mla and set(self.lora_targets) & {"q", "k", "v"}:
                raise ValueError("lora_targets: q, k, v of MLA attention are not modelled; use o, gate, up, down")
        if np.any(np.asarray(self.seq_len) > self.model.max_context):
            raise ValueError(f"seq_len exceeds {self.model.name}'s maximum context of {self.model.max_context:,}")

    # ---- derived ---------------------------------------------------------------------------
    @property
    def act_bytes(self) -> float:
        return 4.0 if self.precision == "fp32" else bytes_per_element(self.compute_dtype)

    @property
    def accumulation_steps(self) -> int:
        """Micro-batches per optimizer step on each device to reach ``global_batch``."""
        if self.global_batch is None:
            return 1
        per_step = int(np.max(self.micro_batch)) * self.dp
        return max(1, -(-self.global_batch // per_step))

    @property
    def persistent_grads(self) -> bool:
        return self.precision == "mixed" or self.accumulation_steps > 1 or self.zero >= 2


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
    # MLP matrices: the dense MLP, each routed expert and the shared experts (one entry per width).
    mlps = [(m.intermediate_size, m.dense_mlp_layers)]
    if m.moe:
        mlps.append((m.moe.expert_intermediate_size, m.moe_layers * m.moe.num_experts))
        if m.moe.shared_experts:
            width = m.moe.shared_expert_intermediate_size or m.moe.expert_intermediate_size
            mlps.append((width, m.moe_layers * m.moe.shared_experts))
    mlps = [(width, count) for width, count in mlps if count]
    names = ("gate", "up", "down") if m.mlp == "gated" else ("up", "down")
    for width, count in mlps:
        suffix = "" if len(mlps) == 1 else f"@{width}"
        for name in names:
            shapes[name + suffix] = (width, h, count) if name == "down" else (h, width, count)
    return shapes


def lora_params(m: ModelConfig, rank: int, targets: tuple[str, ...]) -> int:
    """Adapter parameters: r x (in + out) for every targeted matrix (A is r x in, B is out x r)."""
    total = 0
    for key, (n_in, n_out, count) in linear_shapes(m).items():
        if key.split("@")[0] in targets:
            total += rank * (n_in + n_out) * count
    return total


def _linear_weight_params(m: ModelConfig) -> int:
    """Parameters in linear matrices (what QLoRA stores in NF4): all but embeddings and norms."""
    counts = m.param_counts()
    return counts["total"] - counts["embedding"] - m.norm_params() * (m.num_layers * m.norms_per_layer + 1)


def _small_tensor_params(m: ModelConfig) -> int:
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


# ---- memory ----------------------------------------------------------------------------------
def _optimizer_bytes(s: TrainSetup, p: Params) -> float:
    if s.optimizer == "adamw":
        return 8.0 * p.trainable
    if s.optimizer == "sgd-momentum":
        return 4.0 * p.trainable
    if s.optimizer == "adamw-8bit":
        small = _small_tensor_params(s.model) if s.method == "full" else 0
        return ADAM8_BYTES * (p.trainable - small) + 8.0 * small
    # Adafactor without momentum: a row and a column factor per matrix, a full second moment for vectors.
    in_matrices = sum(n * k for n, k in p.optimizer_matrices)
    factors = sum(n + k for n, k in p.optimizer_matrices)
    vectors = max(0, p.trainable - in_matrices) if s.method == "full" else 0
    return 4.0 * (factors + vectors)


def _trains(s: TrainSetup, matrix: str) -> bool:
    """Whether a linear matrix has a gradient to compute (its weight, or its LoRA adapter)."""
    return s.method == "full" or matrix in s.lora_targets


def _stream_bytes(s: TrainSetup) -> float:
    """Bytes per element of what the norms keep (their input, the normalised x): fp32 under
    autocast (it runs norms in fp32, upcasting a 16-bit input) and in fp32; 16-bit in mixed
    precision."""
    return 4.0 if s.precision in ("amp", "fp32") else s.act_bytes


def _casts_per_linear(s: TrainSetup) -> bool:
    """Autocast: every linear casts (and saves) its own 16-bit copy of the fp32 norm output."""
    return s.precision == "amp"


def layer_saved_bytes(s: TrainSetup) -> dict[str, np.ndarray]:
    """Bytes each tensor one layer saves for backward holds, per micro-batch.

    As PyTorch's autograd saves them: a linear layer keeps its input only when its weight (or
    adapter) is trained; under autocast each linear keeps its own 16-bit copy of an fp32 input
    (separate q, k, v and gate, up projections, as Hugging Face models have them), while the
    residual stream and the norms stay fp32; Megatron-style mixed precision runs fused QKV and
    gate-up projections with 16-bit activations throughout. A fused norm kernel (CUDA) keeps its
    input and statistics; PyTorch's decomposed RMSNorm (a CPU) also keeps the normalised x when
    the norm's scale is trained. SDPA keeps q, k, v, its output and, FlashAttention-style, an
    fp32 log-sum-exp per head and row; a naive kernel the s x s probabilities instead."""
    m = s.model
    t = np.asarray(s.micro_batch, float) * np.asarray(s.seq_len, float)  # tokens
    sq = np.asarray(s.seq_len, float)
    h, hd, nh = m.hidden_size, m.head_dim, m.num_heads
    act = s.act_bytes  # 16-bit activations (4 in fp32)
    stream = _stream_bytes(s)  # the residual stream and the norms
    if m.mla:
        q, k, v = nh * m.qk_head_dim, nh * m.qk_head_dim, nh * m.v_head_dim
    else:
        q, k, v = nh * hd, m.num_kv_heads * hd, m.num_kv_heads * hd

    def copies(matrices: tuple[str, ...]) -> int:
        """How many saved copies of a shared input the listed linears make."""
        trained = sum(_trains(s, x) for x in matrices)
        if _casts_per_linear(s):
            return trained  # one 16-bit cast per linear
        return min(1, trained)  # shared, or one fused linear (mixed)

    norm_extra = 0 if s.fused_norms or m.norm == "layernorm" or s.method != "full" else 1
    attention_in = "q", "k", "v"
    mlp_in = ("gate", "up") if m.mlp == "gated" else ("up",)
    out = {
        "layer input and residual": t * h * stream * (1 if m.parallel_attention else 2),
        "normalised x (decomposed norms)": t * h * stream * norm_extra * (1 if m.parallel_attention else 2),
        "inputs of the QKV projections": t * h * (act if _casts_per_linear(s) else stream) * copies(attention_in),
        "q, k, v": t * (q + k + v) * act,
        "attention output": t * nh * m.v_head_dim * act,
        "inputs of the MLP's first projections": (
            t * h * (act if _casts_per_linear(s) else stream) * copies(mlp_in) * (0 if m.parallel_attention else 1)
        ),
    }
    if m.qk_norm:
        out["QK norm"] = t * (q + k) * act * (2 if m.qk_norm == "rmsnorm" and not s.fused_norms else 1)
    if s.flash_attention:
        out["softmax statistics (fp32)"] = t * nh * 4.0
    else:
        out["attention probabilities"] = t * sq * nh * act  # s x s per head and sequence
    i = m.intermediate_size
    if m.moe and m.moe_layers:
        e = m.moe
        width = e.expert_intermediate_size
        share = m.moe_layers / m.num_layers
        per_token = e.experts_per_token * width + e.shared_experts * (e.shared_expert_intermediate_size or width)
        mlp_width = (1 - share) * i + share * per_token
        out["router"] = share * t * e.num_experts * 4.0
    else:
        mlp_width = i
    # Gated: gate, up and SiLU(gate), and their product when down is trained; dense: up, and
    # GELU(up) when down is trained.
    kept = (3 if m.mlp == "gated" else 1) + (1 if _trains(s, "down") else 0)
    out["MLP"] = t * mlp_width * kept * act
    if s.method != "full":  # each adapter keeps its rank-r intermediate
        out["LoRA intermediates"] = t * s.lora_rank * len(s.lora_targets) * act
    if s.recompute == "selective":  # the attention core is recomputed: its output and statistics go
        for key in ("attention probabilities", "softmax statistics (fp32)", "attention output"):
            out.pop(key, None)
    return out


def activation_bytes(s: TrainSetup) -> tuple[np.ndarray, np.ndarray]:
    """(saved activations of the whole model, one layer's without recomputation) per device."""
    m = s.model
    t = np.asarray(s.micro_batch, float) * np.asarray(s.seq_len, float)
    stream = _stream_bytes(s)
    one_layer = sum(layer_saved_bytes(replace(s, recompute="none")).values())
    # The final norm: its input, the normalised x (decomposed), and the LM head's input when
    # the head (or the tied embedding) is trained.
    head_trained = s.method == "full"
    final = t * m.hidden_size * stream * (1 + (0 if s.fused_norms or not head_trained else 1))
    if head_trained:
        final = final + t * m.hidden_size * (s.act_bytes if _casts_per_linear(s) else stream)
    if s.recompute == "full":
        # Only each layer's input is kept; backward rebuilds one layer at a time.
        return m.num_layers * t * m.hidden_size * stream + final, one_layer
    return m.num_layers * sum(layer_saved_bytes(s).values()) + final, one_layer


def logits_bytes(s: TrainSetup) -> tuple[np.ndarray, np.ndarray]:
    """(at the loss in forward, at its backward). Forward: the LM head's output, its fp32 copy
    (none in fp32) and the log-probabilities the loss saves. Backward: the log-probabilities,
    their gradient and the logits' gradient in fp32."""
    t = np.asarray(s.micro_batch, float) * np.asarray(s.seq_len, float)
    v = s.model.vocab_size
    copy = 0.0 if s.precision == "fp32" else 4.0
    return t * v * (s.act_bytes + copy + 4.0), t * v * 12.0


@dataclass(frozen=True)
class TrainMemory:
    """Bytes per device: each term as the step's peak holds it (arrays over a sweep)."""

    weights_bytes: float
    autocast_copies_bytes: float
    master_bytes: float
    optimizer_bytes: float
    grads_bytes: float  # all gradients (at the optimizer step)
    activations_bytes: np.ndarray  # everything saved for backward, at the end of forward
    logits_bytes: np.ndarray  # at the loss, in forward
    peak_bytes: np.ndarray
    peak_at: np.ndarray  # "forward end", "backward start", "backward end", "optimizer step"
    at_peak: dict[str, np.ndarray]  # the live terms at the peak, which add to peak_bytes
    host_bytes: float  # optimizer state and master weights offloaded to host memory
    params: Params

    def to_json(self) -> dict[str, object]:
        def num(x):
            return np.asarray(x, float).tolist()

        return {
            "peak_bytes": num(self.peak_bytes),
            "peak_at": np.asarray(self.peak_at).tolist(),
            "at_peak": {k: num(v) for k, v in self.at_peak.items()},
            "weights_bytes": float(self.weights_bytes),
            "autocast_copies_bytes": float(self.autocast_copies_bytes),
            "master_bytes": float(self.master_bytes),
            "optimizer_bytes": float(self.optimizer_bytes),
            "grads_bytes": float(self.grads_bytes),
            "activations_bytes": num(self.activations_bytes),
            "logits_bytes": num(self.logits_bytes),
            "host_bytes": float(self.host_bytes),
            "params": self.params.total,
            "trainable_params": self.params.trainable,
        }


PHASES = ("forward end", "backward start", "backward end", "optimizer step")


def _grad_bytes_per_param(s: TrainSetup) -> float:
    """Gradient bytes per trainable parameter on one device, sharding included.

    Mixed precision keeps 16-bit gradients (the ZeRO paper's 2 bytes), or with ``fp32_grads``
    accumulates them in fp32 (Megatron's default for bf16; DeepSpeed's fp32 gradient
    partitions): 4 bytes, plus the reduce-scattered 16-bit partition under ZeRO-2 and nothing
    16-bit under ZeRO-3 (gradients land in their fp32 partition), as DeepSpeed's estimators count.
    amp and fp32 keep fp32 gradients. ZeRO-2 and 3 shard them over the data-parallel devices."""
    n = s.dp
    if s.precision != "mixed":
        return 4.0 / n if s.zero >= 2 else 4.0
    if not s.fp32_grads:
        return 2.0 / n if s.zero >= 2 else 2.0
    return {0: 4.0, 1: 4.0, 2: (2.0 + 4.0) / n, 3: 4.0 / n}[s.zero]


def training_memory(s: TrainSetup) -> TrainMemory:
    """Memory per device over the step; the peak is the largest of its phases (see the module)."""
    m = s.model
    p = params(s)
    n = s.dp
    compute = s.act_bytes
    grad_bytes = 2.0 if s.precision == "mixed" else 4.0  # the weights' own dtype
    # Weights as the step holds them.
    if s.method == "full":
        weights = p.total * grad_bytes
    else:
        if s.method == "qlora":
            linear = _linear_weight_params(m)
            base = linear * NF4_BITS / 8 + (p.frozen - linear) * compute
        else:
            base = p.frozen * (4.0 if s.precision == "fp32" else compute)
        weights = base + p.trainable * grad_bytes
    # Autocast saves a 16-bit copy of every weight a linear layer uses, until its backward.
    autocast = 0.0
    if s.precision == "amp":  # fp32 weights cast once per step (autocast caches the casts)
        if s.method == "full":
            head = m.vocab_size * m.hidden_size if m.tied_embeddings else 0
            autocast = (_linear_weight_params(m) + head) * compute
        else:  # the base is stored in 16 bits already; only the fp32 adapters are cast
            autocast = p.trainable * compute
    master = 4.0 * p.trainable if s.precision == "mixed" else 0.0
    grads = p.trainable * _grad_bytes_per_param(s)
    optimizer = _optimizer_bytes(s, p)
    if s.zero >= 1:
        optimizer, master = optimizer / n, master / n
    if s.zero >= 3:
        layer = m.attention_params() + (m.moe_params()[0] if m.moe else m.mlp_params())
        weights = weights / n + 2 * layer * grad_bytes  # the layer in use and the next one prefetched
    host = 0.0
    if s.offload_optimizer:
        host, optimizer, master = optimizer + master, 0.0, 0.0
    activations, one_layer = activation_bytes(s)
    loss_fwd, loss_bwd = logits_bytes(s)
    zero = np.zeros(np.broadcast_shapes(np.shape(activations), np.shape(loss_fwd)))
    live_grads = grads if s.persistent_grads else 0.0
    # A tied embedding's two gradients (from the LM head and from the lookup) are summed at the
    # end of backward: two more vocab x hidden tensors for a moment.
    tied_bytes = 4.0 if s.fp32_grads else grad_bytes
    tied = 2 * m.vocab_size * m.hidden_size * tied_bytes if (m.tied_embeddings and s.method == "full") else 0.0
    rebuild = one_layer if s.recompute == "full" else 0.0
    # A for-each (unfused) AdamW allocates one temporary the size of the trainable parameters.
    temporaries = 0.0 if s.fused_optimizer or s.optimizer != "adamw" else 4.0 * p.trainable / (n if s.zero else 1)
    static = {
        "weights": weights + zero,
        "master weights (fp32)": master + zero,
        "optimizer state": optimizer + zero,
    }
    phases = {
        "forward end": {
            **static,
            "autocast weight copies": autocast + zero,
            "gradients": live_grads + zero,
            "activations": activations + zero,
            "logits and loss": loss_fwd + zero,
        },
        "backward start": {
            **static,
            "autocast weight copies": autocast + zero,
            "gradients": live_grads + zero,
            "activations": activations + zero,
            "logits and loss": loss_bwd + zero,
            "transient": rebuild + zero,
        },
        "backward end": {**static, "gradients": grads + zero, "transient": tied + zero},
        "optimizer step": {**static, "gradients": grads + zero, "transient": temporaries + zero},
    }
    totals = np.stack([sum(terms.values()) for terms in phases.values()])
    which = totals.argmax(axis=0)
    keys = ["weights", "autocast weight copies", "master weights (fp32)", "optimizer state", "gradients"]
    keys += ["activations", "logits and loss", "transient"]
    at_peak = {k: np.choose(which, [terms.get(k, zero) for terms in phases.values()]) for k in keys}
    return TrainMemory(
        weights_bytes=weights,
        autocast_copies_bytes=autocast,
        master_bytes=master,
        optimizer_bytes=optimizer,
        grads_bytes=grads,
        activations_bytes=activations + zero,
        logits_bytes=loss_fwd + zero,
        peak_bytes=totals.max(axis=0),
        peak_at=np.array(PHASES)[which],
        at_peak=at_peak,
        host_bytes=host,
        params=p,
    )


# ---- the training step on the roofline --------------------------------------------------------
# Offloading the optimizer: gradients go down to the host and updated 16-bit weights come back
# over the device's host link (its recorded figure, else PCIe 4.0 x16: 32 GB/s per direction),
# and the update runs at the host's memory bandwidth. The host's figure is a setting, not a
# datasheet figure: 100 GB/s is a planning value for a server's DDR (override it to yours).
DEFAULT_HOST_LINK_BYTES_PER_S = 32e9
DEFAULT_HOST_MEMORY_BYTES_PER_S = 100e9
# FlashAttention's backward does 2.5x its forward's matmul work (five matmuls to two; Dao 2023).
ATTENTION_BACKWARD_FLOPS = 2.5
# Bytes an optimizer update moves per trainable parameter: read the gradient, the weights (or
# fp32 master) and the state, write the weights and the state. A fused kernel does it in one pass;
# for-each (unfused) kernels make several passes over the same tensors.
OPTIMIZER_STATE_BYTES = {"adamw": 8.0, "adamw-8bit": ADAM8_BYTES, "sgd-momentum": 4.0, "adafactor": 0.0}
UNFUSED_PASSES = (
    2.3  # AdamW for-each: ~64 B/param against the fused kernel's 28 (lerp, mul, addcmul, sqrt, div, addcdiv)
)


def _forward_workload(s: TrainSetup):
    from roofline.workload import Precision, Workload

    dtype = "fp32" if s.precision == "fp32" else s.compute_dtype
    weight = dtype if s.method != "qlora" else "int4"
    precision = Precision(weight_dtype=weight, act_dtype=dtype, kv_dtype=dtype)
    batch, seq = int(np.max(s.micro_batch)), int(np.max(s.seq_len))
    return Workload(
        s.model, "prefill", batch, seq, precision=precision, attention="flash" if s.flash_attention else "naive"
    )


def training_ops(s: TrainSetup) -> list:
    """Every op of one optimizer step per device: forward and backward of each micro-batch (times
    the accumulation steps), recomputation, the optimizer update and the gradient communication."""
    from roofline.engine import Op
    from roofline.ops import PROJECTIONS, VECTOR, step_ops

    w = _forward_workload(s)
    m = s.model
    tokens = float(w.tokens)
    micro = s.accumulation_steps
    forward = []
    for op in step_ops(w):
        if op.group == "logits":  # training needs every token's logits, and a loss over them
            v = m.vocab_size
            op = Op(
                name="logits (LM head)",
                flops=2.0 * tokens * m.hidden_size * v,
                dtype=op.dtype,
                weight_bytes=v * m.hidden_size * w.precision.act_bytes,
                act_bytes=tokens * m.hidden_size * w.precision.act_bytes + tokens * v * 4.0,
                count=1,
                group="logits",
                meta={"kind": "matmul", "m": tokens},
            )
            forward.append(op)
            forward.append(
                Op(
                    name="loss (log-softmax, fp32)",
                    flops=5.0 * tokens * v,
                    dtype=VECTOR,
                    act_bytes=3 * tokens * v * 4.0,
                    count=1,
                    group="logits",
                    meta={"kind": "elementwise"},
                )
            )
        elif op.meta.get("kind") != "communication":
            forward.append(op)
    ops = []
    for op in forward:
        ops.append(replace(op, name=f"forward: {op.name}", count=op.count * micro, phase="forward"))
    for op in forward:
        kind = op.meta.get("kind")
        trained = s.method == "full" or any(t in op.name.lower() for t in _OP_TARGETS_BY_NAME.get(op.name, ()))
        if kind == "matmul":
            # Gradient of the input always; of the weight too when it is trained (or adapted).
            factor = 2.0 if trained else 1.0
            backward = replace(op, flops=op.flops * factor, act_bytes=op.act_bytes * factor)
        elif kind == "attention":
            backward = replace(op, flops=op.flops * ATTENTION_BACKWARD_FLOPS, act_bytes=op.act_bytes * 2)
        else:  # elementwise: read the saved input and the incoming gradient, write the gradient
            backward = replace(op, flops=op.flops * 2, act_bytes=op.act_bytes * 1.5)
        ops.append(replace(backward, name=f"backward: {op.name}", count=op.count * micro, phase="backward"))
    if s.recompute != "none":
        for op in forward:
            layer_op = op.count == m.num_layers or op.group in (
                "attention",
                PROJECTIONS,
                "mlp",
                "moe",
                "norm",
                "residual",
            )
            core = op.meta.get("kind") == "attention"
            if op.group not in ("embedding", "logits") and (layer_op if s.recompute == "full" else core):
                ops.append(replace(op, name=f"recompute: {op.name}", count=op.count * micro, phase="recompute"))
    ops += _optimizer_ops(s)
    ops += _gradient_comm_ops(s)
    return ops


# Forward op names and the LoRA targets that make their weight trainable.
_OP_TARGETS_BY_NAME = {
    "QKV projection": ("q", "k", "v"),
    "output projection": ("o",),
    "MLP gate+up projection": ("gate", "up"),
    "MLP up projection": ("up",),
    "MLP down projection": ("down",),
}


def _optimizer_ops(s: TrainSetup) -> list:
    from roofline.engine import Op
    from roofline.ops import VECTOR

    p = params(s)
    n = p.trainable / (s.dp if s.zero >= 1 else 1)
    moved = optimizer_bytes_moved(s)
    passes = 1.0 if s.fused_optimizer or s.optimizer != "adamw" else UNFUSED_PASSES
    if s.offload_optimizer:
        return []  # on the host: timed by offload_time_s
    where = ""
    return [
        Op(
            name=f"optimizer step ({s.optimizer}, {'fused' if passes == 1 else 'for-each'}){where}",
            flops=10.0 * n,
            dtype=VECTOR,
            act_bytes=moved * passes,
            count=1,
            launches=1 if passes == 1 else 7,
            group="optimizer",
            phase="optimizer",
            meta={"kind": "elementwise", "offloaded": s.offload_optimizer},
        )
    ]


def optimizer_bytes_moved(s: TrainSetup) -> float:
    """Bytes one optimizer update moves on one device (see ``_optimizer_ops``)."""
    p = params(s)
    n = p.trainable / (s.dp if s.zero >= 1 else 1)
    grad = 2.0 if s.precision == "mixed" else 4.0
    state = OPTIMIZER_STATE_BYTES[s.optimizer]
    if s.optimizer == "adafactor":
        state = 2 * 4.0 * sum(a + b for a, b in p.optimizer_matrices) / max(p.trainable, 1)
    extra = 2.0 if s.precision == "mixed" else 0.0  # the 16-bit copy written beside the master
    return n * (grad + 4.0 + 4.0 + 2 * state + extra)


def offload_time_s(s: TrainSetup, hw, host_memory_bytes_per_s: float = DEFAULT_HOST_MEMORY_BYTES_PER_S) -> float:
    """An offloaded optimizer step: gradients down, weights up, the update on the host."""
    if not s.offload_optimizer:
        return 0.0
    recorded = hw.interconnect.host_link_gb_per_s if hw.interconnect else None
    link = recorded * 1e9 if recorded else DEFAULT_HOST_LINK_BYTES_PER_S
    p = params(s)
    n = p.trainable / (s.dp if s.zero >= 1 else 1)
    grad = 2.0 if s.precision == "mixed" else 4.0
    transfers = n * grad / link + n * grad / link  # gradients down, updated weights up
    return transfers + optimizer_bytes_moved(s) / host_memory_bytes_per_s


def _gradient_comm_ops(s: TrainSetup) -> list:
    """Data parallelism: DDP all-reduces the gradients; ZeRO 1/2 reduce-scatters them and
    all-gathers the updated weights; ZeRO-3 (FSDP) also all-gathers the weights in forward and
    again in backward. Ring collectives: each device sends (N - 1)/N of the message per pass."""
    from roofline.engine import Op
    from roofline.ops import VECTOR

    n = s.dp
    if n <= 1:
        return []
    p = params(s)
    grad = (2.0 if s.precision == "mixed" and not s.fp32_grads else 4.0) * p.trainable
    weights = (2.0 if s.precision == "mixed" else 4.0) * p.trainable
    ring = (n - 1) / n
    if s.zero == 0:
        passes = [("gradient all-reduce", 2 * ring * grad, 2)]
    elif s.zero in (1, 2):
        passes = [("gradient reduce-scatter", ring * grad, 1), ("weight all-gather", ring * weights, 1)]
    else:
        passes = [
            ("gradient reduce-scatter", ring * grad, 1),
            ("weight all-gather (forward)", ring * weights * s.accumulation_steps, 1),
            ("weight all-gather (backward)", ring * weights * s.accumulation_steps, 1),
        ]
    return [
        Op(
            name=name,
            flops=0.0,
            dtype=VECTOR,
            act_bytes=sent,
            comm_bytes=sent,
            collectives=collectives * s.model.num_layers,
            count=1,
            group="communication",
            phase="communication",
            meta={"kind": "communication"},
        )
        for name, sent, collectives in passes
    ]


# ---- the whole analysis: memory, fit, step time, levers ----------------------------------------
@dataclass(frozen=True)
class TrainResult:
    setup: TrainSetup
    hardware_id: str
    memory: TrainMemory
    capacity_bytes: float
    fits: bool
    largest_micro_batch: int  # at this sequence length (0: not even one sequence fits)
    table: object  # engine.OpTable of the step's ops
    step_time_s: float
    tokens_per_step: float  # over every data-parallel device
    bound: str
    mfu: float
    offload_s: float = 0.0  # the offloaded optimizer step (host link and host memory)
    notes: tuple[str, ...] = ()

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s if self.step_time_s else 0.0

    def to_json(self) -> dict[str, object]:
        t = self.table
        bounds = t.bounds
        rows = [
            {
                "name": op.name,
                "phase": op.phase,
                "count": op.count,
                "flops": float(np.sum(t.flops[i])),
                "bytes": float(np.sum(t.bytes[i])),
                "time_s": float(np.sum(t.time_s[i])),
                "bound": bounds[i],
            }
            for i, op in enumerate(t.ops)
        ]
        by_phase: dict[str, float] = {}
        for row in rows:
            by_phase[row["phase"]] = by_phase.get(row["phase"], 0.0) + row["time_s"]
        if self.offload_s:
            by_phase["optimizer (offloaded to the host)"] = self.offload_s
        s = self.setup
        return {
            "model": s.model.id,
            "hardware": self.hardware_id,
            "seq_len": int(np.max(s.seq_len)),
            "micro_batch": int(np.max(s.micro_batch)),
            "accumulation_steps": s.accumulation_steps,
            "global_batch": s.global_batch or int(np.max(s.micro_batch)) * s.dp,
            "dp": s.dp,
            "zero": s.zero,
            "precision": s.precision,
            "optimizer": s.optimizer,
            "method": s.method,
            "recompute": s.recompute,
            "memory": self.memory.to_json(),
            "capacity_bytes": self.capacity_bytes,
            "fits": self.fits,
            "largest_micro_batch": self.largest_micro_batch,
            "step_time_s": self.step_time_s,
            "time_by_phase_s": by_phase,
            "tokens_per_s": self.tokens_per_s,
            "bound": self.bound,
            "mfu": self.mfu,
            "ops": rows,
            "notes": list(self.notes),
        }


def _capacity(hw, settings) -> float:
    from roofline.memory import capacity_bytes

    return capacity_bytes(hw, settings)


def largest_micro_batch(s: TrainSetup, capacity: float, limit: int = 1 << 16) -> int:
    """The most sequences per micro-batch whose peak fits (a vectorised bisection)."""
    from roofline.memory import largest_fitting

    def fits(batch: np.ndarray) -> np.ndarray:
        return training_memory(replace(s, micro_batch=batch)).peak_bytes <= capacity

    return int(largest_fitting(fits, np.array([limit]))[0])


def analyze_training(s: TrainSetup, hw, settings=None, with_largest: bool = True) -> TrainResult:
    """Memory, fit, and the step on ``hw``'s roofs (one device's view of a data-parallel group)."""
    from roofline.engine import evaluate
    from roofline.settings import Settings

    settings = settings or Settings()
    notes = []
    dtype = "fp32" if s.precision == "fp32" else s.compute_dtype
    if dtype not in hw.peak_tflops.as_dict():
        raise ValueError(f"{hw.id} has no {dtype} peak; allowed dtypes for {hw.id}: {', '.join(hw.dtypes)}")
    if s.dp > 1 and hw.group_link(s.dp)[0] is None:
        raise ValueError(f"dp: {s.dp} devices cannot communicate on {hw.id} ({hw.group_link(s.dp)[1]})")
    memory = training_memory(s)
    capacity = _capacity(hw, settings)
    ceilings = settings.ceilings(hw, tp=max(s.dp, 1) if s.dp > 1 else 1, cuda_graphs=False)
    ops = training_ops(s)
    if s.offload_optimizer:
        notes.append(
            "offloaded optimizer: gradients and weights cross the host link and the update runs at "
            f"{DEFAULT_HOST_MEMORY_BYTES_PER_S / 1e9:.0f} GB/s of host memory bandwidth (a planning value)"
        )
    table = evaluate(ops, ceilings)
    offload = offload_time_s(s, hw)
    step = float(table.step_time_s) + offload
    tokens = float(np.max(s.micro_batch) * np.max(s.seq_len)) * s.accumulation_steps * s.dp
    # Model FLOPs: forward and backward as counted (not recomputation) over every device.
    useful = sum(float(table.flops[i]) for i, op in enumerate(ops) if op.phase in ("forward", "backward")) * s.dp
    peak = hw.peak_flops_per_s(dtype) * s.dp
    mfu = useful / step / peak if step else 0.0
    bound = table.total_bound
    return TrainResult(
        setup=s,
        hardware_id=hw.id,
        memory=memory,
        capacity_bytes=capacity,
        fits=bool(np.all(memory.peak_bytes <= capacity)),
        largest_micro_batch=largest_micro_batch(s, capacity) if with_largest else -1,
        table=table,
        step_time_s=step,
        tokens_per_step=tokens,
        bound=bound,
        mfu=mfu,
        offload_s=offload,
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class TrainLever:
    name: str
    peak_bytes: float
    fits: bool
    step_time_s: float
    slowdown: float  # step time against the setup's own (per token where the micro-batch changes)

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "peak_bytes": self.peak_bytes,
            "fits": self.fits,
            "step_time_s": self.step_time_s,
            "slowdown": self.slowdown,
        }


def _seconds_per_device_token(r: TrainResult) -> float:
    """Step time per token each device processes: throughput per device, whatever the group."""
    return r.step_time_s / (r.tokens_per_step / r.setup.dp) if r.tokens_per_step else 0.0


def levers(s: TrainSetup, hw, settings=None) -> list[TrainLever]:
    """Each memory lever applied alone and evaluated: its peak, whether it fits, its speed."""
    base = analyze_training(s, hw, settings, with_largest=False)
    per_token = _seconds_per_device_token(base)
    candidates: list[tuple[str, TrainSetup]] = []
    if s.recompute != "full":
        candidates.append(("full recomputation (activation checkpointing)", replace(s, recompute="full")))
    if s.recompute == "none":
        candidates.append(("selective recomputation (the attention core)", replace(s, recompute="selective")))
    if not s.flash_attention:
        candidates.append(("FlashAttention", replace(s, flash_attention=True)))
    if s.optimizer == "adamw":
        candidates.append(("8-bit AdamW (bitsandbytes)", replace(s, optimizer="adamw-8bit")))
    if not s.fused_optimizer and s.optimizer == "adamw":
        candidates.append(("fused AdamW", replace(s, fused_optimizer=True)))
    if s.method == "full":
        candidates.append(("LoRA r=16 on q, v", replace(s, method="lora", lora_rank=16, lora_targets=("q", "v"))))
        candidates.append(
            ("QLoRA (NF4 base) r=16 on q, v", replace(s, method="qlora", lora_rank=16, lora_targets=("q", "v")))
        )
    if int(np.max(s.micro_batch)) > 1:
        total = int(np.max(s.micro_batch)) * s.accumulation_steps * s.dp
        candidates.append(
            (
                "micro-batch 1 with gradient accumulation",
                replace(s, micro_batch=1, global_batch=s.global_batch or total),
            )
        )
    if s.dp > 1 and s.zero < 3:
        candidates.append((f"ZeRO-3 / FSDP over {s.dp} devices", replace(s, zero=3)))
    if s.dp == 1:
        candidates.append(("ZeRO-3 / FSDP over 8 devices", replace(s, dp=8, zero=3)))
    if not s.offload_optimizer:
        candidates.append(("offload the optimizer state to the host", replace(s, offload_optimizer=True)))
    out = []
    for name, changed in candidates:
        try:
            r = analyze_training(changed, hw, settings, with_largest=False)
        except ValueError:
            continue
        out.append(
            TrainLever(
                name=name,
                peak_bytes=float(np.max(r.memory.peak_bytes)),
                fits=r.fits,
                step_time_s=r.step_time_s,
                slowdown=_seconds_per_device_token(r) / per_token if per_token else 1.0,
            )
        )
    return out


def plan_to_fit(s: TrainSetup, hw, settings=None, most: int = 5) -> tuple[list[str], TrainResult | None]:
    """Levers combined until the setup fits: each round adds the lever that saves the most memory
    per unit of slowdown. Levers that train the same model come first (recomputation, 8-bit
    state, accumulation, sharding, offload); LoRA and QLoRA, which train something else, only if
    those are not enough. ([], None) if it fits already; otherwise the levers and the result,
    fitting or not."""
    current = analyze_training(s, hw, settings, with_largest=False)
    if current.fits:
        return [], None
    best: tuple[list[str], TrainResult] = ([], current)
    for allow_adapters in (False, True):
        chosen: list[str] = []
        setup, result = s, current
        for _ in range(most):
            options = []
            for lever in levers(setup, hw, settings):
                if not allow_adapters and "LoRA" in lever.name:
                    continue
                saved = float(np.max(result.memory.peak_bytes)) - lever.peak_bytes
                if saved > 0:
                    options.append((saved / max(lever.slowdown, 1e-3) ** 4, lever.name))
            if not options:
                break
            name = max(options)[1]
            setup = _apply_lever(setup, name)
            chosen.append(name)
            result = analyze_training(setup, hw, settings, with_largest=False)
            if result.fits:
                return chosen, result
        if float(np.max(result.memory.peak_bytes)) < float(np.max(best[1].memory.peak_bytes)):
            best = (chosen, result)
    return best


def _apply_lever(s: TrainSetup, name: str) -> TrainSetup:
    if name.startswith("full recomputation"):
        return replace(s, recompute="full")
    if name.startswith("selective"):
        return replace(s, recompute="selective")
    if name == "FlashAttention":
        return replace(s, flash_attention=True)
    if name.startswith("8-bit"):
        return replace(s, optimizer="adamw-8bit")
    if name == "fused AdamW":
        return replace(s, fused_optimizer=True)
    if name.startswith("LoRA"):
        return replace(s, method="lora", lora_rank=16, lora_targets=("q", "v"))
    if name.startswith("QLoRA"):
        return replace(s, method="qlora", lora_rank=16, lora_targets=("q", "v"))
    if name.startswith("micro-batch 1"):
        total = int(np.max(s.micro_batch)) * s.accumulation_steps * s.dp
        return replace(s, micro_batch=1, global_batch=s.global_batch or total)
    if name.startswith("ZeRO-3"):
        return replace(s, zero=3, dp=s.dp if s.dp > 1 else 8)
    if name.startswith("offload"):
        return replace(s, offload_optimizer=True)
    raise ValueError(f"lever: unknown {name!r}")
