"""Activations saved for backward and the logits at the loss, tensor by tensor.

Counted for the architecture with the accounting of Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models", §4, applied to pre-norm RoPE models without dropout:
per layer the layer input, both normalised inputs, Q, K and V, the attention output (the kernel's
and the contiguous copy the output projection reads), the residual, and the MLP's gate, up,
SiLU(gate) and product (gated) or its up and GELU output (dense); FlashAttention adds its fp32
log-sum-exp per head and row, a naive kernel the s x s probabilities per head. Selective
recomputation drops the attention core's saved outputs (and the probabilities), full
recomputation keeps only each layer's input and rebuilds one layer at a time in backward.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from roofline.training.setup import TrainSetup


def trains(s: TrainSetup, matrix: str) -> bool:
    """Whether a linear matrix has a gradient to compute (its weight, or its LoRA adapter)."""
    return s.method == "full" or matrix in s.lora_targets


def stream_bytes(s: TrainSetup) -> float:
    """Bytes per element of the residual stream (each layer's input): fp32 under autocast and in
    fp32; 16-bit in mixed precision and pure bf16."""
    return 4.0 if s.precision in ("amp", "fp32") else s.act_bytes


def _norm_bytes(s: TrainSetup) -> float:
    """Bytes per element of what an RMSNorm keeps (its input, and the normalised x where it is
    decomposed): the stream's dtype in a fused kernel; fp32 in PyTorch's decomposed RMSNorm,
    which upcasts a 16-bit input and keeps the fp32 upcast and the fp32 normalised x."""
    return 4.0 if not s.fused_norms and s.model.norm == "rmsnorm" else stream_bytes(s)


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
    input and statistics; PyTorch's decomposed RMSNorm (a CPU) keeps an fp32 upcast of its input,
    and also the fp32 normalised x when the norm's scale is trained. SDPA keeps q, k, v, its
    output and, FlashAttention-style, an fp32 log-sum-exp per head and row; a naive kernel the
    s x s probabilities instead."""
    m = s.model
    t = np.asarray(s.micro_batch, float) * np.asarray(s.seq_len, float)  # tokens
    sq = np.asarray(s.seq_len, float)
    h, hd, nh = m.hidden_size, m.head_dim, m.num_heads
    act = s.act_bytes  # 16-bit activations (4 in fp32)
    stream = stream_bytes(s)  # the residual stream
    norm = _norm_bytes(s)  # what the norms keep
    if m.mla:
        q, k, v = nh * m.qk_head_dim, nh * m.qk_head_dim, nh * m.v_head_dim
    else:
        q, k, v = nh * hd, m.num_kv_heads * hd, m.num_kv_heads * hd

    def copies(matrices: tuple[str, ...]) -> int:
        """How many saved copies of a shared input the listed linears make."""
        trained = sum(trains(s, x) for x in matrices)
        if _casts_per_linear(s):
            return trained  # one 16-bit cast per linear
        return min(1, trained)  # shared, or one fused linear (mixed)

    norm_extra = 0 if s.fused_norms or m.norm == "layernorm" or s.method != "full" else 1
    attention_in = "q", "k", "v"
    mlp_in = ("gate", "up") if m.mlp == "gated" else ("up",)
    out = {
        "layer input and residual": t * h * norm * (1 if m.parallel_attention else 2),
        "normalised x (decomposed norms)": t * h * norm * norm_extra * (1 if m.parallel_attention else 2),
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
    kept = (3 if m.mlp == "gated" else 1) + (1 if trains(s, "down") else 0)
    out["MLP"] = t * mlp_width * kept * act
    if s.method != "full":  # each adapter keeps its rank-r intermediate
        out["LoRA intermediates"] = t * s.lora_rank * len(s.lora_targets) * act
    if s.recompute == "selective":  # the attention core is recomputed: its output and statistics go
        for key in ("attention probabilities", "softmax statistics (fp32)", "attention output"):
            out.pop(key, None)
    return out


def final_saved_bytes(s: TrainSetup) -> np.ndarray:
    """What the final norm and the LM head save: the norm's input, the normalised x (decomposed),
    and the head's input when the head (or the tied embedding) is trained. Backward frees them
    (the head's, then the norm's) before it reaches the last layer."""
    m = s.model
    t = np.asarray(s.micro_batch, float) * np.asarray(s.seq_len, float)
    head_trained = s.method == "full"
    final = t * m.hidden_size * _norm_bytes(s) * (1 + (0 if s.fused_norms or not head_trained else 1))
    if head_trained:
        final = final + t * m.hidden_size * (s.act_bytes if _casts_per_linear(s) else stream_bytes(s))
    return final


def rebuilt_layer_bytes(s: TrainSetup) -> np.ndarray:
    """What backward allocates when full recomputation rebuilds one layer: everything the layer
    saves, less its input, which the checkpoint holds already when the first norm keeps the input
    itself (a fused kernel, or an input already in fp32) rather than an fp32 upcast of it."""
    m = s.model
    t = np.asarray(s.micro_batch, float) * np.asarray(s.seq_len, float)
    one_layer = sum(layer_saved_bytes(replace(s, recompute="none")).values())
    shared = t * m.hidden_size * stream_bytes(s) if _norm_bytes(s) == stream_bytes(s) else 0.0
    return one_layer - shared


def activation_bytes(s: TrainSetup) -> tuple[np.ndarray, np.ndarray]:
    """(saved activations of the whole model, one layer's without recomputation) per device."""
    m = s.model
    t = np.asarray(s.micro_batch, float) * np.asarray(s.seq_len, float)
    one_layer = sum(layer_saved_bytes(replace(s, recompute="none")).values())
    final = final_saved_bytes(s)
    if s.recompute == "full":
        # Only each layer's input is kept; backward rebuilds one layer at a time.
        return m.num_layers * t * m.hidden_size * stream_bytes(s) + final, one_layer
    return m.num_layers * sum(layer_saved_bytes(s).values()) + final, one_layer


def logits_bytes(s: TrainSetup) -> tuple[np.ndarray, np.ndarray]:
    """(at the loss in forward, at its backward). Forward: the LM head's output, its fp32 copy
    (none in fp32) and the log-probabilities the loss saves. Backward: the log-probabilities,
    their gradient and the logits' gradient in fp32."""
    t = np.asarray(s.micro_batch, float) * np.asarray(s.seq_len, float)
    v = s.model.vocab_size
    copy = 0.0 if s.precision == "fp32" else 4.0
    return t * v * (s.act_bytes + copy + 4.0), t * v * 12.0
