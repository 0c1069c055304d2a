"""Numeric formats: storage size and which ones a device peak can be quoted for."""

from __future__ import annotations

# Bytes per element as stored in memory. tf32 is stored as fp32; the Tensor Cores only
# read its top 19 bits, so it moves 4 bytes per element.
BYTES_PER_ELEMENT: dict[str, float] = {
    "fp64": 8.0,
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
    "int4": 0.5,
}

# Formats a datasheet quotes a peak for (math runs in these).
COMPUTE_DTYPES: tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")

# Formats a tensor can be stored in (weights, KV cache, activations).
STORAGE_DTYPES: tuple[str, ...] = tuple(BYTES_PER_ELEMENT)


def bytes_per_element(dtype: str) -> float:
    """Storage size of one element of ``dtype``; raises ValueError naming the allowed values."""
    try:
        return BYTES_PER_ELEMENT[dtype]
    except KeyError:
        allowed = ", ".join(STORAGE_DTYPES)
        raise ValueError(f"unknown dtype {dtype!r}; allowed: {allowed}") from None
