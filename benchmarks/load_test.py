"""Ten people at once: a bounded, local load test of the dashboard.

Starts `streamlit run app.py` from a checkout, opens N browser sessions (headless Chromium) on
the Which hardware? page with a large request, and has every session move the same what-if
slider a few times, all at once. For each change it times the browser from the key press to the
moment the page shows the new what-if time, and prints the median and the slowest; and the
server's CPU time per update (the browsers run on the same machine, so on a small one their
rendering is part of the wait).

    python benchmarks/load_test.py                      # this checkout, 10 sessions, 4 changes each
    python benchmarks/load_test.py --repo /tmp/old --sessions 10 --changes 4

Needs playwright and Chromium at /usr/bin/chromium (as the browser tests do).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
# A large request: 405B over a long prompt and output, every device in the database ranked.
PATH = "/advisor?model=llama-3.1-405b&phase=request&batch=32&seq=8192&output=1024&tp=8&x_memory=1.0"
WHAT_IF_TIME = '[data-testid="stMetricValue"]'


def _serve(repo: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.headless=true",
            f"--server.port={port}",
            "--browser.gatherUsageStats=false",
            "--server.fileWatcherType=none",
        ],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(600):
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                return proc
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise SystemExit("the dashboard did not start")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _session(
    url: str,
    changes: int,
    ready: threading.Barrier,
    barrier: threading.Barrier,
    out: list[float],
    errors: list[str],
) -> None:
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            page.wait_for_selector(WHAT_IF_TIME, timeout=180_000)
            page.wait_for_load_state("networkidle")
            thumb = page.locator('[data-testid="stSlider"]').filter(has_text="Memory bandwidth").get_by_role("slider")
            ready.wait(timeout=600)
            for i in range(changes):
                before = page.locator(WHAT_IF_TIME).first.inner_text()
                barrier.wait(timeout=600)
                start = time.perf_counter()
                thumb.focus()
                page.keyboard.press("ArrowRight" if i % 2 == 0 else "ArrowLeft")
                page.wait_for_function(
                    "([sel, before]) => { const e = document.querySelector(sel); return e && e.innerText !== before; }",
                    arg=[WHAT_IF_TIME, before],
                    timeout=120_000,
                )
                out.append(time.perf_counter() - start)
            browser.close()
    except Exception as exc:  # a session that fails is reported, and the barrier released for the rest
        errors.append(f"{type(exc).__name__}: {exc}"[:300])
        barrier.abort()
        ready.abort()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout to serve (default: this one)")
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--changes", type=int, default=4)
    parser.add_argument("--port", type=int, default=8655)
    args = parser.parse_args()
    proc = _serve(args.repo, args.port)
    try:
        times: list[float] = []
        errors: list[str] = []
        barrier = threading.Barrier(args.sessions)
        ready = threading.Barrier(args.sessions + 1)  # every session loaded: the changes start
        url = f"http://127.0.0.1:{args.port}{PATH}"
        threads = [
            threading.Thread(target=_session, args=(url, args.changes, ready, barrier, times, errors))
            for _ in range(args.sessions)
        ]
        for t in threads:
            t.start()
        ready.wait(timeout=900)
        cpu_before = _cpu_s(proc.pid)
        for t in threads:
            t.join()
        server_cpu_s = _cpu_s(proc.pid) - cpu_before
    finally:
        proc.terminate()
    print(f"repo {args.repo}: {args.sessions} sessions × {args.changes} slider changes at once, on {PATH}")
    if times:
        print(
            f"update time: median {statistics.median(times):.2f} s, slowest {max(times):.2f} s, "
            f"fastest {min(times):.2f} s ({len(times)} updates)"
        )
        print(
            f"server CPU: {server_cpu_s / len(times):.2f} s per update ({server_cpu_s:.1f} s in all); the rest of "
            "an update's time is the browsers, which share this machine's cores"
        )
    for e in errors:
        print("session failed:", e)


if __name__ == "__main__":
    main()
