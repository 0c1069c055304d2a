"""Running one case: its files written, the entry point called, the outcome classified and measured."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

from benchmarks.hostile.cases import _WouldMeasure
from benchmarks.hostile.cli_cases import BASELINES
from benchmarks.hostile.data_cases import EXAMPLES
from benchmarks.hostile.values import AS_LIMIT, ROOT


def materialize(case: dict, folder: Path) -> None:
    for spec in case.get("files", []):
        path = folder / spec["name"]
        path.parent.mkdir(parents=True, exist_ok=True)
        kind = spec["kind"]
        if kind == "text":
            path.write_text(spec["text"], encoding="utf-8", errors="surrogatepass")
        elif kind == "bytes":
            path.write_bytes(base64.b64decode(spec["b64"]))
        elif kind == "big":
            with open(path, "w", encoding="utf-8") as f:
                f.write(spec["prefix"])
                chunk = spec["char"] * 2**20
                for _ in range(spec["pad"] // 2**20):
                    f.write(chunk)
                f.write(spec["char"] * (spec["pad"] % 2**20))
                f.write(spec["suffix"])
        elif kind == "dir":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "zero_link":
            path.symlink_to("/dev/zero")
        elif kind == "outside_link":
            path.symlink_to("/etc/passwd")
        elif kind == "dangling":
            path.symlink_to(folder / "nowhere")
        elif kind == "missing":
            pass


def _argv(case: dict, folder: Path) -> list[str]:
    return [a.replace("@@", str(folder)) for a in case["argv"]]


def _strict_json(text: str) -> str | None:
    """None when the text is strict JSON; else what is wrong."""

    def refuse(constant):
        raise ValueError(f"{constant} in JSON output")

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError as exc:
        return str(exc)[:120]
    return None


def classify_cli(argv: list[str], code, out: str, err: str) -> tuple[str, str]:
    if "Traceback" in err:
        lines = [line for line in err.strip().splitlines() if line.strip()]
        return "traceback", lines[-1][:200] if lines else "Traceback"
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning:")]
    if code == 0:
        if "--json" in argv and "-h" not in argv and "--help" not in argv and out.strip():
            problem = _strict_json(out)
            if problem:
                return "nan_json", problem
        return "valid", ""
    if code == 2 and len(lines) == 1 and lines[0].startswith("error:"):
        return "clean_error", lines[0][:200]
    if code == 1 and not lines:  # a closed pipe ends quietly
        return "valid", "closed pipe"
    return "unclean_error", f"exit {code}: " + (" | ".join(lines)[:200] or "(no message)")


class Meter:
    """Wall time and the peak memory a case adds over the worker's memory before it: the rise of
    the resident set's high-water mark (reset per case through /proc/self/clear_refs), and with
    ``--tracemalloc`` also the peak of Python's traced allocations (exact, but 4x slower)."""

    tracing = False

    def __init__(self) -> None:
        import tracemalloc

        self.tracemalloc = tracemalloc
        self.clear_refs = os.path.exists("/proc/self/clear_refs")

    @staticmethod
    def _status(field: str) -> float:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) / 1024
        return 0.0

    def __enter__(self):
        if self.tracing:
            self.tracemalloc.reset_peak()
            self.traced0 = self.tracemalloc.get_traced_memory()[0]
        reset = False
        if self.clear_refs:
            with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
                f.write("5")
                reset = True
        self.rss0 = self._status("VmRSS:") if reset else self._status("VmHWM:")
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.t0
        rss = self._status("VmHWM:") - self.rss0
        traced = (self.tracemalloc.get_traced_memory()[1] - self.traced0) / 2**20 if self.tracing else 0.0
        self.mb = max(traced, rss, 0.0)
        return False


def run_cli_inprocess(case: dict, folder: Path) -> dict:
    from roofline.cli import main
    from roofline.datafiles import PROBLEMS

    argv = _argv(case, folder)
    PROBLEMS.clear()
    out, err = io.StringIO(), io.StringIO()
    outcome = None
    with Meter() as meter:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
            except _WouldMeasure:
                code = 0
            except MemoryError:
                outcome = ("memory_error", "MemoryError")
            except RecursionError as exc:
                outcome = ("traceback", f"RecursionError: {str(exc)[:150]}")
            except BaseException as exc:  # noqa: BLE001 - anything escaping main is the finding
                if isinstance(exc, KeyboardInterrupt):
                    raise
                tb = traceback.extract_tb(exc.__traceback__)
                where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
                outcome = ("traceback", f"{type(exc).__name__}: {str(exc)[:150]}{where}")
    PROBLEMS.clear()
    if outcome is None:
        outcome = classify_cli(argv, code, out.getvalue(), err.getvalue())
    return {"outcome": outcome[0], "message": outcome[1], "wall": meter.wall, "mb": meter.mb}


def _limit_child() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
    os.setsid()


def run_subprocess(case: dict, folder: Path, timeout: float) -> dict:
    argv = _argv(case, folder)
    mode = case.get("stdout", "pipe")
    out_path, err_path = folder / "_stdout", folder / "_stderr"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROOFLINE_")}
    env["PYTHONPATH"] = str(ROOT)
    with open(err_path, "wb") as err_file:
        if mode == "full":
            stdout = open("/dev/full", "wb")
        elif mode == "closed":
            r, w = os.pipe()
            os.close(r)
            stdout = os.fdopen(w, "wb")
        else:
            stdout = open(out_path, "wb")
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "roofline", *argv],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=err_file,
                env=env,
                preexec_fn=_limit_child,
            )
        finally:
            stdout.close()
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = 0  # reaped here: keep Popen from waiting again
        wall = time.perf_counter() - t0
    mb = usage.ru_maxrss / 1024
    err = err_path.read_text(errors="replace")
    out = out_path.read_text(errors="replace") if mode == "pipe" else ""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGKILL and wall >= timeout:
            return {"outcome": "hang", "message": f"killed after {timeout:.0f} s", "wall": wall, "mb": mb}
        return {"outcome": "crash", "message": f"killed by signal {sig}", "wall": wall, "mb": mb}
    code = os.WEXITSTATUS(status)
    if "MemoryError" in err:
        return {"outcome": "memory_error", "message": "MemoryError", "wall": wall, "mb": mb}
    # a closed pipe must end quietly (exit 1, nothing said); /dev/full is a one-line error
    outcome, message = classify_cli(argv, code, out, err)
    return {"outcome": outcome, "message": message, "wall": wall, "mb": mb}


def run_parse_results(case: dict, folder: Path) -> dict:
    from roofline.measure.schema import ResultsError, parse_results

    path = folder / "results.json"
    try:
        data = path.read_bytes() if path.is_file() else b""
    except OSError:
        data = b""
    if not path.is_file():
        return {"outcome": "skip", "message": "not a file: the CLI cases cover it", "wall": 0.0, "mb": 0.0}
    text = data.decode("utf-8", errors="surrogateescape")
    outcome = ("valid", "")
    with Meter() as meter:
        try:
            results = parse_results(text, "upload.json")
            problem = _strict_json(results.to_json())
            if problem:
                outcome = ("nan_json", problem)
        except ResultsError as exc:
            outcome = (
                ("clean_error", str(exc).splitlines()[0][:200])
                if "upload.json" in str(exc)
                else ("unclean_error", str(exc)[:200])
            )
        except MemoryError:
            outcome = ("memory_error", "MemoryError")
        except Exception as exc:  # noqa: BLE001
            outcome = ("traceback", f"{type(exc).__name__}: {str(exc)[:150]}")
    return {"outcome": outcome[0], "message": outcome[1], "wall": meter.wall, "mb": meter.mb}


def run_decode(case: dict) -> dict:
    from roofline.datafiles import DataError
    from roofline.hardware import Hardware
    from roofline.models import ModelConfig
    from roofline.records import decode_record

    schema = ModelConfig if case["param"] == "cmodel" else Hardware
    what = f"URL parameter `{case['param']}`"
    outcome = ("valid", "")
    with Meter() as meter:
        try:
            record = decode_record(case["text"], schema, what)
            numbers = list(_numbers(record.model_dump()))
            if not all(math.isfinite(n) for n in numbers):
                outcome = ("nan_json", "a decoded record holds a non-finite number")
            else:  # what the pages and `model show` / `hardware show` first make of it
                from roofline.api import hardware_summary, model_summary

                summary = model_summary(record) if schema is ModelConfig else hardware_summary(record)
                problem = _strict_json(json.dumps(summary, default=str))
                if problem:
                    outcome = ("nan_json", f"its summary: {problem}")
        except DataError as exc:
            outcome = (
                ("clean_error", str(exc)[:200]) if case["param"] in str(exc) else ("unclean_error", str(exc)[:200])
            )
        except MemoryError:
            outcome = ("memory_error", "MemoryError")
        except Exception as exc:  # noqa: BLE001
            outcome = ("traceback", f"{type(exc).__name__}: {str(exc)[:150]}")
    return {"outcome": outcome[0], "message": outcome[1], "wall": meter.wall, "mb": meter.mb}


def _numbers(value: object):
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield float(value) if abs(value) < 1e308 or isinstance(value, float) else math.inf
    elif isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _numbers(v)


def run_page(case: dict, timeout: float) -> dict:
    from streamlit.testing.v1 import AppTest

    outcome = ("valid", "")
    with Meter() as meter:
        try:
            at = AppTest.from_file(str(ROOT / case["page"]), default_timeout=timeout)
            for key, values in case["params"].items():
                at.query_params[key] = values if len(values) > 1 else values[0]
            at.run()
            if at.exception:
                first = at.exception[0]
                message = (first.message or "").splitlines()[0] if first.message else ""
                outcome = ("uncaught", f"{first.proto.type or 'Exception'}: {message[:160]}")
            else:
                texts = [e.value for e in [*at.warning, *at.error] if isinstance(e.value, str)]
                refused = [t for t in texts if "URL parameter" in t or "cmodel" in t or "cdevice" in t]
                if refused:
                    outcome = ("clean_error", refused[0].splitlines()[0][:200])
        except RuntimeError as exc:
            outcome = (
                ("hang", str(exc)[:160])
                if "timeout" in str(exc).lower() or "timed out" in str(exc).lower()
                else ("uncaught", f"RuntimeError: {str(exc)[:150]}")
            )
        except MemoryError:
            outcome = ("memory_error", "MemoryError")
        except Exception as exc:  # noqa: BLE001
            outcome = ("uncaught", f"{type(exc).__name__}: {str(exc)[:150]}")
    return {"outcome": outcome[0], "message": outcome[1], "wall": meter.wall, "mb": meter.mb}


_WARM: set = set()


def warm_up(case: dict) -> None:
    """Run a plain command, or the page with no parameters, once per worker before timing a case:
    the first import of a page's or a command's modules is not the case's cost."""
    key = case["page"] if case["mode"] == "page" else case["mode"]
    if key in _WARM or case["mode"] in ("subprocess",):
        return
    _WARM.add(key)
    with (
        contextlib.suppress(Exception),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        if case["mode"] == "page":
            from streamlit.testing.v1 import AppTest

            AppTest.from_file(str(ROOT / case["page"]), default_timeout=60).run()
        elif case["mode"] == "cli":
            from roofline.cli import main

            for argv in (["hardware", "list"], ["model", "list"], BASELINES["analyze"]):
                main(argv)
        elif case["mode"] == "parse_results":
            from roofline.measure.schema import parse_results

            parse_results(json.dumps(EXAMPLES["h100-sxm-quick-run.json"]), "warm-up")
        elif case["mode"] == "decode":
            import roofline.records  # noqa: F401


def run_case(case: dict, scratch: Path, timeout: float) -> dict:
    folder = scratch / case["id"]
    if folder.exists():
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    try:
        warm_up(case)
        materialize(case, folder)
        mode = case["mode"]
        if mode == "cli":
            return run_cli_inprocess(case, folder)
        if mode == "subprocess":
            return run_subprocess(case, folder, timeout)
        if mode == "parse_results":
            return run_parse_results(case, folder)
        if mode == "decode":
            return run_decode(case)
        if mode == "page":
            return run_page(case, timeout)
        raise ValueError(mode)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
