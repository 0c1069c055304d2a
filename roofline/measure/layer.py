"""One real decoder layer with a model's shapes and random weights, built in torch.

Llama-style: RMSNorm, Q/K/V projections with GQA/MQA, rotary embedding, attention with a KV
cache, output projection, RMSNorm, then a gated (SwiGLU) or dense (GELU) MLP, or a top-k MoE.
``attention="sdpa"`` uses scaled_dot_product_attention (what is measured); ``"matmul"`` writes
the scores out explicitly (what FlopCounterMode can count on the CPU). MLA and sliding-window
models are measured with their head shapes but plain attention.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from roofline.models import ModelConfig


class _MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int, gated: bool):
        super().__init__()
        self.gated = gated
        self.up = nn.Linear(hidden, intermediate, bias=False)
        self.gate = nn.Linear(hidden, intermediate, bias=False) if gated else None
        self.down = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gated:
            return self.down(F.silu(self.gate(x)) * self.up(x))
        return self.down(F.gelu(self.up(x), approximate="tanh"))


def _rms_norm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class DecoderLayer(nn.Module):
    def __init__(self, model: ModelConfig, attention: str = "sdpa"):
        super().__init__()
        self.nh, self.nkv, self.hd = model.num_heads, model.num_kv_heads, model.head_dim
        h = model.hidden_size
        self.attention = attention
        self.q = nn.Linear(h, self.nh * self.hd, bias=False)
        self.k = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.v = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.o = nn.Linear(self.nh * self.hd, h, bias=False)
        gated = model.mlp == "gated"
        self.moe = model.moe
        if model.moe:
            self.router = nn.Linear(h, model.moe.num_experts, bias=False)
            self.experts = nn.ModuleList(
                _MLP(h, model.moe.expert_intermediate_size, gated) for _ in range(model.moe.num_experts)
            )
        else:
            self.mlp = _MLP(h, model.intermediate_size, gated)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        groups = self.nh // self.nkv
        if self.attention == "sdpa":
            if groups > 1:
                k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.hd)
        if causal:
            s = q.shape[-2]
            scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
        return scores.softmax(-1) @ v

    def _moe(self, h: torch.Tensor) -> torch.Tensor:
        weights, chosen = self.router(h).softmax(-1).topk(self.moe.experts_per_token, dim=-1)
        out = torch.zeros_like(h)
        for e, expert in enumerate(self.experts):
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            if rows.numel():
                out.index_add_(0, rows, expert(h[rows]) * weights[rows, slot, None].to(h.dtype))
        return out

    def forward(self, x: torch.Tensor, past_k: torch.Tensor | None = None, past_v: torch.Tensor | None = None):
        b, s, hidden = x.shape
        h = _rms_norm(x)
        q = self.q(h).view(b, s, self.nh, self.hd).transpose(1, 2)
        k = self.k(h).view(b, s, self.nkv, self.hd).transpose(1, 2)
        v = self.v(h).view(b, s, self.nkv, self.hd).transpose(1, 2)
        start = 0 if past_k is None else past_k.shape[2]
        pos = torch.arange(start, start + s, device=x.device, dtype=torch.float32)
        freqs = pos[:, None] / (10000.0 ** (torch.arange(0, self.hd, 2, device=x.device) / self.hd))[None, :]
        angles = torch.cat([freqs, freqs], dim=-1)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        if past_k is not None:
            k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        attn = self._attend(q, k, v, causal=past_k is None).transpose(1, 2).reshape(b, s, self.nh * self.hd)
        x = x + self.o(attn)
        h = _rms_norm(x).reshape(b * s, hidden)
        mlp = self._moe(h) if self.moe else self.mlp(h)
        return x + mlp.view(b, s, hidden)
