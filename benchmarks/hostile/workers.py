"""Worker processes: one case at a time under a memory limit, with a watchdog for hangs."""

from __future__ import annotations

import contextlib
import os
import resource
import shlex
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.hostile.cases import _stub_measurements, make_case
from benchmarks.hostile.cli_cases import cli_commands
from benchmarks.hostile.data_cases import page_keys
from benchmarks.hostile.runners import Meter, run_case
from benchmarks.hostile.values import AS_LIMIT, DEFAULT_TIMEOUT, RECYCLE, ROOT, TIMEOUTS, _short


def worker_main(conn, scratch: str, tracing: bool = False) -> None:
    """One worker: a 4 GB address space, cases one at a time from the pipe."""
    if tracing:
        import tracemalloc

        tracemalloc.start(1)
        Meter.tracing = True
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
    for key in [k for k in os.environ if k.startswith("ROOFLINE_")]:
        del os.environ[key]
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    _stub_measurements()
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)
    generated = None  # the parser's commands and the pages' keys, read once: cases are made here, not sent
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        task, timeout = message
        try:
            if generated is None:
                generated = (cli_commands(), page_keys())
            case = make_case(task["entry"], task["index"], task["seed"], *generated)
            result = run_case(case, Path(scratch), timeout)
            result["input"] = _show_input(case)
        except BaseException as exc:  # noqa: BLE001 - the harness's own fault, reported as such
            result = {
                "outcome": "crash",
                "message": f"harness: {type(exc).__name__}: {str(exc)[:150]}",
                "wall": 0.0,
                "mb": 0.0,
            }
        conn.send(result)


# ==== the dispatcher =============================================================================
class Slot:
    def __init__(self, ctx, scratch: Path, tracing: bool) -> None:
        self.ctx, self.scratch, self.tracing = ctx, scratch, tracing
        self.proc = None
        self.used = 0

    def start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=worker_main, args=(child, str(self.scratch), self.tracing), daemon=True)
        self.proc.start()
        child.close()
        self.used = 0

    def stop(self, kill: bool = False) -> None:
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            with contextlib.suppress(OSError, BrokenPipeError):
                self.conn.send(None)
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self.proc = None

    def run(self, case: dict, timeout: float) -> dict:
        if self.proc is None or self.used >= RECYCLE:
            self.stop()
            self.start()
        self.used += 1
        t0 = time.perf_counter()
        try:
            self.conn.send((case, timeout))
            # the worker's own start (imports) is not the case's fault: allow for it generously
            if self.conn.poll(timeout + (30 if self.used == 1 else 10)):
                return self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            if self.proc is not None:
                self.proc.join(2)
            code = self.proc.exitcode if self.proc else None
            self.stop(kill=True)
            return {
                "outcome": "crash",
                "message": f"worker died (exit {code})",
                "wall": time.perf_counter() - t0,
                "mb": 0.0,
            }
        self.stop(kill=True)
        return {
            "outcome": "hang",
            "message": f"no answer in {timeout:.0f} s",
            "wall": time.perf_counter() - t0,
            "mb": 0.0,
        }


def execute(cases: list[dict], jobs: int, progress: bool, tracing: bool = False) -> list[dict]:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    scratch = Path(tempfile.mkdtemp(prefix="hostile-"))
    results: list[dict | None] = [None] * len(cases)
    # page cases first (slow, so they spread over the workers), then the rest in order
    order = sorted(range(len(cases)), key=lambda i: cases[i]["entry"] != "pages")
    lock = threading.Lock()
    position = [0]
    done = [0]
    t_start = time.perf_counter()

    def loop() -> None:
        slot = Slot(ctx, scratch, tracing)
        try:
            while True:
                with lock:
                    if position[0] >= len(order):
                        return
                    i = order[position[0]]
                    position[0] += 1
                case = cases[i]
                timeout = TIMEOUTS.get(case["entry"], DEFAULT_TIMEOUT)
                results[i] = slot.run(case, timeout)
                with lock:
                    done[0] += 1
                    if progress and (done[0] % 250 == 0 or done[0] == len(cases)):
                        print(
                            f"  {done[0]:,}/{len(cases):,} cases, {time.perf_counter() - t_start:.0f} s",
                            file=sys.stderr,
                            flush=True,
                        )
        finally:
            slot.stop()

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shutil.rmtree(scratch, ignore_errors=True)
    return results  # type: ignore[return-value]


# ==== the report =================================================================================


def _show_input(case: dict) -> str:
    if case["mode"] in ("cli", "subprocess"):
        args = " ".join(shlex.quote(_short(a, 50)) for a in case["argv"])
        return f"python -m roofline {args}  [{_short(case['desc'], 160)}]"
    return _short(case["desc"], 220)
