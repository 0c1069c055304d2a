"""A Chrome trace's events read and checked: the JSON, bounded in size, strictness, nesting and
event count (``parse_trace``), its complete events sorted into host ops, annotations and kernels
with finite, in-range times, and nested by interval containment per thread. A trace is untrusted
data: anything wrong is a ``TraceError`` that says what."""

from __future__ import annotations

import gzip
import io
import math
from collections import defaultdict
from dataclasses import dataclass, field

from roofline.datafiles import strict_json
from roofline.measure.schema import _depth
from roofline.profile.counting import is_communication

MAX_TRACE_BYTES = 16 * 2**20
MAX_EVENTS = 250_000
MAX_NESTING = 32
MAX_DURATION_US = 1e12  # eleven days: a longer event is not a profile of a step
MODULE_PREFIX = "module: "
KERNEL_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
HOST_CATS = frozenset({"cpu_op", "operator"})
ANNOTATION_CATS = frozenset({"user_annotation", "gpu_user_annotation"})


class TraceError(ValueError):
    """A trace that cannot be imported; the message says why."""


@dataclass
class _Event:
    name: str
    cat: str
    ts: float  # microseconds
    dur: float
    thread: tuple
    args: dict
    children: list = field(default_factory=list)
    top: _Event | None = None  # the top-level aten op this event belongs to
    module: str | None = None  # innermost module range around it

    @property
    def end(self) -> float:
        return self.ts + self.dur


def _number(value: object, what: str, origin: str, index: int) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TraceError(f"{origin}: event {index}: {what} must be a finite number, got {str(value)[:40]!r}")
    return float(value)


def parse_trace(text: str | bytes, origin: str = "trace", max_bytes: int = MAX_TRACE_BYTES) -> dict:
    """The trace's JSON object, checked for size, strictness, nesting and event count. A gzip
    file (``.json.gz``) is read up to ``max_bytes`` unpacked, so a small bomb stays small."""
    if isinstance(text, bytes) and text[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(text)) as packed:
                text = packed.read(max_bytes + 1)
        except (OSError, EOFError) as exc:
            raise TraceError(f"{origin}: a damaged gzip file ({str(exc)[:80]})") from None
        if len(text) > max_bytes:
            raise TraceError(f"{origin}: unpacks to more than a trace can be here ({max_bytes:,} bytes at most)")
    if len(text) > max_bytes:
        raise TraceError(
            f"{origin}: {len(text):,} bytes is larger than a trace can be here ({max_bytes:,} bytes at most); "
            "profile fewer steps, or with fewer ranks per file"
        )
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise TraceError(f"{origin}: not UTF-8 text") from None
    if _depth(text) > MAX_NESTING:
        raise TraceError(f"{origin}: nested deeper than {MAX_NESTING} levels: not a profiler trace")
    # Every event is an object; counting braces bounds the work before anything is built.
    if text.count("{") > 4 * MAX_EVENTS:
        raise TraceError(f"{origin}: more than {MAX_EVENTS:,} events; a trace holds at most {MAX_EVENTS:,}")

    try:
        data = strict_json(text)
    except ValueError as exc:
        raise TraceError(f"{origin}: not JSON ({str(exc)[:120]})") from None
    if isinstance(data, list):  # the bare-array form of the Chrome trace format
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceError(f'{origin}: not a Chrome trace (expected an object with a "traceEvents" list)')
    if len(data["traceEvents"]) > MAX_EVENTS:
        raise TraceError(f"{origin}: {len(data['traceEvents']):,} events; a trace holds at most {MAX_EVENTS:,}")
    return data


def _events(data: dict, origin: str) -> tuple[list[_Event], list[_Event], list[_Event]]:
    """(host ops, annotations, kernels) among the complete ("X") events, validated."""
    host, notes, kernels = [], [], []
    for i, e in enumerate(data["traceEvents"]):
        if not isinstance(e, dict):
            raise TraceError(f"{origin}: event {i} is not an object")
        if e.get("ph") != "X":
            continue
        cat, name = e.get("cat"), e.get("name")
        if not isinstance(cat, str) or not isinstance(name, str) or len(name) > 10_000:
            raise TraceError(f"{origin}: event {i}: needs a text 'cat' and 'name'")
        bucket = (
            host if cat in HOST_CATS else notes if cat in ANNOTATION_CATS else kernels if cat in KERNEL_CATS else None
        )
        if bucket is None:
            continue
        ts = _number(e.get("ts"), "ts", origin, i)
        dur = _number(e.get("dur", 0), "dur", origin, i)
        if dur < 0 or dur > MAX_DURATION_US:
            raise TraceError(f"{origin}: event {i}: duration {dur} µs is out of range (0 to {MAX_DURATION_US:g})")
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        thread = (str(e.get("pid")), str(e.get("tid")))
        bucket.append(_Event(name, cat, ts, dur, thread, args))
    return host, notes, kernels


def _nest(events: list[_Event]) -> None:
    """Parent/child by interval containment per thread; each event learns its top-level aten op
    and its innermost module range."""
    by_thread: dict[tuple, list[_Event]] = defaultdict(list)
    for e in events:
        by_thread[e.thread].append(e)
    for items in by_thread.values():
        items.sort(key=lambda e: (e.ts, -e.dur))
        stack: list[_Event] = []
        for e in items:
            while stack and e.ts >= stack[-1].end:
                stack.pop()
            parent = stack[-1] if stack else None
            if parent is not None:
                parent.children.append(e)
                e.module = parent.module
                e.top = parent.top
            if e.name.startswith(MODULE_PREFIX) and e.cat in ANNOTATION_CATS:
                e.module = e.name[len(MODULE_PREFIX) :]
            if e.top is None and e.cat in HOST_CATS and (e.name.startswith("aten::") or is_communication(e.name)):
                e.top = e
            stack.append(e)
