"""The ops of a measured step that ran as more kernels than the model counts, the launches a
serving engine makes: a GEMM's split-K reduction, the KV-cache writes beside attention, and plain
PyTorch's unfused elementwise chains (rotary embedding as ten kernels a layer on an H200 where an
engine runs one)."""

from __future__ import annotations

from roofline.measure.schema import StepMeasurement

CHAIN = 1.5  # measured kernels over the modelled launches above which an op is named


def kernel_chain_line(step: StepMeasurement) -> str:
    """The ops the profiler saw run as more kernels than the model counts, with their share of the
    step's kernel time ('' where none did, or the file has no per-op kernel counts)."""
    chains = [
        op
        for op in step.ops
        if op.kernels is not None and op.modelled_launches and op.kernels > CHAIN * op.modelled_launches
    ]
    if not chains:
        return ""
    total = sum(op.time_s for op in step.ops) or 1.0
    parts = [
        f"{op.name} {op.kernels:,.0f} kernels where the model counts {op.modelled_launches:,} "
        f"({op.time_s / total:.0%} of the ops' time)"
        for op in sorted(chains, key=lambda o: -o.time_s)
    ]
    return (
        "Ran as more kernels than the model counts: "
        + "; ".join(parts)
        + ". The extra kernels are what this implementation runs beyond an engine's launches (a GEMM's split-K "
        "reduction, the KV-cache writes, unfused elementwise chains such as rotary embedding): their launches and "
        "passes over the data are time the model does not predict."
    )
