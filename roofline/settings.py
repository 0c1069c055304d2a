"""What the user sets besides the workload: overheads, a serving engine's memory settings, a
measured link, and what-if multipliers of a device's resources."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from roofline.defaults import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_COLLECTIVE_LATENCY_S,
    DEFAULT_COMM_BUFFER_BYTES,
    DEFAULT_CUDA_GRAPH_BYTES,
    DEFAULT_GRAPH_LAUNCH_OVERHEAD_S,
    DEFAULT_GRAPH_REPLAY_S,
    DEFAULT_LAUNCH_OVERHEAD_S,
    DEFAULT_MEMORY_UTILIZATION,
    DEFAULT_NON_TORCH_BYTES,
    RECV_OTHER_WEIGHT,
)
from roofline.engine import Ceilings
from roofline.engines import engine_profile, vllm_batch_defaults
from roofline.hardware import Hardware
from roofline.roofs import check_engine, check_moe_kernel, engine_note, kernel_tables, resolved_engine
from roofline.routing import check_moe_routing


class SettingError(ValueError):
    """A setting out of its range, naming the field (``field``) it is about."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


# (field, lowest allowed, highest allowed, whether the lowest is allowed itself)
_RANGES = {
    "launch_overhead_s": (0.0, 1.0, True),
    "graph_launch_overhead_s": (0.0, 1.0, True),
    "collective_latency_s": (0.0, 10.0, True),
    "memory_utilization": (0.0, 1.0, False),
    "non_torch_bytes": (0.0, 1e15, True),
    "cuda_graph_bytes": (0.0, 1e15, True),
    "comm_buffer_bytes": (0.0, 1e15, True),
    "compute_scale": (0.0, 1e6, False),
    "memory_scale": (0.0, 1e6, False),
    "link_scale": (0.0, 1e6, False),
    "capacity_scale": (0.0, 1e6, False),
    "batch_wait_ratio": (0.0, 1.0, True),
}
# (field, lowest, highest)
_INTEGERS = {
    "block_size": (1, 1024),  # a paged cache's block: engines page in tens to a few hundred tokens
    "max_batched_tokens": (1, 1 << 30),
    "max_num_seqs": (1, 1 << 24),
    "recv_interval": (1, RECV_OTHER_WEIGHT),
    "batch_wait_iters": (0, 1 << 20),
    "attention_dp": (1, 1024),
}


# Settings that may be left unset (None) for the engine's default on each device.
_PER_DEVICE = ("max_batched_tokens", "max_num_seqs")


@dataclass(frozen=True)
class Settings:
    launch_overhead_s: float = DEFAULT_LAUNCH_OVERHEAD_S
    graph_launch_overhead_s: float = DEFAULT_GRAPH_LAUNCH_OVERHEAD_S
    collective_latency_s: float = DEFAULT_COLLECTIVE_LATENCY_S
    # A measured all-reduce (roofline.measure.collectives) replaces the datasheet link figure.
    link_bandwidth_bytes_per_s: float | None = None
    # The one device that link was measured on (roofline.measured_roofs); None: every device.
    link_hardware_id: str | None = None
    # A serving engine's memory settings (vLLM's names): see roofline.memory.
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION
    block_size: int = DEFAULT_BLOCK_SIZE
    # None: the engine's own default on each device (Settings.for_device).
    max_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    # Settings that hold new requests back in a simulated engine (off by default, as in the engines):
    # SGLang's --scheduler-recv-interval, TensorRT-LLM's batch_wait_timeout_iters and
    # batch_wait_max_tokens_ratio (roofline.serving.simulation.scheduler).
    recv_interval: int = 1
    batch_wait_iters: int = 0
    batch_wait_ratio: float = 0.0
    # The most new tokens of a step with prompt tokens that the engine replays from a CUDA graph (in
    # the simulation and the steady state); a larger step dispatches each kernel from the host
    # (launch_overhead_s each). None: the
    # engine's own default (roofline.engines: vLLM 512, SGLang and TensorRT-LLM none).
    prompt_graph_tokens: int | None = None
    # Attention data parallel ranks in the simulated engine's TP group (SGLang's --dp with
    # --enable-dp-attention, TensorRT-LLM's enable_attention_dp): roofline.workload.Workload.
    attention_dp: int = 1
    non_torch_bytes: float = DEFAULT_NON_TORCH_BYTES
    cuda_graph_bytes: float = DEFAULT_CUDA_GRAPH_BYTES  # with CUDA graphs
    comm_buffer_bytes: float = DEFAULT_COMM_BUFFER_BYTES  # NCCL buffers, with TP > 1
    # What-if multipliers of the device's resources (1 = the datasheet).
    compute_scale: float = 1.0
    memory_scale: float = 1.0
    link_scale: float = 1.0
    capacity_scale: float = 1.0
    # Achievable roofs fitted on kernels measured on one device (roofline.calibration); used
    # for that device only, every other one keeps its datasheet.
    calibration: object | None = None
    # Whose measured kernels the ops are read from (roofline.roofs): "ideal" is the datasheet
    # alone; "auto" the newest vLLM tables where the device has them. A calibration of a device
    # (the user's own measurement) comes before the engine's tables there.
    engine: str = "ideal"
    engine_version: str | None = None
    # Which MoE kernels the engine runs (roofline.roofs.MOE_KERNELS): "auto" the fastest its tables
    # timed; a family as the server's MoE backend setting names it (TensorRT-LLM's TRTLLM: trtllm-gen).
    moe_kernel: str = "auto"
    # How a MoE layer's tokens spread over its experts in the tables read (roofline.routing): "auto"
    # the model's own as the database prices it, else balanced or a power law by name.
    moe_routing: str = "auto"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _RANGES:
                lo, hi, lo_ok = _RANGES[f.name]
                ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
                ok = ok and (value >= lo if lo_ok else value > lo) and value <= hi
                if not ok:
                    low = f"[{lo:g}" if lo_ok else f"({lo:g}"
                    raise SettingError(f.name, f"{f.name} must be a number in {low}, {hi:g}], got {value!r}")
            elif f.name in _INTEGERS and not (value is None and f.name in _PER_DEVICE):
                lo, hi = _INTEGERS[f.name]
                if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                    raise SettingError(f.name, f"{f.name} must be an integer in [{lo}, {hi}], got {value!r}")
        g = self.prompt_graph_tokens
        if g is not None and (isinstance(g, bool) or not isinstance(g, int) or not 0 <= g <= 1 << 24):
            raise ValueError(f"prompt_graph_tokens must be an integer in [0, 16777216] or None, got {g!r}")
        check_engine(self.engine)
        check_moe_kernel(self.moe_kernel)
        check_moe_routing(self.moe_routing)
        if self.engine_version is not None and not (
            isinstance(self.engine_version, str) and 0 < len(self.engine_version) <= 40
        ):
            raise ValueError(f"engine_version must be a version string, got {self.engine_version!r}")
        link = self.link_bandwidth_bytes_per_s
        if link is not None and not (isinstance(link, int | float) and math.isfinite(link) and 0 < link <= 1e15):
            raise ValueError(f"link_bandwidth_bytes_per_s must be a positive number, got {link!r}")

    def for_device(self, hw: Hardware) -> Settings:
        """These settings on ``hw``: a token budget left unset (None) is the engine's default there
        (``EngineProfile.token_budget``; vLLM's for the ideal bound), a sequence cap left unset
        vLLM's (``roofline.engines.vllm_batch_defaults``), as the memory model counts vLLM's
        profile run."""
        if self.max_batched_tokens is not None and self.max_num_seqs is not None:
            return self
        tokens, seqs = vllm_batch_defaults(hw)
        profile = engine_profile(resolved_engine(self.engine, hw.id))
        tokens = profile.token_budget(hw) if profile is not None else tokens
        return replace(
            self,
            max_batched_tokens=tokens if self.max_batched_tokens is None else self.max_batched_tokens,
            max_num_seqs=seqs if self.max_num_seqs is None else self.max_num_seqs,
        )

    def require_device(self, what: str) -> None:
        """Refuse, naming ``what``, settings whose token budget or sequence cap is still the engine's
        per-device default (None): those are known on a device only (``for_device``)."""
        if self.max_batched_tokens is None or self.max_num_seqs is None:
            raise ValueError(
                f"{what} needs the engine's token budget and sequence cap, which depend on the device: "
                "Settings.for_device(hw)"
            )

    def calibrated_on(self, hardware_id: str) -> bool:
        """Whether the user's calibration was measured on this device (its roofs then stand in for
        the engine's tables and the datasheet there)."""
        return self.calibration is not None and self.calibration.hardware_id == hardware_id

    def roofs_note(self, hw: Hardware) -> str:
        """Which roofs these settings give ``hw``, in a sentence (``roofline.roofs.engine_note``)."""
        return engine_note(
            self.engine,
            hw.id,
            hw.name,
            self.engine_version,
            self.moe_kernel,
            self.moe_routing,
            self.calibrated_on(hw.id),
        )

    def ceilings(self, hw: Hardware, tp: int = 1, cuda_graphs: bool = False, serving: bool = True) -> Ceilings:
        """The roofs a step runs against on ``hw`` in a ``tp``-wide group. In eager mode every
        kernel launch costs the host ``launch_overhead_s``; replayed from a CUDA graph the host
        pays one replay per step. Every kernel takes at least ``graph_launch_overhead_s`` on the
        device either way. A serving engine (``engine``) adds its host work per step to a
        ``serving`` step (``roofline.engines``); a training step has none."""
        measured_here = self.link_hardware_id in (None, hw.id)  # the measured link is this device's
        measured_link = bool(self.link_bandwidth_bytes_per_s) and measured_here
        ceilings = Ceilings.from_hardware(
            hw,
            0.0 if cuda_graphs else self.launch_overhead_s,
            self.collective_latency_s if measured_here else DEFAULT_COLLECTIVE_LATENCY_S,
            tp=tp,
            kernel_floor_s=self.graph_launch_overhead_s,
        )
        if cuda_graphs:
            ceilings = replace(ceilings, graph_replay_s=DEFAULT_GRAPH_REPLAY_S)
        cal = self.calibration
        tables = kernel_tables(resolved_engine(self.engine, hw.id), hw.id, self.engine_version)
        if self.calibrated_on(hw.id):
            ceilings = replace(ceilings, roof_source=cal, source="calibrated")
            # The calibration's own host and kernel floor where it measured them.
            if cal.host_per_launch_s is not None and not cuda_graphs:
                per_launch = cal.host_per_launch_s
                ceilings = replace(ceilings, launch_overhead_s=per_launch, host_cost_s={"elementwise": per_launch})
            if cal.kernel_floor_s is not None:
                ceilings = replace(ceilings, kernel_floor_s=cal.kernel_floor_s)
        elif tables is not None:
            if self.moe_kernel != "auto":
                tables = replace(tables, moe_kernel=self.moe_kernel)
            if self.moe_routing != "auto":
                tables = replace(tables, moe_routing=self.moe_routing)
            if measured_link:  # the user's own all-reduce, not the table's
                tables = replace(tables, link_measured=True)
            ceilings = replace(ceilings, roof_source=tables, source="engine-measured")
        from roofline.engines import engine_profile  # pydantic models built on first use, not at --help

        profile = engine_profile(resolved_engine(self.engine, hw.id)) if serving else None
        if profile is not None:
            ceilings = replace(
                ceilings,
                engine_step_s=profile.host_step_s,
                engine_per_seq_s=profile.host_per_seq_s,
                engine_overlap=profile.overlaps(self.engine_version),
                engine_step_note=profile.host_note(self.engine_version),
                engine_step_short=profile.host_short(self.engine_version),
            )
        if measured_link:
            ceilings = replace(
                ceilings, link_bandwidth_bytes_per_s=self.link_bandwidth_bytes_per_s, link_note="measured all-reduce"
            )
        if (self.compute_scale, self.memory_scale, self.link_scale) != (1.0, 1.0, 1.0):
            ceilings = ceilings.scaled(self.compute_scale, self.memory_scale, self.link_scale)
        return ceilings

    def to_json(self) -> dict[str, object]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "calibration"}
        data["calibration"] = None if self.calibration is None else self.calibration.source
        return data


DEFAULT_SETTINGS = Settings()
