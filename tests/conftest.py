"""Shared fixtures (a running dashboard and a browser for the browser tests) and the order in which
the test workers take the files."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Under pytest-xdist every worker (and every child it starts: a measuring process, the CLI, the
# dashboard) shares the machine's cores with the other workers. A math library that starts a thread
# per core in each of them oversubscribes the cores, and its threads spin waiting for one another:
# on two cores with two workers the in-process measurement suite took 2.7 times as long. Each
# worker gets its share of the cores (unless OMP_NUM_THREADS is set already). Set here, before any
# test module imports torch or numpy.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-dev-shm-usage",
]


# The files that take longest, slowest first (as timed on a 2-core machine with two workers). Under
# ``-n auto --dist loadfile`` each file runs whole on one worker, handed out in the order below: the
# long files start first and the many short ones fill in behind them, so the two workers finish
# together. (pytest-xdist's own order, most tests first, handed these one- to three-test files out
# last, and the run ended with one worker alone on them.)
SLOWEST_FILES = [
    "tests/test_measure.py",
    "tests/test_browser.py",
    "tests/test_training_real.py",
    "tests/test_browser_phone.py",
    "tests/test_fuzz_pages.py",
    "tests/test_pages.py",
    "tests/test_hardening.py",
    "tests/test_training_real_mixed.py",
    "tests/test_page_views.py",
    "tests/test_serving_load_page.py",
    "tests/test_loading_real.py",
    "tests/test_fuzz.py",
    "tests/test_cli.py",
    "tests/test_profile_package.py",
    "tests/test_training_cases.py",
    "tests/test_serving.py",
    "tests/test_readme.py",
    "tests/test_profile_distributed.py",
]


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: keep the order set below
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    """The slowest files first, in the order of ``SLOWEST_FILES``; the rest after them as collected."""
    rank = {name: i for i, name in enumerate(SLOWEST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def app_url():
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.headless=true",
            "--server.address=127.0.0.1",
            f"--server.port={port}",
            "--browser.gatherUsageStats=false",
            "--server.fileWatcherType=none",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the dashboard did not start within 60 s")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing in CI; .ci/run must install Debian's chromium")
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()
