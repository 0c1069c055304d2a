"""The arithmetic of an op's time on the roofs: its four terms (compute, memory, link, kernel
floor) on one device or many at once, a roof source's replacement of them, the host's dispatch,
and a step's time from its device and host time and a serving engine's host work."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from roofline.ceilings import REGIMES, Ceilings
from roofline.op_record import Op


def time_terms(
    flops: np.ndarray | float,
    bytes_moved: np.ndarray | float,
    peak_flops_per_s: np.ndarray | float,
    memory_bandwidth_bytes_per_s: np.ndarray | float,
    comm_bytes: np.ndarray | float = 0.0,
    link_bandwidth_bytes_per_s: np.ndarray | float | None = None,
    collectives: np.ndarray | float = 0.0,
    collective_latency_s: np.ndarray | float = 0.0,
    launches: np.ndarray | float = 0.0,
    kernel_floor_s: np.ndarray | float = 0.0,
) -> np.ndarray:
    """The four device-time terms, stacked on a new first axis in ``REGIMES`` order. Broadcasts.

    A peak given as NaN (not published) makes the compute term of an op with FLOPs NaN: unknown,
    so the op's time is a lower bound. A communication op on a device without a link figure gets
    NaN too: it cannot run there."""
    flops = np.asarray(flops, float)
    comm_bytes = np.asarray(comm_bytes, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        compute_s = np.where(flops > 0, flops / np.asarray(peak_flops_per_s, float), 0.0)
        memory_s = np.asarray(bytes_moved, float) / np.asarray(memory_bandwidth_bytes_per_s, float)
        link = np.nan if link_bandwidth_bytes_per_s is None else np.asarray(link_bandwidth_bytes_per_s, float)
        comm_s = np.where(comm_bytes > 0, comm_bytes / link, 0.0)
    comm_s = comm_s + np.asarray(collectives, float) * np.asarray(collective_latency_s, float)
    floor_s = np.asarray(launches, float) * np.asarray(kernel_floor_s, float)
    return np.stack(np.broadcast_arrays(compute_s, memory_s, comm_s, floor_s))


def time_and_regime(terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Time (max of the terms) and the index into ``REGIMES`` of the winning term."""
    return terms.max(axis=0), terms.argmax(axis=0)


def byte_totals(ops: Sequence[Op]) -> dict[str, np.ndarray]:
    """Weight, activation and KV bytes of a step summed over its ops and counts (arrays broadcast
    over a sweep); no ceilings needed."""
    totals: dict[str, np.ndarray] = {}
    for name in ("weight_bytes", "act_bytes", "kv_bytes"):
        totals[name] = sum(np.asarray(getattr(op, name), float) * op.count for op in ops)
    return totals


OVERHEAD = REGIMES.index("overhead")
_FIELDS = ("flops", "weight_bytes", "act_bytes", "kv_bytes", "comm_bytes", "collectives", "launches")


def _device_axis(ops: tuple[Op, ...], ceilings: Sequence[Ceilings]) -> dict[str, np.ndarray]:
    """Every op on every device at once: arrays of shape (devices, ops, *sweep)."""
    shape = np.broadcast_shapes(*(np.shape(getattr(op, n)) for op in ops for n in _FIELDS))
    extra = (1,) * len(shape)
    stacked = {
        n: np.stack([np.broadcast_to(np.asarray(getattr(op, n), float), shape) for op in ops])[None] for n in _FIELDS
    }
    per_device = (len(ceilings), 1, *extra)
    per_op = (1, len(ops), *extra)

    def column(values: list[float | None]) -> np.ndarray:
        return np.array([np.nan if v is None else v for v in values], float).reshape(per_device)

    peaks = np.array([[c.peak(op.dtype) if c.has_peak(op.dtype) else np.nan for op in ops] for c in ceilings]).reshape(
        len(ceilings), len(ops), *extra
    )
    moved = stacked["weight_bytes"] + stacked["act_bytes"] + stacked["kv_bytes"]
    terms = time_terms(
        stacked["flops"],
        moved,
        peaks,
        column([c.memory_bandwidth_bytes_per_s for c in ceilings]),
        comm_bytes=stacked["comm_bytes"],
        link_bandwidth_bytes_per_s=column([c.link_bandwidth_bytes_per_s for c in ceilings]),
        collectives=stacked["collectives"],
        collective_latency_s=column([c.collective_latency_s for c in ceilings]),
        launches=stacked["launches"],
        kernel_floor_s=column([c.kernel_floor_s for c in ceilings]),
    )
    ideal = terms.copy()
    sources: list[tuple[str, ...]] = []
    for d, c in enumerate(ceilings):
        labels = (f"{c.source} roofs",) * len(ops)
        if c.roof_source is not None:
            # A roof source (a calibration, an engine's kernel tables) replaces the terms of the ops
            # it answers; the rest keep the datasheet.
            replacement, labels = c.roof_source.device_terms(ops, stacked["flops"][0], moved[0], terms[:, d])
            terms[:, d] = np.where(np.isnan(replacement), terms[:, d], replacement)
            # The kernel floor holds under any roof source, for an op timed as its own kernels: none takes
            # less (the ideal bound's floor too). An op timed inside a fused one (0 s) has no kernel of its own.
            own = np.nansum(replacement, axis=0) > 0
            terms[OVERHEAD, d] = np.where(own, np.fmax(terms[OVERHEAD, d], ideal[OVERHEAD, d]), terms[OVERHEAD, d])
        sources.append(tuple(labels))
    known = np.where(np.isnan(terms), -np.inf, terms)
    # An unknown compute term leaves the largest known one, a lower bound; a missing link is NaN:
    # the op cannot run there.
    device = np.where(np.isnan(terms[REGIMES.index("communication")]), np.nan, known.max(axis=0))
    regime = known.argmax(axis=0)
    ideal_known = np.where(np.isnan(ideal), -np.inf, ideal)
    ideal_device = np.where(np.isnan(ideal[REGIMES.index("communication")]), np.nan, ideal_known.max(axis=0))
    host_per_launch = np.array(
        [[c.launch_overhead_s and _host_cost(c, op) for op in ops] for c in ceilings], float
    ).reshape(len(ceilings), len(ops), *extra)
    count = np.array([op.count for op in ops], float).reshape(per_op)
    return {
        **{n: stacked[n] * count for n in _FIELDS},
        "count": count,
        "terms": terms * count,
        "device": device * count,
        "ideal_device": ideal_device * count,
        "sources": sources,
        "host": stacked["launches"] * host_per_launch * count,
        "regime": regime,
        "compute_unknown": np.isnan(terms[0]),
    }


def _host_cost(c: Ceilings, op: Op) -> float:
    """Host seconds to dispatch one launch of ``op`` in eager mode on ``c``'s host."""
    if c.host_cost_s:
        key = "attention" if op.op_class.startswith("attention") else op.op_class
        if key in c.host_cost_s:
            return c.host_cost_s[key]
        return c.host_cost_s.get("elementwise", c.launch_overhead_s)
    return c.launch_overhead_s * op.host_factor


def sampled_rows(ops: Sequence[Op]) -> np.ndarray | float:
    """The sequences a step samples: the rows of its LM head (0 for a step without one)."""
    return sum((np.asarray(op.meta.get("m", 0.0), float) for op in ops if op.group == "logits"), 0.0)


def step_with_engine(device_s, host_s, ceilings: Ceilings, sampled=0.0):
    """A step's time from its device time and its host dispatch time: the longer of the two, since
    launches are asynchronous; then a serving engine's host work per step (a fixed part and a part
    per sampled sequence), added where the engine runs it between steps. Where it runs it beside
    the device's work, the host does its work and the step's dispatch on one Python thread, so
    those two add and the device's work overlaps their sum (as the serving simulation times a
    step: ``roofline.serving.simulation.steptime``)."""
    engine = ceilings.engine_step_s + ceilings.engine_per_seq_s * np.asarray(sampled, float)
    if ceilings.engine_overlap:
        return np.maximum(device_s, host_s + engine)
    return np.maximum(device_s, host_s) + engine
