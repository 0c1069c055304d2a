"""Start-up of the command line and the dashboard against another revision, in one run.

Both trees are timed turn about, round after round, so the machine's load falls on both alike;
the ratio of the medians is the figure (this tree over the other one):

- ``--help``: wall time of ``python -m roofline --help`` in a fresh process;
- ``dashboard``: ``streamlit run app.py`` to its health check, and to the Roofline page's first
  drawn chart in a cold headless Chromium (``benchmarks/cold_start.py``'s browser timing, on
  the page's clock: the first frame with the chart drawn).

    git worktree add --detach /tmp/base 80bba93        # the tree to compare with
    python -m benchmarks.startup --base /tmp/base --rounds 5
    python -m benchmarks.startup --base /tmp/base --rounds 5 --pages roofline llm kv advisor hardware

Needs playwright and Chromium at /usr/bin/chromium for the dashboard timing (``--no-browser``
times the command line only).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.cold_start import PAGES, browser

ROOT = Path(__file__).resolve().parent.parent


def cli_help_s(root: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(root))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "roofline", "--help"], cwd=root, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="the other tree (a git worktree)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-browser", action="store_true", help="time the command line only")
    parser.add_argument(
        "--pages", nargs="+", choices=sorted(PAGES), default=["roofline"], help="pages whose first chart is timed"
    )
    args = parser.parse_args(argv)
    if not (args.base / "app.py").is_file():
        parser.error(f"--base: {args.base} holds no app.py (give a worktree of this repository)")
    trees = {"this tree": ROOT, "base": args.base.resolve()}
    times: dict[tuple[str, str], list[float]] = {}
    for round_ in range(args.rounds):
        for name, root in trees.items() if round_ % 2 == 0 else reversed(trees.items()):
            times.setdefault((name, "--help"), []).append(cli_help_s(root))
            if not args.no_browser:
                for page in args.pages:
                    timing = browser(page, root)
                    times.setdefault((name, "server healthy"), []).append(timing.healthy_s)
                    times.setdefault((name, f"{page} first chart"), []).append(timing.drawn_s)
    print(f"median of {args.rounds} rounds, turn about; base = {args.base}")
    print(f"{'':22s} {'this tree s':>12s} {'base s':>8s} {'ratio':>6s}")
    for what in ("--help", "server healthy", *(f"{page} first chart" for page in args.pages)):
        if ("base", what) not in times:
            continue
        here, base = statistics.median(times[("this tree", what)]), statistics.median(times[("base", what)])
        print(f"{what:22s} {here:12.2f} {base:8.2f} {here / base:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
