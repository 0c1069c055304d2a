"""Op times from the kernel tables for the Ops ``roofline.ops`` and ``roofline.serving`` build.

The bridge between a step's Op table and a ``TablePredictor``: a linear layer's op becomes a GEMM
query, an attention op a context or generation attention query (its shape from the workload), an
all-reduce a custom all-reduce query. What the tables do not cover (MoE experts, MLA, weight-only
formats, elementwise kernels) comes back as ``None`` with the reason, for the caller to fall back.
Scalar workloads only (one step, not a sweep).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from roofline.engine import Ceilings, Op, evaluate
from roofline.tables.predict import Prediction, TablePredictor
from roofline.workload import Precision, Workload


def gemm_shape(op: Op, p: Precision) -> tuple[float, float, float, float] | None:
    """(m, n, k, weight bytes per element) of a linear layer's op: m from its meta; n and k from
    its meta where given, else from its FLOPs (2 m n k) and activation bytes (m (n + k) x the
    activation's bytes), which fix n and k up to their order."""
    m = float(np.asarray(op.meta.get("m", 0.0)))
    if m <= 0 or "experts_loaded" in op.meta or "absorb" in op.name:
        return None
    if "n" in op.meta and "k" in op.meta:
        n, k = float(op.meta["n"]), float(op.meta["k"])
        return m, n, k, float(np.asarray(op.weight_bytes)) / (n * k)
    nk = float(op.flops) / (2.0 * m)
    n_plus_k = float(op.act_bytes) / (m * p.act_bytes)
    disc = n_plus_k**2 - 4 * nk
    if disc < -1e-6 * n_plus_k**2:
        return None
    root = math.sqrt(max(disc, 0.0))
    n, k = (n_plus_k + root) / 2, (n_plus_k - root) / 2
    return m, n, k, float(np.asarray(op.weight_bytes)) / nk


MOE_FUSED_OP = "MoE experts gate+up"
MOE_INSIDE_FUSED = ("MoE experts activation", "MoE experts down")
TABLE_WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "fp4": 0.5625}


def op_table_time(
    op: Op,
    w: Workload,
    predictor: TablePredictor,
    prompt_len: int | None = None,
    chunk: float = 0.0,
    gemm_dtype: str | None = None,
    moe_parallel: tuple[int, int] | None = None,
    moe_dtype: str | None = None,
) -> Prediction:
    """One op's device time per occurrence from the kernel tables, or ``None`` and why not.

    ``w`` is the workload the op belongs to (scalar batch and length): attention ops carry no
    shape of their own. In a mixed step (``roofline.serving.mixed_step_ops``) the ops named
    "prefill chunk" are ``chunk`` tokens of a ``prompt_len``-token prompt. ``gemm_dtype`` names
    the table of the linear layers' math where it is not the precision's ("fp8_block");
    ``moe_parallel`` the (TP, EP) split of the experts (default (TP, 1)) and ``moe_dtype`` the
    experts' weight format where it is not the precision's ("fp8_block").

    The MoE tables time a fused layer: its whole time comes back on the "MoE experts gate+up" op;
    ``step_table_times`` puts the activation and down projection at 0 inside it."""
    gemm_dtype = gemm_dtype or w.precision.act_dtype
    kind = op.meta.get("kind")
    m, p, tp = w.model, w.precision, w.tp
    if kind == "matmul" and "experts_loaded" in op.meta:
        if not op.name.startswith(MOE_FUSED_OP):
            return Prediction(None, "MoE experts: timed with the gate+up op")
        moe = m.moe
        routed = float(np.asarray(op.meta["m"])) * float(np.asarray(op.meta["experts_loaded"]))
        moe_tp, moe_ep = moe_parallel or (tp, 1)
        return predictor.moe(
            routed / moe.experts_per_token,
            m.hidden_size,
            moe.expert_intermediate_size,
            moe.experts_per_token,
            moe.num_experts,
            moe_tp,
            moe_ep,
            moe_dtype or p.expert_weight_dtype or p.weight_dtype,
        )
    if kind == "matmul":
        shape = gemm_shape(op, p)
        if shape is None:
            return Prediction(None, "MLA absorbed projections: no table converted")
        rows, n, k, weight_bytes = shape
        dtype = gemm_dtype if op.dtype == p.act_dtype else op.dtype
        if math.isclose(weight_bytes, 2.0, rel_tol=0.05):  # bf16 weights (the LM head): a bf16 GEMM
            dtype = "bf16"
        # Weight-only formats (int4 weights, bf16 math) have no table: the bf16 one would read 4x the weights.
        if not math.isclose(weight_bytes, TABLE_WEIGHT_BYTES.get(dtype, weight_bytes), rel_tol=0.15):
            return Prediction(None, f"{weight_bytes:g}-byte weights with {op.dtype} math: no table")
        a, b = predictor.gemm(rows, n, k, dtype), predictor.gemm(rows, k, n, dtype)
        if a.time_s is None or b.time_s is None:
            return a if a.time_s is None else b
        # Which of n and k is the output is not in the op: the geometric mean of both orientations.
        return Prediction(math.sqrt(a.time_s * b.time_s), a.label, a.extrapolated or b.extrapolated)
    if kind == "attention":
        if m.mla:
            if "MLA latent, decode" not in op.name:
                return Prediction(None, "MLA prefill attention: no table converted")
            if (m.mla.kv_lora_rank, m.mla.qk_rope_head_dim) != (512, 64):
                return Prediction(None, "MLA decode tables are measured for a 512 + 64 latent only")
            return predictor.mla_decode(
                float(np.asarray(w.batch)), float(np.asarray(w.seq_len)), m.num_heads / tp, p.kv_dtype
            )
        window = m.local_span if "(sliding window)" in op.name else 0
        if m.local_kind == "chunk" and window:
            return Prediction(None, "chunked attention: no table")
        args = (m.num_heads / tp, m.kv_heads_per_device(tp), m.qk_head_dim, p.kv_dtype, window or 0)
        if "prefill chunk" in op.name:
            whole = predictor.attention("prefill", 1, prompt_len, *args)
            share = chunk / prompt_len
            return whole if whole.time_s is None else replace(whole, time_s=whole.time_s * share)
        phase = "prefill" if w.phase == "prefill" else "decode"
        return predictor.attention(phase, float(np.asarray(w.batch)), float(np.asarray(w.seq_len)), *args)
    if kind == "communication":
        if "all-reduce" not in op.name:
            return Prediction(None, f"{op.name}: only all-reduce tables converted")
        message = float(np.asarray(op.act_bytes)) / 2
        return predictor.all_reduce(message, tp)
    return Prediction(None, "elementwise: datasheet")


def step_table_times(
    ops: list[Op],
    w: Workload,
    predictor: TablePredictor,
    prompt_len: int | None = None,
    chunk: float = 0.0,
    gemm_dtype: str | None = None,
    moe_parallel: tuple[int, int] | None = None,
    moe_dtype: str | None = None,
) -> list[Prediction]:
    """``op_table_time`` of every op of a step, in order; where a fused MoE layer was timed, its
    activation and down projection are 0 (inside it)."""
    out: list[Prediction] = []
    fused: Prediction | None = None  # the last fused MoE layer's answer
    for op in ops:
        if op.name.startswith(MOE_INSIDE_FUSED) and fused is not None and fused.time_s is not None:
            out.append(Prediction(0.0, "inside the fused MoE layer: " + fused.label, fused.extrapolated))
            continue
        pred = op_table_time(op, w, predictor, prompt_len, chunk, gemm_dtype, moe_parallel, moe_dtype)
        if op.name.startswith(MOE_FUSED_OP):
            fused = pred
        out.append(pred)
    return out


@dataclass(frozen=True)
class TableStep:
    """A step's ops timed from the kernel tables where they answer, the datasheet elsewhere."""

    device_s: np.ndarray  # per op, totals over its count
    datasheet_s: np.ndarray  # the same ops on the datasheet roofs
    from_tables: np.ndarray  # bool per op
    sources: tuple[str, ...]  # per op: the table's label, or "datasheet (why the table could not answer)"
    host_s: float  # the step's host time (dispatch, or one CUDA-graph replay)

    @property
    def step_s(self) -> float:
        return max(float(self.device_s.sum()), self.host_s)

    @property
    def datasheet_step_s(self) -> float:
        return max(float(self.datasheet_s.sum()), self.host_s)

    @property
    def table_share(self) -> float:
        """The part of the device time that the tables set."""
        total = float(self.device_s.sum())
        return float(self.device_s[self.from_tables].sum() / total) if total > 0 else 0.0


def table_step(ops: list[Op], w: Workload, ceilings: Ceilings, predictor: TablePredictor, **context) -> TableStep:
    """Evaluate ``ops`` on ``ceilings`` (``roofline.engine.evaluate``) and replace the device time
    of every op the tables answer; ``context`` goes to ``step_table_times`` (prompt_len, chunk,
    gemm_dtype, moe_parallel, moe_dtype)."""
    table = evaluate(ops, ceilings)
    datasheet = np.asarray(table.device_s, float).reshape(len(ops))
    device = datasheet.copy()
    from_tables = np.zeros(len(ops), bool)
    sources = []
    for i, (op, pred) in enumerate(zip(ops, step_table_times(ops, w, predictor, **context))):
        if pred.time_s is not None:
            device[i] = pred.time_s * op.count
            from_tables[i] = True
            sources.append(pred.label)
        else:
            sources.append(f"datasheet ({pred.label})")
    return TableStep(device, datasheet, from_tables, tuple(sources), float(table.host_time_s))
