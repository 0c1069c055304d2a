"""Accelerator database: a pydantic schema for ``hardware_db/*.toml`` and a cached loader.

Units are in the field names and use SI decimal prefixes: 1 TB/s = 1e12 B/s,
1 GB = 1e9 B, 1 TFLOPS = 1e12 FLOP/s.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from roofline.datafiles import load_dirs, load_record, search_dirs
from roofline.dtypes import COMPUTE_DTYPES

SHIPPED_HARDWARE_DIR = Path(__file__).resolve().parent.parent / "hardware_db"
HARDWARE_DIR_ENV = "ROOFLINE_HARDWARE_DIR"

PositiveFloat = Annotated[float, Field(gt=0)]


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    url: str = Field(pattern=r"^https?://")


class PeakTflops(BaseModel):
    """Dense peak throughput per math format, in TFLOPS (TOPS for int8). Absent = unknown."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fp64: PositiveFloat | None = None
    fp32: PositiveFloat | None = None
    tf32: PositiveFloat | None = None
    bf16: PositiveFloat | None = None
    fp16: PositiveFloat | None = None
    fp8: PositiveFloat | None = None
    int8: PositiveFloat | None = None
    fp4: PositiveFloat | None = None

    def as_dict(self) -> dict[str, float]:
        """Only the formats the device has, in the canonical order."""
        return {d: getattr(self, d) for d in COMPUTE_DTYPES if getattr(self, d) is not None}


class Interconnect(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = Field(min_length=1)
    # Aggregate bandwidth of one device's scale-up links, GB/s (1e9 B/s).
    bandwidth_gb_per_s: PositiveFloat
    # True where the published figure adds both directions (NVIDIA's NVLink "900 GB/s").
    bidirectional: bool

    @property
    def unidirectional_bytes_per_s(self) -> float:
        """What one device can send at once: the figure a ring collective is limited by."""
        per_direction_gb = self.bandwidth_gb_per_s / 2 if self.bidirectional else self.bandwidth_gb_per_s
        return per_direction_gb * 1e9


class Hardware(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    name: str = Field(min_length=1)
    vendor: str = Field(min_length=1)
    launch_year: int = Field(ge=2010, le=2035)
    kind: Literal["gpu", "tpu", "accelerator", "cpu"] = "gpu"
    peak_tflops: PeakTflops
    memory_gb: PositiveFloat
    memory_type: str | None = None
    memory_bandwidth_tbps: PositiveFloat
    l2_cache_mb: PositiveFloat | None = None
    compute_units: int | None = Field(default=None, gt=0)
    compute_unit_name: str | None = None
    interconnect: Interconnect | None = None
    tdp_w: PositiveFloat | None = None
    notes: str | None = None
    sources: list[Source] = Field(min_length=1)

    @field_validator("peak_tflops")
    @classmethod
    def _at_least_one_peak(cls, value: PeakTflops) -> PeakTflops:
        if not value.as_dict():
            raise ValueError("at least one dtype peak is required")
        return value

    @property
    def memory_bandwidth_bytes_per_s(self) -> float:
        return self.memory_bandwidth_tbps * 1e12

    @property
    def dtypes(self) -> list[str]:
        return list(self.peak_tflops.as_dict())

    def peak_flops_per_s(self, dtype: str) -> float:
        """Dense peak of ``dtype`` in FLOP/s; a clear error where the part lacks it."""
        peaks = self.peak_tflops.as_dict()
        if dtype not in peaks:
            raise ValueError(f"{self.id} has no {dtype!r} peak; allowed dtypes for {self.id}: {', '.join(peaks)}")
        return peaks[dtype] * 1e12

    def ridge_intensity(self, dtype: str) -> float:
        """FLOP/byte at which compute and memory time are equal (the ridge point)."""
        return self.peak_flops_per_s(dtype) / self.memory_bandwidth_bytes_per_s


def load_hardware_file(path: Path) -> Hardware:
    """Parse and validate one device file; errors name the file and the field."""
    return load_record(path, Hardware)


def hardware_dirs(extra_dir: str | Path | None = None) -> tuple[Path, ...]:
    """Shipped folder first, then ``$ROOFLINE_HARDWARE_DIR`` (os.pathsep list), then ``extra_dir``.

    Later folders add devices or override shipped ones with the same id.
    """
    return search_dirs(SHIPPED_HARDWARE_DIR, HARDWARE_DIR_ENV, extra_dir)


@lru_cache(maxsize=16)
def _load_dirs(dirs: tuple[Path, ...]) -> dict[str, Hardware]:
    return load_dirs(dirs, Hardware, "hardware")


def load_hardware(extra_dir: str | Path | None = None) -> dict[str, Hardware]:
    """All devices by id, validated once per set of folders and cached."""
    return dict(_load_dirs(hardware_dirs(extra_dir)))


def get_hardware(hardware_id: str, extra_dir: str | Path | None = None) -> Hardware:
    devices = load_hardware(extra_dir)
    try:
        return devices[hardware_id]
    except KeyError:
        raise ValueError(f"unknown hardware {hardware_id!r}; allowed: {', '.join(sorted(devices))}") from None
