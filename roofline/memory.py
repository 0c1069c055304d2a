"""Memory: the one place that says how much a workload needs per device and whether it fits.

Per device of a tensor-parallel group of ``tp``:

    need = weights + KV cache + activations + non-torch memory (+ CUDA-graph memory)
    capacity = the memory the runtime exposes x memory_utilization
    fits = need <= capacity

- Weights: linear layers at their format (block scales and zero points included), split over TP;
  K/V projections replicated where there are fewer KV heads than devices (one head's worth each);
  MLA's down-projections replicated; embeddings, LM head (vocab-parallel), norms and routers at
  the activation dtype.
- KV cache: whole blocks of ``block_size`` tokens per sequence and layer (paged attention);
  sliding-window layers hold at most the window; MLA holds its latent on every rank.
- Activations: the larger of the step's own live activations (a request's prompts at most the
  token budget a step, as an engine runs them) and the workspace a serving engine reserves for its
  largest forward pass (vLLM profiles a pass of ``max_num_batched_tokens`` tokens, with
  ``max_num_seqs`` rows of fp32 logits, and keeps that much free).
- Non-torch memory: the CUDA context and library workspaces, plus NCCL's buffers under TP, which
  a serving engine measures and subtracts; CUDA graphs add the memory their capture pins.
- Capacity: what CUDA (or the vendor's runtime) reports, where the device file records it (an
  "80 GB" H100 SXM exposes 85,017,493,504 B = 79.18 GiB), else the nominal GB (10^9 B).

Nothing here runs the timing engine: bytes are summed from shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from roofline.defaults import TP_DEGREES
from roofline.engines import prompt_step
from roofline.hardware import Hardware
from roofline.models import ModelConfig
from roofline.ops.kernels import mla_qkv_precision
from roofline.settings import Settings
from roofline.workload import Precision, Workload, valid_tp

GIB = 2**30
LOGITS_BYTES = 4.0  # logits are written in fp32 for sampling
# vLLM's profile run samples max_num_seqs rows over the whole vocabulary on every rank with top-k
# and top-p on: the fp32 logits, then their sort, fp32 values and int64 indices (4 + 4 + 8 bytes
# per logit). Its logs put the peak at 14.9-16.0 bytes per row and vocabulary entry (Llama 3.1 8B,
# Qwen2.5 7B, Qwen3 8B, Gemma 2 and 3, Phi-4, gpt-oss 20B; engine_db/vllm_startup_logs.toml).
SAMPLER_BYTES_PER_LOGIT = LOGITS_BYTES + 4.0 + 8.0


# ---- weights ---------------------------------------------------------------------------------
def weight_bytes_per_device(model: ModelConfig, precision: Precision, tp: int = 1, attention_dp: int = 1) -> float:
    """Resident weight bytes on each of ``tp`` devices. Under attention data parallelism
    (``attention_dp`` ranks) the attention layers, the embedding and the LM head are split over
    one rank's ``tp / attention_dp`` devices, the MLP and experts over all ``tp``."""
    m, h = model, model.hidden_size
    wb, ab = precision.weight_bytes, precision.act_bytes
    atp = tp // attention_dp
    attn = m.attention_params()
    if m.mla:
        ml = m.mla
        replicated = (
            (h * ml.q_lora_rank + ml.q_lora_rank if ml.q_lora_rank else 0)
            + h * (ml.kv_lora_rank + ml.qk_rope_head_dim)
            + ml.kv_lora_rank
        )
        split = attn - replicated
    else:
        kv_all = h * 2 * m.num_kv_heads * m.head_dim
        # Each device holds its share of the KV heads, or one whole head when tp > KV heads.
        replicated = h * 2 * m.head_dim * m.kv_heads_per_device(atp) if m.num_kv_heads < atp else 0.0
        split = attn - (kv_all if replicated else 0.0)
    linear = m.num_layers * (split / atp + replicated) + m.dense_mlp_layers * m.mlp_params() / tp
    # MLA's q and kv projections (q_a, q_b, kv_a, kv_b, their norms) are held in the format the
    # step runs them in: bf16 for an NVFP4 checkpoint, which leaves them unquantized.
    qkv_bytes = mla_qkv_precision(precision).weight_bytes
    qkv = 0.0
    if m.mla and qkv_bytes != wb:
        qkv = m.num_layers * ((split - m.num_heads * m.mla.v_head_dim * h) / atp + replicated)
        linear -= qkv
    router, experts = 0.0, 0.0
    if m.moe:
        total, _ = m.moe_params()
        router = h * m.moe.num_experts
        experts = m.moe_layers * m.routed_expert_params() / tp  # at the experts' own format
        linear += m.moe_layers * (total - router) / tp - experts
    unquantized = (
        (m.embedding_params() + m.lm_head_params()) / atp
        + (m.num_layers * m.norms_per_layer + 1) * m.norm_params()
        + m.num_layers * m.extra_attention_params()
        + m.moe_layers * router
        # A multimodal checkpoint's vision tower is loaded beside the text model (split over TP, as
        # vLLM's vision encoders are), at the activation dtype.
        + (m.vision_params_b or 0.0) * 1e9 / tp
    )
    return linear * wb + qkv * qkv_bytes + experts * precision.expert_weight_bytes + unquantized * ab


# ---- KV cache --------------------------------------------------------------------------------
def kv_bytes_per_token_per_layer(model: ModelConfig, precision: Precision, tp: int = 1) -> float:
    """Bytes one token adds to one layer's cache on one device: K and V at this device's KV heads,
    or MLA's latent plus rotary key (not split by heads, so every rank holds all of it)."""
    if model.mla:
        elements = model.kv_elements_per_token_per_layer()
    else:
        elements = 2 * model.kv_heads_per_device(tp) * model.head_dim
    return elements * precision.kv_bytes


def kv_cache_bytes(
    model: ModelConfig,
    precision: Precision,
    tp: int,
    batch: np.ndarray | float,
    context: np.ndarray | float,
    block_size: int = 1,
) -> np.ndarray:
    """Cache bytes on each device for ``batch`` sequences of ``context`` tokens.

    Full-attention layers hold every token, sliding-window and chunked layers at most the window or
    chunk (an engine allocates a whole chunk's worth); each layer's tokens are rounded up to whole
    blocks of ``block_size`` (1 = no paging)."""
    ctx = np.asarray(context, float)

    def held(tokens: np.ndarray) -> np.ndarray:
        return np.ceil(tokens / block_size) * block_size

    local = model.local_layers
    tokens = (model.num_layers - local) * held(ctx)
    if local:  # a window's or a chunk's worth at most
        tokens = tokens + local * held(np.minimum(ctx, model.local_span))
    return np.asarray(batch, float) * tokens * kv_bytes_per_token_per_layer(model, precision, tp)


# ---- activations -----------------------------------------------------------------------------
def activation_peak_bytes(
    model: ModelConfig,
    precision: Precision,
    tp: int,
    tokens: np.ndarray | float,
    sequences: np.ndarray | float,
    queries_per_sequence: np.ndarray | float,
    keys_per_sequence: np.ndarray | float,
    attention: str = "flash",
    logit_rows: np.ndarray | float | None = None,
    attention_dp: int = 1,
) -> np.ndarray:
    """Live activations of one forward pass on one device, at its largest stage.

    Through every stage the residual stream and the normed input live (2 x tokens x hidden);
    on top of them: the attention stage holds Q, K, V and the attention output (a naive kernel
    also the score and probability matrices of every query/key pair); the MLP holds the
    gate/up output and the activated product; a MoE layer its router logits and the routed
    tokens' expert activations; the last stage the LM head's output, its fp32 copy and the fp32
    probabilities a sampler computes (``logit_rows`` rows, one per sequence by default).
    Earlier layers' activations are freed at inference. Under attention data parallelism
    (``attention_dp`` ranks of ``tp / attention_dp`` devices, ``tokens`` one rank's) the MLP
    stages hold every rank's tokens.
    """
    m, ab = model, precision.act_bytes
    t = np.asarray(tokens, float)
    h = m.hidden_size
    atp = tp // attention_dp
    nh = m.num_heads / atp
    stream = 2 * t * h * ab
    if m.mla:
        ml = m.mla
        qkv = t * (
            nh * m.qk_head_dim + ml.kv_lora_rank + ml.qk_rope_head_dim + nh * (ml.qk_nope_head_dim + ml.v_head_dim)
        )
    else:
        qkv = t * (nh + 2 * m.kv_heads_per_device(atp)) * m.head_dim
    attn = stream + (qkv + t * nh * m.v_head_dim) * ab
    if attention == "naive":
        pairs = np.asarray(sequences, float) * np.asarray(queries_per_sequence, float)
        pairs = pairs * np.asarray(keys_per_sequence, float)
        attn = attn + 2 * nh * pairs * ab  # scores and probabilities
    stages = [attn]
    t = t * attention_dp  # the MLP and experts see every rank's tokens
    if attention_dp > 1:
        stream = 2 * t * h * ab
    if m.dense_mlp_layers:
        i = m.intermediate_size / tp
        gated = 2 if m.mlp == "gated" else 1
        stages.append(stream + t * (gated + 1) * i * ab)
    if m.moe_layers:
        moe = m.moe
        i = moe.expert_intermediate_size / tp
        gated = 2 if m.mlp == "gated" else 1
        routed = t * moe.experts_per_token
        shared = t * moe.shared_experts * (gated + 1) * i * ab
        stages.append(stream + t * moe.num_experts * 4.0 + routed * (h + (gated + 1) * i) * ab + shared)
    rows = np.asarray(sequences if logit_rows is None else logit_rows, float)
    # The LM head's output at the activation dtype, its fp32 copy and the fp32 probabilities.
    stages.append(2 * np.asarray(tokens, float) * h * ab + rows * (m.vocab_size / atp) * (ab + 2 * LOGITS_BYTES))
    peak = stages[0]
    for stage in stages[1:]:
        peak = np.maximum(peak, stage)
    return peak


def step_activation_bytes(w: Workload, settings: Settings | None = None) -> np.ndarray:
    """Activations of the workload's largest step: its one step, or a request's prompts as an engine
    runs them (``engines.prompt_step``; ``settings`` as on the device; None: all in one pass)."""
    m, p, b, s, d = w.model, w.precision, np.asarray(w.batch, float), np.asarray(w.seq_len, float), w.attention_dp
    if w.phase == "decode":
        return activation_peak_bytes(m, p, w.tp, b, b, 1.0, s + 1, w.attention, attention_dp=d)
    tokens, rows = (b * s, b)
    if w.phase == "request" and settings is not None:
        tokens, rows = prompt_step(settings.engine, settings.max_batched_tokens, b, s)
    return activation_peak_bytes(m, p, w.tp, tokens, rows, tokens / rows, s, w.attention, attention_dp=d)


def workspace_bytes(
    model: ModelConfig, precision: Precision, tp: int, settings: Settings, attention_dp: int = 1
) -> float:
    """What a serving engine keeps free for its largest pass, as vLLM's profile run measures it: a
    forward pass of ``max_batched_tokens`` tokens (fused attention) with ``max_num_seqs`` rows of
    logits, or the sampler's dummy run over ``max_num_seqs`` rows, the larger. ``settings`` as on
    the device (``Settings.for_device``)."""
    settings.require_device("workspace_bytes")
    tokens = min(settings.max_batched_tokens, model.max_context * settings.max_num_seqs)
    rows = min(settings.max_num_seqs, tokens)
    forward = float(
        activation_peak_bytes(
            model, precision, tp, tokens, rows, tokens / rows, tokens / rows, "flash", rows, attention_dp
        )
    )
    # Then the sampler's dummy run over the whole vocabulary, every rank alike (TP does not split it).
    sampler = settings.max_num_seqs * model.vocab_size * SAMPLER_BYTES_PER_LOGIT
    return max(forward, sampler)


# ---- capacity --------------------------------------------------------------------------------
def exposed_bytes(hw: Hardware, settings: Settings) -> tuple[float, str]:
    """What the runtime exposes: measured on this device (a calibration's results file), the
    device file's recorded figure, or the nominal GB; and where the figure comes from."""
    cal = settings.calibration
    if settings.calibrated_on(hw.id) and cal.memory_bytes:
        return cal.memory_bytes, f"{cal.memory_bytes:,.0f} B measured on this device ({cal.source})"
    return hw.memory_bytes, hw.memory_source


def capacity_bytes(hw: Hardware, settings: Settings) -> float:
    """Usable bytes per device: what the runtime exposes x memory_utilization (x a what-if scale)."""
    return exposed_bytes(hw, settings)[0] * settings.memory_utilization * settings.capacity_scale


@dataclass(frozen=True)
class Footprint:
    """Bytes per device, term by term, and whether they fit. Terms may be arrays over a sweep."""

    hardware_id: str
    tp: int
    weights_bytes: float
    kv_cache_bytes: np.ndarray | float
    step_activation_bytes: np.ndarray | float
    workspace_bytes: float
    non_torch_bytes: float
    cuda_graph_bytes: float
    capacity_bytes: float
    exposed_bytes: float
    memory_utilization: float
    capacity_note: str
    smallest_tp: int | None = None

    @property
    def activation_bytes(self) -> np.ndarray | float:
        return np.maximum(self.step_activation_bytes, self.workspace_bytes)

    @property
    def reserved_bytes(self) -> float:
        return self.non_torch_bytes + self.cuda_graph_bytes

    @property
    def total_bytes(self) -> np.ndarray | float:
        return self.weights_bytes + self.kv_cache_bytes + self.activation_bytes + self.reserved_bytes

    @property
    def fits(self) -> np.ndarray | bool:
        fits = np.asarray(self.total_bytes) <= self.capacity_bytes
        return bool(fits) if fits.ndim == 0 else fits

    @property
    def kv_budget_bytes(self) -> float:
        """What is left for the KV cache once weights, the workspace and reserved memory are in
        place: the cache a serving engine allocates (0 when even those do not fit)."""
        return max(0.0, self.capacity_bytes - self.weights_bytes - self.workspace_bytes - self.reserved_bytes)

    @property
    def free_bytes(self) -> np.ndarray | float:
        return np.maximum(0.0, self.capacity_bytes - self.total_bytes)

    def to_json(self) -> dict[str, object]:
        return {
            "hardware": self.hardware_id,
            "devices": self.tp,
            "weights_bytes": self.weights_bytes,
            "kv_cache_bytes": float(np.max(self.kv_cache_bytes)),
            "activation_bytes": float(np.max(self.activation_bytes)),
            "step_activation_bytes": float(np.max(self.step_activation_bytes)),
            "workspace_bytes": self.workspace_bytes,
            "non_torch_bytes": self.non_torch_bytes,
            "cuda_graph_bytes": self.cuda_graph_bytes,
            "total_bytes": float(np.max(self.total_bytes)),
            "capacity_bytes": self.capacity_bytes,
            "exposed_bytes": self.exposed_bytes,
            "memory_utilization": self.memory_utilization,
            "kv_budget_bytes": self.kv_budget_bytes,
            "fits": bool(np.all(self.fits)),
            "smallest_tp": self.smallest_tp,
            "convention": "per device: weights + KV cache + max(step activations, workspace) + non-torch "
            "(+ CUDA graphs) <= exposed memory x memory_utilization; " + self.capacity_note,
        }


def footprint(w: Workload, hw: Hardware, settings: Settings, with_smallest_tp: bool = True) -> Footprint:
    """Every term of the workload's memory on one device of ``hw`` (its largest moment: the
    cache at the final context, the activations of its largest step)."""
    m, p = w.model, w.precision
    settings = settings.for_device(hw)  # vLLM's token budget and sequence cap there, where unset
    result = Footprint(
        hardware_id=hw.id,
        tp=w.tp,
        weights_bytes=weight_bytes_per_device(m, p, w.tp, w.attention_dp),
        kv_cache_bytes=kv_cache_bytes(m, p, w.attention_tp, w.batch, w.final_context, settings.block_size),
        step_activation_bytes=step_activation_bytes(w, settings),
        workspace_bytes=workspace_bytes(m, p, w.tp, settings, w.attention_dp),
        non_torch_bytes=settings.non_torch_bytes + (settings.comm_buffer_bytes if w.tp > 1 else 0.0),
        cuda_graph_bytes=settings.cuda_graph_bytes if w.cuda_graphs else 0.0,
        capacity_bytes=capacity_bytes(hw, settings),
        exposed_bytes=exposed_bytes(hw, settings)[0],
        memory_utilization=settings.memory_utilization,
        capacity_note=exposed_bytes(hw, settings)[1],
    )
    if with_smallest_tp:
        result = replace(result, smallest_tp=smallest_tp(w, hw, settings))
    return result


def smallest_tp(w: Workload, hw: Hardware, settings: Settings, room_only: bool = False) -> int | None:
    """The smallest valid TP degree at which the workload fits (``room_only``: leaves any KV room)."""
    for tp in TP_DEGREES:
        if valid_tp(w.model, tp) and tp % w.attention_dp == 0:
            fp = footprint(replace(w, tp=tp), hw, settings, with_smallest_tp=False)
            if fp.kv_budget_bytes > 0 if room_only else np.all(fp.fits):
                return tp
    return None


def beyond_links(hw: Hardware, tp: int) -> str:
    """Where a TP degree's devices are more than the device's links join (``smallest_tp`` may name
    one), why: this tool times no such group; empty where they are joined."""
    link, why = hw.group_link(tp)
    return f" ({why}: a group this tool does not time)" if tp > 1 and link is None else ""


# ---- capacity questions, answered with the same footprint ------------------------------------
def largest_fitting(fits: Callable[[np.ndarray], np.ndarray], upper: np.ndarray) -> np.ndarray:
    """The largest integer n in [0, upper] with ``fits(n)`` (which must be non-increasing in n),
    element by element, by bisection over the whole array at once. 0 where even 1 does not fit."""
    lo = np.zeros(np.shape(upper), np.int64)
    hi = np.asarray(upper, np.int64).copy()
    while np.any(lo < hi):
        open_ = lo < hi
        mid = (lo + hi + 1) // 2
        ok = fits(np.maximum(mid, 1))
        lo = np.where(open_ & ok, mid, lo)
        hi = np.where(open_ & ~ok, mid - 1, hi)
    return lo


MAX_SEARCH = 1 << 40


def max_batch(w: Workload, hw: Hardware, settings: Settings, contexts: np.ndarray | float) -> np.ndarray:
    """Most sequences that fit with ``contexts`` tokens each (decode at that context): the
    largest batch for which ``footprint`` fits."""
    ctx = np.asarray(contexts, np.int64)
    per_seq = kv_cache_bytes(w.model, w.precision, w.attention_tp, 1, ctx, settings.block_size)
    fixed = footprint(w.step("decode", 1, 1), hw, settings, with_smallest_tp=False)
    room = fixed.capacity_bytes - fixed.weights_bytes - fixed.workspace_bytes - fixed.reserved_bytes
    upper = np.clip(np.floor(np.maximum(room, 0.0) / per_seq), 0, MAX_SEARCH).astype(np.int64)

    def fits(batch: np.ndarray) -> np.ndarray:
        step = w.step("decode", np.maximum(ctx - 1, 1), batch)
        return np.asarray(footprint(step, hw, settings, with_smallest_tp=False).fits)

    return largest_fitting(fits, upper)


def max_context(w: Workload, hw: Hardware, settings: Settings, batch: int) -> int:
    """Longest context (up to the model's maximum) at which ``batch`` sequences fit; 0 if none."""

    def fits(context: np.ndarray) -> np.ndarray:
        step = w.step("decode", np.maximum(context - 1, 1), batch)
        return np.asarray(footprint(step, hw, settings, with_smallest_tp=False).fits)

    return int(largest_fitting(fits, np.array(w.model.max_context)))
