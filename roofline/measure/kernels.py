"""Achievable ceilings and kernel sweeps, each kernel in the layout fast libraries use.

- GEMMs as ``F.linear`` on (out, in) weights, the orientation a model's linear layers run;
  int8 through ``torch._int_mm`` with B column-major (an (n, k) tensor passed transposed, its fast
  path); fp8 through ``torch._scaled_mm`` with real per-tensor scales (amax / 448).
- Memory bandwidth by a copy kernel (read + write: x times 1 into another buffer) and by a
  read-only reduction, and a cache roof: the same read over a working set that fits in the last-level cache.
- Sweeps at a model's shapes: its linear layers over the rows M (decode's 1 to prefill's
  thousands), decode attention over batch x context on a static cache with SDPA and
  ``enable_gqa``, causal prefill attention over length, and the elementwise kernels over tokens.
Every sweep point becomes a ``KernelPoint`` with the FLOPs and bytes the engine counts for it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch.nn import functional as F

from roofline.calibration import KernelPoint, elementwise_flops
from roofline.measure.model import TORCH_DTYPES
from roofline.measure.schema import Timing
from roofline.measure.timing import host_dispatch, rotation_count, time_device
from roofline.models import ModelConfig

Progress = Callable[[float, str], None]
FP8_MAX = 448.0  # e4m3


def _random(shape: tuple[int, ...], dtype: str, device: torch.device) -> torch.Tensor:
    if dtype == "int8":
        return torch.randint(-64, 64, shape, dtype=torch.int8, device=device)
    return torch.randn(shape, device=device, dtype=TORCH_DTYPES.get(dtype, torch.float32))


def linear_fn(dtype: str) -> Callable:
    """One GEMM as a model runs it: y = x W^T with W stored (out, in)."""
    if dtype == "fp8":

        def run(args):
            x, w, sx, sw = args
            return torch._scaled_mm(x, w.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)

        return run
    if dtype == "int8":
        return lambda args: torch._int_mm(args[0], args[1].t())
    return lambda args: F.linear(args[0], args[1])


def linear_weights(n: int, k: int, dtype: str, device: torch.device, copies: int) -> list[tuple]:
    """``copies`` weight matrices (N, K), each with its per-tensor scale where the format has one."""
    sets = []
    for _ in range(copies):
        if dtype == "fp8":
            w = torch.randn(n, k, device=device)
            sw = w.abs().max() / FP8_MAX  # a per-tensor scale from the data
            sets.append(((w / sw).to(torch.float8_e4m3fn), sw.float()))
        else:
            sets.append((_random((n, k), dtype, device), None))
    return sets


def linear_inputs(m: int, weights: list[tuple], dtype: str, device: torch.device) -> list[tuple]:
    """One activation (M, K) per weight copy, as ``linear_fn`` takes them."""
    sets = []
    for w, sw in weights:
        k = w.shape[1]
        if dtype == "fp8":
            x = torch.randn(m, k, device=device)
            sx = x.abs().max() / FP8_MAX
            sets.append(((x / sx).to(torch.float8_e4m3fn), w, sx.float(), sw))
        else:
            sets.append((_random((m, k), dtype, device), w))
    return sets


LAYOUTS = {
    "fp32": "F.linear, weights (N, K), TF32 off",
    "tf32": "F.linear, weights (N, K), TF32 on",
    "bf16": "F.linear, weights (N, K)",
    "fp16": "F.linear, weights (N, K)",
    "int8": "torch._int_mm, B column-major ((N, K) passed transposed)",
    "fp8": "torch._scaled_mm e4m3, B column-major, per-tensor scales amax/448, bf16 out",
}


def element_bytes(dtype: str) -> float:
    return 1.0 if dtype in ("int8", "fp8") else torch.finfo(TORCH_DTYPES[dtype]).bits / 8


def time_linear(
    m: int,
    n: int,
    k: int,
    dtype: str,
    device: torch.device,
    repeats: int,
    cache_bytes: float,
    weights: list[tuple] | None = None,
) -> Timing:
    """Device time of one (M, K) x (N, K)^T GEMM; ``weights`` (from ``linear_weights``) lets a
    sweep over M build its weight copies once."""
    if weights is None:
        copies = rotation_count((m * k + n * k) * element_bytes(dtype), cache_bytes)
        weights = linear_weights(n, k, dtype, device, copies)
    inputs = linear_inputs(m, weights, dtype, device)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        return time_device(linear_fn(dtype), inputs, device, calls=min(8, len(inputs) * 2), repeats=repeats)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32


def memory_roofs(
    device: torch.device, copy_bytes: int, cache_bytes: float, repeats: int
) -> tuple[dict[str, Timing], int]:
    """Copy (read + write), read-only and in-cache read, each timed back to back; and the bytes
    of the in-cache working set (a quarter of the cache, so two copies stay resident)."""
    elements = copy_bytes // 4
    src = [torch.randn(elements, device=device) for _ in range(2)]
    dst = torch.empty(elements, device=device)
    small = [torch.randn(max(1024, int(cache_bytes // 16)), device=device) for _ in range(2)]
    timings = {
        # The copy is an elementwise kernel (read one, write one), as a model's ops are: ``copy_``
        # becomes a memcpy node in a CUDA graph, and on an H200 one of 512 MiB or more then ran at
        # 2.75 TB/s where the same copy run eagerly, or this kernel in a graph, ran at 4.2 TB/s.
        "copy": time_device(lambda s: torch.mul(s, 1.0, out=dst), src, device, calls=4, repeats=repeats),
        "read": time_device(lambda s: torch.sum(s), src, device, calls=4, repeats=repeats),
        "cache": time_device(lambda s: torch.sum(s), small, device, calls=64, repeats=repeats),
    }
    return timings, small[0].numel() * 4


def host_costs(device: torch.device) -> dict[str, float]:
    """Host dispatch of one eager op of each kind, on tiny tensors so the device keeps up."""
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    x = torch.zeros(8, 64, device=device, dtype=dtype)
    w = torch.zeros(64, 64, device=device, dtype=dtype)
    weight = torch.ones(64, device=device, dtype=dtype)
    q = torch.zeros(1, 4, 1, 64, device=device, dtype=dtype)
    kv = torch.zeros(1, 2, 16, 64, device=device, dtype=dtype)
    return {
        "elementwise": host_dispatch(lambda: x.add_(1.0), device),
        "linear": host_dispatch(lambda: F.linear(x, w), device),
        "norm": host_dispatch(lambda: F.rms_norm(x, (64,), weight, 1e-6), device),
        "attention": host_dispatch(lambda: F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True), device),
    }


def linear_shapes(m: ModelConfig) -> dict[str, tuple[int, int]]:
    """(N, K) of the model's linear layers."""
    shapes = {
        "o": (m.hidden_size, m.num_heads * m.v_head_dim),
        "gate_up": (2 * m.intermediate_size if m.mlp == "gated" else m.intermediate_size, m.hidden_size),
        "down": (m.hidden_size, m.intermediate_size),
        "lm_head": (m.vocab_size, m.hidden_size),
    }
    if not m.mla:
        shapes["qkv"] = ((m.num_heads + 2 * m.num_kv_heads) * m.head_dim, m.hidden_size)
    return shapes


def sweep_linear(
    m: ModelConfig,
    ms: list[int],
    dtype: str,
    device,
    repeats,
    cache_bytes,
    progress,
    max_weight_bytes: float | None = None,
) -> tuple[list[KernelPoint], list[str]]:
    """The model's linear layers over the rows M, each weight built once (its copies rotated past
    the cache); layers whose weight exceeds ``max_weight_bytes`` are left out, and said so."""
    elt = element_bytes(dtype)
    points, skipped = [], []
    shapes = linear_shapes(m)
    for j, (name, (n, k)) in enumerate(shapes.items()):
        if max_weight_bytes is not None and n * k * elt > max_weight_bytes:
            skipped.append(f"{name} ({n} x {k}, {n * k * elt / 1e6:,.0f} MB)")
            continue
        weights = linear_weights(n, k, dtype, device, rotation_count(n * k * elt, cache_bytes))
        for rows in ms:
            progress(j / len(shapes), f"linear {name}: M={rows}, N={n}, K={k}")
            t = time_linear(rows, n, k, dtype, device, repeats, cache_bytes, weights)
            points.append(
                KernelPoint(
                    op_class="linear",
                    name=name,
                    shape={"m": rows, "n": n, "k": k},
                    flops=2.0 * rows * n * k,
                    bytes=(rows * k + n * k + rows * n) * elt,
                    time_s=t.median_s,
                )
            )
        del weights
    return points, skipped


def sweep_decode_attention(
    m: ModelConfig, batches: list[int], contexts: list[int], dtype: str, device, repeats, cache_bytes
) -> list[KernelPoint]:
    """SDPA of one new token per sequence over a static cache of ``context`` tokens."""
    torch_dtype = TORCH_DTYPES[dtype]
    elt = torch.finfo(torch_dtype).bits / 8
    nh, nkv, hd = m.num_heads, m.num_kv_heads, m.head_dim
    points = []
    for b in batches:
        for c in contexts:
            kv_bytes = 2 * b * c * nkv * hd * elt
            copies = rotation_count(kv_bytes, cache_bytes, limit=4)
            sets = [
                (
                    torch.randn(b, nh, 1, hd, device=device, dtype=torch_dtype),
                    torch.randn(b, nkv, c, hd, device=device, dtype=torch_dtype),
                    torch.randn(b, nkv, c, hd, device=device, dtype=torch_dtype),
                )
                for _ in range(copies)
            ]

            def attend(args):
                return F.scaled_dot_product_attention(*args, enable_gqa=nkv != nh)

            t = time_device(attend, sets, device, calls=min(8, 2 * copies), repeats=repeats)
            points.append(
                KernelPoint(
                    op_class="attention_decode",
                    name="decode attention",
                    shape={"batch": b, "context": c},
                    flops=2.0 * b * nh * c * 2 * hd,
                    bytes=kv_bytes + 2 * b * nh * hd * elt,
                    parallel=b * nkv,
                    time_s=t.median_s,
                )
            )
            del sets
    return points


def sweep_prefill_attention(
    m: ModelConfig, shapes: list[tuple[int, int]], dtype: str, device, repeats
) -> list[KernelPoint]:
    torch_dtype = TORCH_DTYPES[dtype]
    elt = torch.finfo(torch_dtype).bits / 8
    nh, nkv, hd = m.num_heads, m.num_kv_heads, m.head_dim
    points = []
    for b, s in shapes:
        sets = [
            (
                torch.randn(b, nh, s, hd, device=device, dtype=torch_dtype),
                torch.randn(b, nkv, s, hd, device=device, dtype=torch_dtype),
                torch.randn(b, nkv, s, hd, device=device, dtype=torch_dtype),
            )
            for _ in range(2)
        ]
        t = time_device(
            lambda args: F.scaled_dot_product_attention(*args, is_causal=True, enable_gqa=nkv != nh),
            sets,
            device,
            calls=4,
            repeats=repeats,
        )
        points.append(
            KernelPoint(
                op_class="attention_prefill",
                name="prefill attention",
                shape={"batch": b, "seq": s},
                flops=2.0 * nh * b * s * (s + 1) / 2 * 2 * hd,
                bytes=b * s * (2 * nh + 2 * nkv) * hd * elt,
                parallel=b * nh * np.ceil(s / 128),
                time_s=t.median_s,
            )
        )
    return points


def sweep_elementwise(m: ModelConfig, tokens: list[int], dtype: str, device, repeats, cache_bytes) -> list[KernelPoint]:
    """RMSNorm and residual add over the hidden size, SiLU x up over the MLP width."""
    torch_dtype = TORCH_DTYPES[dtype]
    elt = torch.finfo(torch_dtype).bits / 8
    h, i = m.hidden_size, m.intermediate_size
    weight = torch.ones(h, device=device, dtype=torch_dtype)
    points = []
    for t in tokens:
        cases = {
            "norm": (lambda a: F.rms_norm(a[0], (h,), weight, 1e-6), [(t, h)], 2 * t * h * elt + h * elt),
            "residual": (lambda a: a[0] + a[1], [(t, h), (t, h)], 3 * t * h * elt),
            "activation": (lambda a: F.silu(a[0]) * a[1], [(t, i), (t, i)], 3 * t * i * elt),
        }
        for op_class, (fn, shapes, moved) in cases.items():
            copies = rotation_count(moved, cache_bytes, limit=4)
            sets = [tuple(torch.randn(s, device=device, dtype=torch_dtype) for s in shapes) for _ in range(copies)]
            timing = time_device(fn, sets, device, calls=min(8, 2 * copies), repeats=repeats)
            points.append(
                KernelPoint(
                    op_class=op_class,
                    name={"norm": "rms_norm", "residual": "residual add", "activation": "silu x up"}[op_class],
                    shape={"tokens": t},
                    flops=elementwise_flops(op_class, t * (h if op_class != "activation" else i), m.norm),
                    bytes=moved,
                    time_s=timing.median_s,
                )
            )
    return points
