"""A real training step on the local device: peak memory and step time beside the prediction.

The model is built in torch from its ``model_db`` shapes with random weights and trained the way
a plain PyTorch loop trains it: causal ``scaled_dot_product_attention`` (FlashAttention-style
kernels where the build has them), the loss on every token (the logits upcast to fp32), AdamW
(fused or for-each), SGD with momentum or Adafactor, optional activation checkpointing per
layer (full) or of the attention core (selective), optional LoRA adapters on the chosen
matrices with the base frozen, and autocast to bf16 (``amp``), fp32, or pure bf16 (``pure-bf16``:
the model cast with ``model.to(torch.bfloat16)``, AdamW's state allocated in bf16 like the
parameters, no autocast and no fp32 master copy). Memory is measured on
the step after a warm-up step (so the optimizer's state exists, as in every step but the first):

- CUDA: ``torch.cuda.max_memory_allocated`` over the step;
- CPU: the process's peak resident memory over the step (``VmHWM`` after resetting it through
  ``/proc/self/clear_refs``) less its resident memory before the model was built. The run is a
  child process with glibc's mmap threshold fixed at 64 KiB, so every tensor's pages go back to
  the system when it is freed and resident memory follows the live tensors.

Run as ``python -m roofline.measure.training --json '{...}'`` (the parent does this).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from roofline.measure.child import run_child
from roofline.measure.model import Norm
from roofline.measure.room import check_ram
from roofline.models import ModelConfig
from roofline.training import TrainSetup, training_memory

MEASURABLE_OPTIMIZERS = ("adamw", "sgd-momentum", "adafactor")


def check_measurable(s: TrainSetup) -> None:
    """What this harness can run, or a clear error naming what it cannot."""
    m = s.model
    if m.moe or m.mla or m.parallel_attention or m.positional != "rope":
        raise ValueError(
            f"model: {m.id} is not measured here (the training harness builds dense pre-norm RoPE models: "
            "Llama, Qwen, Mistral, Gemma, Phi, SmolLM)"
        )
    if s.optimizer not in MEASURABLE_OPTIMIZERS:
        raise ValueError(
            f"optimizer: {s.optimizer} needs bitsandbytes; measured here: {', '.join(MEASURABLE_OPTIMIZERS)}"
        )
    if s.method == "qlora":
        raise ValueError("method: qlora needs bitsandbytes' NF4 kernels; measure lora or full here")
    if s.precision == "mixed":
        raise ValueError(
            "precision: mixed (16-bit weights with an fp32 master copy, the default) is a framework's scheme "
            "that the measured step does not run; measure amp, fp32 or pure-bf16"
        )
    if s.dp > 1 or s.zero or s.offload_optimizer:
        raise ValueError("dp, zero and offload are not measured on one device")


class LoRALinear(nn.Module):
    """A frozen base matrix plus a trainable rank-r update B A (A: r x in, B: out x r, B = 0)."""

    def __init__(self, base: nn.Linear, rank: int):
        super().__init__()
        self.base = base
        self.base.weight.requires_grad_(False)
        if self.base.bias is not None:
            self.base.bias.requires_grad_(False)
        device = base.weight.device
        self.a = nn.Parameter(torch.randn(rank, base.in_features, device=device) / math.sqrt(base.in_features))
        self.b = nn.Parameter(torch.zeros(base.out_features, rank, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + F.linear(F.linear(x, self.a), self.b)


class _Layer(nn.Module):
    def __init__(self, m: ModelConfig, selective: bool):
        super().__init__()
        h, hd = m.hidden_size, m.head_dim
        self.m, self.selective = m, selective
        self.norm1, self.norm2 = Norm(h, m.norm), Norm(h, m.norm)
        bias = m.qkv_bias or m.linear_bias
        self.q = nn.Linear(h, m.num_heads * hd, bias=bias)
        self.k = nn.Linear(h, m.num_kv_heads * hd, bias=bias)
        self.v = nn.Linear(h, m.num_kv_heads * hd, bias=bias)
        self.o = nn.Linear(m.num_heads * hd, h, bias=m.linear_bias)
        gated = m.mlp == "gated"
        self.gate = nn.Linear(h, m.intermediate_size, bias=m.linear_bias) if gated else None
        self.up = nn.Linear(h, m.intermediate_size, bias=m.linear_bias)
        self.down = nn.Linear(m.intermediate_size, h, bias=m.linear_bias)

    def _core(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=q.shape[1] != k.shape[1])

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        m = self.m
        b, s, _ = x.shape
        hd = m.head_dim
        y = self.norm1(x)
        q = self.q(y).view(b, s, m.num_heads, hd).transpose(1, 2)
        k = self.k(y).view(b, s, m.num_kv_heads, hd).transpose(1, 2)
        v = self.v(y).view(b, s, m.num_kv_heads, hd).transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        out = checkpoint(self._core, q, k, v, use_reentrant=False) if self.selective else self._core(q, k, v)
        x = x + self.o(out.transpose(1, 2).reshape(b, s, m.num_heads * hd))
        y = self.norm2(x)
        if self.gate is not None:
            hidden = F.silu(self.gate(y)) * self.up(y)
        else:
            hidden = F.gelu(self.up(y), approximate="tanh")
        return x + self.down(hidden)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


class TrainModel(nn.Module):
    def __init__(self, s: TrainSetup):
        super().__init__()
        m = s.model
        self.m, self.full_recompute = m, s.recompute == "full"
        self.embed = nn.Embedding(m.vocab_size, m.hidden_size)
        self.layers = nn.ModuleList(_Layer(m, s.recompute == "selective") for _ in range(m.num_layers))
        self.norm = Norm(m.hidden_size, m.norm)
        self.lm_head = None if m.tied_embeddings else nn.Linear(m.hidden_size, m.vocab_size, bias=False)
        if s.method == "lora":
            self.requires_grad_(False)
            if s.precision == "amp":  # the frozen base is loaded in 16 bits; adapters stay fp32
                self.to(torch.bfloat16 if s.compute_dtype == "bf16" else torch.float16)
            for layer in self.layers:
                for name in s.lora_targets:
                    base = getattr(layer, name, None)
                    if isinstance(base, nn.Linear):
                        setattr(layer, name, LoRALinear(base, s.lora_rank))
        if s.precision == "pure-bf16":  # weights, and so gradients and optimizer state, in bf16
            self.to(torch.bfloat16)

    def forward(self, ids: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            if self.full_recompute:
                x = checkpoint(layer, x, cos, sin, use_reentrant=False)
            else:
                x = layer(x, cos, sin)
        x = self.norm(x)
        logits = self.lm_head(x) if self.lm_head is not None else F.linear(x, self.embed.weight)
        # The loss on every next token, in fp32 as training code computes it.
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), ids.view(-1))


def _optimizer(s: TrainSetup, params, device: torch.device):
    if s.optimizer == "adamw":
        fused = s.fused_optimizer
        return torch.optim.AdamW(params, lr=1e-4, fused=fused or None, foreach=None if fused else True)
    if s.optimizer == "sgd-momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=not s.fused_optimizer)
    return torch.optim.Adafactor(params, lr=1e-3)


def _rope_dtype(s: TrainSetup) -> torch.dtype:
    """The rotary tables in the activations' dtype under pure bf16 (an fp32 table would promote
    q and k to fp32), fp32 otherwise."""
    return torch.bfloat16 if s.precision == "pure-bf16" else torch.float32


def _rss_bytes(field: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return float(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def _warm_up_libraries(s: TrainSetup, dev: torch.device) -> None:
    """One step of a one-layer model of the same kind at a short length: the math libraries
    allocate their workspaces and compile their kernels once, before the baseline is read."""
    small = replace(s, model=s.model.model_copy(update={"num_layers": 1, "vocab_size": 256}), seq_len=16, micro_batch=1)
    with torch.device(dev):
        model = TrainModel(small)
    opt = _optimizer(small, [p for p in model.parameters() if p.requires_grad], dev)
    ids = torch.randint(0, 256, (1, 16), device=dev)
    cos = torch.ones(16, s.model.head_dim, device=dev, dtype=_rope_dtype(s))
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=s.precision == "amp"):
        loss = model(ids, cos, cos * 0)
    loss.backward()
    opt.step()
    del model, opt, loss


def run_step(s: TrainSetup, device: str, steps: int = 1) -> dict:
    """Peak memory (bytes) and time (s) of one training step after a warm-up step; in-process."""
    dev = torch.device(device)
    torch.manual_seed(0)
    on_cuda = dev.type == "cuda"
    _warm_up_libraries(s, dev)  # their lazily created buffers and code are not the step's tensors
    base = torch.cuda.memory_allocated(dev) if on_cuda else _rss_bytes("VmRSS")
    with torch.device(dev):
        model = TrainModel(s)
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = _optimizer(s, trainable, dev)
    b, seq = int(s.micro_batch), int(s.seq_len)
    ids = torch.randint(0, s.model.vocab_size, (b, seq), device=dev)
    hd = s.model.head_dim
    pos = torch.arange(seq, device=dev, dtype=torch.float32)
    freqs = pos[:, None] / (10000.0 ** (torch.arange(0, hd, 2, device=dev) / hd))[None, :]
    angles = torch.cat([freqs, freqs], dim=-1)
    amp = s.precision == "amp"
    cos, sin = angles.cos().to(_rope_dtype(s)), angles.sin().to(_rope_dtype(s))

    def step() -> float:
        with torch.autocast(
            dev.type, dtype=torch.bfloat16 if s.compute_dtype == "bf16" else torch.float16, enabled=amp
        ):
            loss = model(ids, cos, sin)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss.detach())

    times, peak = [], 0.0
    step()  # warm-up: the optimizer's state is created here
    for _ in range(steps):
        if on_cuda:
            torch.cuda.synchronize(dev)
            torch.cuda.reset_peak_memory_stats(dev)
        else:
            _reset_peak_rss()
        start = time.perf_counter()
        step()
        if on_cuda:
            torch.cuda.synchronize(dev)
        times.append(time.perf_counter() - start)
        high = torch.cuda.max_memory_allocated(dev) if on_cuda else _rss_bytes("VmHWM")
        peak = max(peak, high - base)
    return {
        "peak_bytes": peak,
        "time_s": sorted(times)[len(times) // 2],
        "params": sum(p.numel() for p in model.parameters()),
        "trainable": sum(p.numel() for p in trainable),
        "device": torch.cuda.get_device_name(dev) if on_cuda else "CPU",
        "method": "torch.cuda.max_memory_allocated" if on_cuda else "peak resident memory (VmHWM) less the baseline",
    }


def norms_are_fused(device: str) -> bool:
    """Whether this build's RMSNorm on ``device`` keeps only its input (a fused kernel) or also
    the normalised x (the decomposed form), found by counting what it saves for backward."""
    dev = torch.device(device)
    x = torch.randn(4, 64, device=dev, requires_grad=True)
    w = torch.ones(64, device=dev, requires_grad=True)
    saved: list[torch.Tensor] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        F.rms_norm(x, (64,), w, 1e-6)
    big = {t.untyped_storage().data_ptr() for t in saved if t.numel() == x.numel() and t is not w}
    return len(big) <= 1


def setup_to_json(s: TrainSetup) -> dict:
    return {
        "model": s.model.model_dump(mode="json"),
        "seq_len": int(s.seq_len),
        "micro_batch": int(s.micro_batch),
        "precision": s.precision,
        "compute_dtype": s.compute_dtype,
        "optimizer": s.optimizer,
        "fused_optimizer": s.fused_optimizer,
        "recompute": s.recompute,
        "method": s.method,
        "lora_rank": s.lora_rank,
        "lora_targets": list(s.lora_targets),
        "fused_norms": s.fused_norms,
    }


def setup_from_json(data: dict) -> TrainSetup:
    data = dict(data)
    data["model"] = ModelConfig.model_validate(data["model"])
    data["lora_targets"] = tuple(data["lora_targets"])
    return TrainSetup(**data)


def measure(s: TrainSetup, device: str = "cpu", timeout_s: float = 600) -> dict:
    """Run ``run_step`` in a fresh child process (so resident memory starts clean); its result
    with the prediction for the same setup as this device runs it (fused or decomposed norms)."""
    check_measurable(s)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device: {device} requested but torch sees no CUDA device; allowed here: cpu")
    s = replace(s, fused_norms=norms_are_fused(device))
    if device == "cpu":  # a GPU's own allocator refuses what does not fit; a host would swap
        check_ram(float(training_memory(s).peak_bytes), f"train --measure cpu of {s.model.id}")
    stdout = run_child(
        "roofline.measure.training",
        ["--device", device, "--json", json.dumps(setup_to_json(s))],
        "the training step",
        timeout_s,
    )
    result = json.loads(stdout)
    predicted = training_memory(s)
    result["predicted_peak_bytes"] = float(predicted.peak_bytes)
    result["predicted_peak_at"] = str(predicted.peak_at)
    result["fused_norms"] = s.fused_norms
    return result


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m roofline.measure.training")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    print(json.dumps(run_step(setup_from_json(json.loads(args.json)), args.device)))


if __name__ == "__main__":
    main()
