"""The measurement results file: one versioned JSON schema for ceilings, kernels and collectives.

Plain JSON validated by pydantic: a results file from another machine is data, never code
(no pickle, no eval). This module does not import torch, so the dashboard can load uploads
where torch is missing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from roofline.datafiles import format_validation_error
from roofline.engine import Ceilings

SCHEMA_NAME = "roofline.measure"
SCHEMA_VERSION = 1


class ResultsError(ValueError):
    """A results file that cannot be used; the message says why."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Timing(_Strict):
    """Repeated timings of one thing, in seconds."""

    median_s: float = Field(gt=0)
    p10_s: float = Field(gt=0)
    p90_s: float = Field(gt=0)
    repeats: int = Field(gt=0)


class DeviceInfo(_Strict):
    name: str
    kind: Literal["cuda", "cpu"]
    driver: str | None = None
    cuda_version: str | None = None
    torch_version: str
    clocks_mhz: dict[str, float] | None = None
    memory_bytes: float | None = None
    date: str  # ISO 8601, UTC
    matched_hardware_id: str | None = None  # the database device its datasheet roofs come from


class MeasuredCeilings(_Strict):
    memory_bandwidth_tbps: float = Field(gt=0)  # device-to-device copy, read + write bytes
    read_bandwidth_tbps: float | None = Field(default=None, gt=0)  # read-only reduction
    peak_tflops: dict[str, float]  # dtype -> achieved TFLOP/s (TOP/s for int8) on large GEMMs
    launch_overhead_s: float = Field(ge=0)  # a tiny kernel, eager
    graph_launch_overhead_s: float | None = Field(default=None, ge=0)  # the same kernel replayed from a CUDA graph
    timings: dict[str, Timing] = Field(default_factory=dict)


class MeasuredOp(_Strict):
    name: str
    kind: Literal["gemm", "layer"]
    phase: str | None = None
    dtype: str
    shape: dict[str, int]
    flops: float = Field(ge=0)
    bytes: float = Field(gt=0)
    time_s: float = Field(gt=0)
    timing: Timing
    predicted_time_s: float = Field(gt=0)  # on the measured (achievable) roofs
    predicted_datasheet_time_s: float | None = Field(default=None, gt=0)  # on the matched device's datasheet
    predicted_bound: str

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    @property
    def achieved_tflops(self) -> float:
        return self.flops / self.time_s / 1e12

    @property
    def achieved_tbps(self) -> float:
        return self.bytes / self.time_s / 1e12

    @property
    def ratio(self) -> float:
        """Measured / predicted on the achievable roofs: the model's error for this op."""
        return self.time_s / self.predicted_time_s


class CollectivePoint(_Strict):
    message_bytes: float = Field(gt=0)
    time_s: float = Field(gt=0)
    bus_bandwidth_gbps: float = Field(gt=0)  # GB/s: 2(n-1)/n x message / time, the ring's per-link rate


class Collectives(_Strict):
    op: Literal["all_reduce"] = "all_reduce"
    backend: str
    world_size: int = Field(ge=2)
    points: list[CollectivePoint] = Field(min_length=1)

    @property
    def link_bandwidth_bytes_per_s(self) -> float:
        """The bus bandwidth of the largest message: what a big all-reduce sustains."""
        return max(self.points, key=lambda p: p.message_bytes).bus_bandwidth_gbps * 1e9

    @property
    def latency_s(self) -> float:
        """The time of the smallest message: a collective's fixed cost."""
        return min(self.points, key=lambda p: p.message_bytes).time_s


class Results(_Strict):
    schema_name: Literal["roofline.measure"] = Field(SCHEMA_NAME, alias="schema")
    version: Literal[1] = SCHEMA_VERSION
    mode: Literal["quick", "full", "collectives"]
    device: DeviceInfo
    ceilings: MeasuredCeilings | None = None
    ops: list[MeasuredOp] = Field(default_factory=list)
    collectives: Collectives | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2)

    def ceilings_for_engine(self, launch_from_graphs: bool = False) -> Ceilings:
        """The measured ("achievable") roofs as engine Ceilings, labelled as measured."""
        if self.ceilings is None:
            raise ResultsError("this results file has no measured ceilings")
        c = self.ceilings
        launch = c.graph_launch_overhead_s if launch_from_graphs and c.graph_launch_overhead_s else c.launch_overhead_s
        link = self.collectives.link_bandwidth_bytes_per_s if self.collectives else None
        return Ceilings(
            name=self.device.name,
            peak_flops_per_s={d: v * 1e12 for d, v in c.peak_tflops.items()},
            memory_bandwidth_bytes_per_s=c.memory_bandwidth_tbps * 1e12,
            link_bandwidth_bytes_per_s=link,
            launch_overhead_s=launch,
            source="measured",
            hardware_id=self.device.matched_hardware_id or "",
        )


def parse_results(text: str | bytes, origin: str = "results file") -> Results:
    """Validate a results file's text; a clear ResultsError for anything else."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{origin}: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_NAME:
        raise ResultsError(f'{origin}: not a roofline measurement file (expected "schema": "{SCHEMA_NAME}")')
    if data.get("version") != SCHEMA_VERSION:
        raise ResultsError(
            f"{origin}: results format version {data.get('version')!r} is not supported; this build reads "
            f"version {SCHEMA_VERSION}"
        )
    try:
        return Results.model_validate(data)
    except ValidationError as exc:
        raise ResultsError(format_validation_error(Path(origin), exc)) from None


def load_results(path: str | Path) -> Results:
    path = Path(path)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read ({exc.strerror})") from None
    return parse_results(text, str(path))


def save_results(results: Results, path: str | Path) -> None:
    Path(path).write_text(results.to_json())
