"""Any model of the database, built in torch with random weights, run the way serving engines run
it, with every op inside a profiler range named like the engine's op.

What a good implementation does, and this does:
- a static KV cache, preallocated for the step, written in place with ``index_copy_`` (no
  ``torch.cat`` of the whole cache every step);
- attention through ``scaled_dot_product_attention`` with ``enable_gqa=True`` (K and V stay at
  the KV heads: no ``repeat_interleave``); sliding windows and chunks by slicing the cache in
  decode and by a mask in prefill;
- MLA (DeepSeek) in its absorbed form for decode: attention over the cached latent, each head's
  W_UK folded into its query and W_UV into its output;
- MoE routing with top-k and each loaded expert run once on its tokens;
- linear layers as ``F.linear`` on (out, in) weights, the layout checkpoints ship.
Not modelled: attention sinks (one logit per head) and logit soft-capping, both far below a
kernel's cost. A decode step replays from a CUDA graph; MoE routing is data-dependent, so MoE
steps are measured eager only.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from roofline.measure.ranges import op_range
from roofline.models import ModelConfig
from roofline.ops import attention_label, is_local_layer

TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _suffix(model: ModelConfig, local: bool) -> str:
    label = attention_label(model, local)
    return f" ({label})" if label else ""


class Norm(nn.Module):
    """RMSNorm or LayerNorm over the last dimension (the model's and the training harness's)."""

    def __init__(self, width: int, kind: str):
        super().__init__()
        self.kind = kind
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width)) if kind == "layernorm" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "layernorm":
            return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias)
        return F.rms_norm(x, (x.shape[-1],), self.weight, 1e-6)


class _MLP(nn.Module):
    def __init__(self, hidden: int, width: int, gated: bool, bias: bool):
        super().__init__()
        self.gated = gated
        self.up = nn.Linear(hidden, width * (2 if gated else 1), bias=bias)  # gate and up fused
        self.down = nn.Linear(width, hidden, bias=bias)

    def forward(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        with op_range(f"{prefix} {'gate+up' if self.gated else 'up'} projection"):
            h = self.up(x)
        with op_range(f"{prefix} activation ({'SiLU/GELU x up' if self.gated else 'GELU'})"):
            if self.gated:
                gate, up = h.chunk(2, dim=-1)
                h = F.silu(gate) * up
            else:
                h = F.gelu(h, approximate="tanh")
        with op_range(f"{prefix} down projection"):
            return self.down(h)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


class DecoderLayer(nn.Module):
    def __init__(self, m: ModelConfig, index: int):
        super().__init__()
        self.m, self.index = m, index
        h = m.hidden_size
        self.local = is_local_layer(m, index)
        self.suffix = _suffix(m, self.local)
        self.norms = nn.ModuleList(Norm(h, m.norm) for _ in range(m.norms_per_layer))
        bias = m.qkv_bias or m.linear_bias
        if m.mla:
            ml = m.mla
            q_out = m.num_heads * m.qk_head_dim
            if ml.q_lora_rank:
                self.q_a = nn.Linear(h, ml.q_lora_rank, bias=False)
                self.q_norm = Norm(ml.q_lora_rank, "rmsnorm")
                self.q_b = nn.Linear(ml.q_lora_rank, q_out, bias=False)
            else:
                self.q_b = nn.Linear(h, q_out, bias=False)
            self.kv_a = nn.Linear(h, ml.kv_lora_rank + ml.qk_rope_head_dim, bias=False)
            self.kv_norm = Norm(ml.kv_lora_rank, "rmsnorm")
            # W_UK and W_UV per head: (heads, nope, r) and (heads, r, v)
            self.w_uk = nn.Parameter(torch.randn(m.num_heads, ml.qk_nope_head_dim, ml.kv_lora_rank) * 0.02)
            self.w_uv = nn.Parameter(torch.randn(m.num_heads, ml.kv_lora_rank, ml.v_head_dim) * 0.02)
        else:
            self.qkv = nn.Linear(h, (m.num_heads + 2 * m.num_kv_heads) * m.head_dim, bias=bias)
        if m.qk_norm == "rmsnorm":
            self.q_norm_w = nn.Parameter(torch.ones(m.qk_head_dim))
            self.k_norm_w = nn.Parameter(torch.ones(m.qk_head_dim))
        self.o = nn.Linear(m.num_heads * m.v_head_dim, h, bias=m.linear_bias)
        dense = m.moe is None or index < m.moe.first_dense_layers or (index + 1) % m.moe.layer_interval != 0
        gated = m.mlp == "gated"
        if dense:
            self.mlp = _MLP(h, m.intermediate_size, gated, m.linear_bias)
            self.moe = None
        else:
            moe = m.moe
            self.moe = moe
            self.router = nn.Linear(h, moe.num_experts, bias=False)
            self.experts = nn.ModuleList(
                _MLP(h, moe.expert_intermediate_size, gated, False) for _ in range(moe.num_experts)
            )
            width = moe.shared_experts * (moe.shared_expert_intermediate_size or moe.expert_intermediate_size)
            self.shared = _MLP(h, width, gated, False) if moe.shared_experts else None

    # ---- attention --------------------------------------------------------------------------
    def _window_start(self, position: int) -> int:
        m = self.m
        if not self.local:
            return 0
        if m.local_kind == "chunk":
            return (position // m.attention_chunk_size) * m.attention_chunk_size
        return max(0, position + 1 - m.sliding_window)

    def _prefill_mask(self, s: int, device) -> torch.Tensor | None:
        m = self.m
        if not self.local:
            return None
        i = torch.arange(s, device=device)[:, None]
        j = torch.arange(s, device=device)[None, :]
        allowed = j <= i
        if m.local_kind == "chunk":
            allowed &= (i // m.attention_chunk_size) == (j // m.attention_chunk_size)
        else:
            allowed &= j > i - m.sliding_window
        return allowed

    def _qk_norm(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        kind = self.m.qk_norm
        with op_range(f"QK norm ({kind})"):
            if kind == "rmsnorm":
                return F.rms_norm(q, (q.shape[-1],), self.q_norm_w, 1e-6), F.rms_norm(
                    k, (k.shape[-1],), self.k_norm_w, 1e-6
                )
            return F.normalize(q, dim=-1), F.normalize(k, dim=-1)

    def _attention(self, x: torch.Tensor, cache: dict, position: int, cos, sin) -> torch.Tensor:
        if self.m.mla:
            return self._mla(x, cache, position, cos, sin)
        m = self.m
        b, s, _ = x.shape
        nh, nkv, hd = m.num_heads, m.num_kv_heads, m.head_dim
        with op_range("QKV projection"):  # the heads' views too: host work of this op on a CPU
            qkv = self.qkv(x)
            q, k, v = qkv.split([nh * hd, nkv * hd, nkv * hd], dim=-1)
            q = q.view(b, s, nh, hd).transpose(1, 2)
            k = k.view(b, s, nkv, hd).transpose(1, 2)
            v = v.view(b, s, nkv, hd).transpose(1, 2)
        if m.qk_norm:
            q, k = self._qk_norm(q, k)
        if m.positional == "rope":
            with op_range("rotary embedding"):
                q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        k_cache, v_cache = cache["k"], cache["v"]
        if s > 1:  # prefill: write the cache, attend over the fresh K and V
            name = "attention (FlashAttention)" + self.suffix
            with op_range(name):
                positions = torch.arange(position, position + s, device=x.device)
                k_cache.index_copy_(2, positions, k)
                v_cache.index_copy_(2, positions, v)
                mask = self._prefill_mask(s, x.device)
                out = F.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, is_causal=mask is None, enable_gqa=nkv != nh
                )
                return out.transpose(1, 2).reshape(b, s, nh * hd)  # heads back to rows: a copy
        else:  # decode: write the new token in place, attend over the cached span
            with op_range("attention (fused decode)" + self.suffix):
                k_cache.index_copy_(2, cache["position"], k)
                v_cache.index_copy_(2, cache["position"], v)
                start = self._window_start(position)
                out = F.scaled_dot_product_attention(
                    q, k_cache[:, :, start : position + 1], v_cache[:, :, start : position + 1], enable_gqa=nkv != nh
                )
                return out.transpose(1, 2).reshape(b, s, nh * hd)

    def _mla(self, x: torch.Tensor, cache: dict, position: int, cos, sin) -> torch.Tensor:
        m, ml = self.m, self.m.mla
        b, s, _ = x.shape
        nh, nope, rope, r = m.num_heads, ml.qk_nope_head_dim, ml.qk_rope_head_dim, ml.kv_lora_rank
        with op_range("QKV projection (MLA down/up)"):
            q = self.q_b(self.q_norm(self.q_a(x))) if ml.q_lora_rank else self.q_b(x)
            kv = self.kv_a(x)
            q = q.view(b, s, nh, nope + rope).transpose(1, 2)
            q_nope, q_rope = q.split([nope, rope], dim=-1)
            latent, k_rope = kv.split([r, rope], dim=-1)
            latent = self.kv_norm(latent)
        with op_range("rotary embedding"):
            q_rope = _rotate(q_rope, cos, sin)
            k_rope = _rotate(k_rope[:, None], cos, sin)[:, 0]
        positions = torch.arange(position, position + s, device=x.device) if s > 1 else cache["position"]
        if s > 1:
            with op_range("MLA KV up-projection" + self.suffix):
                k_nope = torch.einsum("bsr,hnr->bhsn", latent, self.w_uk)
                v = torch.einsum("bsr,hrv->bhsv", latent, self.w_uv)
            with op_range("attention (FlashAttention)" + self.suffix):
                cache["latent"].index_copy_(1, positions, latent)
                cache["rope"].index_copy_(1, positions, k_rope)
                k = torch.cat([k_nope, k_rope[:, None].expand(b, nh, s, rope)], dim=-1)
                qq = torch.cat([q_nope, q_rope], dim=-1)
                out = F.scaled_dot_product_attention(qq, k, v, is_causal=True)
                return out.transpose(1, 2).reshape(b, s, nh * ml.v_head_dim)
        with op_range("MLA query absorb (W_UK)" + self.suffix):
            q_lat = torch.einsum("bhsn,hnr->bhsr", q_nope, self.w_uk)
        with op_range("attention (MLA latent, decode)" + self.suffix):
            cache["latent"].index_copy_(1, positions, latent)
            cache["rope"].index_copy_(1, positions, k_rope)
            start = self._window_start(position)
            lat = cache["latent"][:, start : position + 1]
            kr = cache["rope"][:, start : position + 1]
            scores = (
                torch.einsum("bhsr,btr->bhst", q_lat, lat) + torch.einsum("bhsd,btd->bhst", q_rope, kr)
            ) / math.sqrt(nope + rope)
            out_lat = torch.einsum("bhst,btr->bhsr", scores.softmax(-1), lat)
        with op_range("MLA output absorb (W_UV)" + self.suffix):
            out = torch.einsum("bhsr,hrv->bhsv", out_lat, self.w_uv)
            return out.transpose(1, 2).reshape(b, s, nh * ml.v_head_dim)

    # ---- feed-forward -----------------------------------------------------------------------
    def _moe_forward(self, x: torch.Tensor) -> torch.Tensor:
        moe = self.moe
        with op_range("MoE router"):  # scores, top-k, and which rows go to which expert
            weights, chosen = self.router(x).softmax(-1).topk(moe.experts_per_token, dim=-1)
            routes = [(chosen == e).nonzero(as_tuple=True) for e in range(moe.num_experts)]
            out = torch.zeros_like(x)
        for expert, (rows, slot) in zip(self.experts, routes):
            if not rows.numel():
                continue
            with op_range("MoE experts gate+up"):
                h = expert.up(x[rows])
            with op_range("MoE experts activation"):
                gate, up = h.chunk(2, dim=-1) if expert.gated else (h, None)
                h = F.silu(gate) * up if expert.gated else F.gelu(h, approximate="tanh")
            with op_range("MoE experts down + combine"):
                out.index_add_(0, rows, expert.down(h) * weights[rows, slot, None].to(x.dtype))
        if self.shared is not None:
            out = out + self.shared(x, "shared expert")
        return out

    def forward(self, x: torch.Tensor, cache: dict, position: int, cos, sin) -> torch.Tensor:
        m = self.m
        b, s, h = x.shape
        extra = m.norms_per_layer - 1
        post_name = "post-attention norm" + ("s" if m.norms_per_layer > 2 else "")
        with op_range("input norm"):
            normed = self.norms[0](x)
        attn = self._attention(normed, cache, position, cos, sin)
        with op_range("output projection"):
            attn = self.o(attn)
        if extra >= 3:  # Gemma: a norm after attention before the residual
            with op_range(post_name):
                attn = self.norms[1](attn)
        flat_in = normed if m.parallel_attention else None
        if not m.parallel_attention:
            with op_range("residual add"):
                x = x + attn
            if extra:
                with op_range(post_name):
                    flat_in = self.norms[2 if extra >= 3 else 1](x)
        flat = flat_in.reshape(b * s, h)
        ff = self._moe_forward(flat) if self.moe is not None else self.mlp(flat, "MLP")
        ff = ff.view(b, s, h)
        if extra >= 3:
            with op_range(post_name):
                ff = self.norms[3](ff)
        if m.parallel_attention:
            with op_range("residual add (x + attn + mlp)"):
                return x + attn + ff
        with op_range("residual add"):
            return x + ff


class Model(nn.Module):
    """The whole model, or its first ``layers`` layers (the rest measured by scaling)."""

    def __init__(self, m: ModelConfig, layers: int | None = None):
        super().__init__()
        self.m = m
        h = m.hidden_size
        self.embed = nn.Embedding(m.vocab_size, h)
        self.pos_embed = nn.Embedding(m.max_context, h) if m.positional == "learned" else None
        self.layers = nn.ModuleList(DecoderLayer(m, i) for i in range(layers or m.num_layers))
        self.final_norm = Norm(h, m.norm)
        self.lm_head = None if m.tied_embeddings else nn.Linear(h, m.vocab_size, bias=False)

    def new_cache(self, batch: int, context: int, device, dtype) -> list[dict]:
        """A static cache per layer, preallocated for ``context`` tokens (local layers too: a
        serving engine pages them; here the slice a step reads is what matters)."""
        m = self.m
        caches = []
        for _ in self.layers:
            if m.mla:
                caches.append(
                    {
                        "latent": torch.zeros(batch, context, m.mla.kv_lora_rank, device=device, dtype=dtype),
                        "rope": torch.zeros(batch, context, m.mla.qk_rope_head_dim, device=device, dtype=dtype),
                    }
                )
            else:
                shape = (batch, m.num_kv_heads, context, m.head_dim)
                caches.append(
                    {
                        "k": torch.zeros(shape, device=device, dtype=dtype),
                        "v": torch.zeros(shape, device=device, dtype=dtype),
                    }
                )
        return caches

    def rotary(self, position: int, s: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        dim = self.m.mla.qk_rope_head_dim if self.m.mla else self.m.head_dim
        pos = torch.arange(position, position + s, device=device, dtype=torch.float32)
        freqs = pos[:, None] / (10000.0 ** (torch.arange(0, dim, 2, device=device) / dim))[None, :]
        angles = torch.cat([freqs, freqs], dim=-1)
        return angles.cos().to(dtype), angles.sin().to(dtype)

    def forward(self, ids: torch.Tensor, caches: list[dict], position: int, rotary) -> torch.Tensor:
        b, s = ids.shape
        with op_range("embedding gather"):
            x = self.embed(ids)
            if self.pos_embed is not None:
                x = x + self.pos_embed(torch.arange(position, position + s, device=ids.device))[None]
        cos, sin = rotary
        for layer, cache in zip(self.layers, caches):
            x = layer(x, cache, position, cos, sin)
        with op_range("final norm"):
            x = self.final_norm(x)
        with op_range("logits (LM head)"):
            last = x[:, -1]  # prefill needs only each sequence's last token; decode has one
            return (self.lm_head(last) if self.lm_head is not None else last @ self.embed.weight.t()).float()


def build_model(m: ModelConfig, layers: int, device: torch.device, dtype: torch.dtype) -> Model:
    """The model's first ``layers`` layers, allocated once on ``device`` in ``dtype`` (built on
    the meta device, so no full-precision host copy is ever made) with random weights: normal
    with std 0.02, norm scales 1, biases 0."""
    with torch.device("meta"):
        model = Model(m, layers)
    model = model.to(dtype=dtype).to_empty(device=device).eval()
    generator = torch.Generator(device=device).manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "bias":
                param.zero_()
            elif param.dim() == 1:  # norm scales
                param.fill_(1.0)
            else:
                param.normal_(0.0, 0.02, generator=generator)
    return model


def bytes_to_build(m: ModelConfig, layers: int, batch: int, context: int, dtype: str) -> float:
    """Weights of ``layers`` layers plus embeddings and head, and their caches, in bytes."""
    from roofline.memory import kv_cache_bytes
    from roofline.workload import Precision

    elt = torch.finfo(TORCH_DTYPES[dtype]).bits / 8
    counts = m.param_counts()
    per_layer = (counts["attention_and_norms"] + counts["mlp"]) / m.num_layers
    edges = counts["embedding"] + counts["lm_head"]
    cache = kv_cache_bytes(
        m, Precision(kv_dtype=dtype if dtype in ("fp32", "bf16", "fp16") else "bf16"), 1, batch, context
    )
    return (edges + layers * per_layer) * elt + float(cache) * layers / m.num_layers
