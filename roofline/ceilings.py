"""The roofs one device offers (``Ceilings``) and the regimes an op's time can fall in."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from roofline.defaults import (
    DEFAULT_COLLECTIVE_LATENCY_S,
    DEFAULT_GRAPH_LAUNCH_OVERHEAD_S,
    DEFAULT_LAUNCH_OVERHEAD_S,
)
from roofline.hardware import Hardware

REGIMES: tuple[str, ...] = ("compute", "memory", "communication", "overhead")
# What a figure rests on, by the ceilings' source: the product's four words.
RESTS_ON: dict[str, str] = {
    "datasheet": "ideal",
    "engine-measured": "engine-measured",
    "calibrated": "calibrated",
    "measured": "measured",
}
REGIME_LABELS: dict[str, str] = {
    "compute": "compute-bound",
    "memory": "memory-bandwidth-bound",
    "communication": "communication-bound",
    "overhead": "overhead-bound",
}


def dtype_words(dtypes) -> str:
    """Dtypes for a sentence: elementwise ops' "vector" is the FP32 vector rate."""
    return ", ".join("fp32 vector" if d == "vector" else d for d in dtypes)


def regime_label(bound: str, lower_bound: bool = False) -> str:
    """The regime in words; where a compute peak is unpublished the compute term is unknown, so
    the regime is only the largest term that is known, and the time is a lower bound."""
    label = REGIME_LABELS[bound]
    return f"{label} at least (compute peak unpublished)" if lower_bound else label


@dataclass(frozen=True)
class Ceilings:
    """The roofs one device offers: peak per dtype, memory bandwidth, link, overheads.

    Built from the datasheet (``from_hardware``) or from measurements; ``roof_source`` replaces
    the datasheet time of the ops it can answer (``roofline.roofs``: a calibration of achievable
    roofs per op class, or an engine's measured kernel tables). ``source`` says which ("datasheet",
    "measured", "calibrated", "engine-measured"), and the plots print it. ``engine_step_s`` is a
    serving engine's host work per step (scheduling, input preparation, sampling), which the
    device waits for between steps.
    ``launch_overhead_s`` is the host's dispatch cost of one eager kernel launch (0 when replayed
    from a CUDA graph); ``kernel_floor_s`` the least device time of one kernel.
    """

    name: str
    peak_flops_per_s: Mapping[str, float]
    memory_bandwidth_bytes_per_s: float
    link_bandwidth_bytes_per_s: float | None = None
    collective_latency_s: float = DEFAULT_COLLECTIVE_LATENCY_S
    launch_overhead_s: float = DEFAULT_LAUNCH_OVERHEAD_S
    source: str = "datasheet"
    hardware_id: str = ""
    # Elementwise kernels run on the vector units: the FP32 vector rate where it is published.
    vector_flops_per_s: float | None = None
    link_note: str = ""  # how the link figure was derived (topology, group size)
    kernel_floor_s: float = DEFAULT_GRAPH_LAUNCH_OVERHEAD_S
    graph_replay_s: float = 0.0  # host cost of one CUDA-graph replay, paid once per step
    roof_source: object | None = None  # roofline.roofs.RoofSource
    engine_step_s: float = 0.0
    engine_per_seq_s: float = 0.0  # and per sequence the step samples
    engine_overlap: bool = False  # the engine's host work runs while the device works (else between steps)
    engine_step_note: str = ""  # which engine's host work, and where its figure comes from
    engine_step_short: str = ""  # the same in a few words
    # Measured host dispatch per launch by op class (linear, attention, norm, elementwise);
    # None: launch_overhead_s times the default relative costs.
    host_cost_s: Mapping[str, float] | None = None

    @classmethod
    def from_hardware(
        cls,
        hw: Hardware,
        launch_overhead_s: float = DEFAULT_LAUNCH_OVERHEAD_S,
        collective_latency_s: float = DEFAULT_COLLECTIVE_LATENCY_S,
        tp: int = 2,
        kernel_floor_s: float = DEFAULT_GRAPH_LAUNCH_OVERHEAD_S,
    ) -> Ceilings:
        """The datasheet roofs of ``hw``; the link is what each device of a ``tp``-wide group gets
        from the device's topology (a group of 2 when no group is given)."""
        if launch_overhead_s < 0:
            raise ValueError(f"launch_overhead_s must be >= 0, got {launch_overhead_s}")
        peaks = {d: hw.peak_tflops.gemm_peak(d) * 1e12 for d in hw.peak_tflops.as_dict()}
        link, note = hw.group_link(max(2, tp))
        return cls(
            name=hw.name,
            peak_flops_per_s=peaks,
            memory_bandwidth_bytes_per_s=hw.memory_bandwidth_bytes_per_s,
            link_bandwidth_bytes_per_s=link,
            collective_latency_s=collective_latency_s,
            launch_overhead_s=launch_overhead_s,
            source="datasheet",
            hardware_id=hw.id,
            vector_flops_per_s=hw.peak_tflops.fp32 * 1e12 if hw.peak_tflops.fp32 else None,
            link_note=note,
            kernel_floor_s=kernel_floor_s,
        )

    def peak(self, dtype: str) -> float:
        if dtype == "vector":
            # The FP32 vector rate where known, else the slowest known peak.
            if self.vector_flops_per_s:
                return self.vector_flops_per_s
            if not self.peak_flops_per_s:
                raise ValueError(f"{self.name} has no published peak")
            return self.peak_flops_per_s.get("fp32", min(self.peak_flops_per_s.values()))
        try:
            return self.peak_flops_per_s[dtype]
        except KeyError:
            allowed = ", ".join(self.peak_flops_per_s) or "none published"
            raise ValueError(f"{self.name} has no {dtype!r} peak; allowed dtypes: {allowed}") from None

    def peak_or_none(self, dtype: str) -> float | None:
        """The peak of ``dtype``, or None where the device's figure is not published."""
        return self.peak(dtype) if self.has_peak(dtype) else None

    def has_peak(self, dtype: str) -> bool:
        if dtype == "vector":
            return bool(self.vector_flops_per_s or self.peak_flops_per_s)
        return dtype in self.peak_flops_per_s

    def ridge_intensity(self, dtype: str) -> float:
        """FLOP/byte where the memory roof meets the compute roof."""
        return self.peak(dtype) / self.memory_bandwidth_bytes_per_s

    def attainable_flops_per_s(self, intensity: np.ndarray | float, dtype: str) -> np.ndarray:
        """The roofline: min(peak, bandwidth x intensity); the bandwidth slope alone where the peak
        is unpublished (an upper bound on what the device attains)."""
        memory_roof = self.memory_bandwidth_bytes_per_s * np.asarray(intensity, float)
        peak = self.peak_or_none(dtype)
        return memory_roof if peak is None else np.minimum(peak, memory_roof)

    def scaled(
        self, compute: float = 1.0, memory: float = 1.0, link: float = 1.0, label: str | None = None
    ) -> Ceilings:
        """A what-if copy with every peak, the bandwidth and the link multiplied."""
        return replace(
            self,
            name=label or self.name,
            peak_flops_per_s={d: v * compute for d, v in self.peak_flops_per_s.items()},
            vector_flops_per_s=None if self.vector_flops_per_s is None else self.vector_flops_per_s * compute,
            memory_bandwidth_bytes_per_s=self.memory_bandwidth_bytes_per_s * memory,
            link_bandwidth_bytes_per_s=(
                None if self.link_bandwidth_bytes_per_s is None else self.link_bandwidth_bytes_per_s * link
            ),
            roof_source=None if self.roof_source is None else self.roof_source.scaled(compute, memory),
        )
