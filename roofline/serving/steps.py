"""The steps a serving engine runs, as ops on the roofline.

A continuous-batching step with chunked prefill: B sequences decode together and the step also
processes c tokens of new prompts. One such mixed step reads every weight once for B + c rows
(the point of chunking), attends B decode queries over their caches and c prompt tokens over the
prompt so far (half of it on average). ``c`` is a token count, not a number of sequences. In
steady state B x prompt / output prompt tokens arrive per step; ``prompt_chunks`` says how the
engine packs them: whole prompts (or budget-sized chunks) in a share of the steps.

Speculative decoding's verify step scores k drafted tokens and one more per sequence in one step
of B(k + 1) rows that reads the cache once.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from roofline.engine import Op
from roofline.memory import kv_bytes_per_token_per_layer
from roofline.ops import step_ops
from roofline.workload import Workload


def is_attention(op: Op) -> bool:
    """Ops whose work depends on the cache (attention, and MLA's absorbed per-head products)."""
    return op.meta.get("kind") == "attention" or op.name.startswith("MLA ")


def prompt_chunks(batch, prompt_len: int, output_len: int, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """How a steady state's prompts reach the steps. B sequences each finish every ``output_len``
    steps, so c = B x prompt / output prompt tokens arrive per step on average; an engine does
    not spread them thin over every step: a prompt goes in whole, or in chunks of what its token
    ``budget`` leaves beside the B decodes, min(prompt, budget - B). So a share c / that of the
    steps carries such a chunk and the rest only decode; where the prompts need more than one
    chunk a step, every step carries c. Returns (the prompt tokens of a step that carries some,
    the share of steps that do): the mean step is share x T(B, chunk) + (1 - share) x T(B, 0)."""
    b = np.asarray(batch, float)
    mean = b * prompt_len / output_len
    whole = np.clip(budget - b, 1, prompt_len)
    share = np.clip(mean / whole, 0.0, 1.0)
    return np.where(mean < whole, whole, mean), share


def prefill_batches(batch, prompt_len: int, output_len: int, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """How a steady state's prompts reach the steps where each prompt runs in a prefill step of its
    own, apart from the decodes (SGLang's default). B sequences each finish every ``output_len``
    steps, so B / output prompts wait at each decode step on average, and the engine takes as many
    waiting prompts as its token ``budget`` holds into one prefill batch: k = B / output of them
    (at least one, at most budget // prompt). Returns (k, the prefill steps per output step,
    B / output / k): the mean output step is T_decode(B) + steps x T_prefill(k prompts)."""
    arriving = np.asarray(batch, float) / output_len
    most = max(1, budget // prompt_len)
    k = np.clip(arriving, 1.0, most)
    return k, arriving / k


def whole_neighbours(k) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """A fractional count of prompts k as its two whole neighbours and their weights, ((floor,
    ceil - k), (ceil, k - floor)), the floor weighing 1 where k is whole: a step of k prompts
    costs the weighted sum of those two steps."""
    k = np.asarray(k, float)
    lo, hi = np.floor(k), np.ceil(k)
    return (lo, np.where(hi > lo, hi - k, 1.0)), (hi, np.where(hi > lo, k - lo, 0.0))


def mixed_step_ops(w: Workload, batch, chunk, prompt_len: int) -> list[Op]:
    """One continuous-batching step: ``batch`` decoding sequences (at ``w.seq_len`` cached) and
    ``chunk`` tokens of new prompts of ``prompt_len`` tokens (a token count, whole or not). Linear
    layers and elementwise ops see batch + chunk rows (weights read once); decode attention reads
    each sequence's cache; the chunk attends over the prompt so far (half of it on average); the
    LM head runs for the decoding sequences."""
    b = np.asarray(batch, float)
    c = np.asarray(chunk, float) * np.ones_like(b)
    if np.any(~np.isfinite(c)) or np.any(c < 0):
        raise ValueError(f"chunk must be a non-negative number of tokens, got {chunk!r}")
    ops = step_ops(replace(w, phase="decode", batch=batch), rows=b + c)
    if np.any(c > 0):
        ops += _chunk_attention(w, c, prompt_len)
    return [replace(op, phase="decode") for op in ops]


def _chunk_attention(w: Workload, chunk: np.ndarray, prompt_len: int) -> list[Op]:
    """Attention of ``chunk`` prompt tokens: the whole prompt's prefill attention scaled to the
    chunk's share, plus reading the prompt's cache so far (half of it on average) per chunk."""
    prompt = replace(w, phase="prefill", batch=1, seq_len=prompt_len, output_len=1)
    share = chunk / prompt_len
    per_layer_kv = kv_bytes_per_token_per_layer(w.model, w.precision, w.attention_tp)
    out = []
    for op in step_ops(prompt):
        if not is_attention(op):
            continue
        scaled = replace(
            op,
            name=f"{op.name}, prefill chunk",
            flops=op.flops * share,
            act_bytes=op.act_bytes * share,
            kv_bytes=op.kv_bytes * share + (prompt_len / 2) * per_layer_kv * (chunk > 0),
            weight_bytes=op.weight_bytes * share,
            # A measured kernel of the whole prompt, scaled to the chunk's share of its work.
            meta={**op.meta, "work_share": share},
        )
        out.append(scaled)
    return out


def verify_step_ops(w: Workload, batch, k: int) -> list[Op]:
    """Speculative decoding's verify step: ``k`` drafted tokens and one more per sequence, through
    the target model in one step. Linear layers see batch x (k + 1) rows; attention scores k + 1
    queries per sequence against a cache read once; logits for every verified position."""
    b = np.asarray(batch, float)
    rows = replace(w, phase="decode", batch=b * (k + 1))
    ops = [op for op in step_ops(rows) if not is_attention(op)]
    for op in step_ops(replace(w, phase="decode", batch=b)):
        if is_attention(op):
            ops.append(replace(op, flops=op.flops * (k + 1), act_bytes=op.act_bytes * (k + 1)))
    return ops
