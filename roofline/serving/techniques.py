"""Serving techniques that move the frontier: speculative decoding and disaggregation.

Speculative decoding verifies k drafted tokens per sequence in one target step of B(k + 1)
rows that reads the cache once; with acceptance rate a the step yields (1 - a^(k+1)) / (1 - a)
tokens on average. At small batch the verify step costs about what a decode step does (memory
bound) and decoding speeds up; at large batch it turns compute-bound and costs ~(k + 1) steps,
and speculation slows decoding down.

Disaggregation runs prefill and decode on separate pools: decode steps never carry a prefill,
and each prompt's KV cache crosses a link to the decode pool.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from roofline.engine import evaluate
from roofline.hardware import Hardware
from roofline.models import ModelConfig
from roofline.ops import step_ops
from roofline.serving.steady import serving_sweep
from roofline.serving.steps import verify_step_ops
from roofline.serving.traffic import Traffic
from roofline.settings import Settings
from roofline.workload import Precision, Workload, check_positive_int


def expected_accepted(alpha: float, k: int) -> float:
    """Tokens a verify step yields on average: (1 - a^(k+1)) / (1 - a) (Leviathan et al. 2023)."""
    if not 0 <= alpha <= 1:
        raise ValueError(f"acceptance rate must be in [0, 1], got {alpha!r}")
    if alpha == 1:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def speculative(
    model: ModelConfig,
    hw: Hardware,
    traffic: Traffic,
    batches,
    k: int,
    alpha: float,
    draft: ModelConfig | None = None,
    precision: Precision | None = None,
    tp: int = 1,
    settings: Settings | None = None,
) -> dict[str, np.ndarray]:
    """Decode with and without speculation at each batch: the plain step, the verify step, the
    draft's k steps (none for n-gram drafting), tokens per verify, the speed-up (below 1: it
    slows decoding) and the verify step's intensity and regime."""
    check_positive_int(k, "k", 64)
    settings = settings or Settings()
    precision = precision or Precision()
    b = np.asarray(batches, float)
    w, _ = Workload(model, "decode", b, int(round(traffic.mean_context)), precision=precision, tp=tp).on(hw)
    c = settings.ceilings(hw, tp, cuda_graphs=True)
    plain = evaluate(step_ops(w), c)
    verify_ops = verify_step_ops(w, b, k)
    verify = evaluate(verify_ops, c)
    # A verify step does the plain step's work and more: where measured kernel tables read it
    # faster (a GEMM timed at k + 1 times the rows picked a better kernel), it is held at the
    # plain step's time, so the speed-up never passes the tokens each verify yields.
    verify_s = np.maximum(verify.step_time_s, plain.step_time_s)
    draft_s = np.zeros_like(b)
    if draft is not None:
        dw, _ = Workload(draft, "decode", b, int(round(traffic.mean_context)), precision=precision, tp=1).on(hw)
        draft_s = k * evaluate(step_ops(dw), settings.ceilings(hw, 1, cuda_graphs=True)).step_time_s
    tokens = expected_accepted(alpha, k)
    spec_tpot = (verify_s + draft_s) / tokens
    flops = sum(np.asarray(op.flops, float) * op.count for op in verify_ops) * np.ones_like(b)
    moved = sum(np.asarray(op.bytes, float) * op.count for op in verify_ops) * np.ones_like(b)
    return {
        "batch": b,
        "plain_tpot_s": plain.step_time_s,
        "verify_s": verify_s,
        "draft_s": draft_s,
        "tokens_per_verify": np.full_like(b, tokens),
        "spec_tpot_s": spec_tpot,
        "speedup": plain.step_time_s / spec_tpot,
        "verify_intensity": flops / moved,
        "plain_bound": plain.step_bound,
        "verify_bound": verify.step_bound,
    }


def disaggregation(
    model: ModelConfig,
    hw: Hardware,
    traffic: Traffic,
    batch: int,
    precision: Precision | None = None,
    tp: int = 1,
    settings: Settings | None = None,
    link_bytes_per_s: float | None = None,
) -> dict[str, dict[str, float]]:
    """One pool with chunked prefill against separate prefill and decode pools at the same
    decode batch: TTFT, TPOT and tokens/s per device of each, and the KV transfer per prompt
    (over ``link_bytes_per_s``, default the device's scale-up link: pools in one NVLink domain)."""
    settings = settings or Settings()
    precision = precision or Precision()
    one = serving_sweep(model, [hw], traffic, precision, tp, settings, batches=np.array([batch]), chunked=True)
    if hw.id in one.why_not:
        raise ValueError(one.why_not[hw.id])
    w, _ = Workload(model, "decode", batch, int(round(traffic.mean_context)), precision=precision, tp=tp).on(hw)
    c = settings.ceilings(hw, tp, cuda_graphs=True)
    decode_s = float(evaluate(step_ops(w), c).step_time_s)
    prefill_s = float(
        evaluate(step_ops(replace(w, phase="prefill", batch=1, seq_len=traffic.prompt_len)), c).step_time_s
    )
    kv_bytes = model.kv_bytes_per_token(precision.kv_dtype) * traffic.prompt_len
    link = link_bytes_per_s or (hw.interconnect.unidirectional_bytes_per_s if hw.interconnect else None)
    if not link:
        raise ValueError(f"{hw.id} has no interconnect figure for the KV transfer; give the link's bandwidth")
    transfer = kv_bytes / link
    decode_rate = batch / decode_s  # tokens/s of one decode group
    prefill_devices = decode_rate / traffic.output_len * prefill_s * tp  # devices prefilling to keep pace
    return {
        "one pool (chunked prefill)": {
            "ttft_s": float(one.ttft_s[0, 0]),
            "tpot_s": float(one.tpot_s[0, 0]),
            "tokens_per_s_per_device": float(one.per_device[0, 0]),
        },
        "prefill and decode pools": {
            "ttft_s": prefill_s + transfer,
            "tpot_s": decode_s,
            "tokens_per_s_per_device": decode_rate / (tp + prefill_devices),
            "kv_transfer_s": transfer,
            "kv_bytes_per_prompt": float(kv_bytes),
            "prefill_devices_per_decode_group": prefill_devices,
        },
    }
