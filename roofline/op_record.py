"""The Op record: one kernel (or fused group) of a step, with its FLOPs and bytes per occurrence."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from roofline.defaults import HOST_COST_FACTORS


@dataclass(frozen=True)
class Op:
    """One kernel (or fused group) of a step. FLOPs and bytes are per occurrence; ``count``
    says how many times it runs per step (e.g. once per layer)."""

    name: str
    flops: float
    dtype: str
    weight_bytes: float = 0.0
    act_bytes: float = 0.0
    kv_bytes: float = 0.0
    count: int = 1
    comm_bytes: float = 0.0  # bytes each device sends per occurrence (collectives only)
    collectives: int = 0  # collectives per occurrence, each paying the link latency
    launches: int = 1  # kernel launches per occurrence
    group: str = ""
    phase: str = ""
    meta: Mapping[str, object] = field(default_factory=dict)

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.act_bytes + self.kv_bytes

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes > 0 else float("inf")

    @property
    def op_class(self) -> str:
        """The class a calibration fits achievable roofs for."""
        kind = self.meta.get("kind", "")
        if kind == "matmul":
            return "linear"
        if kind == "attention":
            return "attention_prefill" if self.phase == "prefill" else "attention_decode"
        if kind == "communication":
            return "communication"
        if self.group in ("norm", "residual"):
            return self.group
        return "activation" if "activation" in self.name else "elementwise"

    @property
    def host_factor(self) -> float:
        """Host dispatch cost of this op's launches relative to a tiny eager op."""
        return HOST_COST_FACTORS.get(self.op_class, 1.0)
