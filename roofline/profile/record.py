"""The profile record: a step's ops measured by ``torch.profiler`` (here or on another machine),
per kernel, per aten op and per module, with FLOPs and bytes from the recorded shapes.

It is data, validated like every upload (finite numbers, no unknown fields), and converts to
the measurement results file (``roofline.measure``) as kernel points, so the Measure page and
the roofline plots take a profile as they take any other measurement. No torch here.
"""

from __future__ import annotations

import json
import math
from typing import Literal

from pydantic import ConfigDict, Field

from roofline.calibration import KernelPoint
from roofline.datafiles import DataRecord
from roofline.engine import Ceilings
from roofline.measure.schema import DeviceInfo, Results

SCHEMA_NAME = "roofline.profile"
# 2: ops carry their dispatches (kernels launched, innermost host ops); a version-1 file still reads,
# each op one dispatch per occurrence.
SCHEMA_VERSION = 2
LEVELS = ("kernel", "aten", "module")


class ProfiledOp(DataRecord):
    """One op (a kernel, a top-level aten op, or a module) of the profiled step, per step:
    ``count`` occurrences that took ``time_s`` in all and did ``flops`` and moved ``bytes``."""

    level: Literal["kernel", "aten", "module"]
    name: str
    op_class: str  # linear, attention, norm, elementwise, reduction, copy, communication, other, module
    shapes: str = ""  # the recorded input shapes, as text
    dtype: str = "fp32"
    count: float = Field(ge=0)
    time_s: float = Field(ge=0)
    flops: float = Field(ge=0)
    bytes: float = Field(ge=0)
    comm_bytes: float = Field(default=0.0, ge=0)
    rank: int = Field(default=0, ge=0, le=1_000_000)
    # Its kernels on a GPU, or the innermost host ops under it on a CPU, per step; None: one per occurrence.
    dispatches: float | None = Field(default=None, ge=0)

    @property
    def launches(self) -> float:
        """The dispatches its occurrences made: each costs at least the device's kernel floor."""
        return self.count if self.dispatches is None else self.dispatches

    @property
    def intensity(self) -> float | None:
        return self.flops / self.bytes if self.bytes > 0 else None

    @property
    def achieved_flops_per_s(self) -> float:
        return self.flops / self.time_s if self.time_s > 0 else 0.0


class RankSummary(DataRecord):
    """One rank's step, per step: wall time, the time its device (a GPU's kernels, or a CPU's
    ops) was busy, the idle time between (the host's gaps), and the time in communication."""

    rank: int = Field(ge=0, le=1_000_000)
    steps: int = Field(ge=1, le=1_000_000)
    wall_s: float = Field(ge=0)
    busy_s: float = Field(ge=0)
    idle_s: float = Field(ge=0)
    communication_s: float = Field(default=0.0, ge=0)
    communication_bytes: float = Field(default=0.0, ge=0)  # the collectives' messages
    collectives: int = Field(default=0, ge=0)


class Profile(DataRecord):
    schema_name: Literal["roofline.profile"] = Field(SCHEMA_NAME, alias="schema")
    version: Literal[1, 2] = SCHEMA_VERSION
    source: Literal["profiler", "trace"]
    activity: Literal["cuda", "cpu"]  # whose time the ops carry: the GPU's kernels or the CPU's ops
    device: DeviceInfo
    label: str = ""
    steps: int = Field(ge=1, le=1_000_000)
    ranks: list[RankSummary] = Field(min_length=1)
    skew_s: float | None = Field(default=None, ge=0)  # largest spread of a collective's start across ranks
    flop_counter_flops: float | None = Field(default=None, ge=0)  # FlopCounterMode's total per step, where run
    ops: list[ProfiledOp] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2)

    def level(self, level: str, rank: int | None = None) -> list[ProfiledOp]:
        """The ops of one level (of one rank: the first where none is given), longest first."""
        rank = self.ranks[0].rank if rank is None else rank
        return sorted(
            (op for op in self.ops if op.level == level and op.rank == rank), key=lambda op: op.time_s, reverse=True
        )

    @property
    def wall_s(self) -> float:
        return self.ranks[0].wall_s

    @property
    def busy_s(self) -> float:
        return self.ranks[0].busy_s

    @property
    def idle_s(self) -> float:
        return self.ranks[0].idle_s

    def to_results(self, roofs: Ceilings | None = None) -> Results:
        """The aten ops as a measurement results file's kernel points: what the
        Measure page and the roofline plots draw. Ops that move no bytes or took no time are left out.
        A datasheet device in ``roofs`` goes with them by its id, so the page draws its roofs."""
        level = "aten"  # on a GPU too: an aten op's shapes name its class; its time is its kernels'
        points = []
        for op in self.level(level):
            if op.bytes <= 0 or op.time_s <= 0:
                continue
            op_class, shape = calibration_class(op)
            points.append(
                KernelPoint(
                    op_class=op_class,
                    name=f"{op.name} {op.shapes}".strip()[:200],
                    shape=shape,
                    flops=op.flops / max(op.count, 1.0),
                    bytes=op.bytes / max(op.count, 1.0),
                    time_s=op.time_s / max(op.count, 1.0),
                )
            )
        device = self.device
        if roofs is not None and roofs.source == "datasheet" and roofs.hardware_id:
            device = device.model_copy(update={"matched_hardware_id": roofs.hardware_id})
        return Results(
            mode="sweeps",
            device=device,
            notes=[f"profile ({self.source}) of {self.label or 'a step'}: one point per {level} op", *self.notes],
            sweeps=points,
        )


def _dims(shapes: str) -> list[list[int]]:
    try:
        dims = json.loads("[" + shapes.replace(" x ", ", ") + "]") if shapes else []
    except ValueError:
        return []
    return [d for d in dims if isinstance(d, list) and d and all(isinstance(x, int) and x > 0 for x in d)]


def calibration_class(op: ProfiledOp) -> tuple[str, dict[str, int]]:
    """The class a calibration fits (``roofline.calibration.CLASSES``) and the shape it buckets
    by: a linear by the rows M it multiplies, attention by its query length, add as a residual,
    other elementwise math as an activation. Other ops keep their own class."""
    dims = _dims(op.shapes)
    base = op.name.split("::", 1)[-1]
    if op.op_class == "linear" and dims:
        first = dims[1] if base in ("addmm", "baddbmm") and len(dims) > 1 else dims[0]
        rows = math.prod(first[:-1]) if len(first) > 1 else 1
        return "linear", {"m": max(1, min(rows, 2**40))}
    if op.op_class == "attention" and dims and len(dims[0]) == 4:
        return ("attention_decode" if dims[0][2] == 1 else "attention_prefill"), {"q_len": dims[0][2]}
    if op.op_class == "norm":
        return "norm", {}
    if op.op_class == "elementwise":
        return ("residual" if base in ("add", "add_") else "activation"), {}
    return op.op_class, {}
