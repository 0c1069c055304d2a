"""Op times from engine-measured kernel tables, each with what it rests on.

A ``TablePredictor`` answers for one (device, engine, version): GEMM by (m, n, k, dtype), context
and generation attention by (batch, length, heads, KV heads, head dim, KV dtype), all-reduce by
message and GPU count. Sizes are read off the measured grid in log space (``roofline.tables.grid``);
categorical keys (dtype, head dim, KV dtype, window) must match exactly. Where the table has no
such key, or no measured corner around the point, the answer is ``None`` and the caller falls
back (to a calibration or the datasheet) and says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

import roofline.tables.store as store
from roofline.routing import TABLE_DISTRIBUTIONS
from roofline.tables.grid import LogGrid

ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "nccl": "NCCL"}
# roofline dtype names -> the tables' names
GEMM_DTYPES = {
    "bf16": "bfloat16",
    "fp16": "bfloat16",
    "fp8": "fp8",
    "fp8_block": "fp8_block",
    "fp4": "nvfp4",
    "nvfp4": "nvfp4",
}
KV_DTYPES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8"}
ELEMENT_BYTES = {"bfloat16": 2}
ATTENTION_AXES = ("batch_size", "seq", "num_heads", "num_key_value_heads")
# table -> (columns that must match exactly, columns read off in log space)
LAYOUT: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "gemm": (("gemm_dtype",), ("m", "n", "k")),
    "context_attention": (("attn_dtype", "kv_cache_dtype", "head_dim", "window_size"), ATTENTION_AXES),
    "generation_attention": (("attn_dtype", "kv_cache_dtype", "head_dim", "window_size"), ATTENTION_AXES),
    "custom_allreduce": (("allreduce_dtype", "num_gpus"), ("message_size",)),
    "compute_scale": (("quant_dtype",), ("m", "k")),
    "generation_mla": (("mla_dtype", "kv_cache_dtype", "num_heads"), ("batch_size", "seq")),
    "context_mla": (("mla_dtype", "kv_cache_dtype", "num_heads"), ("batch_size", "seq")),
    "mla_bmm": (("bmm_dtype", "op_name"), ("num_tokens", "num_heads")),
    "moe": (
        ("moe_dtype", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size", "distribution"),
        ("num_tokens",),
    ),
}
# The power of each read-off size that a table's work grows with: the most its time may grow with
# that size past the largest measured (roofline.tables.grid). A prompt's attention grows with its
# length squared (causal, every token against those before it); everything else in proportion.
WORK_POWERS: dict[str, tuple[float, ...]] = {
    "gemm": (1.0, 1.0, 1.0),
    "context_attention": (1.0, 2.0, 1.0, 1.0),
    "generation_attention": (1.0, 1.0, 1.0, 1.0),
    "custom_allreduce": (1.0,),
    "compute_scale": (1.0, 1.0),
    "generation_mla": (1.0, 1.0),
    "context_mla": (1.0, 2.0),
    "mla_bmm": (1.0, 1.0),
    "moe": (1.0,),
}
# Per-tensor FP8 GEMMs were timed with a dynamic activation scale: each timed call also reduced its
# activation to an amax and derived the scale. aiconfigurator's collectors build TensorRT-LLM's FP8
# linear layer without an input scale (collector/trtllm/collect_gemm.py; TensorRT-LLM's
# FP8QDQLinearMethod then quantizes dynamically) and vLLM's with activation_scheme="dynamic"
# (collector/vllm/collect_gemm.py since June 2026, its 0.22.0 and 0.24.0 collections; earlier ones
# were static, and their files hold no scale table), and SGLang's with a per-token dynamic quant
# (its scale table holds the few shapes where dynamic timed above static). A per-tensor FP8 checkpoint
# (ModelOpt's, NVIDIA's) ships static input scales, and the engine quantizes with them directly:
# that is assumed of every FP8 run (the sample records no checkpoint's scales). The database timed
# the difference on its own, dynamic less static quantization of the same (m, k) activation
# (quantize/computescale_perf.parquet), and derives static-scale FP8 from it for every engine
# alike; so it is taken off here, wherever a file has that table.
STATIC_SCALE_NOTE = "static activation scale: the table's dynamic-scale computation, timed apart, taken off"
NO_SCALE_TABLE_NOTE = "no scale-computation table in this file: read as timed"
# GEMM tables timed without CUDA graphs: aiconfigurator's vLLM collector launches block-FP8 GEMMs
# eagerly (use_cuda_graph=gemm_type != "fp8_block"), so a small one's time is the host's dispatch,
# not the kernel's: its maintainers measured 148.55 us eager against 12.32 us in a graph at
# (m, n, k) = (1, 768, 7168) on a B200 (ai-dynamo/aisimulate PR 219). The dispatch depends on the
# shape, so no one floor tells it apart. A block-scaled FP8 GEMM does the math of a per-tensor one
# and reads a scale per 128 x 128 block more; so where the eager time is over HOST_BOUND_FACTOR
# times the same engine's graph-timed per-tensor FP8 GEMM of that shape, the host set it, and the
# table has no answer there (the datasheet stands, and says so). A decode step runs in a graph.
EAGER_TIMED_GEMM = {("vllm", "fp8_block"): "fp8"}  # -> the graph-timed table it is checked against
HOST_BOUND_FACTOR = 2.0
# A GEMM with twice the rows does twice the work; a table whose time at m is more than this factor
# (the spread that tells MoE routings apart at one token, roofline.routing) over its time at 2 m
# timed the smaller GEMM on a slower path. The time stands as measured (the engine runs it so), and
# its label says so: vLLM 0.24.0's per-tensor FP8 GEMM at m = 1 on B200, B300 and GB200 is 2.3-2.8x
# its time at m = 2 to 8 on most shapes, the same kernel class recorded at both (kernel_source).
SLOWER_THAN_TWICE = 1.5
SLOWER_CACHE_SIZE = 4096
SLOWER_THAN_TWICE_WORDS = "(twice the rows, twice the work)"
SLOWER_THAN_TWICE_READ = re.compile(r"at m = (\S+) this table measured (\S+)x its time at m = \S+ \(twice the rows")
# roofline expert weight formats -> the MoE tables' names. For mxfp4 the names are kernels for the
# same weights (bf16 or mxfp8 activations): the fastest measured wins, as everywhere in these
# tables (the converter keeps the fastest kernel per shape). Otherwise they are different
# checkpoints: the first measured wins.
SAME_WEIGHTS = {"mxfp4"}
MOE_DTYPES = {
    "bf16": ("bfloat16",),
    "fp16": ("bfloat16",),
    "fp8": ("fp8", "fp8_block"),
    "fp8_block": ("fp8_block", "fp8"),
    "nvfp4": ("nvfp4",),
    "int4": ("int4_wo",),
    "mxfp4": ("w4a16_mxfp4", "w4a8_mxfp4_mxfp8"),
}


@dataclass(frozen=True)
class Prediction:
    time_s: float | None  # None: the table does not cover this op
    label: str  # what the figure rests on, or why the table could not answer
    extrapolated: bool = False


class TablePredictor:
    """Kernel times measured inside one serving engine on one device."""

    def __init__(self, entry: dict, asked: str | None = None):
        self.entry = entry
        self.device, self.engine, self.version = entry["device"], entry["engine"], entry["version"]
        self.asked = asked if asked != self.version else None  # a version asked for and not installed
        self._grids: dict[tuple, LogGrid | None] = {}
        self._slower: dict[tuple, str] = {}  # slower_than_twice's answers

    @classmethod
    def open(
        cls, device: str, engine: str, version: str | None = None, say_closest: bool = True
    ) -> TablePredictor | None:
        """The tables of ``version`` (None: the newest), or the closest installed (``store.find``),
        which then says so in its label (unless not ``say_closest``: a measured run's version, which
        its row already names beside the tables it was scored on)."""
        entry = store.find(device, engine, version)
        return None if entry is None else cls(entry, version if say_closest else None)

    @cached_property
    def tables(self) -> dict[str, dict[str, np.ndarray]]:
        return store.load_tables(self.entry["path"])

    @property
    def label(self) -> str:
        closest = f" (no {self.asked} tables installed: the closest)" if self.asked else ""
        return (
            f"{ENGINE_NAMES.get(self.engine, self.engine)} {self.version} kernels{closest}, {self.device}, "
            f"public database ({self.entry['source']}, {self.entry['licence'].split(' ')[0]})"
        )

    def categories(self, table: str) -> list[dict[str, object]]:
        """Every combination of the exact-match columns measured in ``table``."""
        t = self.tables.get(table)
        if t is None:
            return []
        columns = LAYOUT[table][0]
        combos = sorted({tuple(row) for row in zip(*(t[c].tolist() for c in columns))})
        return [dict(zip(columns, combo)) for combo in combos]

    def grid(self, table: str, keys: dict[str, object], as_timed: bool = False) -> LogGrid | None:
        """The measured grid of ``table`` for one combination of its exact-match columns: of the
        kernels' times, so a GEMM table timed without CUDA graphs has its host-bound points left
        out (``as_timed`` keeps every point as the file has it)."""
        axes = LAYOUT[table][1]
        graphed = EAGER_TIMED_GEMM.get((self.engine, keys.get("gemm_dtype"))) if table == "gemm" else None
        cache_key = (table, tuple(sorted(keys.items())), as_timed or graphed is None)
        if cache_key not in self._grids:
            grid = None
            if graphed is not None and not as_timed:
                grid = self._kernel_points(self.grid(table, keys, as_timed=True), graphed)
            elif (t := self.tables.get(table)) is not None:
                mask = np.ones(len(t["latency_ms"]), bool)
                for column, value in keys.items():
                    mask &= t[column] == value
                if mask.any():
                    columns = [t[a][mask] if a != "seq" else _seq(t, table)[mask] for a in axes]
                    latency = t["latency_ms"][mask].astype(float) * 1e-3
                    grid = LogGrid.from_rows(columns, latency, max_slopes=WORK_POWERS.get(table))
            self._grids[cache_key] = grid
        return self._grids[cache_key]

    def _kernel_points(self, grid: LogGrid | None, graphed: str) -> LogGrid | None:
        """``grid`` (a GEMM table timed without CUDA graphs) with every point over
        HOST_BOUND_FACTOR x the graph-timed ``graphed`` GEMM of its shape left out, before anything
        is interpolated: a read between a host-bound point and a kernel-bound one would otherwise
        blend the host's dispatch into the kernel's time."""
        if grid is None:
            return None
        reference = self.grid("gemm", {"gemm_dtype": graphed})
        if reference is None:
            return LogGrid(grid.axes, np.full(grid.log_latency.shape, np.nan), strict=True, max_slopes=grid.max_slopes)
        mesh = np.meshgrid(*(np.exp(axis) for axis in grid.axes), indexing="ij")
        log_reference, _ = reference.many(tuple(mesh))
        kernel = grid.log_latency <= log_reference + np.log(HOST_BOUND_FACTOR)  # NaN either side: left out
        # Strict: a point beside a host-bound one is no answer either, rather than the far corner's
        # time read flat across the gap.
        return LogGrid(grid.axes, np.where(kernel, grid.log_latency, np.nan), strict=True, max_slopes=grid.max_slopes)

    def host_bound_note(self, table_dtype: str) -> str:
        """Why a GEMM of an eager-timed table has no answer where its measured points were host-bound."""
        return (
            f"timed without CUDA graphs: over {HOST_BOUND_FACTOR:g}× the graph-timed "
            f"{EAGER_TIMED_GEMM[(self.engine, table_dtype)]} GEMM of the same shape, a call read the host's "
            "dispatch, not the kernel"
        )

    def _answer(self, grid: LogGrid | None, point: tuple[float, ...], what: str) -> Prediction:
        if grid is None:
            return Prediction(None, f"no {what} in {self.label}")
        log_t, extrapolated = grid(point)
        if not np.isfinite(log_t):
            return Prediction(None, f"{what} outside the measured grid of {self.label}")
        return Prediction(float(np.exp(log_t)), self.label + (" (extrapolated)" if extrapolated else ""), extrapolated)

    def gemm(self, m: float, n: float, k: float, dtype: str = "bf16") -> Prediction:
        table_dtype = GEMM_DTYPES.get(dtype, dtype)
        grid = self.grid("gemm", {"gemm_dtype": table_dtype})
        answer = self._answer(grid, (max(m, 1.0), n, k), f"{dtype} GEMM")
        if answer.time_s is None:
            if (self.engine, table_dtype) in EAGER_TIMED_GEMM:
                as_timed = self.grid("gemm", {"gemm_dtype": table_dtype}, as_timed=True)
                timed = self._answer(as_timed, (max(m, 1.0), n, k), "")
                if timed.time_s is not None:
                    return Prediction(None, f"{timed.label}; {self.host_bound_note(table_dtype)}", timed.extrapolated)
            return answer
        seconds, note = self.as_engine_runs(np.asarray([answer.time_s]), table_dtype, max(m, 1.0), n, k)
        if not note:
            return answer
        time_s = None if np.isnan(seconds[0]) else float(seconds[0])
        return Prediction(time_s, f"{answer.label}; {note}", answer.extrapolated)

    def as_engine_runs(
        self, seconds: np.ndarray, table_dtype: str, m, n, k, compare: bool = True
    ) -> tuple[np.ndarray, str]:
        """GEMM times read off this engine's ``table_dtype`` table at each ``m`` (arrays), ``n`` and
        ``k``, as the engine runs them (NaN where the table's time is not the kernel's), and what
        was changed or found ('' where nothing was; ``compare``: whether a smaller GEMM timed slower
        than twice its rows is looked for, ``slower_than_twice``)."""
        notes = []
        if table_dtype == "fp8":  # as run with a checkpoint's static scales: less the scale computation
            scale = self.grid("compute_scale", {"quant_dtype": "fp8"})
            if scale is None:
                notes.append(NO_SCALE_TABLE_NOTE)
            else:
                log_t, _ = scale.many((np.maximum(np.asarray(m, float), 1.0), float(k)))
                scale_s = np.exp(log_t)  # NaN outside its grid; kept only below the GEMM's own time
                take = np.isfinite(scale_s) & (scale_s < seconds)
                if np.any(take):
                    seconds = np.where(take, seconds - scale_s, seconds)
                    notes.append(STATIC_SCALE_NOTE)
        graphed = EAGER_TIMED_GEMM.get((self.engine, table_dtype))
        if graphed is not None:
            grid = self.grid("gemm", {"gemm_dtype": graphed})
            reference = np.full(np.shape(seconds), np.nan)
            if grid is not None:
                log_t, _ = grid.many((np.maximum(np.asarray(m, float), 1.0), float(n), float(k)))
                reference = np.exp(log_t)
            host = ~(seconds <= HOST_BOUND_FACTOR * reference)  # no graph-timed reference: not read either
            if np.any(host & np.isfinite(seconds)):
                seconds = np.where(host, np.nan, seconds)
                notes.append(self.host_bound_note(table_dtype))
        if compare:
            notes.append(self.slower_than_twice(seconds, table_dtype, m, n, k))
        return seconds, "; ".join(note for note in notes if note)

    def slower_than_twice(self, seconds: np.ndarray, table_dtype: str, m, n, k) -> str:
        """Where the table times the GEMM at some ``m`` over ``SLOWER_THAN_TWICE`` x its time at 2 m
        (as the engine runs both), what it measured there; '' where it did not."""
        m = np.maximum(np.asarray(m, float), 1.0)
        key = (table_dtype, float(n), float(k), m.shape, m.tobytes())  # the same shapes recur across steps
        if key not in self._slower:
            if len(self._slower) >= SLOWER_CACHE_SIZE:  # a long-lived server's sweeps: start afresh
                self._slower.clear()
            self._slower[key] = self._slower_than_twice(np.asarray(seconds, float), table_dtype, m, n, k)
        return self._slower[key]

    @staticmethod
    def slower_than_twice_found(label: str) -> tuple[float, float] | None:
        """(m, the ratio) of a label's ``slower_than_twice`` note; None where it has none."""
        found = SLOWER_THAN_TWICE_READ.search(label)
        return None if found is None else (float(found[1]), float(found[2]))

    def _slower_than_twice(self, seconds: np.ndarray, table_dtype: str, m: np.ndarray, n, k) -> str:
        grid = self.grid("gemm", {"gemm_dtype": table_dtype})
        if grid is None:
            return ""
        log_t, extrapolated = grid.many((2.0 * m, float(n), float(k)))
        twice, _ = self.as_engine_runs(np.where(extrapolated, np.nan, np.exp(log_t)), table_dtype, 2.0 * m, n, k, False)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio, rows = (a.ravel() for a in np.broadcast_arrays(np.asarray(seconds, float) / twice, m))
        slow = np.isfinite(ratio) & (ratio > SLOWER_THAN_TWICE)
        if not np.any(slow):
            return ""
        at = float(rows[np.argmax(np.where(slow, ratio, 0.0))])
        return (
            f"at m = {at:g} this table measured {np.max(ratio[slow]):.2g}x its time at m = {2 * at:g} "
            f"{SLOWER_THAN_TWICE_WORDS}: the engine runs the smaller GEMM on a slower path, so a larger batch costs "
            "no more here"
        )

    def attention(
        self,
        phase: str,
        batch: float,
        seq_len: float,
        num_heads: float,
        num_kv_heads: float,
        head_dim: int,
        kv_dtype: str = "bf16",
        window: int = 0,
    ) -> Prediction:
        """``phase`` "prefill": ``seq_len`` new tokens per sequence attending causally;
        "decode": one new token per sequence over a cache of ``seq_len`` tokens."""
        table = "context_attention" if phase == "prefill" else "generation_attention"
        keys = {
            "kv_cache_dtype": KV_DTYPES.get(kv_dtype, kv_dtype),
            "head_dim": int(head_dim),
            "window_size": int(window),
            "attn_dtype": "bfloat16",
        }
        grid = self.grid(table, keys)
        return self._answer(grid, (batch, seq_len, num_heads, num_kv_heads), f"{phase} attention (head dim {head_dim})")

    def mla_decode(self, batch: float, seq_len: float, heads_per_gpu: float, kv_dtype: str = "bf16") -> Prediction:
        """MLA's decode attention on the cached latent (DeepSeek-V3's 512 + 64 layout) over a cache
        of ``seq_len`` tokens, ``heads_per_gpu`` query heads on each GPU."""
        keys = {
            "mla_dtype": "bfloat16",
            "kv_cache_dtype": KV_DTYPES.get(kv_dtype, kv_dtype),
            "num_heads": int(heads_per_gpu),
        }
        return self._answer(self.grid("generation_mla", keys), (batch, seq_len), "MLA decode attention")

    def moe(
        self,
        tokens: float,
        hidden: int,
        inter: int,
        topk: int,
        experts: int,
        moe_tp: int = 1,
        moe_ep: int = 1,
        weight_dtype: str = "bf16",
        routing: str = "balanced",
    ) -> Prediction:
        """One fused MoE layer (routed experts) for ``tokens`` tokens routed as ``routing`` names
        (``roofline.routing``: balanced or a power law); ``inter`` is the whole expert's
        intermediate size, split over ``moe_tp`` x ``moe_ep`` GPUs."""
        if routing not in TABLE_DISTRIBUTIONS:  # "auto" needs the model (roofline.routing.model_routing)
            raise ValueError(f"routing must be one of {', '.join(TABLE_DISTRIBUTIONS)}, got {routing!r}")
        shape = {
            "distribution": TABLE_DISTRIBUTIONS[routing],
            "hidden_size": int(hidden),
            "inter_size": int(inter),
            "topk": int(topk),
            "num_experts": int(experts),
            "moe_tp_size": int(moe_tp),
            "moe_ep_size": int(moe_ep),
        }
        what = f"{weight_dtype} MoE {experts}x{hidden}x{inter} top-{topk} (TP {moe_tp}, EP {moe_ep})"
        answers = []
        for table_dtype in MOE_DTYPES.get(weight_dtype, (weight_dtype,)):
            grid = self.grid("moe", {"moe_dtype": table_dtype, **shape})
            if grid is not None:
                answers.append(self._answer(grid, (max(tokens, 1.0),), what))
                if weight_dtype not in SAME_WEIGHTS:
                    break
        timed = [a for a in answers if a.time_s is not None]
        if timed:
            return min(timed, key=lambda a: a.time_s)
        return answers[0] if answers else Prediction(None, f"no {what} in {self.label}")

    def all_reduce(self, message_bytes: float, num_gpus: int, dtype: str = "bf16") -> Prediction:
        table_dtype = KV_DTYPES.get(dtype, dtype)
        grid = self.grid("custom_allreduce", {"allreduce_dtype": table_dtype, "num_gpus": int(num_gpus)})
        elements = message_bytes / ELEMENT_BYTES.get(table_dtype, 2)
        return self._answer(grid, (max(elements, 1.0),), f"{num_gpus}-GPU all-reduce")


def _seq(t: dict[str, np.ndarray], table: str) -> np.ndarray:
    """Tokens per sequence the kernel sees: the prompt in a context table, the cached tokens
    (prompt + steps already generated) in a generation table."""
    return t["isl"] + t["step"] if table in ("generation_attention", "generation_mla") else t["isl"]
