"""Where a cold dashboard spends the time before its first chart.

Two measurements, each from a fresh process:

- ``browser``: starts `streamlit run app.py` on a free port, waits for its health check, opens
  the page in headless Chromium and times the navigation to the first drawn Plotly chart (cold),
  then a reload (warm). A new server per page, so every page is timed cold.
- ``phases``: in a fresh Python, the server-side steps of a page's first run one by one: the
  imports the page needs, the hardware and model databases, and the page script itself (run
  twice with AppTest: the first run builds and caches, the second shows the warm cost).

    python benchmarks/cold_start.py                      # both, for the Roofline and LLM pages
    python benchmarks/cold_start.py phases --pages llm kv
    python benchmarks/cold_start.py browser --pages roofline
    python benchmarks/cold_start.py floor --pages kv accuracy --rounds 5

``floor`` times each page against the least a page can cost here: a Streamlit app in a temporary
folder, with this project's `.streamlit/config.toml`, that draws a title and one three-point chart
(no sidebar, no widgets, no imports of this project). Both are timed cold, turn about, and the
medians printed with their difference: the part of a page's first chart that its own content
(widgets, tables, the server's imports and computation) costs, apart from Streamlit's boot and
Plotly's script, which every page pays.

Two clocks time the first chart. ``drawn``: the page's own, read in the browser: the first task
after the animation frame in which a chart's trace is in the document and visible (that frame
painted), from the start of the navigation: what a user sees, late rather than early.
``noticed``: when Playwright's wait for that element returns, from the call that starts the
navigation. Playwright checks from the page's main thread, so work the page does after the chart
is on screen (the late widget scripts, a table) delays ``noticed`` by up to half a second where
it does not delay what a user sees; ``drawn`` is the headline.

Needs playwright and Chromium at /usr/bin/chromium for ``browser``. The numbers vary with the
machine's load: compare runs taken one after the other.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-dev-shm-usage",
]
PAGES = {
    "roofline": ("", "views/roofline_page.py"),
    "llm": ("llm", "views/llm_page.py"),
    "kv": ("kv", "views/kv_page.py"),
    "advisor": ("advisor", "views/advisor_page.py"),
    "hardware": ("hardware", "views/hardware_page.py"),
    "training": ("training", "views/training_page.py"),
    "serving": ("serving", "views/serving_page.py"),
    "accuracy": ("accuracy", "views/accuracy_page.py"),
}
# A drawn trace: the blank chart app.py sends first to load Plotly early has none.
CHART = '[data-testid="stPlotlyChart"] .main-svg g.trace'
# Runs in the page before its own scripts (the top frame only): window.__chartDrawnMs is set once
# a chart's trace is in the document and visible in an animation frame, at the first task after that
# frame (its style, layout and paint done, or later where other work came first): ms from the start
# of the navigation. A WebGL trace has no g.trace: a chart counts by its SVG traces (every chart of
# this project has one: a roof, a band, a line).
DRAWN_CLOCK = """
(() => {
  if (window !== window.top) return;
  const visible = (el) => {
    const box = el.getBoundingClientRect();
    return (box.width > 0 || box.height > 0) && el.checkVisibility();
  };
  const poll = () => {
    if (Array.from(document.querySelectorAll(CHART)).some(visible)) {
      setTimeout(() => { window.__chartDrawnMs = performance.now(); }, 0);
    } else {
      requestAnimationFrame(poll);
    }
  };
  requestAnimationFrame(poll);
})();
""".replace("CHART", json.dumps(CHART))

# Run in a fresh interpreter: each step's wall time, in order.
PHASES_SCRIPT = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
laps, t = [], time.perf_counter()
def lap(name):
    global t
    now = time.perf_counter(); laps.append((name, now - t)); t = now
import streamlit; lap("import streamlit")
import numpy, pandas; lap("import numpy, pandas")
import plotly.graph_objects; lap("import plotly")
import pydantic; lap("import pydantic")
import roofline.engine, roofline.workload, roofline.ops, roofline.inference, roofline.kvcache, roofline.api
lap("import roofline (engine, ops, workload)")
import roofline.plots; lap("import roofline.plots")
from roofline.hardware import load_hardware; load_hardware(); lap("load + validate the hardware database")
from roofline.models import load_models; load_models(); lap("load + validate the model database")
from streamlit.testing.v1 import AppTest
at = AppTest.from_file(sys.argv[2], default_timeout=120); at.run(); lap("page script, first run")
at.run(); lap("page script, second run")
print(json.dumps(laps))
"""


def phases(page: str) -> list[tuple[str, float]]:
    out = subprocess.run(
        [sys.executable, "-c", PHASES_SCRIPT, str(ROOT), str(ROOT / PAGES[page][1])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FLOOR_APP = """import plotly.graph_objects as go
import streamlit as st

st.set_page_config(page_title="floor", layout="wide")
st.title("Floor")
st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 3, 2])), width="stretch", theme=None)
"""


def floor_app(into: Path) -> Path:
    """A folder holding the floor app (``FLOOR_APP`` as app.py) and this project's Streamlit
    config; ``browser("floor", folder)`` times it."""
    (into / ".streamlit").mkdir(parents=True, exist_ok=True)
    (into / ".streamlit" / "config.toml").write_text((ROOT / ".streamlit" / "config.toml").read_text())
    (into / "app.py").write_text(FLOOR_APP)
    return into


class Timing(NamedTuple):
    """One cold load, in seconds (``js_mb`` in MB)."""

    healthy_s: float  # server start to its health check
    title_s: float  # navigation to the page's title (the script has started, the frontend is up)
    drawn_s: float  # navigation to the first frame with a chart drawn, on the page's clock
    noticed_s: float  # navigation to Playwright's wait for that chart returning
    warm_drawn_s: float  # the same as drawn_s, after a reload
    js_mb: float  # JavaScript the cold load fetched


def browser(page: str, root: Path = ROOT) -> Timing:
    """Starts a server for ``root``, loads ``page`` cold in a new Chromium, then reloads it."""
    from playwright.sync_api import sync_playwright

    port = free_port()
    t0 = time.perf_counter()
    server = subprocess.Popen(
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
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.05)
        healthy = time.perf_counter() - t0
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            tab = b.new_page(viewport={"width": 1440, "height": 900})
            tab.add_init_script(DRAWN_CLOCK)
            scripts: list[int] = []
            tab.on(
                "response",
                lambda r: scripts.append(int(r.headers.get("content-length", 0))) if r.url.endswith(".js") else None,
            )
            t1 = time.perf_counter()
            tab.goto(f"http://127.0.0.1:{port}/{PAGES[page][0] if page in PAGES else ''}")
            tab.wait_for_selector("h1", timeout=120_000)
            title = time.perf_counter() - t1
            tab.wait_for_selector(CHART, timeout=120_000)
            noticed = time.perf_counter() - t1
            drawn = tab.wait_for_function("window.__chartDrawnMs", timeout=120_000).json_value() / 1e3
            tab.reload()
            warm = tab.wait_for_function("window.__chartDrawnMs", timeout=120_000).json_value() / 1e3
            b.close()
        return Timing(healthy, title, drawn, noticed, warm, sum(scripts) / 1e6)
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="?", choices=["both", "phases", "browser", "floor"], default="both")
    parser.add_argument("--pages", nargs="+", choices=list(PAGES), default=["roofline", "llm"])
    parser.add_argument("--rounds", type=int, default=5, help="floor: samples of each, turn about")
    args = parser.parse_args()
    if args.what == "floor":
        if args.rounds < 1:
            parser.error(f"--rounds must be at least 1, got {args.rounds}")
        floor(args.pages, args.rounds)
        return
    for page in args.pages:
        if args.what in ("both", "phases"):
            print(f"{page}: server-side steps of a first run, fresh process")
            for name, seconds in phases(page):
                print(f"  {name:42s} {seconds * 1e3:7.0f} ms")
        if args.what in ("both", "browser"):
            t = browser(page)
            print(
                f"{page}: server healthy after {t.healthy_s:.2f} s; title {t.title_s:.2f} s, first chart drawn "
                f"{t.drawn_s:.2f} s cold (noticed {t.noticed_s:.2f} s; {t.js_mb:.1f} MB of JavaScript fetched); "
                f"{t.warm_drawn_s:.2f} s after a reload"
            )


def floor(pages: list[str], rounds: int) -> None:
    """Each page's cold first chart against the floor app's, turn about; medians and the gap, on
    both clocks (drawn, the headline; noticed)."""
    import statistics
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        floor_root = floor_app(Path(tmp))
        times: dict[str, list[Timing]] = {page: [] for page in [*pages, "floor"]}
        for i in range(rounds):
            for page in pages:
                pair = [(page, ROOT), ("floor", floor_root)]
                for name, root in pair if i % 2 == 0 else pair[::-1]:
                    times[name].append(browser(name, root))

    def median(name: str, field: str) -> float:
        return statistics.median(getattr(t, field) for t in times[name])

    base, base_noticed = median("floor", "drawn_s"), median("floor", "noticed_s")
    print(
        f"floor (a title and one chart): drawn {base:.2f} s (noticed {base_noticed:.2f} s), "
        f"median of {len(times['floor'])}"
    )
    for page in pages:
        drawn, noticed = median(page, "drawn_s"), median(page, "noticed_s")
        print(
            f"{page:10s} drawn {drawn:.2f} s (+{drawn - base:.2f} s over the floor), noticed {noticed:.2f} s "
            f"(+{noticed - base_noticed:.2f} s)  drawn samples: " + " ".join(f"{t.drawn_s:.2f}" for t in times[page])
        )


if __name__ == "__main__":
    main()
