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

The prediction is the serving steady state of ``roofline.serving``: one continuous-batching step
with ``batch`` = the run's concurrency decoding at the mean context (prompt + half the output),
plus the prompt tokens that arrive per step (``batch x isl / osl``) as a prefill chunk, replayed
from a CUDA graph. Two columns:
- ``datasheet``: every op on the datasheet roofs (what roofline prints today);
- ``tables``: the GEMMs, attention and all-reduces read from the engine-measured kernel tables
  (``roofline.tables``) of the run's engine on the run's device, and the routed experts from its
  fused-MoE tables and MLA decode from its MLA tables; every op the tables cannot
  answer (vLLM's MLA, MLA prefill and absorbed projections, weight-only int4 GEMMs, elementwise)
  keeps its datasheet time, and
  ``table_share`` says which part of the step the tables set.

The sample's rows, and how each maps to a model, a device, a precision and the kernel tables
it reads, are ``roofline.silicon_sample``'s.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from roofline.accuracy import BREAKDOWNS, breakdowns, score
from roofline.engine import evaluate
from roofline.engines import engine_profile, in_host_fit_split
from roofline.format import ranks_of
from roofline.hardware import get_hardware
from roofline.inferencex_runs import SPECULATIVE_REASON, run_decoding
from roofline.models import ModelConfig, get_model
from roofline.sample_ranks import run_parallelism
from roofline.serving import mixed_step_ops
from roofline.settings import Settings
from roofline.silicon_sample import (  # noqa: F401 (validate_load and the tests import them from here)
    BLOCK_FP8_CHECKPOINTS,
    DEVICE_IDS,
    MODEL_IDS,
    QUANT,
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
) -> StepPrediction:
    """The steady-state step of a run (see the module notes), on the datasheet and with the
    engine's kernel ``tables`` and its host work per step (its ``version``'s way)."""
    settings = settings or Settings()
    hw = get_hardware(hardware_id)
    context = int(round(isl + osl / 2))
    w = Workload(
        model, "decode", concurrency, context, precision=precision, tp=tp, cuda_graphs=True, attention_dp=attention_dp
    )
    run, _ = w.on(hw)
    # Prompt tokens per step in the steady state, rounded to whole tokens (at least one).
    chunk = max(1, round(concurrency * isl / osl))
    ops = mixed_step_ops(run, concurrency, chunk, isl)
    ceilings = settings.ceilings(hw, tp, cuda_graphs=True)
    if tables is None:
        return StepPrediction(float(evaluate(ops, ceilings).step_time_s), None, 0.0, ())
    profile = engine_profile(tables.engine)
    expected = replace(ceilings, roof_source=tables, source="engine-measured")
    if profile is not None:
        expected = replace(
            expected,
            engine_step_s=profile.host_step_s,
            engine_per_seq_s=profile.host_per_seq_s,
            engine_overlap=profile.overlaps(version),
            engine_step_note=profile.host_note(version),
        )
    step = evaluate(ops, expected)
    breakdown = tuple(
        {"name": op.name, "count": op.count, "datasheet_s": d, "tables_s": t, "source": src}
        for op, d, t, src in zip(ops, step.ideal_device_s.tolist(), step.device_s.tolist(), step.sources)
    )
    labels = tuple(sorted({src for src, used in zip(step.sources, step.from_source) if used}))
    return StepPrediction(float(step.ideal_step_time_s), float(step.step_time_s), step.source_share, labels, breakdown)


def score_rows(
    rows: list[dict[str, str]], tables: bool = True, with_ops: bool = False, moe_routing: str | None = None
) -> tuple[list[dict[str, object]], dict[str, int]]:
    """Predict every scoreable row; also count the rows left out, by reason. ``with_ops`` adds
    each run's per-op breakdown (``ops``); ``moe_routing`` reads every MoE layer at that routing
    (None: each model's own, ``roofline.routing``)."""
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
            pred = predict_tpot(
                model,
                device,
                precision,
                tp,
                int(row["isl"]),
                int(row["osl"]),
                concurrency,
                source,
                version=version,
                attention_dp=dp,
            )
        except ValueError as exc:
            reason = "does not run as configured: " + re.sub(r"(?<![\w-])\d+(?![\w-])", "N", str(exc).split(";")[0])
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
                "isl": int(row["isl"]),
                "osl": int(row["osl"]),
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


def explain(run_id: str, path: Path | None = None) -> dict[str, object]:
    """One run's prediction op by op: where each op's time comes from, on both columns."""
    sample = load_silicon_sample(path)
    rows = [r for r in sample if r["id"] == run_id]
    if not rows:
        raise ValueError(f"no run {run_id!r} in the silicon sample")
    results, skipped = score_rows(rows, tables=True, with_ops=True)
    decoding = run_decoding(rows[0])
    if not results:
        speculative = any(reason.startswith(SPECULATIVE_REASON) for reason in skipped)
        where = f" ({decoding.where})" if decoding and speculative else ""
        if rows[0].get("same_as"):
            where = f": {rows[0]['same_as']}"
        raise ValueError(f"run {run_id!r} is not scored: {', '.join(skipped)}{where}")
    documented = documented_kv_dtype(rows[0])
    kv = f"{documented[0]} ({documented[1]})" if documented else "bf16 (the engines' default; the source records none)"
    setup = documented_setup(rows[0])
    scheduler = f"{setup.words()} ({setup.where})" if setup else "the engine's defaults (the source records none)"
    extra = {"kv_cache": kv, "scheduler": scheduler}
    if repeats := [r["id"] for r in sample if r.get("same_as") == run_id]:
        extra["repeats"] = repeats  # the sample's other rows of this run (roofline.sample_twins)
    if decoding:
        extra["decoding"] = f"{decoding.kind} ({decoding.where})"
    extra["ttft"] = _first_token(rows[0])
    if rows[0].get("recorded_parallelism"):
        extra["parallelism"] = (
            f"TP {_number(rows[0], 'tp_size'):g}, experts split {_number(rows[0], 'moe_tp_size'):g} x "
            f"{_number(rows[0], 'moe_ep_size'):g} (TP x EP) "
            f"as its config ran it; the row records {rows[0]['recorded_parallelism']} (TP x EP as TP)"
        )
    return results[0] | extra


def _first_token(row: dict[str, str]) -> dict[str, object]:
    """The run's mean TTFT as ``validate --load`` simulates it at its clients, beside the same run
    with one client (a rank, under attention data parallelism): its prompts alone in the server, so
    the gap between the two is the waiting and the steps shared with the other clients' work, and
    the second is the prefill itself."""
    from roofline.validate_load import simulate_row

    cache: dict = {}
    loaded, alone = simulate_row(row, cache), simulate_row({**row, "batch_size": "1"}, cache)
    return {
        "measured_ms": loaded["measured_ttft_ms"],
        "clients": f"{loaded['concurrency']} clients" + (" a rank" if loaded.get("attention_dp") else ""),
        **{f"{c}_ms": loaded[f"{c}_ttft_ms"] for c in ("datasheet", "tables") if f"{c}_ttft_ms" in loaded},
        **{f"one_client_{c}_ms": alone[f"{c}_ttft_ms"] for c in ("datasheet", "tables") if f"{c}_ttft_ms" in alone},
    }


def _ttft_line(t: dict[str, object]) -> str:
    def both(prefix: str) -> str:
        return ", ".join(
            f"{c} {t[prefix + c + '_ms']:.1f} ms" for c in ("datasheet", "tables") if prefix + c + "_ms" in t
        )

    return (
        f"TTFT measured {t['measured_ms']:.1f} ms; simulated at its {t['clients']} (validate --load): "
        f"{both('')}; with one client, its prompts alone in the server: {both('one_client_')}"
    )


def _clients(result: dict[str, object]) -> str:
    """The run's concurrency, and under attention data parallelism its ranks and each one's share."""
    d, c = int(result.get("attention_dp") or 1), result["concurrency"]
    if d <= 1:
        return f"concurrency {c}"
    return f"{ranks_of(int(result['tp']), d, 'GPU')}, concurrency {c} a rank ({c * d} in all)"


def render_explain(result: dict[str, object]) -> str:
    lines = [
        f"{result['id']}: {result['model']} on {result['device']}, "
        f"{(result['engine'] + ' ' + (result['engine_version'] or '')).strip()}, "
        f"TP {result['tp']}, {_clients(result)}, {result['isl']} in / {result['osl']} out",
        f"TPOT measured {result['measured_tpot_ms']:.2f} ms, datasheet {result['datasheet_tpot_ms']:.2f} ms, "
        f"tables {result['tables_tpot_ms']:.2f} ms",
        *([_ttft_line(result["ttft"])] if result.get("ttft") else []),
        f"KV cache: {result.get('kv_cache', 'bf16')}",
        f"Scheduler (validate --load): {result.get('scheduler', 'the engine defaults')}",
        *([f"Parallelism: {result['parallelism']}"] if result.get("parallelism") else []),
        *([f"Decoding: {result['decoding']}"] if result.get("decoding") else []),
        *([f"The sample repeats this run as: {', '.join(result['repeats'])}"] if result.get("repeats") else []),
        f"{'op':<48} {'count':>5} {'datasheet ms':>12} {'tables ms':>10}  source",
    ]
    for op in result["ops"]:
        lines.append(
            f"{op['name'][:48]:<48} {op['count']:>5} {op['datasheet_s'] * 1e3:>12.3f} {op['tables_s'] * 1e3:>10.3f}  "
            f"{op['source']}"
        )
    return "\n".join(lines)


def write_csv(results: list[dict[str, object]], path: Path, fields: tuple[str, ...] = RESULT_FIELDS) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for r in results:
            writer.writerow({k: r[k] for k in fields})


def render(report: dict[str, object]) -> str:
    lines = [
        f"{report['metric']}: {report['overall']['runs']} runs scored. {report['not_scored']}.",
        f"error = predicted / measured - 1; bias = median error (> 0: predicted slower); MoE routing: "
        f"{report.get('moe_routing', 'auto')}",
        f"{'model':<16} {'device':<9} {'engine':<7} {'runs':>4}  {'datasheet med/p90/bias':>24}  "
        f"{'tables med/p90/bias':>22} {'share':>6}",
    ]

    def cols(e: dict[str, float] | None) -> str:
        if not e:
            return "-"
        return f"{e['median_abs_error']:.0%}/{e['p90_abs_error']:.0%}/{e['bias']:+.0%}"

    for g in report["groups"]:
        share = f"{g['table_share']:.0%}" if "table_share" in g else "-"
        lines.append(
            f"{g['model']:<16} {g['device']:<9} {g['engine']:<7} {g['runs']:>4}  {cols(g['datasheet']):>24}  "
            f"{cols(g.get('tables')):>22} {share:>6}"
        )
    totals = [
        ("all", report["overall"]),
        ("host-work fit split", report["host_fit_split"]),
        ("test set (the rest)", report["test_set"]),
    ]
    totals += [(f"  test set, {k}", o) for f in BREAKDOWNS for k, o in report.get(f"test_set_by_{f}", {}).items()]
    for name, o in totals:
        lines.append(f"{name:<34} {o['runs']:>4}  {cols(o.get('datasheet')):>24}  {cols(o.get('tables')):>22}")
    lines.append("left out: " + "; ".join(f"{n} {why}" for why, n in sorted(report["skipped"].items())))
    return "\n".join(lines)
