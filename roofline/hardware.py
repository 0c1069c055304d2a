"""Accelerator database: a pydantic schema for ``hardware_db/*.toml`` and a cached loader.

Units are in the field names and use SI decimal prefixes: 1 TB/s = 1e12 B/s,
1 GB = 1e9 B, 1 TFLOPS = 1e12 FLOP/s.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from roofline.datafiles import DataRecord, load_dirs, load_record, search_dirs, shown_path
from roofline.dtypes import COMPUTE_DTYPES, KV_FORMATS, PEAK_FIELDS, WEIGHT_FORMATS

SHIPPED_HARDWARE_DIR = Path(__file__).resolve().parent.parent / "hardware_db"
HARDWARE_DIR_ENV = "ROOFLINE_HARDWARE_DIR"

# A figure of a real device: positive, and within nine orders of magnitude either way of today's
# parts (a denormal bandwidth would make every time infinite).
PositiveFloat = Annotated[float, Field(ge=1e-6, le=1e9)]


class Source(DataRecord):
    name: str = Field(min_length=1)
    url: str | None = Field(default=None, pattern=r"^https?://")  # every shipped file gives one


class PeakTflops(DataRecord):
    """Dense peak throughput per math format, in TFLOPS (TOPS for int8). Absent = unknown.

    ``fp32`` is the vector (non-tensor, non-matrix) rate on every device; ``fp32_matrix`` is a
    matrix-core FP32 rate where the vendor publishes one (AMD), used for FP32 GEMMs there.
    ``fp64`` is the best dense FP64 rate (tensor or matrix cores where they exist)."""

    fp64: PositiveFloat | None = None
    fp32: PositiveFloat | None = None
    fp32_matrix: PositiveFloat | None = None
    tf32: PositiveFloat | None = None
    bf16: PositiveFloat | None = None
    fp16: PositiveFloat | None = None
    fp8: PositiveFloat | None = None
    int8: PositiveFloat | None = None
    fp4: PositiveFloat | None = None

    @model_validator(mode="after")
    def _orderings_possible(self) -> PeakTflops:
        """Refuse figure pairs no real part has, the signature of a sparse figure beside a dense
        one: tensor cores run bf16 and fp16 at one rate (never bf16 at twice fp16), and fp8 units
        run at least at the bf16 rate (a part without fp8 math leaves fp8 out)."""
        if self.bf16 and self.fp16 and abs(self.bf16 / self.fp16 - 2) < 0.02:
            raise ValueError(
                f"bf16 ({self.bf16:g}) is twice fp16 ({self.fp16:g}): one of them is a 'with sparsity' "
                "figure; record both dense (halve the sparse one)"
            )
        if self.bf16 and self.fp8 and self.fp8 < self.bf16 * 0.999:
            raise ValueError(
                f"fp8 ({self.fp8:g}) is below bf16 ({self.bf16:g}): fp8 math runs at least at the bf16 rate, "
                "so one of them is not a dense peak of the same kind (leave fp8 out where the part has no fp8 math)"
            )
        return self

    def as_dict(self) -> dict[str, float]:
        """The math formats the device has a peak for, in the canonical order (fp32 = vector)."""
        return {d: getattr(self, d) for d in COMPUTE_DTYPES if getattr(self, d) is not None}

    def published(self) -> dict[str, float]:
        """Every figure in the file, fp32_matrix included."""
        return {d: getattr(self, d) for d in PEAK_FIELDS if getattr(self, d) is not None}

    def gemm_peak(self, dtype: str) -> float | None:
        """The peak a GEMM in ``dtype`` can reach: FP32 GEMMs use matrix cores where published."""
        if dtype == "fp32" and self.fp32_matrix is not None:
            return self.fp32_matrix
        return getattr(self, dtype, None) if dtype in COMPUTE_DTYPES else None


class Formats(DataRecord):
    """The storage formats the device's inference kernels take, with where that is stated.

    ``weights``: linear-layer weight formats a serving stack runs on this device, either on the
    format's own tensor cores (fp8 W8A8 from Ada/Hopper and MI300) or as weight-only kernels that
    widen to the 16-bit math (Marlin/AWQ/GPTQ int4, FP8 Marlin). ``kv``: KV-cache formats its
    attention kernels read. ``math``: the dtypes its matrix units compute in (fp8 = W8A8 on fp8
    tensor cores). A format listed here may still lack a published peak (then times are lower
    bounds); a format missing here is refused for timing. No record: nothing is refused."""

    weights: list[str] = Field(min_length=1)
    kv: list[str] = Field(min_length=1)
    math: list[str] = Field(min_length=1)
    basis: str = Field(min_length=1)  # in words: which kernels, which generation rule
    sources: list[Source] = Field(min_length=1)

    @field_validator("weights")
    @classmethod
    def _known_weights(cls, value: list[str]) -> list[str]:
        return _known(value, WEIGHT_FORMATS, "weight")

    @field_validator("kv")
    @classmethod
    def _known_kv(cls, value: list[str]) -> list[str]:
        return _known(value, KV_FORMATS, "KV-cache")

    @field_validator("math")
    @classmethod
    def _known_math(cls, value: list[str]) -> list[str]:
        return _known(value, dict.fromkeys(COMPUTE_DTYPES), "math")


def _known(value: list[str], allowed: dict, what: str) -> list[str]:
    bad = [v for v in value if v not in allowed]
    if bad:
        raise ValueError(f"unknown {what} format(s) {', '.join(map(repr, bad))}; allowed: {', '.join(allowed)}")
    if len(set(value)) != len(value):
        raise ValueError(f"{what} formats listed twice: {value}")
    return value


TOPOLOGIES = ("switch", "bridge", "mesh", "torus", "pcie")


class Interconnect(DataRecord):
    """The scale-up link and how devices are joined by it.

    topology: ``switch`` (NVSwitch: every device of the domain gets its full bandwidth to any
    other), ``bridge`` (a bridge joins pairs; beyond two, traffic crosses the host link),
    ``mesh`` (fully connected, one link per peer: a group of t devices uses t - 1 links),
    ``torus`` (TPU ICI: a group rings both ways along one axis, two links), ``pcie`` (no scale-up
    link; devices talk over PCIe)."""

    kind: str = Field(min_length=1)
    # Aggregate bandwidth of one device's scale-up links, GB/s (1e9 B/s), as published.
    bandwidth_gb_per_s: PositiveFloat
    # True where the published figure adds both directions (NVIDIA's NVLink "900 GB/s").
    bidirectional: bool
    topology: Literal["switch", "bridge", "mesh", "torus", "pcie"]
    # Devices one scale-up domain joins at this bandwidth (HGX 8, NVL72 72, a bridge 2).
    domain_size: int | None = Field(default=None, ge=2, le=1_000_000)
    links: int | None = Field(default=None, gt=0, le=1024)  # links per device (mesh: one per peer)
    host_link: str | None = None  # e.g. "PCIe 5.0 x16": what traffic beyond the domain crosses
    host_link_gb_per_s: PositiveFloat | None = None  # per direction

    @model_validator(mode="after")
    def _links_known(self) -> Interconnect:
        if self.topology in ("mesh", "torus") and self.links is None:
            raise ValueError(f"a {self.topology} interconnect needs 'links' (links per device)")
        if self.topology == "bridge" and self.domain_size not in (None, 2):
            raise ValueError("a bridge joins pairs: domain_size must be 2")
        return self

    @property
    def unidirectional_bytes_per_s(self) -> float:
        """What one device can send at once over all its links."""
        per_direction_gb = self.bandwidth_gb_per_s / 2 if self.bidirectional else self.bandwidth_gb_per_s
        return per_direction_gb * 1e9

    def group_bandwidth(self, devices: int) -> tuple[float | None, str]:
        """(bytes/s each device of a tensor-parallel group of ``devices`` can send, how).

        A ring (or direct) all-reduce over the group is limited by this per-direction figure.
        None where the group cannot be joined (beyond the domain with no host-link figure)."""
        if devices <= 1:
            return None, "one device: no communication"
        per_direction = self.unidirectional_bytes_per_s
        within = self.domain_size is None or devices <= self.domain_size
        if self.topology == "pcie":
            return per_direction, f"{self.kind} (no scale-up link)"
        if within and self.topology == "switch":
            return per_direction, f"{self.kind} through a switch: each device its full bandwidth"
        if within and self.topology == "bridge" and devices == 2:
            return per_direction, f"{self.kind} bridge between the pair"
        if within and self.topology == "mesh":
            per_link = per_direction / self.links
            used = min(devices - 1, self.links)
            return used * per_link, f"{self.kind} mesh: {used} of {self.links} links (one per peer)"
        if within and self.topology == "torus":
            per_link = per_direction / self.links
            used = min(2, self.links)
            return used * per_link, f"{self.kind} torus: a ring both ways along one axis ({used} links)"
        if self.host_link_gb_per_s:
            where = "beyond the bridged pair" if self.topology == "bridge" else f"beyond {self.domain_size} devices"
            return self.host_link_gb_per_s * 1e9, f"{where}: {self.host_link or 'the host link'}"
        return (
            None,
            f"{devices} devices exceed the {self.kind} domain of {self.domain_size} and no host link is recorded",
        )


class Hardware(DataRecord):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    name: str = Field(min_length=1)
    vendor: str = Field(min_length=1)
    launch_year: int = Field(ge=2010, le=2035)
    kind: Literal["gpu", "tpu", "accelerator", "soc", "cpu"] = "gpu"
    peak_tflops: PeakTflops
    memory_gb: PositiveFloat  # nominal, as the vendor prints it (shown; used only when the next is unknown)
    # What the runtime really exposes (CUDA's total_memory / cudaMemGetInfo total), where
    # published or measured; the file cites it. Capacity math uses this.
    memory_exposed_bytes: int | None = Field(default=None, gt=0, le=2**50)
    memory_type: str | None = None
    memory_bandwidth_tbps: PositiveFloat
    l2_cache_mb: PositiveFloat | None = None
    compute_units: int | None = Field(default=None, gt=0, le=10_000_000)
    compute_unit_name: str | None = None
    interconnect: Interconnect | None = None
    tdp_w: PositiveFloat | None = None
    formats: Formats | None = None
    notes: str | None = None
    sources: list[Source] = Field(min_length=1)

    @property
    def memory_bandwidth_bytes_per_s(self) -> float:
        return self.memory_bandwidth_tbps * 1e12

    @property
    def memory_bytes(self) -> float:
        """Capacity the runtime exposes: the recorded figure, else the nominal GB (10^9 B)."""
        return float(self.memory_exposed_bytes) if self.memory_exposed_bytes else self.memory_gb * 1e9

    @property
    def memory_source(self) -> str:
        if self.memory_exposed_bytes:
            gib = self.memory_exposed_bytes / 2**30
            return f"{self.memory_exposed_bytes:,} B ({gib:.2f} GiB) as the runtime reports it"
        return (
            f"nominal {self.memory_gb:g} GB read as 10^9 B: the runtime's own figure is not recorded for this "
            "device (HBM parts usually expose about 1% less than the nominal GiB, GDDR cards with ECC 7-8% less)"
        )

    def group_link(self, devices: int) -> tuple[float | None, str]:
        """Per-direction bytes/s one device of a ``devices``-wide group can send, and how."""
        if devices <= 1:
            return None, "one device: no communication"
        if self.interconnect is None:
            return None, "no interconnect figure recorded"
        return self.interconnect.group_bandwidth(devices)

    def supports_weight_format(self, fmt: str) -> bool | None:
        """Whether the device's kernels take ``fmt`` weights; None where no record says."""
        return None if self.formats is None else fmt in self.formats.weights

    def supports_kv_format(self, fmt: str) -> bool | None:
        """Whether the device's attention kernels read a ``fmt`` KV cache; None where unrecorded."""
        return None if self.formats is None else fmt in self.formats.kv

    def supports_math(self, dtype: str) -> bool | None:
        """Whether the device's matrix units compute in ``dtype``; None where unrecorded."""
        return None if self.formats is None else dtype in self.formats.math

    def unsupported_formats(self, weights: tuple[str, ...] = (), kv: tuple[str, ...] = (), math: str = "") -> list[str]:
        """The formats asked for that the device's record says its kernels do not take, in words
        ("fp8 weights"); empty where all are taken or nothing is recorded."""
        out = [f"{f} weights" for f in dict.fromkeys(weights) if self.supports_weight_format(f) is False]
        out += [f"{f} KV cache" for f in dict.fromkeys(kv) if self.supports_kv_format(f) is False]
        return out + ([f"{math} math"] if math and self.supports_math(math) is False else [])

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
        raise ValueError(
            f"unknown hardware {shown_path(hardware_id)!r}; allowed: {', '.join(sorted(devices))}"
        ) from None
