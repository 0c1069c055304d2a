"""Functions that return plain data (dicts, lists) for the command line and the pages.

The CLI prints these as JSON and the dashboard lays them out, so the two never disagree.
"""

from __future__ import annotations

from dataclasses import replace

from roofline.dtypes import peak_unit
from roofline.engine import REGIME_LABELS, Ceilings, evaluate
from roofline.hardware import Hardware
from roofline.matmul import matmul_op
from roofline.models import ModelConfig


def hardware_summary(hw: Hardware) -> dict[str, object]:
    """A device as JSON-friendly data; unknown figures are ``None``, never 0."""
    peaks = hw.peak_tflops.as_dict()
    return {
        "id": hw.id,
        "name": hw.name,
        "vendor": hw.vendor,
        "kind": hw.kind,
        "launch_year": hw.launch_year,
        "peak_tflops": peaks,
        "peak_units": {d: peak_unit(d) for d in peaks},
        "fp32_matrix_tflops": hw.peak_tflops.fp32_matrix,
        "memory_gb": hw.memory_gb,
        "memory_exposed_bytes": hw.memory_exposed_bytes,
        "memory_bytes": hw.memory_bytes,
        "memory_source": hw.memory_source,
        "memory_type": hw.memory_type,
        "memory_bandwidth_tbps": hw.memory_bandwidth_tbps,
        "l2_cache_mb": hw.l2_cache_mb,
        "compute_units": hw.compute_units,
        "compute_unit_name": hw.compute_unit_name,
        "interconnect": hw.interconnect.model_dump() if hw.interconnect else None,
        "tp_link_gb_per_s": {str(t): (hw.group_link(t)[0] or 0) / 1e9 or None for t in (2, 4, 8, 16)},
        "tdp_w": hw.tdp_w,
        "ridge_intensity": {d: hw.ridge_intensity(d) for d in peaks},
        "formats": hw.formats.model_dump() if hw.formats else None,
        "notes": hw.notes,
        "sources": [s.model_dump() for s in hw.sources],
    }


def matmul_result(
    ceilings: Ceilings, m: int, n: int, k: int, dtype: str, out_dtype: str | None = None
) -> dict[str, object]:
    """FLOPs, bytes, intensity, time and regime of one GEMM on one device: ``time_s`` on the
    ceilings' roofs (an engine's measured GEMM where they carry one), the datasheet's terms and
    time (the ideal bound) beside it."""
    op = matmul_op(m, n, k, dtype, out_dtype)
    row = evaluate([op], ceilings).rows()[0]
    ideal = evaluate([op], replace(ceilings, roof_source=None, source="datasheet")).rows()[0]
    bound = row["bound"]
    # A roof source without this GEMM (no fp64 table) leaves it on the datasheet: say that.
    covered = ceilings.roof_source is not None and not row["rests_on"].startswith("datasheet")
    return {
        "hardware": ceilings.hardware_id,
        "hardware_name": ceilings.name,
        "ceilings": ceilings.source if covered or ceilings.roof_source is None else "datasheet",
        "m": m,
        "n": n,
        "k": k,
        "dtype": dtype,
        "out_dtype": op.meta["out_dtype"],
        "flops": row["flops"],
        "bytes": row["bytes"],
        "intensity": row["intensity"],
        "time_s": row["time_s"],
        # The datasheet's time (the ideal bound), and what time_s rests on.
        "ideal_time_s": row["ideal_time_s"],
        "rests_on": row["rests_on"],
        # The datasheet's terms: the ideal bound is the largest.
        "compute_s": ideal["compute_s"],
        "memory_s": ideal["memory_s"],
        "overhead_s": ideal["overhead_s"],
        "bound": bound,
        "bound_label": REGIME_LABELS[bound],
        "attainable_tflops": float(ceilings.attainable_flops_per_s(row["intensity"], dtype)) / 1e12,
        # FLOPs over the datasheet's time: an ideal bound, not a measured rate; and over time_s.
        "ideal_bound_tflops": ideal["achieved_tflops"],
        "expected_tflops": row["achieved_tflops"],
        "peak_tflops": ceilings.peak(dtype) / 1e12,
        "ridge_intensity": ceilings.ridge_intensity(dtype),
        "kernel_floor_s": ceilings.kernel_floor_s,
    }


def model_summary(model: ModelConfig) -> dict[str, object]:
    """A model as JSON-friendly data: its shape, parameter counts and KV bytes per token."""
    data = model.model_dump(exclude={"sources"})
    data["attention"] = model.attention_kind
    data["params"] = model.param_counts()
    data["kv_bytes_per_token"] = {d: model.kv_bytes_per_token(d) for d in ("bf16", "fp8", "int4")}
    data["sources"] = [s.model_dump() for s in model.sources]
    return data
