"""Where an op's device time comes from: the roof sources, and the serving engine whose kernels
a prediction is read from.

One way in for every source of op times (DESIGN.md). The datasheet is the base: every op's time
is the largest of its compute, memory, link and kernel-floor terms (``roofline.optable``), the
ideal bound. A roof source, carried by ``Ceilings.roof_source`` and chosen once per evaluation,
replaces the terms of the ops it can answer and labels each op with what its time rests on:

- ``roofline.calibration.Calibration``: "calibrated", the user's own kernel sweeps measured on
  their device, fitted per op class;
- ``roofline.tables.source.KernelTables``: "engine-measured", kernels timed inside vLLM, SGLang
  or TensorRT-LLM on the device (the public database in ``kernel_db/``).

A roof source has ``kind``, ``hardware_id``, ``label``, ``device_terms(ops, flops, moved,
ideal_terms) -> (terms, labels)`` (NaN terms where the datasheet stays) and ``scaled(compute,
memory)`` for what-if questions. The engine, the serving simulation and the pages never branch
on which one it is.

``--engine`` (and the pages' engine choice) picks the tables: ``auto`` is the newest vLLM where
the device has tables and the datasheet elsewhere; ``vllm``, ``sglang`` and ``trtllm`` name one;
``ideal`` is the datasheet alone.
"""

from __future__ import annotations

from functools import lru_cache

ENGINES: tuple[str, ...] = ("auto", "vllm", "sglang", "trtllm", "ideal")
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "ideal": "ideal (datasheet)"}
AUTO_ENGINE = "vllm"  # what "auto" reads where the device has tables
# The MoE kernel families the tables tell apart (roofline.tables.convert.MOE_KERNEL_MARKS), in words;
# "auto" is the fastest each engine's table timed for a shape.
MOE_KERNEL_WORDS = {
    "trtllm-gen": "TensorRT-LLM-gen",
    "deepgemm": "DeepGEMM",
    "cutlass": "CUTLASS",
    "marlin": "Marlin",
    "triton": "Triton",
}
MOE_KERNELS: tuple[str, ...] = ("auto", *MOE_KERNEL_WORDS)
# What the engines call them: TensorRT-LLM's moe_config.backend, SGLang's --moe-runner-backend,
# vLLM's --moe-backend (lower case). Names not here (WIDEEP, CUTEDSL, aiter, mega-MoE, ...) have
# no table: the fastest timed kernel stands.
MOE_BACKENDS = {
    "trtllm": "trtllm-gen",
    "flashinfer_trtllm": "trtllm-gen",
    "flashinfer_mxfp4": "trtllm-gen",
    "deepgemm": "deepgemm",
    "deep_gemm": "deepgemm",
    "cutlass": "cutlass",
    "flashinfer_cutlass": "cutlass",
    "marlin": "marlin",
    "triton": "triton",
    "triton_kernel": "triton",  # SGLang: OpenAI's triton_kernels (gpt-oss)
    "batched_deepgemm": "deepgemm",
    "batched_triton": "triton",
}


def check_moe_kernel(kernel: str) -> str:
    if kernel not in MOE_KERNELS:
        raise ValueError(f"moe_kernel must be one of {', '.join(MOE_KERNELS)}, got {kernel!r}")
    return kernel


def moe_kernel_of_backend(backend: str | None) -> str | None:
    """The kernel family an engine's MoE backend setting names, or None (not one the tables have)."""
    return MOE_BACKENDS.get(backend.strip().lower()) if isinstance(backend, str) else None


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    return engine


def resolved_engine(engine: str, hardware_id: str) -> str:
    """The engine ``engine`` means on ``hardware_id``: ``auto`` becomes vLLM where the device has
    its tables and ``ideal`` elsewhere; a named engine stays named (``kernel_tables`` says when
    it has no tables there)."""
    check_engine(engine)
    if engine == "auto":
        return AUTO_ENGINE if kernel_tables(AUTO_ENGINE, hardware_id) is not None else "ideal"
    return engine


@lru_cache(maxsize=256)
def kernel_tables(engine: str, hardware_id: str, version: str | None = None):
    """The engine's kernel tables on the device as a roof source, or None where none are
    installed (``python -m roofline tables list`` shows which)."""
    if engine in ("ideal", "auto"):
        return None
    from roofline.tables.predict import TablePredictor
    from roofline.tables.source import KernelTables

    predictor = TablePredictor.open(hardware_id, engine, version)
    return None if predictor is None else KernelTables(predictor)


def engine_note(
    engine: str,
    hardware_id: str,
    hardware_name: str,
    version: str | None = None,
    moe_kernel: str = "auto",
    moe_routing: str = "auto",
    calibrated: bool = False,
) -> str:
    """One sentence: which roofs ``engine`` gives this device, and why (and which MoE kernels and
    routing, where set); ``calibrated``: the user's calibration of the device stands in for them."""
    named = resolved_engine(engine, hardware_id)
    if calibrated:
        if named == "ideal":
            return f"{hardware_name}: your calibration's roofs stand in for the datasheet's"
        words = ENGINE_NAMES[named]
        tables = kernel_tables(named, hardware_id, version) is not None
        instead = f"{words}'s kernel tables" if tables else f"the datasheet's (no {words} kernel tables for it)"
        return f"{hardware_name}: your calibration's roofs stand in for {instead}; {words}'s host work per step applies"
    if named == "ideal":
        if engine == "auto":
            return f"{hardware_name}: ideal roofs (datasheet); no engine-measured kernel tables for it"
        return f"{hardware_name}: ideal roofs (datasheet)"
    source = kernel_tables(named, hardware_id, version)
    if source is None:
        words = ENGINE_NAMES[named]
        return (
            f"{hardware_name}: datasheet roofs, no {words} kernel tables for it "
            f"(`python -m roofline tables import` brings more); {words}'s host work per step applies, so the times "
            "are not the ideal bound"
        )
    moe = (
        f"; MoE kernels set to {MOE_KERNEL_WORDS[moe_kernel]} (each MoE op says where its time is read)"
        if moe_kernel in MOE_KERNEL_WORDS
        else ""
    )
    if moe_routing != "auto":
        from roofline.routing import routing_words

        moe += f"; MoE routing set to {routing_words(moe_routing)} (each MoE op says which it was read at)"
    return f"{hardware_name}: engine-measured roofs, {source.label}{moe}"
