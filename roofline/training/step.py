"""The training step on the roofline: forward, backward and recomputation of each micro-batch,
the optimizer update (on the device or offloaded to the host) and the gradient communication of
data parallelism."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from roofline.engine import Op
from roofline.ops import PROJECTIONS, VECTOR, step_ops
from roofline.training.setup import ADAM8_BYTES, TrainSetup, lora_matrices_per_token, params
from roofline.workload import Precision, Workload

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
# for-each (unfused) kernels make several passes over the same tensors. States in fp32 (in bf16
# under pure bf16: half of these, but 8-bit AdamW's own).
OPTIMIZER_STATE_BYTES = {"adamw": 8.0, "adamw-8bit": ADAM8_BYTES, "sgd-momentum": 4.0, "adafactor": 0.0}
UNFUSED_PASSES = (
    2.3  # AdamW for-each: ~64 B/param against the fused kernel's 28 (lerp, mul, addcmul, sqrt, div, addcdiv)
)


def _forward_workload(s: TrainSetup) -> Workload:
    dtype = "fp32" if s.precision == "fp32" else s.compute_dtype
    weight = dtype if s.method != "qlora" else "int4"
    precision = Precision(weight_dtype=weight, act_dtype=dtype, kv_dtype=dtype)
    batch, seq = int(np.max(s.micro_batch)), int(np.max(s.seq_len))
    return Workload(
        s.model, "prefill", batch, seq, precision=precision, attention="flash" if s.flash_attention else "naive"
    )


def training_ops(s: TrainSetup) -> list[Op]:
    """Every op of one optimizer step per device: forward and backward of each micro-batch (times
    the accumulation steps), recomputation, the optimizer update and the gradient communication."""
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
        if kind == "matmul":
            # Gradient of the input always; of the weight only in full fine-tuning: LoRA's base
            # weights are frozen (the adapters' own gradients are the LoRA ops below).
            factor = 2.0 if s.method == "full" else 1.0
            backward = replace(op, flops=op.flops * factor, act_bytes=op.act_bytes * factor)
        elif kind == "attention":
            backward = replace(op, flops=op.flops * ATTENTION_BACKWARD_FLOPS, act_bytes=op.act_bytes * 2)
        else:  # elementwise: read the saved input and the incoming gradient, write the gradient
            backward = replace(op, flops=op.flops * 2, act_bytes=op.act_bytes * 1.5)
        ops.append(replace(backward, name=f"backward: {op.name}", count=op.count * micro, phase="backward"))
    if s.method != "full":
        ops += _adapter_ops(s, tokens, micro, w.precision.math_dtype, w.precision.act_bytes)
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


def _adapter_ops(s: TrainSetup, tokens: float, micro: int, dtype: str, act_bytes: float) -> list[Op]:
    """LoRA's adapters beside the frozen matrices they adapt, one op per adapted matrix kind and
    one occurrence per matrix (each layer's, each routed expert's): x A (in x r) then (x A) B
    (r x out), two kernels and 2 r (in + out) FLOPs a token (a routed expert's for its share of
    the tokens); backward four kernels and twice the FLOPs, the gradient of the input and of A and
    B. Each reads its input and writes its output; its weights are r (in + out) values."""
    r, ops = s.lora_rank, []
    for kind, n_in, n_out, instances, share in lora_matrices_per_token(s.model, s.lora_targets):
        seen = tokens * share
        name, _, where = kind.partition("@")
        forward = Op(
            name=f"LoRA adapter on {name}" + (f" ({where})" if where else "") + f", r={r}",
            flops=2.0 * seen * r * (n_in + n_out),
            dtype=dtype,
            weight_bytes=r * (n_in + n_out) * act_bytes,
            act_bytes=seen * (n_in + 2 * r + n_out) * act_bytes,
            count=instances * micro,
            launches=2,
            group=PROJECTIONS,
            phase="forward",
            meta={"kind": "matmul", "m": seen},
        )
        backward = replace(
            forward, flops=2 * forward.flops, act_bytes=2 * forward.act_bytes, launches=4, phase="backward"
        )
        ops += [replace(forward, name=f"forward: {forward.name}"), replace(backward, name=f"backward: {forward.name}")]
        if s.recompute == "full":  # the adapters' forward runs again with the layer it sits in
            ops.append(replace(forward, name=f"recompute: {forward.name}", phase="recompute"))
    return ops


def _optimizer_ops(s: TrainSetup) -> list[Op]:
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
    grad = s.weight_bytes
    weight = s.optimizer_dtype_bytes  # the fp32 master in mixed precision, else the weights themselves
    scale = weight / 4.0  # states are allocated like the weights they update
    state = OPTIMIZER_STATE_BYTES[s.optimizer] * (scale if s.optimizer != "adamw-8bit" else 1.0)
    if s.optimizer == "adafactor":
        state = 2 * weight * sum(a + b for a, b in p.optimizer_matrices) / max(p.trainable, 1)
    extra = 2.0 if s.precision == "mixed" else 0.0  # the 16-bit copy written beside the master
    return n * (grad + weight + weight + 2 * state + extra)


def offload_time_s(s: TrainSetup, hw, host_memory_bytes_per_s: float = DEFAULT_HOST_MEMORY_BYTES_PER_S) -> float:
    """An offloaded optimizer step: gradients down, weights up, the update on the host."""
    if not s.offload_optimizer:
        return 0.0
    recorded = hw.interconnect.host_link_gb_per_s if hw.interconnect else None
    link = recorded * 1e9 if recorded else DEFAULT_HOST_LINK_BYTES_PER_S
    p = params(s)
    n = p.trainable / (s.dp if s.zero >= 1 else 1)
    grad = s.weight_bytes
    transfers = n * grad / link + n * grad / link  # gradients down, updated weights up
    return transfers + optimizer_bytes_moved(s) / host_memory_bytes_per_s


def _gradient_comm_ops(s: TrainSetup) -> list[Op]:
    """Data parallelism: DDP all-reduces the gradients; ZeRO 1/2 reduce-scatters them and
    all-gathers the updated weights; ZeRO-3 (FSDP) also all-gathers the weights in forward and
    again in backward. Ring collectives: each device sends (N - 1)/N of the message per pass."""
    n = s.dp
    if n <= 1:
        return []
    p = params(s)
    grad = (4.0 if s.precision == "mixed" and s.fp32_grads else s.weight_bytes) * p.trainable
    weights = s.weight_bytes * p.trainable
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
