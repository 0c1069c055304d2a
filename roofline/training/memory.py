"""Training memory per device over the step, term by term, and its peak.

- **weights** as the step holds them: mixed precision (Megatron, DeepSpeed) keeps 16-bit
  weights, 16-bit gradients and an fp32 master copy (2 + 2 + 4 bytes per trainable parameter);
  PyTorch autocast (``amp``) keeps fp32 weights and gradients and saves 16-bit copies of the
  weights for backward; fp32 keeps fp32 everything; pure bf16 keeps bf16 everything (weights,
  gradients and optimizer state, no master copy: 2 + 2 + 4 bytes per parameter under AdamW).
  LoRA freezes the base at its dtype and trains adapters of rank r on the chosen matrices; QLoRA
  stores the frozen linear weights in NF4.
- **optimizer state** per trainable parameter: AdamW m and v in fp32 (8 B; in pure bf16 4 B,
  PyTorch allocating the state like the parameter); bitsandbytes 8-bit AdamW 2 B plus one fp32
  absmax per 256-element block per state (2 + 8/256 = 2.031 B; tensors under 4,096 elements keep
  fp32 states); SGD with momentum 4 B (2 in pure bf16); Adafactor without momentum a row and a
  column factor per matrix, 4(n + m) B (2(n + m) in pure bf16; Shazeer and Stern 2018).
- **ZeRO / FSDP** over ``dp`` devices (Rajbhandari et al. 2019, §3.1): stage 1 shards the
  optimizer state and master weights, stage 2 the gradients too, stage 3 (FSDP full shard) the
  weights too, with one layer's weights gathered at a time. Offload moves the optimizer state
  and master weights to host memory.
- **activations** saved for backward (see ``activations``).
- **logits**: the LM head's output, its fp32 copy for the loss and the log-probabilities the loss
  saves, then their gradient.

The peak is found along the step: the end of forward (every activation and the loss), the start
of backward (the loss's and the logits' gradients beside every activation), the last layer's
backward (the logits' gradients and what the final norm and the LM head saved are freed, the
head's weight gradient exists; full recomputation rebuilds the last layer only now), the
layers' backward (activations freed layer by layer as gradients appear; it peaks at one of its
ends, the last layer's or the end of backward) and the optimizer step (all gradients; an
unfused, for-each optimizer also allocates temporaries the size of the trainable parameters).
Gradients persist across micro-batches when accumulating, and always in mixed precision (its
frameworks allocate one gradient buffer).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.training.activations import (
    activation_bytes,
    final_saved_bytes,
    logits_bytes,
    rebuilt_layer_bytes,
    stream_bytes,
)
from roofline.training.setup import (
    ADAM8_BYTES,
    NF4_BITS,
    Params,
    TrainSetup,
    linear_weight_params,
    params,
    small_tensor_params,
)


def _optimizer_bytes(s: TrainSetup, p: Params) -> float:
    state = s.optimizer_dtype_bytes
    if s.optimizer == "adamw":
        return 2 * state * p.trainable
    if s.optimizer == "sgd-momentum":
        return state * p.trainable
    if s.optimizer == "adamw-8bit":
        small = small_tensor_params(s.model) if s.method == "full" else 0
        return ADAM8_BYTES * (p.trainable - small) + 8.0 * small  # bitsandbytes: fp32 for small tensors
    # Adafactor without momentum: a row and a column factor per matrix, a full second moment for vectors.
    in_matrices = sum(n * k for n, k in p.optimizer_matrices)
    factors = sum(n + k for n, k in p.optimizer_matrices)
    vectors = max(0, p.trainable - in_matrices) if s.method == "full" else 0
    return state * (factors + vectors)


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
    peak_at: np.ndarray  # one of PHASES
    at_peak: dict[str, np.ndarray]  # the live terms at the peak, which add to peak_bytes
    by_phase: dict[str, dict[str, np.ndarray]]  # the live terms at each moment of PHASES
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


PHASES = ("forward end", "backward start", "last layer's backward", "backward end", "optimizer step")


def _grad_bytes_per_param(s: TrainSetup) -> float:
    """Gradient bytes per trainable parameter on one device, sharding included.

    Mixed precision keeps 16-bit gradients (the ZeRO paper's 2 bytes), or with ``fp32_grads``
    accumulates them in fp32 (Megatron's default for bf16; DeepSpeed's fp32 gradient
    partitions): 4 bytes, plus the reduce-scattered 16-bit partition under ZeRO-2 and nothing
    16-bit under ZeRO-3 (gradients land in their fp32 partition), as DeepSpeed's estimators count.
    amp and fp32 keep fp32 gradients, pure bf16 bf16 ones. ZeRO-2 and 3 shard them over the
    data-parallel devices."""
    n = s.dp
    if s.precision != "mixed":
        return s.weight_bytes / n if s.zero >= 2 else s.weight_bytes
    if not s.fp32_grads:
        return 2.0 / n if s.zero >= 2 else 2.0
    return {0: 4.0, 1: 4.0, 2: (2.0 + 4.0) / n, 3: 4.0 / n}[s.zero]


def training_memory(s: TrainSetup) -> TrainMemory:
    """Memory per device over the step; the peak is the largest of its phases (see the module)."""
    m = s.model
    p = params(s)
    n = s.dp
    compute = s.act_bytes
    grad_bytes = s.weight_bytes  # the weights' own dtype
    # Weights as the step holds them.
    if s.method == "full":
        weights = p.total * grad_bytes
    else:
        if s.method == "qlora":
            linear = linear_weight_params(m)
            base = linear * NF4_BITS / 8 + (p.frozen - linear) * compute
        else:
            base = p.frozen * (4.0 if s.precision == "fp32" else compute)
        weights = base + p.trainable * grad_bytes
    # Autocast saves a 16-bit copy of every weight a linear layer uses, until its backward.
    autocast = 0.0
    if s.precision == "amp":  # fp32 weights cast once per step (autocast caches the casts)
        if s.method == "full":
            head = m.vocab_size * m.hidden_size if m.tied_embeddings else 0
            autocast = (linear_weight_params(m) + head) * compute
        else:  # the base is stored in 16 bits already; only the fp32 adapters are cast
            autocast = p.trainable * compute
    master = 4.0 * p.trainable if s.precision == "mixed" else 0.0
    grads = p.trainable * _grad_bytes_per_param(s)
    optimizer = _optimizer_bytes(s, p)
    if s.zero >= 1:
        optimizer, master = optimizer / n, master / n
    if s.zero >= 3:
        layer = m.attention_params() + (m.moe_params()[0] if m.moe else m.mlp_params())
        # The layer in use and the next one prefetched, gathered as stored (NF4 under QLoRA).
        weights = weights / n + 2 * layer * weights / p.total
    host = 0.0
    if s.offload_optimizer:
        host, optimizer, master = optimizer + master, 0.0, 0.0
    activations, _ = activation_bytes(s)
    loss_fwd, loss_bwd = logits_bytes(s)
    zero = np.zeros(np.broadcast_shapes(np.shape(activations), np.shape(loss_fwd)))
    live_grads = grads if s.persistent_grads else 0.0
    # A tied embedding's two gradients (from the LM head and from the lookup) are summed at the
    # end of backward: two more vocab x hidden tensors for a moment.
    tied_bytes = 4.0 if s.fp32_grads else grad_bytes
    tied = 2 * m.vocab_size * m.hidden_size * tied_bytes if (m.tied_embeddings and s.method == "full") else 0.0
    # The LM head's backward is done before the last layer's begins: the logits' gradients and
    # what the final norm and the head saved are gone, the head's weight gradient is there (a tied
    # embedding's waits in autograd's buffer for its second part), and so is the gradient flowing
    # into the last layer. Full recomputation rebuilds that layer now, not beside the logits.
    head = m.vocab_size * m.hidden_size if s.method == "full" else 0
    head_grad = 0.0 if s.persistent_grads else head * _grad_bytes_per_param(s)
    head_copy = head * compute if s.precision == "amp" else 0.0  # autocast's copy, saved by the head
    tokens = np.asarray(s.micro_batch, float) * np.asarray(s.seq_len, float)
    incoming = tokens * m.hidden_size * stream_bytes(s)
    rebuild = rebuilt_layer_bytes(s) if s.recompute == "full" else 0.0
    # A for-each (unfused) AdamW allocates one temporary the size of the trainable parameters.
    unfused = not s.fused_optimizer and s.optimizer == "adamw"
    temporaries = s.optimizer_dtype_bytes * p.trainable / (n if s.zero else 1) if unfused else 0.0
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
        },
        "last layer's backward": {
            **static,
            "autocast weight copies": autocast - head_copy + zero,
            "gradients": live_grads + head_grad + zero,
            "activations": activations - final_saved_bytes(s) + zero,
            "transient": rebuild + incoming + zero,
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
        by_phase=phases,
        host_bytes=host,
        params=p,
    )
