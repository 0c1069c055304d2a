"""Loading validated TOML data files: one file per record, id equal to the file name."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError


class DataError(ValueError):
    """A data file (hardware or model) that cannot be used; the message names file and field."""


Record = TypeVar("Record", bound=BaseModel)


def format_validation_error(path: Path, error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        field = ".".join(str(p) for p in item["loc"]) or "<file>"
        if item["type"] == "extra_forbidden":
            parts.append(f"unknown field {field!r}")
        elif item["type"] == "missing":
            parts.append(f"missing required field {field!r}")
        else:
            parts.append(f"field {field!r}: {item['msg']} (got {item.get('input')!r})")
    return f"{path}: " + "; ".join(parts)


def load_record(path: Path, schema: type[Record]) -> Record:
    """Parse and validate one file; errors name the file and the field."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{path}: malformed TOML: {exc}") from None
    try:
        record = schema.model_validate(data)
    except ValidationError as exc:
        raise DataError(format_validation_error(path, exc)) from None
    if record.id != path.stem:
        raise DataError(f"{path}: field 'id' is {record.id!r} but the file is named {path.stem!r}.toml")
    return record


def search_dirs(shipped: Path, env_var: str, extra_dir: str | Path | None) -> tuple[Path, ...]:
    """Shipped folder, then ``$env_var`` (os.pathsep list), then ``extra_dir``; later ones override."""
    dirs = [shipped] + [Path(p) for p in os.environ.get(env_var, "").split(os.pathsep) if p]
    if extra_dir:
        dirs.append(Path(extra_dir))
    return tuple(dirs)


def load_dirs(dirs: tuple[Path, ...], schema: type[Record], kind: str) -> dict[str, Record]:
    records: dict[str, Record] = {}
    for directory in dirs:
        if not directory.is_dir():
            raise DataError(f"{directory}: {kind} folder does not exist")
        for path in sorted(directory.glob("*.toml")):
            record = load_record(path, schema)
            records[record.id] = record
    return records
