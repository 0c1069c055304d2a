"""Score the predictions against public measured serving runs: aiconfigurator's silicon sample.

The silicon sample (``kernel_db/silicon_sample.csv.gz``, converted from aiconfigurator-core with the
kernel tables) holds the measured TTFT and TPOT of real vLLM, SGLang and TensorRT-LLM serving runs.
It is the test set: no value of it enters a fit or a default anywhere in roofline.

What is scored: TPOT of the aggregated runs (``mode == agg``) of models that are in ``model_db/``,
on devices that are in ``hardware_db/``, with one tensor-parallel group (no pipeline parallelism;
attention data parallelism as one of its ranks, ``roofline.sample_ranks``). TTFT under load is
scored by ``validate --load`` (``roofline.validate_load``: each run simulated request by request at
its concurrency);
disaggregated runs are not scored yet.

The prediction is the serving steady state of ``roofline.serving``: the mean continuous-batching
step with ``batch`` = the run's concurrency decoding at the mean context (prompt + half the output),
replayed from a CUDA graph, where a share of the steps also carries a prompt whole (or a chunk of
the run's token budget, ``roofline.serving.prompt_chunks``) and the rest only decode; under SGLang,
which does not mix them by default, the prompts waiting run in prefill steps of their own, as many
as the budget holds (``roofline.serving.prefill_batches``), that the decodes wait out. A step with
prompt tokens past the engine's CUDA-graph limit has the host dispatch every kernel, as ``validate
--load``'s simulation runs it.
Two columns:
- ``datasheet``: every op on the datasheet roofs (what roofline prints today);
- ``tables``: the GEMMs, attention and all-reduces read from the engine-measured kernel tables
  (``roofline.tables``) of the run's engine on the run's device, the routed experts from its
  fused-MoE tables and MLA from its MLA tables; every op the tables cannot answer (vLLM's MLA
  attention, weight-only int4 GEMMs, elementwise) keeps its datasheet time, and ``table_share``
  says which part of the step the tables set.

The sample's rows, and how each maps to a model, a device, a precision and the kernel tables
it reads, are ``roofline.silicon_sample``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from roofline.accuracy import breakdowns, score
from roofline.engine import evaluate
from roofline.engines import engine_profile, in_host_fit_split, prompt_defaults
from roofline.hardware import get_hardware
from roofline.models import ModelConfig, get_model
from roofline.ops import step_ops
from roofline.sample_ranks import run_parallelism
from roofline.serving import eager_ceilings, mixed_step_ops, prefill_batches, prompt_chunks, whole_neighbours
from roofline.settings import Settings
from roofline.silicon_sample import (  # noqa: F401 (validate_load and the tests import them from here)
    DEVICE_IDS,
    MODEL_IDS,
    QUANT,
    ScriptSetup,
    _number,
    documented_kv_dtype,
    documented_setup,
    fp8_tables,
    load_silicon_sample,
    precision_for,
    run_tables,
    why_not_scored,
)
from roofline.tables import TablePredictor
from roofline.tables.source import KernelTables
from roofline.workload import Precision, Workload

RESULT_FIELDS = (
    "host_fit_split",
    "id",
    "model",
    "device",
    "engine",
    "engine_version",
    "precision",
    "tp",
    "isl",
    "osl",
    "concurrency",
    "measured_tpot_ms",
    "datasheet_tpot_ms",
    "tables_tpot_ms",
    "table_share",
    "tables_label",
)


@dataclass(frozen=True)
class StepPrediction:
    datasheet_s: float
    tables_s: float | None
    table_share: float  # the part of the tables' step that the tables (not the datasheet) set
    labels: tuple[str, ...]
    ops: tuple[dict[str, object], ...] = ()  # per op: name, count, datasheet_s, tables_s, source (totals)


def predict_tpot(
    model: ModelConfig,
    hardware_id: str,
    precision: Precision,
    tp: int,
    isl: int,
    osl: int,
    concurrency: int,
    tables: KernelTables | None = None,
    settings: Settings | None = None,
    version: str | None = None,
    attention_dp: int = 1,
    budget: int | None = None,
    mixed: bool = True,
) -> StepPrediction:
    """The steady-state TPOT of a run (see the module notes): the mean step over the steps that
    carry a prompt and those that only decode, on the datasheet and with the engine's kernel
    ``tables`` and its host work per step (its ``version``'s way). ``budget``: the engine's tokens
    per step (default ``settings.max_batched_tokens``); ``mixed`` False runs the prompts waiting in
    prefill steps of their own, as many a step as the budget holds, as SGLang does unless told to
    mix them (``--enable-mixed-chunk``)."""
    hw = get_hardware(hardware_id)
    # The datasheet; the tables come as ``tables``. Its engine's budget and cap there, where unset.
    settings = replace((settings or Settings()).for_device(hw), engine="ideal")
    context = int(round(isl + osl / 2))
    w = Workload(
        model, "decode", concurrency, context, precision=precision, tp=tp, cuda_graphs=True, attention_dp=attention_dp
    )
    run, _ = w.on(hw)
    decode = mixed_step_ops(run, concurrency, 0.0, isl)
    if mixed:  # a share of the steps carries a prompt beside the decodes (roofline.serving.prompt_chunks)
        chunk, carrying = prompt_chunks(concurrency, isl, osl, budget or settings.max_batched_tokens)
        mixed_ops = mixed_step_ops(run, concurrency, float(chunk), isl)
        parts = [(float(carrying), mixed_ops, concurrency + float(chunk)), (1 - float(carrying), decode, 0.0)]
    else:  # every output token's step, and prefill steps of the prompts waiting (roofline.serving.prefill_batches)
        k, steps = prefill_batches(concurrency, isl, osl, budget or settings.max_batched_tokens)
        parts = [(1.0, decode, 0.0)]
        for prompts, weight in whole_neighbours(k):  # a fractional k: its two whole neighbours' steps
            prompt = step_ops(replace(run, phase="prefill", batch=int(prompts), seq_len=isl))
            parts.append((float(steps * weight), prompt, float(prompts * isl)))
    # (share of the steps, their ops, their new tokens where they carry a prompt: 0 for decodes alone)
    parts = [part for part in parts if part[0] > 0]
    ceilings = settings.ceilings(hw, tp, cuda_graphs=True)
    if tables is None:
        return StepPrediction(
            sum(share * float(evaluate(ops, ceilings).step_time_s) for share, ops, _ in parts), None, 0.0, ()
        )
    profile = engine_profile(tables.engine)
    # Past the CUDA-graph limit the host dispatches every kernel (roofline.serving.simulation.steptime).
    limit = profile.prompt_graph_limit(settings.max_num_seqs, settings.prompt_graph_tokens) if profile else None
    expected = replace(ceilings, roof_source=tables, source="engine-measured")
    if profile is not None:
        expected = replace(
            expected,
            engine_step_s=profile.host_step_s,
            engine_per_seq_s=profile.host_per_seq_s,
            engine_overlap=profile.overlaps(version),
            engine_step_note=profile.host_note(version),
        )
    ideal_s = tables_s = from_tables_s = 0.0
    labels: set[str] = set()
    by_op: dict[str, dict[str, object]] = {}  # the mean step's time of each op, the parts' summed
    eager = eager_ceilings(expected, settings)
    for share, ops, tokens in parts:
        step = graphed = evaluate(ops, expected)
        if limit is not None and tokens > limit:  # the ideal bound stays the datasheet's, without the host
            step = evaluate(ops, eager)
        ideal_s += share * float(graphed.ideal_step_time_s)
        tables_s += share * float(step.step_time_s)
        from_tables_s += share * float(step.step_time_s) * step.source_share
        labels |= {src for src, used in zip(step.sources, step.from_source) if used}
        for op, d, t, src in zip(ops, step.ideal_device_s.tolist(), step.device_s.tolist(), step.sources):
            entry = by_op.setdefault(op.name, {"name": op.name, "count": op.count, "datasheet_s": 0.0, "tables_s": 0.0})
            entry["datasheet_s"] += share * d
            entry["tables_s"] += share * t
            entry["source"] = src
    share_of_tables = from_tables_s / tables_s if tables_s > 0 else 0.0
    return StepPrediction(ideal_s, tables_s, share_of_tables, tuple(sorted(labels)), tuple(by_op.values()))


def weights_past_memory(model, device: str, precision, tp: int, dp: int) -> str:
    """Why a run is not scored where its weights alone are more than its GPU's memory at its recorded
    parallelism (it cannot have run so), else ''. One that fits but leaves no KV cache at the memory
    model's default fraction is scored: its engine's own fraction is not recorded."""
    from roofline.memory import weight_bytes_per_device

    hw = get_hardware(device)
    run, _ = Workload(model, "decode", 1, 1, precision=precision, tp=tp, attention_dp=dp).on(hw, need_peak=False)
    weights = weight_bytes_per_device(model, run.precision, tp, dp)
    if weights <= hw.memory_bytes:
        return ""
    gib = 2**30
    return (
        f"{model.name}'s weights at TP {tp} ({weights / gib:,.0f} GiB a GPU) are more than the "
        f"{hw.memory_bytes / gib:,.0f} GiB of one {hw.name}: not the run its row records"
    )


def documented_budget(row: dict[str, str], hw) -> int:
    """A run's tokens per step as its server had them: its script's where its source documents one,
    else its engine's default on its device."""
    setup = documented_setup(row)
    return (setup.token_budget if setup else None) or engine_profile(row["backend"]).token_budget(hw)


def run_settings(
    row: dict[str, str],
    attention_dp: int,
    concurrency: int,
    settings: Settings | None = None,
    setup: ScriptSetup | None = None,
) -> Settings:
    """``settings`` (default: the defaults) as one of a run's attention ranks had its server: its
    engine; its token budget (``documented_budget``); the sequence cap and CUDA-graph limit its
    script set where its source documents them, else the engine's defaults, the cap at least its
    clients (``roofline.serving.simulation.api.rank_settings``). The steady score and ``validate
    --load`` both read a run so."""
    from roofline.serving.simulation.api import rank_settings

    hw = get_hardware(DEVICE_IDS[row["system"]])
    setup = setup or documented_setup(row) or ScriptSetup()  # ``setup``: the run's, read already
    settings = replace((settings or Settings()).for_device(hw), engine=row["backend"])
    settings = replace(
        settings,
        max_num_seqs=setup.max_num_seqs or settings.max_num_seqs,
        max_batched_tokens=documented_budget(row, hw),
        prompt_graph_tokens=setup.prompt_graph_tokens,
        attention_dp=attention_dp,
    )
    settings = rank_settings(settings, hw)
    if not setup.max_num_seqs:  # the script's cap holds its other requests back; else at least the clients
        settings = replace(settings, max_num_seqs=max(settings.max_num_seqs, concurrency))
    return settings


def _tokens(row: dict[str, str], column: str) -> int:
    """A row's prompt or output length: a whole number of tokens the models can hold, else a
    ValueError naming the column (Python's "invalid literal for int()" had been the reason)."""
    text = str(row.get(column, "")).strip()
    if not text.isdigit() or not 1 <= int(text) <= 1 << 24:
        raise ValueError(f"{column}: expected a whole number of tokens from 1 to 16,777,216, got {text[:20]!r}")
    return int(text)


def score_rows(
    rows: list[dict[str, str]],
    tables: bool = True,
    with_ops: bool = False,
    moe_routing: str | None = None,
    exact: bool = False,
) -> tuple[list[dict[str, object]], dict[str, int]]:
    """Predict every scoreable row; also count the rows left out, by reason. ``with_ops`` adds
    each run's per-op breakdown (``ops``); ``moe_routing`` reads every MoE layer at that routing
    (None: each model's own, ``roofline.routing``). A reason's numbers become N so that runs group
    by it, unless ``exact`` (one run explained: its own numbers)."""
    out, skipped = [], {}
    predictors: dict[tuple[str, str, str], TablePredictor | None] = {}
    for row in rows:
        reason = why_not_scored(row)
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        model = get_model(MODEL_IDS[row["model_path"]])
        device = DEVICE_IDS[row["system"]]
        engine, version = row["backend"], row.get("backend_version") or None
        source = run_tables(row, predictors, moe_routing) if tables else None
        try:
            precision = precision_for(row, model)
            tp, dp = run_parallelism(row)  # one of D ranks of tp_size GPUs (roofline.sample_ranks)
            concurrency = int(_number(row, "batch_size"))
            if too_big := weights_past_memory(model, device, precision, tp, dp):
                skipped[too_big] = skipped.get(too_big, 0) + 1
                continue
            pred = predict_tpot(
                model,
                device,
                precision,
                tp,
                _tokens(row, "isl"),
                _tokens(row, "osl"),
                concurrency,
                source,
                version=version,
                attention_dp=dp,
                settings=run_settings(row, dp, concurrency),
                mixed=prompt_defaults(engine)[0],  # as the engine runs prompts by default (SGLang: steps of their own)
            )
        except ValueError as exc:
            said = str(exc).split(";")[0]
            reason = "does not run as configured: " + (said if exact else re.sub(r"(?<![\w-])\d+(?![\w-])", "N", said))
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        out.append(
            {
                "id": row["id"],
                "model": model.id,
                "device": device,
                "engine": engine,
                "engine_version": version or "",
                "precision": row.get("gemm_quant_mode") or "bf16",
                "tp": tp,
                **({"attention_dp": dp} if dp > 1 else {}),
                "isl": _tokens(row, "isl"),
                "osl": _tokens(row, "osl"),
                "concurrency": concurrency,
                "measured_tpot_ms": _number(row, "silicon_tpot_ms"),
                "datasheet_tpot_ms": pred.datasheet_s * 1e3,
                "tables_tpot_ms": None if pred.tables_s is None else pred.tables_s * 1e3,
                "table_share": pred.table_share,
                "tables_label": source.label if source else "",
                "host_fit_split": in_host_fit_split(row),
            }
        )
        if with_ops:
            out[-1]["ops"] = list(pred.ops)
    return out, skipped


def _errors(pred: list[float], measured: list[float]) -> dict[str, float]:
    """Median and p90 |predicted / measured - 1| and the bias (median signed error: > 0 predicts
    slower than measured), as ``roofline.accuracy.score`` computes them."""
    s = score(pred, measured)
    nan = float("nan")
    if s is None:
        return {"median_abs_error": nan, "p90_abs_error": nan, "bias": nan}
    return {"median_abs_error": s.median_abs_error, "p90_abs_error": s.p90_abs_error, "bias": s.bias}


def summarize(results: list[dict[str, object]]) -> list[dict[str, object]]:
    """Per model x device x engine: runs, then median and p90 |error| and bias of each column."""
    groups: dict[tuple, list[dict[str, object]]] = {}
    for r in results:
        groups.setdefault((r["model"], r["device"], r["engine"]), []).append(r)
    out = []
    for (model, device, engine), rs in sorted(groups.items()):
        measured = [r["measured_tpot_ms"] for r in rs]
        entry = {"model": model, "device": device, "engine": engine, "runs": len(rs)}
        entry["datasheet"] = _errors([r["datasheet_tpot_ms"] for r in rs], measured)
        if all(r["tables_tpot_ms"] is not None for r in rs):
            entry["tables"] = _errors([r["tables_tpot_ms"] for r in rs], measured)
            entry["table_share"] = float(np.mean([r["table_share"] for r in rs]))
        out.append(entry)
    return out


def validate(path: Path | None = None, tables: bool = True, moe_routing: str | None = None) -> dict[str, object]:
    """The whole report: per-run predictions, per-group errors, overall errors, rows left out."""
    results, skipped = score_rows(load_silicon_sample(path), tables, moe_routing=moe_routing)

    def scores(rs: list[dict[str, object]]) -> dict[str, object]:
        out: dict[str, object] = {"runs": len(rs)}
        if rs:
            measured = [r["measured_tpot_ms"] for r in rs]
            out["datasheet"] = _errors([r["datasheet_tpot_ms"] for r in rs], measured)
            with_tables = [r for r in rs if r["tables_tpot_ms"] is not None]
            if with_tables:
                out["tables"] = _errors(
                    [r["tables_tpot_ms"] for r in with_tables], [r["measured_tpot_ms"] for r in with_tables]
                )
        return out

    return {
        "metric": "TPOT (mean inter-token latency) of aggregated serving runs",
        "not_scored": "TTFT (see validate --load, which simulates each run at its concurrency) and disaggregated runs",
        "moe_routing": moe_routing or "auto",
        "overall": scores(results),
        # The engines' host work per step was fitted on these runs (roofline.engines): the rest is
        # the test set, scored apart.
        "host_fit_split": scores([r for r in results if r["host_fit_split"]]),
        "test_set": scores(test := [r for r in results if not r["host_fit_split"]]),
        # The test set per engine and per device (roofline.accuracy.BREAKDOWNS).
        **breakdowns(test, scores),
        "groups": summarize(results),
        "skipped": skipped,
        "results": results,
    }
