"""``python -m roofline``: the dashboard's numbers on the command line, with ``--json``."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from roofline.cli.args import CliError
from roofline.cli.parser import build_parser
from roofline.datafiles import PROBLEMS, DataError


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # a terminal that cannot show µ gets \xb5, not a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.func(args)
        sys.stdout.flush()
    except (ValueError, DataError, CliError) as exc:  # ResultsError is a ValueError
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (| head): nothing more to say to it
        _silence_stdout()
        return 1
    except OSError as exc:
        # A file or folder the command was given: missing, a folder, not allowed.
        if exc.filename is not None or isinstance(exc, FileNotFoundError | IsADirectoryError | PermissionError):
            where = f"{exc.filename}: {exc.strerror or exc}" if exc.filename is not None else str(exc)
            print(f"error: {where}", file=sys.stderr)
            return 2
        _silence_stdout()  # stdout cannot be written (a full disk, /dev/full)
        print(f"error: cannot write the output ({exc.strerror or exc})", file=sys.stderr)
        return 2
    finally:
        for problem in PROBLEMS:  # bad data files were skipped; say which and why
            print(f"warning: {problem}", file=sys.stderr)
    return 0


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


__all__ = ["CliError", "build_parser", "main"]
