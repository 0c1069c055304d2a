"""Import Chrome-trace JSON exported by ``torch.profiler`` (``export_chrome_trace`` with
``record_shapes=True``), from any machine, one rank or several, as a ``Profile``.

What is read: the aten ops the host ran (``cpu_op`` events) with their recorded input shapes and
dtypes, the kernels they launched (``kernel``/``gpu_memcpy``/``gpu_memset``, matched to their op
by ``External id``), ranges named ``module: <path>`` for the per-module view, step ranges
(``ProfilerStep#N`` or ``roofline.step``), and communication (NCCL kernels; ``gloo:`` ranges).
An op's time is its kernels' device time on a GPU, its own host time on a CPU. The step's idle
time is its wall time less the union of what ran (kernels, or top-level ops): the host's gaps.

A trace is untrusted data: at most ``MAX_TRACE_BYTES`` (16 MiB), strict JSON (no NaN), nested at
most 32 deep, at most ``MAX_EVENTS`` events, each duration finite and non-negative; anything
else is a ``TraceError`` that says what is wrong. No torch here.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from roofline.measure.schema import DeviceInfo
from roofline.profile.counting import comm_bytes, count, is_communication
from roofline.profile.events import (
    ANNOTATION_CATS,
    HOST_CATS,
    KERNEL_CATS,
    MAX_DURATION_US,
    MAX_EVENTS,
    MAX_NESTING,
    MAX_TRACE_BYTES,
    MODULE_PREFIX,
    TraceError,
    _Event,
    _events,
    _nest,
    parse_trace,
)
from roofline.profile.record import Profile, ProfiledOp, RankSummary

MAX_RANKS = 64
STEP_NAMES = ("ProfilerStep#", "roofline.step")

__all__ = [  # the event reading lives in roofline.profile.events; its names stay importable here
    "ANNOTATION_CATS",
    "HOST_CATS",
    "KERNEL_CATS",
    "MAX_DURATION_US",
    "MAX_EVENTS",
    "MAX_NESTING",
    "MAX_RANKS",
    "MAX_TRACE_BYTES",
    "MODULE_PREFIX",
    "STEP_NAMES",
    "TraceError",
    "import_trace_files",
    "import_traces",
    "parse_trace",
]


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def _shape_text(args: dict) -> str:
    dims = args.get("Input Dims")
    if not isinstance(dims, list):
        return ""
    return " x ".join(str(d) for d in dims if d)[:300]


# record_param_comms names a collective's element type in words of its own.
_COMM_DTYPE_BYTES = {"Float": 4, "BFloat16": 2, "Half": 2, "Double": 8, "Long": 8, "Int": 4, "Byte": 1, "Char": 1}


def _message_bytes(op: _Event) -> float:
    """A collective's message: ``record_param_comms``'s element count and type where the launch
    was inside one, else the tensors its top-level op was given."""
    nelems, dtype = op.args.get("In msg nelems"), op.args.get("dtype")
    if isinstance(nelems, int) and not isinstance(nelems, bool) and 0 <= nelems <= 2**50 and dtype in _COMM_DTYPE_BYTES:
        return float(nelems * _COMM_DTYPE_BYTES[dtype])
    top = op.top or op
    return comm_bytes(top.args.get("Input Dims") or [], top.args.get("Input type") or [])


# Conversions that return their input untouched where it already is what was asked (same dtype,
# device and layout); a call that copies shows its copy (aten::_to_copy, aten::copy_) inside it.
MAYBE_NO_OP = frozenset({"aten::to", "aten::contiguous", "aten::type_as"})


def _count(e: _Event):
    dims, types = e.args.get("Input Dims"), e.args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    return count(e.name, dims, types)


@dataclass
class _Agg:
    name: str
    op_class: str
    shapes: str
    dtype: str
    count: int = 0
    time_us: float = 0.0
    flops: float = 0.0
    bytes: float = 0.0
    comm_bytes: float = 0.0
    dispatches: int = 0


def _leaves(e: _Event) -> int:
    """The host ops under ``e`` that call no other (``e`` itself if it calls none), through any
    annotation range between them: each one dispatch of a CPU op's work. Walked with a stack, not
    by recursion: events of the same start and length nest in one another as deep as they repeat."""
    order, stack = [], [e]
    while stack:  # parents before their children
        node = stack.pop()
        order.append(node)
        stack.extend(c for c in node.children if c.cat in HOST_CATS or c.cat in ANNOTATION_CATS)
    count: dict[int, int] = {}
    for node in reversed(order):  # children before their parents
        inner = sum(count[id(c)] for c in node.children if c.cat in HOST_CATS or c.cat in ANNOTATION_CATS)
        count[id(node)] = inner if inner or node.cat not in HOST_CATS else 1
    return count[id(e)]


def _rank(data: dict, index: int, origin: str) -> tuple[list[ProfiledOp], RankSummary, list[float], dict]:
    """One trace file's ops, summary, collective start times (µs, absolute) and facts."""
    host, notes, kernels = _events(data, origin)
    info = data.get("distributedInfo") if isinstance(data.get("distributedInfo"), dict) else {}
    rank = info.get("rank", index)
    rank = rank if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank <= 1_000_000 else index
    base = data.get("baseTimeNanoseconds")
    offset = base / 1e3 if isinstance(base, int | float) and not isinstance(base, bool) and math.isfinite(base) else 0.0
    _nest(host + notes)
    steps = [n for n in host + notes if n.cat != "gpu_user_annotation" and n.name.startswith(STEP_NAMES)]
    if not host and not kernels:
        raise TraceError(f"{origin}: no profiler ops or kernels in it: not a torch.profiler trace with ops")
    tops = [e for e in host if e.top is e]
    if steps:
        steps.sort(key=lambda s: s.ts)
        # A ProfilerStep range also wraps the warm-up schedule's steps; keep those with ops.
        windows = [(s.ts, s.end) for s in steps]
        tops = [e for e in tops if any(a <= e.ts < b for a, b in windows)]
        steps = [s for s in steps if any(s.ts <= e.ts < s.end for e in tops)] or steps
        windows = [(s.ts, s.end) for s in steps]
    else:
        first = min([e.ts for e in host] + [k.ts for k in kernels])
        last = max([e.end for e in host] + [k.end for k in kernels])
        windows = [(first, last)]
    n_steps = len(windows)
    # A kernel names the host event that launched it by its External id: an aten op, or (a compiled
    # graph's Triton kernels, a custom extension) a range around the launch, which stands as an op here.
    by_ext = {}
    for e in host + notes:
        ext = e.args.get("External id")
        if isinstance(ext, int) and e.cat != "gpu_user_annotation":
            by_ext[ext] = e
    launchers: list[_Event] = []
    on_device = bool(kernels)
    launched: dict[int, list[_Event]] = defaultdict(list)  # id(top op) -> its kernels
    step_kernels: list[_Event] = []
    comm: list[tuple[float, float, float]] = []  # (start, end, bytes)
    kernel_aggs: dict[str, _Agg] = {}
    for k in kernels:
        ext = k.args.get("External id")
        op = by_ext.get(ext) if isinstance(ext, int) else None
        if op is None:
            continue
        if op.top is None:
            op.top = op
            launchers.append(op)
        if not any(a <= op.top.ts < b for a, b in windows):
            continue
        step_kernels.append(k)
        launched[id(op.top)].append(k)
        k.top, k.module = op.top, op.module
        if "nccl" in k.name.lower():
            comm.append((k.ts, k.end, _message_bytes(op)))
    if not on_device:
        for n in notes:  # gloo runs a collective on its own thread, in a range named gloo:<op>
            if n.name.startswith("gloo:") and any(a <= n.ts < b for a, b in windows):
                dims, types = n.args.get("Input Dims"), n.args.get("Input type")
                size = comm_bytes(dims, types) if isinstance(dims, list) and isinstance(types, list) else 0.0
                comm.append((n.ts, n.end, size))
    aten: dict[tuple, _Agg] = {}
    modules: dict[str, _Agg] = {}
    for op in tops + [e for e in launchers if any(a <= e.ts < b for a, b in windows)]:
        counted = _count(op)
        own_kernels = launched.get(id(op), [])
        time_us = sum(k.dur for k in own_kernels) if on_device else op.dur
        cls = "communication" if is_communication(op.name) else (counted.op_class if counted else "other")
        shapes = _shape_text(op.args)
        dtype = counted.dtype if counted else "fp32"
        key = (op.name, shapes, dtype)
        agg = aten.setdefault(key, _Agg(op.name, cls, shapes, dtype))
        flops = counted.flops if counted else 0.0
        moved = counted.bytes if counted else 0.0
        if op.name in MAYBE_NO_OP and not op.children and not own_kernels:  # it returned its input: no copy
            moved = 0.0
        agg.count += 1
        agg.time_us += time_us
        agg.flops += flops
        agg.bytes += moved
        dispatches = len(own_kernels) if on_device else _leaves(op)
        agg.dispatches += dispatches
        if cls == "communication":
            agg.comm_bytes += comm_bytes(op.args.get("Input Dims") or [], op.args.get("Input type") or [])
        for k in own_kernels:  # a kernel's share of its op's FLOPs and bytes: its share of the op's time
            share = k.dur / time_us if time_us > 0 else 1.0 / len(own_kernels)
            ka = kernel_aggs.setdefault(k.name, _Agg(k.name, cls, "", dtype))
            ka.count += 1
            ka.dispatches += 1
            ka.time_us += k.dur
            ka.flops += flops * share
            ka.bytes += moved * share
        module = op.module
        seen = set()
        while module:  # inclusive: a module's ops and its submodules'
            if module in seen:
                break
            seen.add(module)
            ma = modules.setdefault(module, _Agg(module, "module", "", dtype))
            ma.count += 1
            ma.dispatches += dispatches
            ma.time_us += time_us
            ma.flops += flops
            ma.bytes += moved
            module = module.rsplit(".", 1)[0] if "." in module else None
    if on_device:
        busy = _union([(k.ts, k.end) for k in step_kernels])
        wall = sum(max(b, max((k.end for k in step_kernels if a <= k.top.ts < b), default=b)) - a for a, b in windows)
    else:
        busy = _union([(e.ts, e.end) for e in tops] + [(a, b) for a, b, _ in comm])
        wall = sum(b - a for a, b in windows)
    if wall <= 0:  # every op 0 µs long (or none in the step): nothing to place, and no regime to name
        raise TraceError(f"{origin}: its profiled step lasts 0 µs (every op and kernel in it has no duration)")
    per_step = 1.0 / n_steps

    def record(level: str, agg: _Agg) -> ProfiledOp:
        return ProfiledOp(
            level=level,
            name=agg.name,
            op_class=agg.op_class,
            shapes=agg.shapes,
            dtype=agg.dtype,
            count=agg.count * per_step,
            time_s=agg.time_us / 1e6 * per_step,
            flops=agg.flops * per_step,
            bytes=agg.bytes * per_step,
            comm_bytes=agg.comm_bytes * per_step,
            dispatches=agg.dispatches * per_step,
            rank=rank,
        )

    ops = [record("aten", a) for a in aten.values()]
    ops += [record("kernel", a) for a in kernel_aggs.values()]
    ops += [record("module", a) for a in modules.values()]
    comm_time = _union([(a, b) for a, b, _ in comm])
    summary = RankSummary(
        rank=rank,
        steps=n_steps,
        wall_s=wall / 1e6 * per_step,
        busy_s=min(busy, wall) / 1e6 * per_step,
        idle_s=max(0.0, wall - busy) / 1e6 * per_step,
        communication_s=comm_time / 1e6 * per_step,
        communication_bytes=sum(c[2] for c in comm) * per_step,
        collectives=len(comm),
    )
    if comm and not on_device:
        ops.append(
            ProfiledOp(
                level="aten",
                name="collectives (gloo)",
                op_class="communication",
                count=len(comm) * per_step,
                time_s=comm_time / 1e6 * per_step,
                flops=0.0,
                bytes=sum(c[2] for c in comm) * per_step,
                comm_bytes=sum(c[2] for c in comm) * per_step,
                rank=rank,
            )
        )
    facts = {
        "device": _device_name(data, on_device),
        "shapes": data.get("record_shapes") != 0 and any("Input Dims" in e.args for e in tops),
        "activity": "cuda" if on_device else "cpu",
    }
    return ops, summary, sorted(a + offset for a, _, _ in comm), facts


def _device_name(data: dict, on_device: bool) -> str:
    props = data.get("deviceProperties")
    if on_device and isinstance(props, list) and props and isinstance(props[0], dict):
        name = props[0].get("name")
        if isinstance(name, str) and name:
            return name[:200]
    return "GPU" if on_device else "CPU"


def import_traces(
    texts: Sequence[tuple[str | bytes, str]], label: str = "", max_bytes: int = MAX_TRACE_BYTES
) -> Profile:
    """A Profile from one trace per rank: ``(text, origin)`` pairs (origin names it in errors)."""
    if not texts:
        raise TraceError("no trace given")
    if len(texts) > MAX_RANKS:
        raise TraceError(f"{len(texts)} traces; at most {MAX_RANKS} ranks are read at once")
    all_ops: list[ProfiledOp] = []
    summaries: list[RankSummary] = []
    starts: list[list[float]] = []
    facts = []
    for index, (text, origin) in enumerate(texts):
        parsed = parse_trace(text, origin, max_bytes)
        try:
            ops, summary, collective_starts, fact = _rank(parsed, index, origin)
        except TraceError:
            raise
        except ValueError as exc:  # a recorded shape no run could have (roofline.profile.counting)
            raise TraceError(f"{origin}: {exc}") from None
        if any(s.rank == summary.rank for s in summaries):
            raise TraceError(f"{origin}: rank {summary.rank} appears twice")
        all_ops += ops
        summaries.append(summary)
        starts.append(collective_starts)
        facts.append(fact)
    notes = []
    if not all(f["shapes"] for f in facts):
        notes.append("recorded without shapes (record_shapes=False): FLOPs and bytes are not known")
    if len({f["activity"] for f in facts}) > 1:
        raise TraceError("the traces mix GPU and CPU-only profiles; import one kind at a time")
    skew = None
    if len(starts) > 1 and all(starts):
        n = min(len(s) for s in starts)
        skew = max(max(s[i] for s in starts) - min(s[i] for s in starts) for i in range(n)) / 1e6
        notes.append(
            f"skew: the largest spread of a collective's start across ranks, over {n} collectives "
            "(ranks on different hosts: as good as their clocks agree)"
        )
    if facts[0]["activity"] == "cuda":
        notes.append("op times are their kernels' device time; a kernel's FLOPs and bytes are its op's, by time share")
    else:
        notes.append("a CPU-only profile: op times are host time of each top-level aten op; no kernels")
    summaries.sort(key=lambda s: s.rank)
    device = DeviceInfo(
        name=facts[0]["device"], kind=facts[0]["activity"], torch_version="not recorded", date="not recorded"
    )
    return Profile(
        source="trace",
        activity=facts[0]["activity"],
        device=device,
        label=label,
        steps=summaries[0].steps,
        ranks=summaries,
        skew_s=skew,
        ops=all_ops,
        notes=notes,
    )


def import_trace_files(paths: Sequence[str], max_bytes: int = MAX_TRACE_BYTES) -> Profile:
    from roofline.datafiles import DataError, read_regular_file, shown_path

    texts = []
    for path in paths:
        try:
            texts.append((read_regular_file(path, max_bytes), shown_path(path)))
        except DataError as exc:
            raise TraceError(str(exc)) from None
    return import_traces(texts, label=", ".join(str(p) for p in paths)[:200], max_bytes=max_bytes)


__all__ = ["MAX_EVENTS", "MAX_TRACE_BYTES", "TraceError", "import_trace_files", "import_traces"]
