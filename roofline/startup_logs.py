"""The memory model against what serving engines print at start-up: the KV-cache budget, the
weights, the activation peak and the non-torch memory of each log in
``engine_db/vllm_startup_logs.toml`` (public logs, a test set: nothing here is fitted), predicted
with the log's own settings (``python -m roofline validate --memory``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import Field

from roofline.datafiles import DataRecord
from roofline.hardware import get_hardware
from roofline.kvcache import analyze_kv
from roofline.models import get_model
from roofline.settings import Settings
from roofline.workload import Precision, Workload

LOGS = Path(__file__).resolve().parents[1] / "engine_db" / "vllm_startup_logs.toml"
GIB = 2**30
TERMS = ("weights", "activation_peak", "non_torch", "kv_cache")


class StartupLog(DataRecord):
    """One engine's start-up, as its log prints it (per GPU)."""

    log: str
    checkpoint: str
    model: str
    hardware: str
    engine: str
    tp: int = Field(ge=1, le=1024)
    memory_utilization: float = Field(gt=0, le=1)
    max_num_seqs: int = Field(ge=1)
    max_batched_tokens: int = Field(ge=1)
    max_model_len: int = Field(ge=1)
    weight_dtype: str
    act_dtype: str
    kv_dtype: str
    expert_weight_dtype: str | None = None
    weights_gib: float = Field(gt=0)
    activation_peak_gib: float = Field(ge=0)
    non_torch_gib: float = Field(ge=0)
    kv_cache_gib: float = Field(gt=0)
    kv_cache_tokens: int = Field(ge=1)
    source: str


def load_logs(path: Path = LOGS) -> list[StartupLog]:
    with open(path, "rb") as f:
        return [StartupLog(**entry) for entry in tomllib.load(f)["logs"].values()]


def predict(log: StartupLog) -> dict[str, float]:
    """The memory model's figures for the log's model, device and settings, in GiB per device."""
    model = get_model(log.model)
    precision = Precision(
        weight_dtype=log.weight_dtype,
        act_dtype=log.act_dtype,
        kv_dtype=log.kv_dtype,
        expert_weight_dtype=log.expert_weight_dtype,
    )
    # The budget is taken before the graphs are captured (v0.19): no CUDA-graph memory in it.
    w = Workload(model, "decode", 1, 1, precision=precision, tp=log.tp, cuda_graphs=False)
    settings = Settings(
        memory_utilization=log.memory_utilization,
        max_num_seqs=log.max_num_seqs,
        max_batched_tokens=log.max_batched_tokens,
    )
    d = analyze_kv(w, get_hardware(log.hardware), 1, min(log.max_model_len, model.max_context), settings).to_json()
    return {
        "weights": d["weights_bytes"] / GIB,
        "activation_peak": d["workspace_bytes"] / GIB,
        "non_torch": d["non_torch_bytes"] / GIB,
        "kv_cache": d["kv_budget_bytes"] / GIB,
        "kv_cache_tokens": d["kv_budget_tokens"],
    }


def score(logs: list[StartupLog] | None = None) -> dict[str, object]:
    """Each log's terms, predicted beside logged, and the error of the KV budget."""
    rows = []
    for log in logs if logs is not None else load_logs():
        ours = predict(log)
        row: dict[str, object] = {
            "log": log.log,
            "checkpoint": log.checkpoint,
            "model": log.model,
            "hardware": log.hardware,
            "engine": log.engine,
            "tp": log.tp,
            "source": log.source,
        }
        for term in TERMS:
            row[f"{term}_gib"] = getattr(log, f"{term}_gib")
            row[f"predicted_{term}_gib"] = ours[term]
        row["kv_cache_error"] = ours["kv_cache"] / log.kv_cache_gib - 1
        row["kv_cache_tokens"], row["predicted_kv_cache_tokens"] = log.kv_cache_tokens, ours["kv_cache_tokens"]
        rows.append(row)
    errors = [abs(r["kv_cache_error"]) for r in rows]
    return {
        "metric": "KV-cache budget per GPU against vLLM's own start-up log (GiB)",
        "logs": len(rows),
        "within_3_percent": sum(e <= 0.03 for e in errors),
        "max_abs_error": max(errors) if errors else None,
        "rows": rows,
    }


def render(report: dict[str, object]) -> str:
    lines = [
        f"{report['metric']}: {report['within_3_percent']} of {report['logs']} logs within 3% "
        f"(largest error {report['max_abs_error']:.1%})",
        f"{'log':<5} {'model':<15} {'tp':>2}  {'KV GiB ours/log':>16} {'error':>7}  {'weights':>13} "
        f"{'activations':>11} {'non-torch':>11}",
    ]
    for r in report["rows"]:
        lines.append(
            f"{r['log']:<5} {r['model']:<15} {r['tp']:>2}  "
            f"{r['predicted_kv_cache_gib']:>7.2f}/{r['kv_cache_gib']:<8.2f} "
            f"{r['kv_cache_error']:>+7.1%}  {r['predicted_weights_gib']:>6.2f}/{r['weights_gib']:<6.2f} "
            f"{r['predicted_activation_peak_gib']:>5.2f}/{r['activation_peak_gib']:<5.2f} "
            f"{r['predicted_non_torch_gib']:>5.2f}/{r['non_torch_gib']:<5.2f}"
        )
    return "\n".join(lines)
