"""A reproducible hostile run over every entry point: the command line (in-process and as real
subprocesses), config.json files, hardware/model TOML folders, results and collectives files,
share-link records and every page's URL parameters.

The rule measured: every input gives a valid result or a clean error naming the field; never a
traceback, an uncaught page exception, a hang, NaN/Infinity in JSON, or an accepted input that
takes over 5 s or 1 GB.

    python -m benchmarks.hostile_run                          # 10,000 cases, seed 0
    python -m benchmarks.hostile_run --cases 2000 --seed 1 --only cli,pages --json out.json
    python -m benchmarks.hostile_run --repro config-00042     # rerun one case, uncaptured

Cases are generated from the seed alone (case ``entry-NNNNN`` is the same whatever ``--cases``
is), so a failing id printed in the table reproduces with ``--repro ID`` (same ``--seed``): its
files are written to ``$TMPDIR/hostile-repro/ID/`` and the command is run with its traceback shown.

Every case runs in a worker process under a 4 GB address-space limit, one case at a time, with
a watchdog that kills the worker when a case passes its timeout (a hang) and starts another.
Wall time is per case; memory is the case's peak over the worker's memory before it (the larger
of tracemalloc's peak and the resident set's high-water mark, which is reset per case).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.hostile.cases import make_case, plan
from benchmarks.hostile.cli_cases import BASELINES, cli_commands
from benchmarks.hostile.data_cases import page_keys
from benchmarks.hostile.report import render, repro, summarize
from benchmarks.hostile.values import ENTRIES, FAIL_CLASSES, FLAG_CLASSES
from benchmarks.hostile.workers import execute


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hostile_run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases in all (default 10,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=",".join(ENTRIES), help="entry points, comma-separated: " + ",".join(ENTRIES))
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--json", default=None, metavar="FILE", help="write the summary and every failing input here")
    parser.add_argument("--examples", type=int, default=5, help="failing inputs listed per class (default 5)")
    parser.add_argument(
        "--tracemalloc", action="store_true", help="also trace Python's allocations per case (4x slower)"
    )
    parser.add_argument("--repro", default=None, metavar="ID", help="rerun one case (e.g. config-00042) uncaptured")
    args = parser.parse_args(argv)
    only = [e.strip() for e in args.only.split(",") if e.strip()]
    unknown = [e for e in only if e not in ENTRIES]
    if unknown:
        parser.error(f"--only: unknown {', '.join(unknown)} (known: {', '.join(ENTRIES)})")
    commands = cli_commands()
    missing = sorted(set(commands) - set(BASELINES))
    if missing:
        print(f"note: no baseline for {', '.join(missing)}: its cases start from the bare command", file=sys.stderr)
    pages = page_keys()
    if args.repro:
        entry, _, index = args.repro.rpartition("-")
        if entry not in ENTRIES or not index.isdigit():
            parser.error(f"--repro: expected ENTRY-NNNNN, got {args.repro!r}")
        return repro(make_case(entry, int(index), args.seed, commands, pages))
    counts = plan(args.cases, only)
    # the workers make each case from (entry, index, seed): nothing large crosses the pipes
    cases = [{"entry": e, "index": i, "seed": args.seed, "id": f"{e}-{i:05d}"} for e in only for i in range(counts[e])]
    print(f"{len(cases):,} cases: " + ", ".join(f"{e} {n:,}" for e, n in counts.items()), file=sys.stderr)
    t0 = time.perf_counter()
    results = execute(cases, args.jobs, progress=True, tracing=args.tracemalloc)
    wall = time.perf_counter() - t0
    summary = summarize(cases, results, lambda t: make_case(t["entry"], t["index"], t["seed"], commands, pages))
    print(render(summary, args.examples, wall, args.seed))
    if args.json:
        document = {
            "seed": args.seed,
            "cases": len(cases),
            "wall_s": wall,
            "entries": {
                name: {k: (dict(v) if isinstance(v, defaultdict) else v) for k, v in s.items()}
                for name, s in summary.items()
            },
        }
        Path(args.json).write_text(json.dumps(document, indent=1, default=str))
    failed = sum(s[c] for s in summary.values() for c in (*FAIL_CLASSES, *FLAG_CLASSES))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
