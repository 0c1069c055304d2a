"""Loading validated TOML data files: one file per record, id equal to the file name.

Each file of a folder is loaded on its own: a bad one (malformed, invalid, not a regular file,
a link out of its folder, too large, not UTF-8, nested too deep) is reported with its name and
the reason, and skipped; the rest load. Reports collect in ``PROBLEMS`` (the command line prints
them on stderr, the Hardware page shows them).
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
import types
import typing
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

MAX_DATA_FILE_BYTES = 1 << 20  # a device or model file is a few KB
MAX_NESTING = 32


class DataError(ValueError):
    """A data file (hardware or model) that cannot be used; the message names file and field."""


MAX_EXACT_INT = 2**53  # every count must be exact in a float64
MAX_TEXT_CHARS = 10_000


def _check_value(value: object, annotation: object, where: str) -> None:
    """Strict checks pydantic's lax mode lets through, applied down into dicts and lists: a
    number is a real number (not ``true``, not ``"80"``, an integer exact in float64), a flag
    is a real boolean, text is valid Unicode of sensible length."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        _check_value(value, args[0], where)
    elif origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        for arg in args:
            if arg is not type(None):
                _check_value(value, arg, where)
                return
    elif annotation in (int, float):
        if isinstance(value, bool):
            raise ValueError(f"{where}expected a number, got a boolean")
        if isinstance(value, str):
            raise ValueError(f"{where}expected a number, got the text {value[:20]!r}")
        if isinstance(value, int) and abs(value) > MAX_EXACT_INT:
            raise ValueError(f"{where}a {len(str(abs(value)))}-digit integer is too large (at most 2^53)")
    elif annotation is bool and not isinstance(value, bool):
        raise ValueError(f"{where}expected true or false, got {str(value)[:20]!r}")
    elif annotation is str and isinstance(value, str):
        if len(value) > MAX_TEXT_CHARS:
            raise ValueError(f"{where}text of {len(value):,} characters is too long (at most {MAX_TEXT_CHARS:,})")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{where}text that is not valid Unicode") from None
    elif origin is dict and isinstance(value, dict) and len(args) == 2:
        for key, item in value.items():
            _check_value(key, args[0], where)
            _check_value(item, args[1], f"{where}[{str(key)[:20]!r}]: ")
    elif origin in (list, tuple) and isinstance(value, list | tuple) and args:
        homogeneous = origin is list or args[-1] is Ellipsis
        for i, item in enumerate(value):
            _check_value(item, args[0] if homogeneous else args[min(i, len(args) - 1)], where)


class DataRecord(BaseModel):
    """Base of every record read from a file, a link or an upload: unknown fields refused,
    numbers finite and real (``true`` is not 1, ``"80"`` is not 80), integers exact, text valid."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _strict_values(cls, value: object, info: ValidationInfo) -> object:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None:
            _check_value(value, field.annotation, "")
        return value


Record = TypeVar("Record", bound=BaseModel)
# Every bad file met so far in this process, as "file: reason" (deduplicated, in order).
PROBLEMS: list[str] = []


def report_problem(problem: str) -> None:
    """Add "file: reason" to ``PROBLEMS`` once."""
    if problem not in PROBLEMS:
        PROBLEMS.append(problem)


def depth(value: object, limit: int = MAX_NESTING) -> int:
    """Nesting depth of parsed TOML, stopping once past ``limit``."""
    stack, deepest = [(value, 1)], 0
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest


def strict_json(text: str | bytes) -> object:
    """``json.loads`` that refuses NaN, Infinity and -Infinity (Python's json takes them, JSON
    does not), with a ValueError naming the constant; callers wrap it with where the text came from."""

    def reject(constant: str) -> None:
        raise ValueError(f"{constant} is not allowed (strict JSON)")

    return json.loads(text, parse_constant=reject)


def shown_path(path: str | Path) -> str:
    """A path as messages show it: one with a newline or another control character quoted with it
    escaped (an error stays on one line), and a 100,000-character one not repeated in full."""
    text = str(path)
    if not text.isprintable():
        text = repr(text)
    return text if len(text) <= 160 else f"{text[:80]}…{text[-40:]} ({len(text):,} characters)"


def read_regular_file(path: str | Path, limit: int, folder: Path | None = None) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, checked before it is opened: a
    FIFO, a device, a folder or a link out of ``folder`` is never read. Errors name the file."""
    path = Path(path)
    name = shown_path(path)
    try:
        info = os.stat(path)  # follows a link: what would be read
    except FileNotFoundError:
        raise DataError(f"{name}: no such file") from None
    except OSError as exc:
        raise DataError(f"{name}: cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise DataError(f"{name}: not a regular file")
    if folder is not None and path.is_symlink():
        target = path.resolve()
        if not target.is_relative_to(folder.resolve()):
            raise DataError(f"{name}: a link out of its folder (to {shown_path(target)}) is not followed")
    if info.st_size > limit:
        raise DataError(f"{name}: {info.st_size:,} bytes is more than this file can hold ({limit:,} at most)")
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise DataError(f"{name}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > limit:  # it grew since it was checked
        raise DataError(f"{name}: more than {limit:,} bytes")
    return data


def read_data_file(path: Path, folder: Path | None = None) -> dict:
    """The TOML table of one data file: a regular file inside ``folder`` once links are
    resolved, at most 1 MiB, UTF-8, nested at most 32 deep."""
    raw = read_regular_file(path, MAX_DATA_FILE_BYTES, folder)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{shown_path(path)}: not UTF-8 (byte {exc.start})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{path}: malformed TOML: {exc}") from None
    except RecursionError:
        raise DataError(f"{path}: nested deeper than {MAX_NESTING} levels") from None
    if depth(data) > MAX_NESTING:
        raise DataError(f"{path}: nested deeper than {MAX_NESTING} levels")
    return data


def format_validation_error(path: Path, error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        field = ".".join(str(p) for p in item["loc"]) or "<file>"
        if item["type"] == "extra_forbidden":
            parts.append(f"unknown field {field!r}")
        elif item["type"] == "missing":
            parts.append(f"missing required field {field!r}")
        else:
            got = repr(item.get("input"))
            got = got if len(got) <= 60 else f"{got[:40]}…({len(got):,} characters)"
            parts.append(f"field {field!r}: {item['msg']} (got {got})")
    return f"{path}: " + "; ".join(parts)


def load_record(path: Path, schema: type[Record], folder: Path | None = None) -> Record:
    """Parse and validate one file; errors name the file and the field."""
    data = read_data_file(path, folder)
    try:
        record = schema.model_validate(data)
    except ValidationError as exc:
        raise DataError(format_validation_error(path, exc)) from None
    if record.id != path.stem:
        raise DataError(f"{path}: field 'id' is {record.id!r} but the file is named {path.stem!r}.toml")
    return record


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name too long for the file system, say
        return False


def search_dirs(shipped: Path, env_var: str, extra_dir: str | Path | None) -> tuple[Path, ...]:
    """Shipped folder, then ``$env_var`` (os.pathsep list), then ``extra_dir``; later ones override."""
    dirs = [shipped]
    for entry in os.environ.get(env_var, "").split(os.pathsep):
        if not entry:
            continue
        if _is_dir(Path(entry)):
            dirs.append(Path(entry))
        else:  # an ambient setting: reported, not fatal (a folder named on the command line is)
            report_problem(f"${env_var}: {shown_path(entry)}: not a folder (ignored)")
    if extra_dir:
        dirs.append(Path(extra_dir))
    return tuple(dirs)


def load_dirs(dirs: tuple[Path, ...], schema: type[Record], kind: str) -> dict[str, Record]:
    """Every valid record of the folders (later folders override earlier ones by id). A folder
    that does not exist is an error (it was named on purpose); a bad file in one is reported in
    ``PROBLEMS`` and skipped."""
    records: dict[str, Record] = {}
    for directory in dirs:
        if not _is_dir(directory):
            what = "is a file, not a folder" if directory.exists() else "does not exist"
            raise DataError(f"{shown_path(directory)}: {kind} folder {what}")
        for path in sorted(directory.glob("*.toml")):
            try:
                record = load_record(path, schema, directory)
            except DataError as exc:
                report_problem(f"{exc} (this {kind} file is skipped)")
                continue
            records[record.id] = record
    return records
