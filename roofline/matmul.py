"""GEMM workload: C[M,N] = A[M,K] @ B[K,N], as one Op or as a vectorised sweep.

FLOPs = 2*M*N*K (one multiply and one add per term). Bytes assume each operand crosses the
memory bus once: A and B read at the input dtype, C written at the output dtype. That is the
minimum traffic; a real kernel re-reads tiles that fall out of cache, so this is the ideal
case the roofline bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from roofline.dtypes import COMPUTE_DTYPES, bytes_per_element
from roofline.engine import REGIMES, Ceilings, Op, evaluate


def _check_dtype(dtype: str, field: str) -> None:
    if dtype not in COMPUTE_DTYPES:
        raise ValueError(f"{field}: unknown dtype {dtype!r}; allowed: {', '.join(COMPUTE_DTYPES)}")


def _check_size(name: str, value: float) -> None:
    if not np.all(np.asarray(value) >= 1):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def default_out_dtype(dtype: str) -> str:
    """8-bit and 4-bit GEMMs write a wider result (bf16 for floats, int32-sized for int8)."""
    return {"fp8": "bf16", "fp4": "bf16", "int8": "fp32"}.get(dtype, dtype)


def matmul_counts(
    m: np.ndarray | float, n: np.ndarray | float, k: np.ndarray | float, dtype: str, out_dtype: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(FLOPs, bytes) of GEMMs; broadcasts over array sizes."""
    _check_dtype(dtype, "dtype")
    out_dtype = out_dtype or default_out_dtype(dtype)
    _check_dtype(out_dtype, "out_dtype")
    m, n, k = (np.asarray(x, float) for x in (m, n, k))
    for name, value in (("M", m), ("N", n), ("K", k)):
        _check_size(name, value)
    flops = 2.0 * m * n * k
    bytes_moved = (m * k + k * n) * bytes_per_element(dtype) + m * n * bytes_per_element(out_dtype)
    return flops, bytes_moved


def matmul_op(m: int, n: int, k: int, dtype: str = "bf16", out_dtype: str | None = None, name: str | None = None) -> Op:
    """One GEMM as an Op. B is counted as the weight operand, A and C as activations."""
    _check_dtype(dtype, "dtype")
    out_dtype = out_dtype or default_out_dtype(dtype)
    _check_dtype(out_dtype, "out_dtype")
    for label, value in (("M", m), ("N", n), ("K", k)):
        _check_size(label, value)
    in_b, out_b = bytes_per_element(dtype), bytes_per_element(out_dtype)
    return Op(
        name=name or f"GEMM {m}x{n}x{k}",
        flops=2.0 * m * n * k,
        dtype=dtype,
        weight_bytes=k * n * in_b,
        act_bytes=m * k * in_b + m * n * out_b,
        launches=1,
        group="matmul",
        meta={"kind": "matmul", "m": m, "n": n, "k": k, "out_dtype": out_dtype},
    )


@dataclass(frozen=True)
class MatmulSweep:
    """A GEMM evaluated over an array of M (e.g. the batch of a decode step) at fixed N, K."""

    m: np.ndarray
    n: int
    k: int
    dtype: str
    flops: np.ndarray
    bytes: np.ndarray
    time_s: np.ndarray
    regime_index: np.ndarray

    @property
    def intensity(self) -> np.ndarray:
        return self.flops / self.bytes

    @property
    def achieved_flops_per_s(self) -> np.ndarray:
        return self.flops / self.time_s

    @property
    def bounds(self) -> list[str]:
        return [REGIMES[i] for i in self.regime_index]


def matmul_sweep(
    m_values: np.ndarray, n: int, k: int, dtype: str, ceilings: Ceilings, out_dtype: str | None = None
) -> MatmulSweep:
    """Time and regime of a GEMM at every M in ``m_values``, in one numpy pass: each point is one
    kernel launched on its own, so its time is the longer of its device time and its dispatch."""
    m = np.asarray(m_values, float)
    matmul_counts(m, n, k, dtype, out_dtype)  # validates the sizes and dtypes
    op = matmul_op(1, n, k, dtype, out_dtype)
    out_b = bytes_per_element(op.meta["out_dtype"])
    in_b = bytes_per_element(dtype)
    sweep_op = replace(
        op,
        flops=2.0 * m * n * k,
        weight_bytes=k * n * in_b * np.ones_like(m),
        act_bytes=m * k * in_b + m * n * out_b,
        meta={**op.meta, "m": m},
    )
    table = evaluate([sweep_op], ceilings)
    return MatmulSweep(m, n, k, dtype, table.flops[0], table.bytes[0], table.time_s[0], table.regime_index[0])


def log_sweep_values(start: int, stop: int, points: int = 64) -> np.ndarray:
    """Distinct integers spaced evenly in log from start to stop, both included."""
    return np.unique(np.round(np.geomspace(start, stop, points)).astype(int))
