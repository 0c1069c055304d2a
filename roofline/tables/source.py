"""Engine-measured kernel roofs: a roof source that reads each op's device time off the kernel
tables one serving engine measured on one device (``roofline.roofs``).

An op is asked of the table its kind names, at the shape its ``meta`` records:
- a linear layer: a GEMM at (m, n, k) in the table of its math (bf16, fp8, fp8 block, nvfp4); a
  bf16-weight layer (the LM head) in the bf16 table; weight-only formats (int4 weights, bf16
  math) have no table; MLA's fused down/up projections and absorbed per-head products as
  ``roofline.tables.mla`` reads them; a table timed with a dynamic FP8
  activation scale less that scale's measured computation (``predict.STATIC_SCALE_NOTE``), and a
  table timed without CUDA graphs only where the kernel, not the host, set its time
  (``predict.EAGER_TIMED_GEMM``);
- the routed experts of a MoE layer: one fused layer (gate+up, activation, down) at the step's
  tokens, timed on the gate+up op, the other two inside it;
- attention: context (prefill) or generation (decode) attention at (batch, tokens, heads, KV
  heads) of its head dim, KV dtype and window; a part of a kernel (a prompt chunk) at its share
  of the whole kernel's work; MLA decode in the MLA table (a 512 + 64 latent only);
- a tensor-parallel all-reduce: the engine's all-reduce at the message's elements and GPUs.
Everything else (elementwise kernels, gathers, naive attention) and every shape outside the
measured grid keeps its datasheet time, and the op's label says why. Sweeps (arrays) are read
in one vectorised pass per op.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from roofline.defaults import FUSED_MOE_PREFIX
from roofline.roofs import MOE_KERNEL_WORDS
from roofline.routing import (
    READ_ORDER,
    ROUTING_WORDS,
    TABLE_DISTRIBUTIONS,
    one_token_outliers,
    resolved_routing,
    routing_note,
    skewed_bounds,
)
from roofline.tables import mla
from roofline.tables.predict import (
    EAGER_TIMED_GEMM,
    ENGINE_NAMES,
    GEMM_DTYPES,
    KV_DTYPES,
    MOE_DTYPES,
    SAME_WEIGHTS,
    TablePredictor,
)

# MLA's prefill heads as the context_mla tables time them: 128 + 64 query/key dims per head.
MLA_PREFILL_HEAD_DIM = 192


def _other_engines(predictor: TablePredictor) -> list[str]:
    """Every other serving engine, in the order their tables are searched."""
    return [e for e in ENGINE_NAMES if e not in (predictor.engine, "nccl")]


def _recording_tables(engine: str, device: str) -> KernelTables | None:
    """The newest tables of ``engine`` on ``device`` where their MoE table records its kernels."""
    from roofline.roofs import kernel_tables

    tables = kernel_tables(engine, device)
    return tables if tables is not None and "kernel" in tables.predictor.tables.get("moe", {}) else None


# How a MoE table's format is named where another's stands in for it.
TABLE_WORDS = {"fp8": "per-tensor fp8", "fp8_block": "block-scaled fp8"}
# Bytes per weight element of each GEMM table's format (nvfp4: 4 bits and an fp8 scale per 16).
TABLE_WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "fp4": 0.5625, "nvfp4": 0.5625}
# The MoE table's element size for a message (all-reduce tables count elements of bf16).
ALLREDUCE_ELEMENT_BYTES = 2.0


@dataclass(frozen=True)
class OpAnswer:
    """Seconds per occurrence (NaN where the table has no answer) and what they rest on."""

    seconds: np.ndarray | None
    label: str
    extrapolated: bool = False
    skewed: bool = False  # a MoE layer read at a skewed routing (roofline.routing)
    instead: str = "datasheet"  # what times the op where the table does not


@dataclass(frozen=True)
class KernelTables:
    """The kernel tables of one engine on one device as a roof source.

    ``gemm_dtype`` names the table of the linear layers' fp8 math where a run's own setup fixes it
    (``fp8_block``: DeepSeek-style block scales; None: each op's ``fp8_scaling``, its workload's
    ``Precision.fp8_scaling``), and ``moe_dtype`` the experts' likewise; ``moe_parallel`` the
    (TP, EP) split of the experts (default: TP over the experts); ``moe_kernel`` the MoE kernel
    family the server runs (``roofline.roofs.MOE_KERNELS``; None: the fastest this engine timed);
    ``moe_routing`` how tokens spread over the experts (``roofline.routing``; None: the model's
    own, ``model_routing``).
    ``speed`` is a what-if: (compute, memory) multipliers applied to each op's measured time by the
    term that binds it on the datasheet. ``link_measured``: the user measured this device's
    all-reduce (``--collectives``); their own measurement times the all-reduce ops, not the table."""

    predictor: TablePredictor
    gemm_dtype: str | None = None
    moe_parallel: tuple[int, int] | None = None
    moe_dtype: str | None = None
    moe_kernel: str | None = None
    moe_routing: str | None = None
    speed: tuple[float, float] = (1.0, 1.0)
    link_measured: bool = False
    kind: str = field(default="engine-measured", init=False)

    @property
    def hardware_id(self) -> str:
        return self.predictor.device

    @property
    def label(self) -> str:
        return self.predictor.label

    @property
    def short_label(self) -> str:
        """The few words a chart title has room for: "vLLM 0.24.0 kernels"."""
        kernels = f"{ENGINE_NAMES.get(self.engine, self.engine)} {self.predictor.version} kernels"
        if self.moe_kernel not in (None, "auto"):
            kernels += f", {MOE_KERNEL_WORDS.get(self.moe_kernel, self.moe_kernel)} MoE kernels"
        if self.moe_routing not in (None, "auto"):
            kernels += f", {ROUTING_WORDS[self.moe_routing]}"
        return kernels

    @property
    def engine(self) -> str:
        return self.predictor.engine

    def scaled(self, compute: float, memory: float) -> KernelTables:
        return replace(self, speed=(self.speed[0] * compute, self.speed[1] * memory))

    def device_terms(self, ops, flops: np.ndarray, moved: np.ndarray, ideal: np.ndarray):
        """Replacement time terms for ``ops`` (shape (4, ops, *sweep), NaN where the datasheet
        stays) and one label per op. Each measured time goes to the term that binds the op on the
        datasheet (``ideal``, the same shape), so the regime is the datasheet's and the time the
        engine's.

        No kernel in a whole step beats the datasheet's compute and memory roofs. A table that
        reads faster measured something a step does not do: a benchmark repeating one small GEMM
        keeps its weights in L2, where a step streams every layer's from memory. Such a time is held
        at the op's datasheet bound (a fused MoE layer's at the bound of all its parts). The
        datasheet routes a MoE layer's tokens uniformly; a layer read at a skewed routing may touch
        fewer experts, down to the top-k every token picks alike, so its bound counts only those
        experts' weights (``skewed_bounds``)."""
        terms = np.full(ideal.shape, np.nan)
        sweep = ideal.shape[2:]
        bounds = np.fmax(ideal[0], ideal[1])  # (ops, *sweep)
        skewed = skewed_bounds(ops, ideal, bounds)
        floors = ideal[3].copy()  # the kernel floor: a fused op's holds its parts' (op_terms holds the rest)
        answers: list[OpAnswer] = []
        fused_at: int | None = None
        for i, op in enumerate(ops):
            meta = op.meta
            if meta.get("moe") == "inside" and fused_at is not None and answers[fused_at].seconds is not None:
                fused = answers[fused_at]
                answers.append(OpAnswer(np.where(np.isnan(fused.seconds), np.nan, 0.0), FUSED_MOE_PREFIX + fused.label))
                for b in (bounds, skewed, floors):
                    b[fused_at] = b[fused_at] + b[i]
                    b[i] = 0.0
                continue
            answers.append(self.op_seconds(op))
            if meta.get("moe") == "fused":
                fused_at = i
        labels: list[str] = []
        for i, answer in enumerate(answers):
            if answer.seconds is None or np.all(np.isnan(answer.seconds)):
                labels.append(f"{answer.instead} ({answer.label})")
                continue
            seconds = np.broadcast_to(np.asarray(answer.seconds, float), sweep)
            binding = ideal[:, i].argmax(axis=0)
            factor = np.where(binding == 0, self.speed[0], self.speed[1])
            timed = seconds / factor
            bound = skewed[i] if answer.skewed else bounds[i]
            held = timed < bound
            timed = np.where(held, bound, timed)
            for term in range(ideal.shape[0]):
                terms[term, i] = np.where(np.isnan(seconds), np.nan, np.where(binding == term, timed, 0.0))
            terms[3, i] = np.where(np.isnan(seconds), np.nan, np.fmax(terms[3, i], floors[i]))
            partial = bool(np.any(np.isnan(seconds)))
            label = answer.label + (" where measured, datasheet elsewhere" if partial else "")
            if np.any(held & ~np.isnan(seconds)):
                label += " (held at the datasheet bound where the table reads faster)"
            labels.append(label)
        return terms, labels

    def op_seconds(self, op) -> OpAnswer:
        """One op's measured seconds per occurrence (an array over the sweep), or why none."""
        kind = op.meta.get("kind")
        if kind == "matmul" and op.meta.get("moe") == "fused":
            return self._moe(op)
        if kind == "matmul" and op.meta.get("moe") == "inside":
            return OpAnswer(None, "MoE experts: timed with the gate+up op")
        if kind == "matmul" and op.meta.get("mla_bmm"):
            return mla.absorb_answer(self, op)
        if kind == "matmul" and op.meta.get("parts"):
            return mla.parts_answer(self, op)
        if kind == "matmul":
            return self.gemm(op)
        if kind == "attention":
            return self._attention(op)
        if kind == "communication":
            if self.link_measured:
                return OpAnswer(
                    None,
                    f"the link of the all-reduce measured on this device, in place of {self.short_label}",
                    instead="calibrated",
                )
            if op.meta.get("collective") != "all_reduce":
                return OpAnswer(None, f"{op.name}: only all-reduce tables converted")
            elements = np.maximum(np.asarray(op.meta["message_bytes"], float) / ALLREDUCE_ELEMENT_BYTES, 1.0)
            keys = {"allreduce_dtype": "bfloat16", "num_gpus": int(op.meta["tp"])}
            return self.read("custom_allreduce", keys, (elements,), f"{op.meta['tp']}-GPU all-reduce")
        return OpAnswer(None, "elementwise kernels: no table")

    def read(self, table: str, keys: dict, point: tuple, what: str, share=1.0) -> OpAnswer:
        """``table``'s time at ``point`` on the grid ``keys`` name (times ``share``), or why none."""
        grid = self.predictor.grid(table, keys)
        if grid is None:
            return OpAnswer(None, f"no {what} in {self.label}")
        log_t, extrapolated = grid.many(point)
        if np.all(np.isnan(log_t)):
            return OpAnswer(None, f"{what} outside the measured grid of {self.label}")
        seconds = np.exp(log_t) * np.asarray(share, float)
        out = bool(np.any(extrapolated & np.isfinite(log_t)))
        return OpAnswer(seconds, self.label + (" (extrapolated)" if out else ""), out)

    def gemm(self, op) -> OpAnswer:
        """A projection's time from the GEMM table, at its (m, n, k) and weight format."""
        meta = op.meta
        if "n" not in meta or "k" not in meta or float(meta.get("matrices", 1)) != 1:
            return OpAnswer(None, "fused or per-head projections (MLA): no table")
        m = np.maximum(np.asarray(meta["m"], float), 1.0)
        n, k = float(meta["n"]), float(meta["k"])
        weight_bytes = float(np.asarray(op.weight_bytes, float).reshape(-1)[0]) / (n * k)
        dtype = op.dtype
        if math.isclose(weight_bytes, 2.0, rel_tol=0.05):  # bf16 weights (the LM head): the bf16 table
            dtype = "bf16"
        elif dtype == "fp8":  # the run's own fp8 table, else its weights' scaling (Precision.fp8_scaling)
            dtype = self.gemm_dtype or ("fp8_block" if meta.get("fp8_scaling") == "block" else "fp8")
        if not math.isclose(weight_bytes, TABLE_WEIGHT_BYTES.get(dtype, -1.0), rel_tol=0.15):
            return OpAnswer(None, f"{weight_bytes:g}-byte weights with {op.dtype} math: no table")
        keys = {"gemm_dtype": GEMM_DTYPES.get(dtype, dtype)}
        answer = self.read("gemm", keys, (m, n, k), f"{dtype} GEMM")
        if answer.seconds is None:
            if (self.predictor.engine, keys["gemm_dtype"]) in EAGER_TIMED_GEMM:  # host-bound points left out
                timed = self.predictor.grid("gemm", keys, as_timed=True)
                if timed is not None and np.any(np.isfinite(timed.many((m, n, k))[0])):
                    return OpAnswer(None, f"{self.label}; {self.predictor.host_bound_note(keys['gemm_dtype'])}")
            return answer
        seconds, note = self.predictor.as_engine_runs(answer.seconds, keys["gemm_dtype"], m, n, k)
        label = f"{answer.label}; {note}" if note else answer.label
        if np.all(np.isnan(seconds)):
            return OpAnswer(None, label)
        return OpAnswer(seconds * np.asarray(meta.get("work_share", 1.0), float), label, answer.extrapolated)

    def _moe(self, op) -> OpAnswer:
        meta = op.meta
        moe_tp, moe_ep = self.moe_parallel or (int(meta["tp"]), 1)
        shape = {
            "hidden_size": int(meta["hidden"]),
            "inter_size": int(meta["expert_inter"]),
            "topk": int(meta["topk"]),
            "num_experts": int(meta["experts"]),
            "moe_tp_size": int(moe_tp),
            "moe_ep_size": int(moe_ep),
        }
        weight_dtype = self.moe_dtype or str(meta["expert_dtype"])
        if weight_dtype == "fp8" and self.moe_dtype is None and meta.get("fp8_scaling") == "block":
            weight_dtype = "fp8_block"
        what = (
            f"{weight_dtype} MoE {meta['experts']}x{meta['hidden']}x{meta['expert_inter']} top-{meta['topk']} "
            f"(TP {moe_tp}, EP {moe_ep})"
        )
        tokens = np.maximum(np.asarray(meta["moe_tokens"], float), 1.0)
        dtypes = MOE_DTYPES.get(weight_dtype, (weight_dtype,))
        sources = self._moe_sources()
        routing = resolved_routing(self.moe_routing, int(meta.get("shared_experts") or 0))
        auto = self.moe_routing in (None, "auto")
        answers: list[tuple[dict, OpAnswer]] = []  # per table dtype: the first source that timed it
        for table_dtype in dtypes:
            for get_tables, keys, relabel in sources:
                tables = get_tables()  # another engine's file is loaded only when reached
                if tables is None:
                    continue
                points = {
                    r: {"moe_dtype": table_dtype, **shape, "distribution": d, **keys}
                    for r, d in TABLE_DISTRIBUTIONS.items()
                }
                outliers = {} if moe_ep > 1 else tables._one_token_outliers(points, what)
                for read_at in (r for r in READ_ORDER[routing] if r not in outliers):
                    answer = tables.read("moe", points[read_at], (tokens,), what)
                    if answer.seconds is not None:
                        break
                if answer.seconds is not None:
                    label = f"{relabel(answer.label)}; {routing_note(routing, read_at, outliers, auto)}"
                    if table_dtype != dtypes[0] and weight_dtype not in SAME_WEIGHTS:  # another checkpoint's kernel
                        asked, read = (TABLE_WORDS.get(d, d) for d in (dtypes[0], table_dtype))
                        label += f"; no {asked} MoE answer in this file: read at its {read} one"
                    answers.append((keys, replace(answer, label=label, skewed=read_at != "balanced")))
                    break
            if answers and weight_dtype not in SAME_WEIGHTS:  # other names are other checkpoints: the first wins
                break
        if not answers:
            return OpAnswer(None, f"no {what} in {self.label}")
        # The kernel set where any table timed it; else (or with none set) what the engine timed.
        chosen = [a for keys, a in answers if "kernel" in keys] or [a for _, a in answers]
        if len(chosen) == 1:
            return chosen[0]
        # Several kernels for the same weights (MXFP4 experts with bf16 or MXFP8 activations): the
        # fastest measured at each point, and whose it is.
        stack = np.array([np.broadcast_to(a.seconds, np.shape(chosen[0].seconds)) for a in chosen])
        seconds = np.fmin.reduce(stack)
        winners = sorted({int(i) for i in np.nanargmin(np.where(np.isnan(stack), np.inf, stack), axis=0).ravel()})
        labels = list(dict.fromkeys(chosen[i].label for i in winners))
        label = labels[0] if len(labels) == 1 else " or ".join(labels) + " (the faster at each size)"
        return OpAnswer(seconds, label, any(a.extrapolated for a in chosen), any(a.skewed for a in chosen))

    def _one_token_outliers(self, points: dict[str, dict], what: str) -> dict[str, float]:
        """``roofline.routing.one_token_outliers`` of this file's one-token times of a MoE shape."""
        one = {r: self.read("moe", point, (np.ones(1),), what).seconds for r, point in points.items()}
        return one_token_outliers({r: float(t[0]) for r, t in one.items() if t is not None and np.isfinite(t[0])})

    def _moe_sources(self) -> list[tuple[object, dict, object]]:
        """Where a MoE layer's time is read, in order (the first that answers wins), each as a
        function giving its tables (None: none to read), the keys it is read at and how its label is
        worded: the kernel family the server runs (``moe_kernel``) in this engine's table; else the
        same kernel as another engine timed it on this device (FlashInfer runs TensorRT-LLM-gen's
        MoE kernels in vLLM and SGLang); else the fastest timed here, and the label says so."""
        kernel = self.moe_kernel
        if kernel in (None, "auto"):
            return [(lambda: self, {}, lambda label: label)]
        words = MOE_KERNEL_WORDS.get(kernel, kernel)
        own = f"{ENGINE_NAMES.get(self.engine, self.engine)} {self.predictor.version}"
        recorded = "kernel" in self.predictor.tables.get("moe", {})
        sources: list[tuple[object, dict, object]] = []
        if recorded:
            sources.append((lambda: self, {"kernel": kernel}, lambda label: f"{words} MoE kernel, {label}"))
        for engine in _other_engines(self.predictor):
            sources.append(
                (
                    lambda engine=engine: _recording_tables(engine, self.predictor.device),
                    {"kernel": kernel},
                    lambda label: f"{words} MoE kernel as timed in {label}; {own} did not time it",
                )
            )
        why = f"no {words} MoE timing of this shape" if recorded else "this file does not record MoE kernels"
        sources.append((lambda: self, {}, lambda label: f"{label}; {why}: the fastest timed kernel"))
        return sources

    def _attention(self, op) -> OpAnswer:
        meta = op.meta
        if meta.get("naive"):
            return OpAnswer(None, "naive attention: engines run a fused kernel, no table")
        share = meta.get("work_share", 1.0)
        kv = KV_DTYPES.get(str(meta["kv_dtype"]), str(meta["kv_dtype"]))
        if meta.get("mla"):
            if meta["phase"] != "decode":
                return OpAnswer(None, "MLA prefill attention: no table converted")
            if tuple(meta["mla"]) != (512, 64):
                return OpAnswer(None, "MLA decode tables are measured for a 512 + 64 latent only")
            keys = {"mla_dtype": "bfloat16", "kv_cache_dtype": kv, "num_heads": int(round(float(meta["heads"])))}
            return self.read("generation_mla", keys, (meta["batch"], meta["seq"]), "MLA decode attention", share)
        if meta.get("mla_prefill"):
            # SGLang's and TensorRT-LLM's files time MLA's prefill kernel on its own (DeepSeek-V3's heads:
            # 128 + 64 query/key and 128 value dims); vLLM's have no such table (their 192-dim prefill rows
            # are grouped-query attention, not MLA's expanded heads).
            if "context_mla" not in self.predictor.tables:
                return OpAnswer(
                    None,
                    "MLA prefill attention: these files time no MLA prefill kernel (vLLM's never do; SGLang's or "
                    "TensorRT-LLM's converted before it was kept: `python -m roofline tables import` again)",
                )
            if int(meta["head_dim"]) != MLA_PREFILL_HEAD_DIM:
                return OpAnswer(None, "MLA prefill tables are measured for 192-dim query/key heads (DeepSeek-V3) only")
            keys = {"mla_dtype": "bfloat16", "kv_cache_dtype": kv, "num_heads": int(round(float(meta["heads"])))}
            return self.read("context_mla", keys, (meta["batch"], meta["seq"]), "MLA prefill attention", share)
        if meta.get("local") == "chunk":
            return OpAnswer(None, "chunked attention: no table")
        table = "context_attention" if meta["phase"] == "prefill" else "generation_attention"
        keys = {
            "attn_dtype": "bfloat16",
            "kv_cache_dtype": kv,
            "head_dim": int(meta["head_dim"]),
            "window_size": int(meta.get("window") or 0),
        }
        point = (meta["batch"], meta["seq"], meta["heads"], meta["kv_heads"])
        what = f"{meta['phase']} attention (head dim {meta['head_dim']})"
        return self.read(table, keys, point, what, share)
