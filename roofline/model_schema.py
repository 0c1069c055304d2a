"""The model record: a pydantic schema for one architecture (``model_db/*.toml``, a share link,
a Hugging Face config.json) and the counts that follow from it alone (parameters, KV-cache bytes
per token).

Its own module so that both the loaders (``roofline.models``) and the config.json reader
(``roofline.hf_config``) import it, and neither imports the other's user.

The size limits are the largest real models' figures times about four (the largest of the
shipped ones in brackets): every count the engine multiplies stays exact in float64, and no
input can make it build a per-layer list of a hundred million entries.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from roofline.datafiles import DataRecord
from roofline.dtypes import kv_bytes_per_element
from roofline.hardware import Source

MAX_LAYERS = 1024  # (Llama 3.1 405B: 126)
MAX_HIDDEN_SIZE = 1 << 16  # (405B: 16,384)
MAX_HEADS = 512  # query or KV heads (405B, DeepSeek-V3: 128)
MAX_HEAD_DIM = 1024  # (Gemma: 256)
MAX_INTERMEDIATE_SIZE = 1 << 18  # 262,144, dense or per expert (405B: 53,248)
MAX_VOCAB_SIZE = 1 << 20  # 1,048,576 (Gemma 3: 262,208)
MAX_CONTEXT = 1 << 24  # 16,777,216 tokens (Llama 4 Scout: 10,485,760); the window and chunk too
MAX_EXPERTS = 2048  # routed experts (Kimi K2: 384; Qwen3-Next: 512)
MAX_EXPERTS_PER_TOKEN = 64  # (Qwen3-Next: 10)
MAX_SHARED_EXPERTS = 64  # (Llama 4, DeepSeek-V3: 1)
MAX_LORA_RANK = 1 << 14  # MLA's compressed ranks (DeepSeek-V3: 1,536 and 512)


class MoE(DataRecord):
    num_experts: int = Field(gt=1, le=MAX_EXPERTS)
    experts_per_token: int = Field(gt=0, le=MAX_EXPERTS_PER_TOKEN)
    shared_experts: int = Field(default=0, ge=0, le=MAX_SHARED_EXPERTS)
    expert_intermediate_size: int = Field(gt=0, le=MAX_INTERMEDIATE_SIZE)
    # The shared experts' width where it differs from the routed ones' (None: the same).
    shared_expert_intermediate_size: int | None = Field(default=None, gt=0, le=MAX_INTERMEDIATE_SIZE)
    # The first layers of some MoE models use a dense MLP instead (DeepSeek-V3: 3).
    first_dense_layers: int = Field(default=0, ge=0, le=MAX_LAYERS)
    # After those, a MoE block on every k-th layer, a dense MLP on the others (Llama 4 Maverick: 2).
    layer_interval: int = Field(default=1, gt=0, le=MAX_LAYERS)

    @model_validator(mode="after")
    def _top_k_fits(self) -> MoE:
        if self.experts_per_token > self.num_experts:
            raise ValueError("experts_per_token cannot exceed num_experts")
        return self


class MLA(DataRecord):
    """Multi-head latent attention (DeepSeek-V2/V3): the cache holds a compressed latent."""

    q_lora_rank: int | None = Field(default=None, gt=0, le=MAX_LORA_RANK)
    kv_lora_rank: int = Field(gt=0, le=MAX_LORA_RANK)
    qk_nope_head_dim: int = Field(gt=0, le=MAX_HEAD_DIM)
    qk_rope_head_dim: int = Field(gt=0, le=MAX_HEAD_DIM)
    v_head_dim: int = Field(gt=0, le=MAX_HEAD_DIM)


class Fp8Checkpoint(DataRecord):
    """A published FP8 checkpoint of the model (its publisher's where there is one, else NVIDIA's;
    a user's own config.json's) and how its weights carry their scales
    (``roofline.defaults.FP8_SCALINGS``): what "auto" fp8 scaling reads the model's kernels at."""

    repo: str = Field(min_length=3, max_length=200)  # its Hugging Face repository
    scaling: Literal["per-tensor", "block"]
    source: Source


class ModelConfig(DataRecord):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$", max_length=128)
    name: str = Field(min_length=1, max_length=200)
    family: str = Field(min_length=1, max_length=64)
    num_layers: int = Field(gt=0, le=MAX_LAYERS)
    hidden_size: int = Field(gt=0, le=MAX_HIDDEN_SIZE)
    num_heads: int = Field(gt=0, le=MAX_HEADS)
    num_kv_heads: int = Field(gt=0, le=MAX_HEADS)
    head_dim: int = Field(gt=0, le=MAX_HEAD_DIM)
    mlp: Literal["gated", "dense"]  # gated: SwiGLU/GeGLU (3 matrices); dense: up, GELU, down
    intermediate_size: int = Field(gt=0, le=MAX_INTERMEDIATE_SIZE)
    vocab_size: int = Field(gt=0, le=MAX_VOCAB_SIZE)
    tied_embeddings: bool
    max_context: int = Field(gt=0, le=MAX_CONTEXT)
    norm: Literal["rmsnorm", "layernorm"]
    norms_per_layer: int = Field(default=2, ge=1, le=8)
    positional: Literal["rope", "learned"] = "rope"
    parallel_attention: bool = False  # attention and MLP read the same normed input (Falcon)
    qkv_bias: bool = False
    linear_bias: bool = False  # every linear layer has a bias (GPT-3)
    sliding_window: int | None = Field(default=None, gt=0, le=MAX_CONTEXT)
    # Chunked local attention (Llama 4): a token attends only within its aligned chunk.
    attention_chunk_size: int | None = Field(default=None, gt=0, le=MAX_CONTEXT)
    # With a window or chunks: every n-th layer attends globally (Gemma 2: 2, Gemma 3: 6, Llama 4:
    # 4). None: every layer is local.
    global_layer_interval: int | None = Field(default=None, gt=0, le=MAX_LAYERS)
    # Learned per-head sink logits in the softmax (gpt-oss): one parameter per head per layer.
    attention_sinks: bool = False
    # A norm over each head's q and k (Qwen3, Gemma 3: RMSNorm with weights; Llama 4: L2, none).
    qk_norm: Literal["rmsnorm", "l2"] | None = None
    moe: MoE | None = None
    mla: MLA | None = None
    published_params_b: float | None = Field(default=None, gt=0, le=1e6)  # the model card's total, for tests
    # What the card's figure is rounded to, where it is coarser than 0.5% (Kimi K2: "1T").
    published_params_rounding_b: float | None = Field(default=None, gt=0, le=1e6)
    # Parameters of a vision tower the card's total includes (not modelled), for the same test.
    vision_params_b: float | None = Field(default=None, ge=0, le=1e6)
    notes: str | None = None
    sources: list[Source] = Field(min_length=1)
    fp8_checkpoint: Fp8Checkpoint | None = None

    @model_validator(mode="after")
    def _heads_consistent(self) -> ModelConfig:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        if self.moe and self.moe.first_dense_layers > self.num_layers:
            raise ValueError("moe.first_dense_layers exceeds num_layers")
        if self.sliding_window and self.attention_chunk_size:
            raise ValueError("a model has a sliding window or chunked attention, not both")
        return self

    # ---- attention shape -------------------------------------------------------------------
    @property
    def attention_kind(self) -> str:
        if self.mla:
            return "MLA"
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        if self.num_kv_heads == 1:
            return "MQA"
        return "GQA"

    @property
    def qk_head_dim(self) -> int:
        return self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim if self.mla else self.head_dim

    @property
    def v_head_dim(self) -> int:
        return self.mla.v_head_dim if self.mla else self.head_dim

    @property
    def local_span(self) -> int | None:
        """Tokens a local layer's attention (and cache) is capped at: the window or the chunk."""
        return self.sliding_window or self.attention_chunk_size

    @property
    def local_kind(self) -> str | None:
        if self.sliding_window:
            return "window"
        return "chunk" if self.attention_chunk_size else None

    @property
    def local_layers(self) -> int:
        """Layers whose attention (and cache) is capped at the sliding window or the chunk."""
        if self.local_span is None:
            return 0
        if self.global_layer_interval is None:
            return self.num_layers
        return self.num_layers - self.num_layers // self.global_layer_interval

    @property
    def moe_layers(self) -> int:
        """MoE layers: after the first dense ones, every ``layer_interval``-th layer (0-based layer
        i is MoE when (i + 1) % interval == 0, as transformers' Llama 4 places them)."""
        if not self.moe:
            return 0
        k, first = self.moe.layer_interval, self.moe.first_dense_layers
        return self.num_layers // k - first // k

    @property
    def dense_mlp_layers(self) -> int:
        return self.num_layers - self.moe_layers

    # ---- parameter counts -----------------------------------------------------------------
    def attention_params(self) -> int:
        h = self.hidden_size
        if self.mla:
            m = self.mla
            nh = self.num_heads
            if m.q_lora_rank:
                q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * nh * self.qk_head_dim
            else:
                q = h * nh * self.qk_head_dim
            kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
            kv += m.kv_lora_rank * nh * (m.qk_nope_head_dim + m.v_head_dim)
            return q + kv + nh * m.v_head_dim * h
        q_out = self.num_heads * self.head_dim
        kv_out = 2 * self.num_kv_heads * self.head_dim
        params = h * (q_out + kv_out) + q_out * h
        if self.qkv_bias or self.linear_bias:
            params += q_out + kv_out
        if self.linear_bias:
            params += h
        return params

    def mlp_params(self, intermediate: int | None = None) -> int:
        h, i = self.hidden_size, intermediate or self.intermediate_size
        matrices = 3 if self.mlp == "gated" else 2
        params = matrices * h * i
        if self.linear_bias:
            params += (matrices - 1) * i + h
        return params

    def moe_params(self) -> tuple[int, int]:
        """(all parameters, parameters active per token) of one MoE block, router included."""
        m = self.moe
        expert = self.mlp_params(m.expert_intermediate_size)
        shared = m.shared_experts * self.mlp_params(m.shared_expert_intermediate_size or m.expert_intermediate_size)
        router = self.hidden_size * m.num_experts
        return router + m.num_experts * expert + shared, router + m.experts_per_token * expert + shared

    def routed_expert_params(self) -> int:
        """Parameters of one MoE block's routed experts (what an expert-only weight format covers)."""
        return self.moe.num_experts * self.mlp_params(self.moe.expert_intermediate_size) if self.moe else 0

    def norm_params(self) -> int:
        return self.hidden_size * (2 if self.norm == "layernorm" else 1)

    def embedding_params(self) -> int:
        params = self.vocab_size * self.hidden_size
        if self.positional == "learned":
            params += self.max_context * self.hidden_size
        return params

    def lm_head_params(self) -> int:
        return 0 if self.tied_embeddings else self.vocab_size * self.hidden_size

    def extra_attention_params(self) -> int:
        """Per layer: attention sinks (one per head) and QK-norm weights (one per head dim, q and k)."""
        sinks = self.num_heads if self.attention_sinks else 0
        qk = 2 * self.qk_head_dim if self.qk_norm == "rmsnorm" else 0
        return sinks + qk

    def param_counts(self) -> dict[str, int]:
        """Parameters by part, the total, and those active for one token (MoE)."""
        layer_common = (
            self.attention_params() + self.extra_attention_params() + self.norms_per_layer * self.norm_params()
        )
        dense_mlp = self.dense_mlp_layers * self.mlp_params()
        moe_total, moe_active = self.moe_params() if self.moe else (0, 0)
        embed = self.embedding_params()
        head = self.lm_head_params()
        final_norm = self.norm_params()
        attention = self.num_layers * layer_common
        total = attention + dense_mlp + self.moe_layers * moe_total + embed + head + final_norm
        active = attention + dense_mlp + self.moe_layers * moe_active + embed + head + final_norm
        return {
            "attention_and_norms": attention,
            "mlp": dense_mlp + self.moe_layers * moe_total,
            "embedding": embed,
            "lm_head": head,
            "total": total,
            "active_per_token": active,
        }

    # ---- KV cache -----------------------------------------------------------------------
    def kv_heads_per_device(self, tp: int) -> float:
        """KV heads each of ``tp`` devices holds; replicated when there are fewer heads than devices."""
        return max(1.0, self.num_kv_heads / tp)

    def kv_elements_per_token_per_layer(self) -> int:
        """Cached elements one token adds to one layer: K and V at the KV heads, or MLA's
        compressed latent plus its rotary key (shared by all heads)."""
        if self.mla:
            return self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    def kv_bytes_per_token(self, kv_dtype: str = "bf16") -> float:
        """KV bytes per cached token over all layers (before any sliding-window cap), with the
        format's scales (int4 KV: 4.25 bits an element), as the KV budget counts them."""
        return self.num_layers * self.kv_elements_per_token_per_layer() * kv_bytes_per_element(kv_dtype)
