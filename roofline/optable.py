"""Ops evaluated on ceilings: the time terms, the ``OpTable`` and the one- and many-device passes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from roofline.ceilings import REGIMES, RESTS_ON, Ceilings, dtype_words
from roofline.op_record import Op
from roofline.op_terms import (  # noqa: F401 (re-exported: the engine's one import place)
    _device_axis,
    byte_totals,
    sampled_rows,
    step_with_engine,
    time_and_regime,
    time_terms,
)


@dataclass(frozen=True)
class OpTable:
    """Ops evaluated on one set of ceilings. Arrays hold totals over each op's ``count``; the
    op axis is first, a sweep's axes follow."""

    ops: tuple[Op, ...]
    ceilings: Ceilings
    count: np.ndarray
    flops: np.ndarray
    weight_bytes: np.ndarray
    act_bytes: np.ndarray
    kv_bytes: np.ndarray
    comm_bytes: np.ndarray
    terms_s: np.ndarray  # (4, n, ...): compute, memory, communication, kernel floor
    device_s: np.ndarray  # device time of each op (a lower bound where compute_unknown)
    host_s: np.ndarray  # host dispatch time of each op (0 from a CUDA graph)
    device_regime: np.ndarray  # index into REGIMES of the largest known term of each op
    # Ops with FLOPs whose dtype has no published peak: compute term NaN, time a lower bound.
    compute_unknown: np.ndarray | None = None
    # The same ops on the datasheet roofs alone (the ideal bound), and what each op's time rests
    # on (the roof source's label, or the datasheet where it has no answer).
    ideal_device_s: np.ndarray | None = None
    sources: tuple[str, ...] = ()

    @property
    def unknown_peaks(self) -> tuple[str, ...]:
        """The dtypes whose peak the device does not publish, among ops that need one."""
        if self.compute_unknown is None:
            return ()
        unknown = np.asarray(self.compute_unknown).reshape(len(self.ops), -1).any(axis=1)
        return tuple(dict.fromkeys(op.dtype for op, u in zip(self.ops, unknown) if u))

    @property
    def is_lower_bound(self) -> bool:
        """True where some op's compute time is unknown: every time is then at least this."""
        return bool(self.unknown_peaks)

    def rests_on(self) -> str:
        """What the times are built from, in words (``--json``'s ``time_rests_on``)."""
        c = self.ceilings
        if c.roof_source is not None:
            text = (
                f"{RESTS_ON.get(c.source, c.source)}: {c.roof_source.label}, for {self.source_share:.0%} of the "
                "device time; datasheet roofs for the ops it does not cover"
            )
        elif not self.is_lower_bound:
            text = f"{c.source} roofs: compute peaks, memory bandwidth, link and kernel floor"
        else:
            missing = dtype_words(self.unknown_peaks)
            text = (
                f"{c.source} roofs without compute: {c.name} publishes no peak for {missing}, so compute time is "
                "unknown and every time is a lower bound from memory bandwidth, link and kernel floor"
            )
        if c.engine_step_s:
            text += f"; plus {c.engine_step_note or 'the engine host work per step'}"
        return text

    @property
    def from_source(self) -> np.ndarray:
        """Per op: whether the roof source (not the datasheet) set its time."""
        return np.array(
            [bool(s) and not s.startswith(("datasheet", f"{self.ceilings.source} roofs")) for s in self.sources]
        )

    @property
    def source_share(self) -> float:
        """The part of the device time (over the whole sweep) that the roof source set."""
        per_op = np.asarray(self.device_s, float).reshape(len(self.ops), -1).sum(axis=1)
        total = float(np.nansum(per_op))
        if not self.sources or total <= 0:
            return 0.0
        return float(np.nansum(per_op[self.from_source]) / total)

    @property
    def bytes(self) -> np.ndarray:
        return self.weight_bytes + self.act_bytes + self.kv_bytes

    @property
    def intensity(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.bytes > 0, self.flops / np.where(self.bytes > 0, self.bytes, 1), np.inf)

    @property
    def host_bound(self) -> np.ndarray:
        """Whether the host's dispatching, not the device, sets the step's time."""
        return self.host_s.sum(axis=0) > self.device_s.sum(axis=0)

    @property
    def time_s(self) -> np.ndarray:
        """Each op's device time: what a profiler shows for its kernels."""
        return self.device_s

    @property
    def effective_s(self) -> np.ndarray:
        """Each op's time in the pipeline: where the host sets the pace, the longer of its device
        and dispatch time (the device waits for the next launch)."""
        return np.where(self.host_bound, np.maximum(self.device_s, self.host_s), self.device_s)

    @property
    def regime_index(self) -> np.ndarray:
        """Each op's regime: its device term, or overhead where the host is the bottleneck and
        this op dispatches slower than it runs."""
        slow_host = self.host_bound & (self.host_s > self.device_s)
        return np.where(slow_host, REGIMES.index("overhead"), self.device_regime)

    @property
    def achieved_flops_per_s(self) -> np.ndarray:
        """FLOPs over the op's time in the pipeline: host-bound ops sit below their roof."""
        time = self.effective_s
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(time > 0, self.flops / np.where(time > 0, time, 1), 0.0)

    @property
    def bounds(self) -> list[str]:
        return [REGIMES[i] for i in np.asarray(self.regime_index).reshape(len(self.ops), -1)[:, 0]]

    @property
    def device_time_s(self) -> np.ndarray:
        return self.device_s.sum(axis=0)

    @property
    def host_time_s(self) -> np.ndarray:
        return self.host_s.sum(axis=0) + self.ceilings.graph_replay_s

    @property
    def step_time_s(self) -> np.ndarray:
        """The step at every sweep point: the longer of the device's work and the host's dispatch,
        and the serving engine's host work per step (0 outside an engine)."""
        return step_with_engine(self.device_time_s, self.host_time_s, self.ceilings, sampled_rows(self.ops))

    @property
    def ideal_step_time_s(self) -> np.ndarray:
        """The step on the datasheet roofs alone, with no engine work between steps: the ideal
        bound the expected step is shown beside."""
        ideal = self.device_s if self.ideal_device_s is None else self.ideal_device_s
        return np.maximum(ideal.sum(axis=0), self.host_time_s)

    @property
    def expected_source(self) -> str:
        """What the step's expected time rests on, in the product's words: "ideal" (datasheet),
        "calibrated", "engine-measured" or "measured"."""
        return RESTS_ON.get(self.ceilings.source, self.ceilings.source)

    @property
    def total_time_s(self) -> float:
        return float(np.sum(self.step_time_s))

    @property
    def exposed_host_s(self) -> np.ndarray:
        """Host time the device waits for: the step's dispatch beyond its ops' device time, and the
        serving engine's host work the device waits for."""
        return self.step_time_s - self.device_time_s

    def time_by_regime_s(self) -> dict[str, np.ndarray]:
        """Device time of the ops in each regime, at every sweep point; the host time the device
        waits for (when the host is slower) counts as overhead. Adds up to the step time."""
        out = {r: np.where(self.device_regime == i, self.device_s, 0.0).sum(axis=0) for i, r in enumerate(REGIMES)}
        out["overhead"] = out["overhead"] + self.exposed_host_s
        return out

    def bound_shares_s(self) -> dict[str, np.ndarray]:
        """Step time by the regime that decides it: a step the host sets is overhead all through
        (no faster device would help it); otherwise the device time of each regime."""
        shares = self.time_by_regime_s()
        host = self.host_bound
        return {r: np.where(host, self.step_time_s if r == "overhead" else 0.0, v) for r, v in shares.items()}

    @property
    def step_bound(self) -> np.ndarray:
        """The step's regime at every sweep point (see ``bound_shares_s``)."""
        shares = np.stack(list(self.bound_shares_s().values()))
        return np.array(REGIMES)[shares.argmax(axis=0)]

    @property
    def total_bound(self) -> str:
        return str(self.step_bound.reshape(-1)[0]) if self.step_bound.size == 1 else "mixed"

    def rows(self) -> list[dict[str, object]]:
        """One dict per op, the numbers a table or ``--json`` shows (totals over count)."""
        intensity = self.intensity
        achieved = self.achieved_flops_per_s
        time, effective, regime = self.time_s, self.effective_s, self.regime_index
        ideal = self.device_s if self.ideal_device_s is None else self.ideal_device_s
        unknown = (
            np.zeros(len(self.ops), bool)
            if self.compute_unknown is None
            else np.asarray(self.compute_unknown).reshape(len(self.ops), -1).any(axis=1)
        )
        out = []
        for i, op in enumerate(self.ops):
            out.append(
                {
                    "name": op.name,
                    "group": op.group,
                    "phase": op.phase,
                    "count": int(op.count),
                    "dtype": op.dtype,
                    "flops": float(self.flops[i]),
                    "bytes": float(self.bytes[i]),
                    "weight_bytes": float(self.weight_bytes[i]),
                    "activation_bytes": float(self.act_bytes[i]),
                    "kv_bytes": float(self.kv_bytes[i]),
                    "comm_bytes": float(self.comm_bytes[i]),
                    "intensity": _finite_or_none(intensity[i]),
                    "time_s": float(time[i]),
                    "ideal_time_s": float(ideal[i]),
                    "rests_on": self.sources[i] if self.sources else f"{self.ceilings.source} roofs",
                    "host_s": float(self.host_s[i]),
                    "effective_s": float(effective[i]),
                    "compute_s": None if unknown[i] else float(self.terms_s[0, i]),
                    "memory_s": float(self.terms_s[1, i]),
                    "communication_s": float(self.terms_s[2, i]),
                    "overhead_s": float(self.terms_s[3, i]),
                    "bound": REGIMES[int(regime[i])],
                    # False where the compute peak is unpublished: time_s is then a lower bound
                    # and "bound" is only the largest known term.
                    "bound_certain": not bool(unknown[i]),
                    "achieved_tflops": float(achieved[i]) / 1e12,
                }
            )
        return out


def _finite_or_none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def evaluate(ops: Sequence[Op] | Iterable[Op], ceilings: Ceilings) -> OpTable:
    """Time and regime of every op on one device, in one vectorised pass.

    Op fields may be numpy arrays over a sweep (batch x context, say); they broadcast, and the
    table's arrays get shape (number of ops, *sweep shape)."""
    ops = tuple(ops)
    if not ops:
        raise ValueError("no ops to evaluate")
    for op in ops:  # a clear error for what cannot run here (a missing peak only bounds the time)
        if np.any(np.asarray(op.comm_bytes) > 0) and ceilings.link_bandwidth_bytes_per_s is None:
            why = ceilings.link_note or "this device has no interconnect figure"
            raise ValueError(f"tp: this tensor-parallel group has no link to communicate over ({why})")
    a = _device_axis(ops, [ceilings])
    return OpTable(
        ops=ops,
        ceilings=ceilings,
        count=a["count"][0],
        flops=a["flops"][0],
        weight_bytes=a["weight_bytes"][0],
        act_bytes=a["act_bytes"][0],
        kv_bytes=a["kv_bytes"][0],
        comm_bytes=a["comm_bytes"][0],
        terms_s=a["terms"][:, 0],
        device_s=a["device"][0],
        ideal_device_s=a["ideal_device"][0],
        sources=a["sources"][0],
        host_s=a["host"][0],
        device_regime=a["regime"][0],
        compute_unknown=a["compute_unknown"][0],
    )


def evaluate_devices(ops: Sequence[Op], ceilings: Sequence[Ceilings], with_ideal: bool = False) -> tuple:
    """One step's time on many devices at once.

    Returns (step time with shape (devices, *sweep shape), the time each regime decides with
    shape (4, devices, *sweep shape): see ``OpTable.bound_shares_s``), and with ``with_ideal`` the
    step on the datasheet roofs alone (``OpTable.ideal_step_time_s``) third. A device that lacks an
    op's dtype, or has no link figure for a communication op, gets NaN: the step cannot run
    there as configured. Where a device publishes no peak for an op's dtype the time is a lower
    bound (``unpublished_peaks`` says which devices and dtypes).
    """
    ops = tuple(ops)
    a = _device_axis(ops, ceilings)
    device, host = a["device"].sum(axis=1), a["host"].sum(axis=1)
    replay = np.array([c.graph_replay_s for c in ceilings]).reshape((len(ceilings),) + (1,) * (device.ndim - 1))
    host = host + replay
    rows = sampled_rows(ops)
    step = np.stack([step_with_engine(device[d], host[d], c, rows) for d, c in enumerate(ceilings)])
    by_regime = np.stack([np.where(a["regime"] == i, a["device"], 0.0).sum(axis=1) for i in range(len(REGIMES))])
    by_regime[REGIMES.index("overhead")] += step - device
    if with_ideal:
        return step, by_regime, np.maximum(a["ideal_device"].sum(axis=1), host)
    return step, by_regime


def unpublished_peaks(ops: Sequence[Op], ceilings: Sequence[Ceilings]) -> list[tuple[str, ...]]:
    """Per device, the dtypes of ops with FLOPs that it publishes no peak for: where any, its
    times from ``evaluate_devices`` are lower bounds."""
    needed = tuple(dict.fromkeys(op.dtype for op in ops if np.any(np.asarray(op.flops) > 0)))
    return [tuple(d for d in needed if not c.has_peak(d)) for c in ceilings]
