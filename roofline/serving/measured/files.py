"""A result file's text read into its benchmark points: strict JSON (no NaN or Infinity), at
most 16 MiB, nested at most 32 deep, one document or (``vllm bench serve --append-result``) one
per line, its format found from its fields."""

from __future__ import annotations

import json
from pathlib import Path

from roofline.datafiles import MAX_NESTING, depth, read_regular_file, shown_path, strict_json
from roofline.serving.measured.aiperf import _aiperf_point, _is_aiperf
from roofline.serving.measured.guidellm import _guidellm_point, _is_guidellm
from roofline.serving.measured.record import FORMATS, MAX_MEASURED_BYTES, MAX_POINTS, MeasuredError, MeasuredRun
from roofline.serving.measured.vllm import _is_vllm, _vllm_point


def _loads(text: str) -> object:
    data = strict_json(text)
    if depth(data) > MAX_NESTING:
        raise RecursionError
    return data


def parse_measured(raw: str | bytes, origin: str = "measured results") -> list[MeasuredRun]:
    """The benchmark points of a result file's text, whichever of FORMATS it is."""
    if len(raw) > MAX_MEASURED_BYTES:
        raise MeasuredError(f"{origin}: {len(raw):,} bytes is more than a result file can hold (16 MiB at most)")
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MeasuredError(f"{origin}: not UTF-8 text (byte {exc.start})") from None
    try:
        try:
            documents = [_loads(raw)]
        except json.JSONDecodeError as exc:
            lines = [line for line in raw.splitlines() if line.strip()]
            if exc.msg != "Extra data" or len(lines) < 2:
                raise
            if len(lines) > MAX_POINTS:
                raise MeasuredError(f"{origin}: more than {MAX_POINTS:,} lines of results") from None
            documents = [_loads(line) for line in lines]  # vllm bench serve --append-result
    except RecursionError:
        raise MeasuredError(f"{origin}: nested deeper than {MAX_NESTING} levels: not a result file") from None
    except ValueError as exc:
        raise MeasuredError(f"{origin}: not JSON ({str(exc)[:120]})") from None
    try:
        return _points(documents)
    except MeasuredError as exc:
        raise MeasuredError(f"{origin}: {exc}") from None


def _points(documents: list[object]) -> list[MeasuredRun]:
    first = documents[0]
    if len(documents) == 1 and _is_guidellm(first):
        benches = first["benchmarks"]
        if len(benches) > MAX_POINTS:
            raise MeasuredError(f"benchmarks: {len(benches):,} points; at most {MAX_POINTS:,}")
        return [_guidellm_point(b, f"benchmarks[{i}]", i, len(benches)) for i, b in enumerate(benches)]
    if len(documents) == 1 and _is_aiperf(first):
        return [_aiperf_point(first)]
    if all(_is_vllm(d) for d in documents):
        prefix = (lambda i: f"line {i + 1}") if len(documents) > 1 else (lambda i: "")
        return [_vllm_point(d, prefix(i), i, len(documents)) for i, d in enumerate(documents)]
    raise MeasuredError("not a serving benchmark result this reads; supported: " + "; ".join(FORMATS.values()))


def read_measured(path: str | Path) -> list[MeasuredRun]:
    """The benchmark points of a result file (see ``parse_measured``)."""
    raw = read_regular_file(path, MAX_MEASURED_BYTES)
    return parse_measured(raw, shown_path(path))
