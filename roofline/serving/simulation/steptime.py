"""The time of any continuous-batching step, from the roofline engine's ops, tabulated once.

A step runs ``tokens`` new tokens through every linear and elementwise layer (the weights are
read once for all of them), samples ``sampled`` sequences through the LM head, attends
``decodes`` single-token queries over their caches (``context`` tokens on average), and attends
each prompt chunk of ``c`` tokens over its ``p`` cached tokens and itself. Each part is a sum of
the engine's ops on the device's roofs (``Settings.ceilings``: datasheet, calibrated or
measured), evaluated over a grid of shapes in one vectorised pass and interpolated in log-log
space, so a simulation of thousands of steps never rebuilds an op.

The parts are separate kernels, so their times add. The decode attention's time at the mean
context is its time at every context under these roofs: its bytes and FLOPs are linear in the
tokens cached.

A step replayed from a CUDA graph costs the host one replay; a step the engine runs eagerly (one
with prompt tokens past the engine's graph limit: ``EngineKnobs.prompt_graph_tokens``) has the
host dispatch every kernel, ``eager_dispatch_s`` in all (each op's launches at the settings' cost
per launch, as ``analyze --eager`` counts them; the same for any number of tokens). The host's
dispatch and the engine's own host work share its Python thread, so they add, and the device runs
beside them: such a step takes the longer of the device's work and the host's.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, replace

import numpy as np

from roofline.engine import Ceilings, Op, evaluate
from roofline.hardware import Hardware
from roofline.models import ModelConfig
from roofline.ops import step_ops
from roofline.serving.steps import is_attention
from roofline.settings import Settings
from roofline.workload import Precision, Workload

GRID_POINTS = 24


def _grid(top: float) -> np.ndarray:
    return np.unique(np.round(np.geomspace(1, max(1.0, top), GRID_POINTS)))


class Table1:
    """Seconds over a geometric grid of one count, interpolated in log-log space (linearly
    extrapolated past the largest point, clamped below the smallest)."""

    def __init__(self, grid: np.ndarray, seconds: np.ndarray) -> None:
        self.grid = np.asarray(grid, float)
        self.seconds = np.asarray(seconds, float)
        self._lx = [math.log(g) for g in self.grid]
        self._ly = [math.log(max(v, 1e-15)) for v in self.seconds]

    def at(self, x: float) -> float:
        """One value, in plain Python: the simulation calls this once per step."""
        lx, ly = self._lx, self._ly
        u = math.log(max(x, 1.0))
        if len(lx) == 1:
            return math.exp(ly[0])
        i = min(max(bisect_right(lx, u) - 1, 0), len(lx) - 2)
        f = (u - lx[i]) / (lx[i + 1] - lx[i])
        return math.exp(ly[i] + max(f, 0.0) * (ly[i + 1] - ly[i]))

    def many(self, x) -> np.ndarray:
        return np.vectorize(self.at, otypes=[float])(np.asarray(x, float))


def _place(grid: list[float], u: float) -> tuple[int, float]:
    """The cell of a sorted grid that ``u`` (clamped to it) falls in, and where in the cell."""
    n = len(grid)
    if n == 1:
        return 0, 0.0
    u = grid[0] if u < grid[0] else grid[-1] if u > grid[-1] else u
    i = bisect_right(grid, u) - 1
    i = 0 if i < 0 else n - 2 if i > n - 2 else i
    return i, (u - grid[i]) / (grid[i + 1] - grid[i])


class Table2:
    """Seconds over two geometric grids, bilinear in log space, clamped to the grid."""

    def __init__(self, gx: np.ndarray, gy: np.ndarray, seconds: np.ndarray) -> None:
        self.gx, self.gy, self.seconds = np.asarray(gx, float), np.asarray(gy, float), np.asarray(seconds, float)
        self._lx = [math.log(g) for g in self.gx]
        self._ly = [math.log(g) for g in self.gy]
        self._lt = np.log(np.maximum(self.seconds, 1e-15)).tolist()
        self._last = (math.nan, math.nan, math.nan)  # the last point asked for and its value (one tuple: thread-safe)

    def at(self, x: float, y: float) -> float:
        """One value, in plain Python: the simulation calls this several times a step, a decode
        stretch again at the point its step was priced at (the last value is kept)."""
        last = self._last
        if last[0] == x and last[1] == y:
            return last[2]
        lx, ly, t = self._lx, self._ly, self._lt
        i, fx = _place(lx, 0.0 if x <= 1.0 else math.log(x))  # NaN stays NaN, as log(max(x, 1)) kept it
        j, fy = _place(ly, 0.0 if y <= 1.0 else math.log(y))
        i1 = i + 1 if i + 1 < len(lx) else i
        j1 = j + 1 if j + 1 < len(ly) else j
        low = t[i][j] * (1 - fx) + t[i1][j] * fx
        high = t[i][j1] * (1 - fx) + t[i1][j1] * fx
        value = math.exp(low * (1 - fy) + high * fy)
        self._last = (x, y, value)
        return value

    def many(self, x, y) -> np.ndarray:
        return np.vectorize(self.at, otypes=[float])(np.asarray(x, float), np.asarray(y, float))


@dataclass(frozen=True)
class StepTimes:
    """Tabulated step parts on one device (seconds); ``roofs`` says what they rest on."""

    roofs: str
    rows: Table1  # every linear and elementwise op at that many new tokens
    logits: Table1  # the LM head at that many sampled sequences
    decode_attention: Table2  # (decoding sequences, their mean context)
    chunk_attention: Table2  # (chunk tokens, cached tokens before it + 1)
    step_overhead_s: float = 0.0  # the engine's host work per step ...
    overhead_per_seq_s: float = 0.0  # ... and per sequence it samples
    overhead_overlaps: bool = False  # the host work runs beside the device's (the step is the longer)
    eager_dispatch_s: float = 0.0  # the host's dispatch of every kernel of a step run without a CUDA graph

    def decode_attention_s(self, decodes: float, mean_context: float) -> float:
        if decodes <= 0:
            return 0.0
        top = self.decode_attention.gx[-1]
        # Past the largest tabulated batch the cache read grows in proportion to the sequences.
        return self.decode_attention.at(decodes, mean_context) * max(1.0, decodes / top)

    def chunk_attention_s(self, chunk: float, prefix: float) -> float:
        return self.chunk_attention.at(chunk, prefix + 1) if chunk > 0 else 0.0

    def step_s(
        self,
        tokens: float,
        sampled: float,
        decodes: float,
        mean_context: float,
        chunks=(),
        prefixes=(),
        graphed: bool = True,
    ) -> float:
        """One step: ``tokens`` new tokens in all, ``decodes`` of them single-token decodes over
        ``mean_context`` cached tokens on average, and prompt chunks of ``chunks`` tokens after
        ``prefixes`` cached ones; ``graphed``: replayed from a CUDA graph (else dispatched eagerly)."""
        t = self.rows.at(tokens) + (self.logits.at(sampled) if sampled > 0 else 0.0)
        t += self.decode_attention_s(decodes, mean_context)
        for c, p in zip(chunks, prefixes):
            t += self.chunk_attention_s(c, p)
        host = self.step_overhead_s + self.overhead_per_seq_s * sampled
        dispatch = 0.0 if graphed else self.eager_dispatch_s
        if self.overhead_overlaps:
            return max(t, host + dispatch)
        return max(t, dispatch) + host

    def host_s(self, sampled: float) -> float:
        """The engine's host work in a step that samples ``sampled`` sequences."""
        return self.step_overhead_s + self.overhead_per_seq_s * sampled


def _sum_time(ops: list[Op], ceilings: Ceilings, keep) -> np.ndarray:
    chosen = [op for op in ops if keep(op)]
    table = evaluate(chosen, ceilings)
    return np.asarray(table.time_s, float).sum(axis=0)


def step_times(
    model: ModelConfig,
    hw: Hardware,
    precision: Precision,
    tp: int,
    settings: Settings,
    max_tokens: int,
    max_seqs: int,
    ceilings: Ceilings | None = None,
) -> StepTimes:
    """Tabulate every part of a step on ``hw`` for steps of up to ``max_tokens`` new tokens and
    ``max_seqs`` sequences, contexts up to the model's maximum, on ``settings``' roofs for the
    device (``ceilings`` replaces them: a roof source of the caller's own)."""
    where = settings.ceilings(hw, tp, cuda_graphs=True) if ceilings is None else ceilings
    rows = _grid(max(max_tokens, max_seqs))
    dp = settings.attention_dp  # tokens and sequences below are one attention rank's
    # As the device runs it: a format its kernels do not take is refused, as the frontier refuses it,
    # and bf16 runs as fp16 where the device has no bf16 math (V100, T4).
    precision = Workload(model, "decode", precision=precision, tp=tp, attention_dp=dp).on(hw)[0].precision
    w = Workload(model, "decode", rows, 1, precision=precision, tp=tp, cuda_graphs=True, attention_dp=dp)
    ops = step_ops(w)
    rows_s = _sum_time(ops, where, lambda op: not is_attention(op) and op.group != "logits")
    logits_s = _sum_time(ops, where, lambda op: op.group == "logits")

    batches, contexts = _grid(max_seqs), _grid(model.max_context - 1)
    w = Workload(
        model,
        "decode",
        batches[:, None],
        contexts[None, :],
        precision=precision,
        tp=tp,
        cuda_graphs=True,
        attention_dp=dp,
    )
    decode_s = _sum_time(step_ops(w), where, is_attention) * np.ones((batches.size, contexts.size))

    chunks, prefixes = _grid(max_tokens), _grid(model.max_context - 1)
    chunk_s = _chunk_table(model, precision, tp, where, chunks, prefixes, dp)
    whole = evaluate(ops, where)
    eager_s = _eager_dispatch_s(ops, settings, where) if where.engine_step_short else 0.0
    roofs = f"{where.source} roofs" + (f" ({where.roof_source.short_label})" if where.roof_source else "")
    unknown = whole.unknown_peaks
    if unknown:
        # No published peak for the math: the step times leave compute out, and are lower bounds.
        roofs += f", lower bounds: {hw.name} publishes no {' or '.join(unknown)} peak"
    roofs += f"; {where.engine_step_short}" if where.engine_step_short else "; no engine host work (ideal)"
    return StepTimes(
        roofs=roofs,
        rows=Table1(rows, rows_s),
        logits=Table1(rows, logits_s),
        decode_attention=Table2(batches, contexts, decode_s),
        chunk_attention=Table2(chunks, np.concatenate([[1.0], prefixes + 1]), chunk_s),
        step_overhead_s=where.engine_step_s,
        overhead_per_seq_s=where.engine_per_seq_s,
        overhead_overlaps=where.engine_overlap,
        eager_dispatch_s=eager_s,
    )


def _eager_dispatch_s(ops: list[Op], settings: Settings, where: Ceilings) -> float:
    """The host's dispatch of one step's kernels without a CUDA graph: every op's launches at the
    settings' cost per launch (the roofs' own where they carry a measured one), once per step, the
    same for any number of tokens (``ops``: a step's ops over a grid of them)."""
    eager = replace(where, launch_overhead_s=settings.launch_overhead_s, graph_replay_s=0.0)
    return float(np.asarray(evaluate(ops, eager).host_s, float).sum(axis=0).max())


def _chunk_table(model, precision, tp, where, chunks, prefixes, attention_dp: int = 1) -> np.ndarray:
    """Attention of a chunk of c prompt tokens after p cached ones: the causal work of p + c
    tokens less that of p, the chunk's own queries and outputs, and every key and value of the
    p + c tokens read once (a fused kernel over a paged cache)."""
    c = chunks[:, None]
    p = np.concatenate([[0.0], prefixes])[None, :]
    total = np.minimum(c + p, model.max_context)
    kw = {"precision": precision, "tp": tp, "cuda_graphs": True, "attention_dp": attention_dp}
    full = step_ops(Workload(model, "prefill", 1, total, **kw))
    before = step_ops(Workload(model, "prefill", 1, np.maximum(p, 1) * np.ones_like(total), **kw))
    had_prefix = (p > 0) * np.ones_like(total)
    ops = []
    for whole, head in zip(full, before):
        if not is_attention(whole):
            continue
        flops = np.maximum(np.asarray(whole.flops) - np.asarray(head.flops) * had_prefix, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(np.asarray(whole.flops) > 0, flops / np.asarray(whole.flops), c / total)
        ops.append(
            replace(
                whole,
                flops=flops,
                act_bytes=np.asarray(whole.act_bytes) * c / total,
                kv_bytes=np.asarray(whole.kv_bytes),
                weight_bytes=np.asarray(whole.weight_bytes) * c / total,
                # A measured kernel over all p + c tokens, scaled to the chunk's share of its work.
                meta={**whole.meta, "work_share": share},
            )
        )
    return _sum_time(ops, where, lambda op: True) * np.ones(total.shape)
