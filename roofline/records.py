"""Device and model records as text: a TOML file the loaders accept unchanged, and a compact,
URL-safe encoding so a custom record travels in a share link.

Both directions validate with the same pydantic schema as the data files; decoding is bounded
(the encoded text, the inflated JSON and its nesting) so a hostile link cannot exhaust memory.
"""

from __future__ import annotations

import base64
import json
import math
import zlib
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from roofline.datafiles import DataError, format_validation_error, strict_json

Record = TypeVar("Record", bound=BaseModel)
MAX_ENCODED_CHARS = 8192
MAX_JSON_BYTES = 64 * 1024


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} cannot be written to a data file")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[\n" + "".join(f"  {_toml_value(v)},\n" for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def to_toml(record: BaseModel, header: str = "") -> str:
    """The record as a data file: scalars and lists first, then one table per nested record."""
    data = record.model_dump(exclude_none=True, by_alias=True)
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{k} = {_toml_value(v)}" for k, v in data.items() if k not in tables]
    for name, table in tables.items():
        lines += ["", f"[{name}]"] + [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def encode_record(record: BaseModel) -> str:
    """Compact, URL-safe text: the record's JSON, deflated, base64url without padding."""
    raw = record.model_dump_json(exclude_none=True, by_alias=True).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def decode_record(text: str, schema: type[Record], what: str) -> Record:
    """The record a share link carries; a clear error for anything that is not one."""
    if len(text) > MAX_ENCODED_CHARS:
        raise DataError(
            f"{what}: {len(text):,} characters is longer than a record's encoding (limit {MAX_ENCODED_CHARS:,})"
        )
    try:
        packed = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        inflater = zlib.decompressobj()
        raw = inflater.decompress(packed, MAX_JSON_BYTES)
        if inflater.unconsumed_tail:
            raise DataError(f"{what}: the record inflates past {MAX_JSON_BYTES:,} bytes")

        data = strict_json(raw)
    except (ValueError, zlib.error, RecursionError) as exc:
        raise DataError(f"{what}: not a record this dashboard wrote ({str(exc)[:80]})") from None
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise DataError(format_validation_error(what, exc)) from None
