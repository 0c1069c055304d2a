"""The measurement results file: one versioned JSON schema for ceilings, kernel sweeps, whole
model steps measured op by op, the calibration fitted on the sweeps, and collectives.

Plain JSON validated by pydantic: a results file from another machine is data, never code
(no pickle, no eval). Parsing is strict (no NaN or Infinity), bounded in size and nesting, and
this module does not import torch, so the dashboard reads uploads where torch is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, ValidationError

from roofline.calibration import Calibration, KernelPoint
from roofline.datafiles import (
    DataError,
    DataRecord,
    format_validation_error,
    read_regular_file,
    shown_path,
    strict_json,
)
from roofline.engine import Ceilings

SCHEMA_NAME = "roofline.measure"
SCHEMA_VERSION = 2
MAX_RESULTS_BYTES = 16 * 2**20  # a full GPU run with two model steps is well under 1 MiB
MAX_OPS = 20_000  # kernel points plus step ops
MAX_NESTING = 32


class ResultsError(ValueError):
    """A results file that cannot be used; the message says why."""


class _Strict(DataRecord):
    """Finite, real numbers (no 1e400, no true), exact integers, valid text, no unknown fields."""


# Physically plausible ranges (a figure past them is a corrupt or hostile file, not a device):
# what today's largest parts reach times a hundred or more, far below what would print as 300 digits.
MAX_TIME_S = 3600.0  # one timed kernel, step or collective
MAX_OVERHEAD_S = 1.0  # a host's dispatch of one op
MAX_COLLECTIVE_S = 10.0  # one all-reduce (the link model's latency is at most this)
MAX_TFLOPS = 1e5  # per device and dtype (a B200's FP4: about 1e4)
MAX_TBPS = 1e3  # memory or cache bandwidth, TB/s (HBM3e: 8)
MAX_BUS_GBPS = 1e5  # all-reduce bus bandwidth, GB/s (NVLink 5: 900 per direction)
MAX_BYTES = 1e18  # bytes moved by one op, or a device's memory
MAX_FLOPS = 1e21  # FLOPs of one op or step
MIN_TIME_S = 1e-12  # below any kernel's or collective's time: a smaller one is a corrupt file
MIN_RATE = 1e-6  # TB/s, TFLOP/s or GB/s: 1 MB/s, 1 MFLOP/s, 1 KB/s (a zero-ish rate makes times overflow)

Positive = Annotated[float, Field(gt=0, le=MAX_TIME_S)]
NonNegative = Annotated[float, Field(ge=0, le=MAX_TIME_S)]
Count = Annotated[int, Field(ge=1, le=2**31)]


class Timing(_Strict):
    """Repeated timings of one thing, in seconds, and how they were taken."""

    median_s: float = Field(ge=MIN_TIME_S, le=MAX_TIME_S)
    p10_s: float = Field(ge=MIN_TIME_S, le=MAX_TIME_S)
    p90_s: float = Field(ge=MIN_TIME_S, le=MAX_TIME_S)
    repeats: int = Field(gt=0, le=1_000_000)
    # cuda-graph: K calls captured in one graph, replay / K (device time only);
    # back-to-back: K calls enqueued between two events / K; host-clock: a synchronised clock.
    method: Literal["cuda-graph", "back-to-back", "host-clock"] = "host-clock"


class DeviceInfo(_Strict):
    name: str = Field(min_length=1, max_length=200)
    kind: Literal["cuda", "cpu"]
    driver: str | None = None
    cuda_version: str | None = None
    torch_version: str
    clocks_mhz: dict[str, Annotated[float, Field(gt=0, le=1e5)]] | None = None
    memory_bytes: float | None = Field(default=None, gt=0, le=MAX_BYTES)
    l2_cache_bytes: float | None = Field(default=None, gt=0, le=MAX_BYTES)
    date: str  # ISO 8601, UTC (or "not recorded" for imported data)
    matched_hardware_id: str | None = None  # the database device its datasheet roofs come from


class MeasuredCeilings(_Strict):
    memory_bandwidth_tbps: float = Field(ge=MIN_RATE, le=MAX_TBPS)  # a copy kernel, read + write bytes
    read_bandwidth_tbps: float | None = Field(default=None, ge=MIN_RATE, le=MAX_TBPS)  # read-only reduction
    cache_bandwidth_tbps: float | None = Field(default=None, ge=MIN_RATE, le=MAX_TBPS)  # a working set that fits in L2
    # dtype -> achieved TFLOP/s (TOP/s for int8) on large GEMMs; at least one
    peak_tflops: dict[str, Annotated[float, Field(ge=MIN_RATE, le=MAX_TFLOPS)]] = Field(min_length=1)
    peak_layouts: dict[str, str] = Field(default_factory=dict)  # dtype -> how it was run
    launch_overhead_s: float = Field(ge=0, le=MAX_OVERHEAD_S)  # host dispatch of a tiny eager op
    # op kind -> eager host cost
    host_dispatch_s: dict[str, Annotated[float, Field(ge=0, le=MAX_OVERHEAD_S)]] = Field(default_factory=dict)
    # per kernel replayed from a graph
    graph_launch_overhead_s: float | None = Field(default=None, ge=0, le=MAX_OVERHEAD_S)
    # The host's cost of an eager step of the measured model, per launch the engine counts: the model
    # built with tiny matrices (same layers and ops) and stepped eagerly, so the host sets the time.
    eager_host_per_launch_s: float | None = Field(default=None, ge=0, le=MAX_OVERHEAD_S)
    eager_host_probe: str | None = Field(default=None, max_length=400)  # what that probe ran
    timings: dict[str, Timing] = Field(default_factory=dict)


class StepOp(_Strict):
    """One of the engine's ops in a measured model step: its measured device time beside the
    prediction on each set of roofs."""

    name: str
    count: int = Field(ge=1, le=2**31)
    op_class: str
    flops: float = Field(ge=0, le=MAX_FLOPS)
    bytes: float = Field(ge=0, le=MAX_BYTES)
    time_s: float = Field(ge=0, le=MAX_TIME_S)  # measured, all occurrences
    predicted_s: dict[str, NonNegative] = Field(default_factory=dict)  # roofs -> predicted seconds
    # Kernels its profiler range launched, all occurrences (GPU runs only), and the launches the
    # engine's model counts for it: an op measured as a chain of kernels where the model counts a
    # fused one shows it here.
    kernels: float | None = Field(default=None, ge=0, le=2**31)
    modelled_launches: int | None = Field(default=None, ge=0, le=2**31)


class StepMeasurement(_Strict):
    """A whole model step (prefill or decode), eager and replayed from a CUDA graph."""

    model: str
    phase: Literal["prefill", "decode"]
    batch: int = Field(ge=1, le=2**31)
    seq_len: int = Field(ge=1, le=2**31)
    dtype: str
    layers_measured: int = Field(ge=1, le=100_000)
    layers_total: int = Field(ge=1, le=100_000)
    eager: Timing  # wall time of the step, host and device together
    graph: Timing | None = None  # the same step replayed from a CUDA graph
    graph_note: str | None = None  # why there is no graph time, where there is none
    kernel_time_s: float = Field(ge=0, le=MAX_TIME_S)  # sum of the step's kernel (device) time, eager
    kernels: int = Field(ge=0, le=2**31)
    attributed_s: float = Field(ge=0, le=MAX_TIME_S)  # kernel time inside ranges named like the engine's ops
    ops: list[StepOp] = Field(default_factory=list)
    predicted_s: dict[str, NonNegative] = Field(default_factory=dict)  # roofs -> predicted step seconds

    @property
    def attribution(self) -> float:
        return self.attributed_s / self.kernel_time_s if self.kernel_time_s else 0.0

    @property
    def overhead_s(self) -> float:
        """Eager wall time the kernels do not account for: the host's dispatching."""
        return max(0.0, self.eager.median_s - self.kernel_time_s)

    def step_ratio(self, roofs: str) -> float | None:
        """Predicted / measured step time on ``roofs`` (eager; "<roofs>, graph" against the graph)."""
        predicted = self.predicted_s.get(roofs)
        measured = self.graph if roofs.endswith(", graph") else self.eager
        if predicted is None or measured is None:
            return None
        return predicted / measured.median_s

    def op_error(self, roofs: str) -> float | None:
        """Median |predicted / measured - 1| over the step's ops on ``roofs``."""
        errors = sorted(
            abs(op.predicted_s[roofs] / op.time_s - 1) for op in self.ops if roofs in op.predicted_s and op.time_s > 0
        )
        if not errors:
            return None
        mid = len(errors) // 2
        return errors[mid] if len(errors) % 2 else (errors[mid - 1] + errors[mid]) / 2

    @property
    def graph_gap_per_kernel_s(self) -> float | None:
        if self.graph is None or not self.kernels:
            return None
        return max(0.0, self.graph.median_s - self.kernel_time_s) / self.kernels


class CollectivePoint(_Strict):
    message_bytes: float = Field(ge=1, le=MAX_BYTES)
    time_s: float = Field(ge=MIN_TIME_S, le=MAX_COLLECTIVE_S)
    # GB/s: 2(n-1)/n x message / time, the ring's per-link rate
    bus_bandwidth_gbps: float = Field(ge=MIN_RATE, le=MAX_BUS_GBPS)


class Collectives(_Strict):
    op: Literal["all_reduce"] = "all_reduce"
    backend: str = Field(min_length=1, max_length=64)
    world_size: int = Field(ge=2, le=1_000_000)
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
    version: Literal[2] = SCHEMA_VERSION
    mode: Literal["quick", "full", "collectives", "sweeps"]
    device: DeviceInfo
    notes: list[str] = Field(default_factory=list)  # how it was measured, what was left out
    ceilings: MeasuredCeilings | None = None
    sweeps: list[KernelPoint] = Field(default_factory=list)
    steps: list[StepMeasurement] = Field(default_factory=list)
    calibration: Calibration | None = None
    collectives: Collectives | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2)

    def ceilings_for_engine(self, launch_from_graphs: bool = False) -> Ceilings:
        """The measured ("achievable") roofs as engine Ceilings, labelled as measured."""
        if self.ceilings is None:
            raise ResultsError("this results file has no measured ceilings")
        c = self.ceilings
        link = self.collectives.link_bandwidth_bytes_per_s if self.collectives else None
        return Ceilings(
            name=self.device.name,
            peak_flops_per_s={d: v * 1e12 for d, v in c.peak_tflops.items()},
            memory_bandwidth_bytes_per_s=c.memory_bandwidth_tbps * 1e12,
            link_bandwidth_bytes_per_s=link,
            launch_overhead_s=0.0 if launch_from_graphs else c.launch_overhead_s,
            kernel_floor_s=c.graph_launch_overhead_s or 0.0,
            source="measured",
            hardware_id=self.device.matched_hardware_id or "",
        )


def _depth(text: str) -> int:
    """Deepest bracket nesting, found without parsing (a 100,000-deep file would overflow it)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            escaped, in_string = (False, in_string) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_results(text: str | bytes, origin: str = "results file") -> Results:
    """Validate a results file's text; a clear ResultsError for anything else."""
    if len(text) > MAX_RESULTS_BYTES:
        raise ResultsError(
            f"{origin}: {len(text):,} bytes is larger than a results file can be "
            f"({MAX_RESULTS_BYTES:,} bytes, {MAX_RESULTS_BYTES // 2**20} MiB, at most)"
        )
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
    except UnicodeDecodeError:
        raise ResultsError(f"{origin}: not UTF-8 text") from None
    if _depth(text) > MAX_NESTING:
        raise ResultsError(f"{origin}: nested deeper than {MAX_NESTING} levels: not a results file")

    try:
        data = strict_json(text)
    except ValueError as exc:
        raise ResultsError(f"{origin}: not JSON ({str(exc)[:120]})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_NAME:
        raise ResultsError(f'{origin}: not a roofline measurement file (expected "schema": "{SCHEMA_NAME}")')
    version = data.get("version")
    if isinstance(version, str) and version.strip() == str(SCHEMA_VERSION):
        raise ResultsError(f'{origin}: "version" must be the number {SCHEMA_VERSION}, not the string {version!r}')
    if version != SCHEMA_VERSION:
        raise ResultsError(
            f"{origin}: results format version {data.get('version')!r} is not supported; this build reads "
            f"version {SCHEMA_VERSION} (measure again with this version)"
        )

    def items(value: object) -> list:
        return value if isinstance(value, list) else []

    points = len(items(data.get("sweeps"))) + sum(
        len(items(step.get("ops"))) for step in items(data.get("steps")) if isinstance(step, dict)
    )
    if points > MAX_OPS:
        raise ResultsError(f"{origin}: {points:,} kernels and ops; a results file holds at most {MAX_OPS:,}")
    try:
        return Results.model_validate(data)
    except ValidationError as exc:
        raise ResultsError(format_validation_error(Path(origin), exc)) from None


def load_results(path: str | Path) -> Results:
    try:
        text = read_regular_file(path, MAX_RESULTS_BYTES)
    except DataError as exc:
        raise ResultsError(str(exc)) from None
    return parse_results(text, shown_path(path))


def save_results(results: Results, path: str | Path) -> None:
    Path(path).write_text(results.to_json())
