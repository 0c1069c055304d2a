"""Request traces: when each request arrived and how many prompt and output tokens it had, read
from a file in one of the shapes public traces and benchmark tools write.

- JSONL, one request per line: ``arrival_s`` (seconds), or ``timestamp`` in seconds or, above
  1e6, in milliseconds as Mooncake's traces record it; ``prompt_tokens`` / ``input_length``;
  ``output_tokens`` / ``output_length``.
- CSV with a header row, its columns found by name:
  - Azure's LLM inference traces (AzurePublicDataset, 2023 and 2024):
    ``TIMESTAMP,ContextTokens,GeneratedTokens``, ``TIMESTAMP`` a wall-clock date and time
    (``2023-11-16 18:15:46.6805900``);
  - BurstGPT (``BurstGPT_1.csv`` and the others): ``Timestamp,Model,Request tokens,Response
    tokens,Total tokens,Log Type`` (some releases add ``Session ID`` and ``Elapsed time``),
    ``Timestamp`` in seconds from the trace's start, however large;
  - the JSONL keys as columns (``arrival_s,prompt_tokens,output_tokens``).

A request with no prompt or no output tokens is left out and counted (BurstGPT records a failed
request with 0 response tokens). Requests are sorted by arrival; the first arrives at 0. ``first``
keeps only the requests of the file's first lines, so a slice of a trace larger than the size
limit (BurstGPT's files run to 140 MB) can be simulated. A ``timestamp``'s unit is judged on the
whole file (read to its end where it is within the size limit); a larger file whose first lines
leave it open is refused rather than guessed.
"""

from __future__ import annotations

import csv
import io
import math
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from roofline.datafiles import strict_json
from roofline.serving.simulation.load import MAX_REQUESTS, MAX_TOKENS, Requests

MAX_TRACE_BYTES = 64 * 2**20
MAX_LINE_BYTES = 1 << 20
_TIME_KEYS = ("arrival_s", "timestamp")
_PROMPT_KEYS = ("prompt_tokens", "input_length")
_OUTPUT_KEYS = ("output_tokens", "output_length")
# CSV columns: (time column, how its values read), prompt columns, output columns.
_CSV_TIMES = {"arrival_s": "seconds", "timestamp": "seconds or ms", "Timestamp": "seconds", "TIMESTAMP": "date"}
_CSV_PROMPTS = (*_PROMPT_KEYS, "ContextTokens", "Request tokens")
_CSV_OUTPUTS = (*_OUTPUT_KEYS, "GeneratedTokens", "Response tokens")


def read_trace(path: str | Path, limit: int = MAX_REQUESTS, first: int | None = None) -> Requests:
    """The requests of the trace at ``path`` (the formats are in the module's notes): at most
    ``limit`` (more is an error), or only those of the file's ``first`` lines. A ``timestamp``'s
    unit (seconds, or milliseconds where one exceeds 1e6) is judged on the whole file."""
    if not str(path).strip():  # Path("") is ".", which had been named as the file
        raise ValueError("trace: expected a file, got an empty path")
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"trace: {path} is not a file")
    with path.open("rb") as f:
        return _read(f, str(path), path.stat().st_size, limit, first)


def parse_trace(data: bytes, name: str = "the trace", limit: int = MAX_REQUESTS, first: int | None = None) -> Requests:
    """``read_trace`` of a file's bytes (an upload), ``name`` naming it in errors."""
    return _read(io.BytesIO(data), name, len(data), limit, first)


def _read(f, path: str, size: int, limit: int, first: int | None) -> Requests:
    whole = size <= MAX_TRACE_BYTES
    if first is None and not whole:
        raise ValueError(
            f"trace: {path} is larger than {MAX_TRACE_BYTES // 2**20} MiB; simulate its first requests "
            "(serve --trace FILE --requests N)"
        )
    rows = first if first is not None else math.inf
    times, prompts, outputs, stamped = [], [], [], []
    skipped, largest_stamp, parse, stamps, read = 0, -math.inf, None, False, 0
    for number, raw in _lines(f):
        where = f"trace line {number}"
        if parse is None:  # the first line says the format: a JSON object, or a CSV header
            if raw.lstrip().removeprefix(b"\xef\xbb\xbf").lstrip()[:1] in (b"{", b"["):
                parse, stamps = _json_row, True  # a JSONL line may hold a timestamp
            else:
                parse, stamps = _csv_parser(raw, where)
                continue
        if read >= rows:
            # Past the lines asked for, only a timestamp's unit is left to learn, where the format can
            # carry one and the file has not already said; a bad line there is no error.
            if not whole or largest_stamp > 1e6 or not stamps:
                break
            try:
                t, _, _, ms = parse(raw, where)
            except ValueError:
                continue
            if ms:
                largest_stamp = max(largest_stamp, t)
            continue
        read += 1
        t, p, o, ms = parse(raw, where)
        if ms:
            largest_stamp = max(largest_stamp, t)
        if p == 0 or o == 0:
            skipped += 1
            continue
        if len(times) >= limit:
            raise ValueError(f"trace: more than {limit:,} requests; simulate its first (--requests N)")
        times.append(t)
        prompts.append(p)
        outputs.append(o)
        stamped.append(ms)
    if not times:
        without = f" ({skipped:,} without prompt or output tokens)" if skipped else ""
        raise ValueError(f"trace: {path} has no requests{without}")
    t, stamped = np.asarray(times, float), np.asarray(stamped, bool)
    if stamped.any() and not whole and largest_stamp <= 1e6:
        raise ValueError(
            f"trace: {path}'s timestamp is in seconds or, where one exceeds 1e6, in milliseconds, judged on the "
            f"whole file, which is larger than {MAX_TRACE_BYTES // 2**20} MiB and none of whose first lines says: "
            "write the arrivals as arrival_s (seconds), or cut the file"
        )
    if largest_stamp > 1e6:
        t[stamped] /= 1e3  # Mooncake's timestamps, in milliseconds
    order = np.argsort(t, kind="stable")
    return Requests(
        t[order] - t[order][0],
        np.asarray(prompts, np.int64)[order],
        np.asarray(outputs, np.int64)[order],
        skipped=skipped,
    )


def _lines(f):
    """(line number, line) of every non-blank line, each at most MAX_LINE_BYTES."""
    number = 0
    while True:
        raw = f.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE_BYTES:
            raise ValueError(f"trace line {number}: longer than {MAX_LINE_BYTES // 2**20} MiB")
        if raw.strip():
            yield number, raw


def _tokens(value: object, where: str) -> int:
    """A token count: a whole number in [0, MAX_TOKENS] (0: a request left out)."""
    if isinstance(value, str):
        text = value.strip()
        value = int(text) if text.isascii() and text.isdigit() and len(text) <= 12 else text[:40]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS:
        raise ValueError(f"{where} must be an integer in [0, {MAX_TOKENS:,}], got {value!r}")
    return int(value)


def _seconds(value: object, where: str, most: float = 1e12) -> float:
    """A time, at most ``most`` (a ``timestamp`` may be epoch milliseconds, up to 1e13)."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"{where} must be a number of seconds, got {value[:40]!r}") from None
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not -1.0 < value <= most:
        raise ValueError(f"{where} must be a number in (-1, {f'{most:.0e}'.replace('+', '')}], got {value!r}")
    return float(value)


def _date(value: str, where: str) -> float:
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(
            f"{where} must be a date and time such as 2023-11-16 18:15:46.68, got {value[:40]!r}"
        ) from None
    return moment.replace(tzinfo=moment.tzinfo or UTC).timestamp()


def _json_row(raw: bytes, where: str) -> tuple[float, int, int, bool]:
    """(arrival, prompt, output, whether the arrival is a ``timestamp``, seconds or milliseconds)."""
    try:
        row = strict_json(raw.removeprefix(b"\xef\xbb\xbf"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{where}: not JSON ({str(exc)[:80]})") from None
    except RecursionError:
        raise ValueError(f"{where}: not JSON (nested too deep)") from None
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected an object with arrival, prompt and output tokens")
    key = _key(row, _TIME_KEYS, where)
    t = _seconds(row[key], f"{where}: {key}", 1e13 if key == "timestamp" else 1e12)
    p = _key(row, _PROMPT_KEYS, where)
    o = _key(row, _OUTPUT_KEYS, where)
    return t, _tokens(row[p], f"{where}: {p}"), _tokens(row[o], f"{where}: {o}"), key == "timestamp"


def _key(row: dict, keys: tuple[str, ...], where: str) -> str:
    for key in keys:
        if key in row:
            return key
    raise ValueError(f"{where}: missing {' or '.join(keys)}")


def _csv_parser(header: bytes, where: str):
    """The row reader of a CSV trace whose header is ``header``, and whether its arrivals are
    ``timestamp``s (seconds, or milliseconds)."""
    names = _cells(header, where)
    try:
        time = next(n for n in names if n in _CSV_TIMES)
        prompt = next(n for n in names if n in _CSV_PROMPTS)
        output = next(n for n in names if n in _CSV_OUTPUTS)
    except StopIteration:
        raise ValueError(
            f"{where}: neither a JSON object (a JSONL trace) nor a CSV header naming an arrival column "
            f"({', '.join(_CSV_TIMES)}), a prompt column "
            f"({', '.join(_CSV_PROMPTS)}) and an output column ({', '.join(_CSV_OUTPUTS)}); "
            f"got {', '.join(names)[:200]}"
        ) from None
    at = {n: i for i, n in reversed(list(enumerate(names)))}
    kind = _CSV_TIMES[time]

    def parse(raw: bytes, where: str) -> tuple[float, int, int, bool]:
        cells = _cells(raw, where)
        if len(cells) < len(names):
            raise ValueError(f"{where}: {len(cells)} columns where the header has {len(names)}")
        value = cells[at[time]]
        if kind == "date":
            t = _date(value, f"{where}: {time}")
        else:
            t = _seconds(value, f"{where}: {time}", 1e13 if kind == "seconds or ms" else 1e12)
        p = _tokens(cells[at[prompt]], f"{where}: {prompt}")
        return t, p, _tokens(cells[at[output]], f"{where}: {output}"), kind == "seconds or ms"

    return parse, kind == "seconds or ms"  # whether its time column may be milliseconds, judged on the whole file


def _cells(raw: bytes, where: str) -> list[str]:
    try:
        text = raw.decode("utf-8-sig")
        return [c.strip() for c in next(csv.reader(io.StringIO(text)), [])]
    except UnicodeDecodeError:
        raise ValueError(f"{where}: not UTF-8 text") from None
    except csv.Error as exc:
        raise ValueError(f"{where}: not a CSV row ({str(exc)[:80]})") from None
