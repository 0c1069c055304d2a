"""How a silicon-sample run's checkpoint stores its weights: the sample's quant modes as roofline's
formats, and which runs read the block-scaled fp8 kernel tables (their checkpoint is block-scaled,
as model_db's ``fp8_checkpoint`` records with its source, or their column says so)."""

from __future__ import annotations

from functools import cache

# quant mode -> (weight dtype, math dtype)
QUANT = {"": ("bf16", "bf16"), "fp8": ("fp8", "fp8"), "fp8_block": ("fp8", "fp8"), "nvfp4": ("nvfp4", "fp4")}
QUANT_WEIGHT_ONLY = {"int4_wo": "int4"}


@cache
def block_fp8_checkpoints() -> frozenset[str]:
    """Checkpoints released with block-scaled fp8 weights (model_db's ``fp8_checkpoint``, each with
    its source): the engines run their block-fp8 kernels whatever a run's column says ("fp8" in some
    of the sample's rows for the same checkpoint)."""
    from roofline.models import load_models

    return frozenset(
        m.fp8_checkpoint.repo
        for m in load_models().values()
        if m.fp8_checkpoint and m.fp8_checkpoint.scaling == "block"
    )


def fp8_tables(row: dict[str, str]) -> tuple[str | None, str | None]:
    """The kernel tables of a run's fp8 GEMMs and experts where they are block-scaled
    ("fp8_block"), else None (the plain fp8 tables): the column says so, or the checkpoint is
    block-scaled whatever the column says (``block_fp8_checkpoints``)."""
    block = row.get("model_path") in block_fp8_checkpoints()
    gemm, moe = row.get("gemm_quant_mode") or "", row.get("moe_quant_mode") or ""
    gemm_dtype = "fp8_block" if gemm == "fp8_block" or (block and gemm == "fp8") else None
    moe_dtype = "fp8_block" if moe == "fp8_block" or (block and moe == "fp8") else None
    return gemm_dtype, moe_dtype
