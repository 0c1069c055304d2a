"""The ``tables`` and ``validate`` commands: the engine-measured kernel tables, and the score of
the predictions against public measured serving runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from roofline.cli.args import non_negative_float
from roofline.cli.outputs import require_writable
from roofline.defaults import CLIENT_STARTS
from roofline.format import dumps_strict
from roofline.routing import MOE_ROUTINGS


def add_parsers(sub) -> None:
    tables = sub.add_parser("tables", help="engine-measured kernel tables (aiconfigurator-core's public database)")
    tables_sub = tables.add_subparsers(dest="tables_command", required=True, parser_class=type(tables))
    p = tables_sub.add_parser("list", help="the (device, engine, version) tables available, with their source")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(func=cmd_tables_list)
    p = tables_sub.add_parser(
        "import", help="convert a newer database (default: the newest from PyPI) into your folder"
    )
    p.add_argument("--source", default=None, help="an aiconfigurator-core wheel or unpacked package (offline)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default ~/.local/share/roofline/kernel_db)")
    p.add_argument("--devices", nargs="*", default=None, help="hardware ids to convert (default: all)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(func=cmd_tables_import)

    p = sub.add_parser("validate", help="score predicted TPOT against public measured serving runs")
    p.add_argument("--sample", type=Path, default=None, help="a silicon_sample.csv(.gz) (default: the shipped one)")
    p.add_argument("--csv", type=Path, default=None, help="also write every scored run to this CSV file")
    p.add_argument("--no-tables", action="store_true", help="datasheet roofs only")
    p.add_argument("--explain", metavar="RUN_ID", default=None, help="one run's prediction op by op")
    p.add_argument(
        "--load",
        action="store_true",
        help="score TTFT and TPOT from a closed-loop simulation of each run at its concurrency (slow: see --every)",
    )
    p.add_argument(
        "--kv-dtype",
        choices=["bf16", "fp8"],
        default=None,
        help="with --load: score every run as if its KV cache were in this format (default: each run's own, as its "
        "benchmark script set it where the source documents it, else bf16)",
    )
    p.add_argument(
        "--range-ratio",
        type=float,
        default=None,
        help="with --load: draw every prompt and output length uniformly in [R x, 1 x] the run's, as a benchmark "
        "client's --random-range-ratio R does, 1 for fixed lengths (default: as each run's own client drew them: "
        "InferenceX's runs 0.8, the rest fixed)",
    )
    p.add_argument(
        "--clients",
        choices=CLIENT_STARTS,
        default=None,
        help="with --load: start every run's clients together, or out of step: one every T / C, T a request's mean "
        "time as simulated with them together, so their phases spread evenly over a request, as a long benchmark's "
        "clients drift (default: as each run's own client started them, together)",
    )
    p.add_argument(
        "--moe-routing",
        choices=MOE_ROUTINGS,
        default=None,
        help="score every MoE run as if its tokens were routed so (default auto: each model's own, as the "
        "database prices it; balanced a perfectly even spread); not with --report, which publishes the "
        "default",
    )
    p.add_argument(
        "--launch-overhead-us",
        type=non_negative_float,
        default=None,
        help="with --load: score every run as if the host dispatched each kernel of a step run without a CUDA "
        "graph in this many microseconds (a tiny op's cost; default the measured 10.6, as every prediction uses)",
    )
    p.add_argument(
        "--every",
        type=int,
        default=None,
        help="with --load or --report: simulate every N-th run (default 10 for --load, every run for --report)",
    )
    p.add_argument(
        "--report",
        type=Path,
        default=None,
        metavar="FILE",
        help="write the published accuracy report (both scores, every run; 3 to 20 minutes) that the Accuracy page "
        "shows, e.g. docs/accuracy.json",
    )
    p.add_argument(
        "--memory",
        action="store_true",
        help="score the memory model's KV-cache budget against vLLM's own start-up logs (engine_db)",
    )
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(func=cmd_validate)


def cmd_tables_list(args: argparse.Namespace) -> None:
    from roofline.tables import store

    data = sorted(
        ({k: v for k, v in e.items() if k != "path"} | {"path": e["path"]} for e in store.entries()),
        key=lambda e: (e["device"], e["engine"], e["version"]),
    )
    if args.json:
        print(dumps_strict(data))
        return
    for e in data:
        print(f"{e['device']:<24} {e['engine']:<7} {e['version']:<11} {e['source']} ({e['licence']})  {e['path']}")


def cmd_tables_import(args: argparse.Namespace) -> None:
    from roofline.tables.importer import import_database

    manifest = import_database(args.source, args.out, args.devices)
    total = sum(f["bytes"] for f in manifest["files"])
    if args.json:
        print(dumps_strict(manifest))
        return
    print(f"{len(manifest['files'])} files, {total / 1e6:.1f} MB, from {manifest['source']} ({manifest['licence']})")


def cmd_validate(args: argparse.Namespace) -> None:
    from roofline.validate import load_silicon_sample, validate
    from roofline.validate_explain import explain, render_explain
    from roofline.validate_render import render, write_csv

    assumed = [
        f
        for f, v in (
            ("--kv-dtype", args.kv_dtype),
            ("--range-ratio", args.range_ratio),
            ("--clients", args.clients),
            ("--launch-overhead-us", args.launch_overhead_us),
        )
        if v is not None
    ]
    if args.moe_routing not in (None, "auto") and (args.memory or args.report or args.explain or args.no_tables):
        raise ValueError(
            "--moe-routing: only with the steady score or --load, not with --memory, --report, --explain or "
            "--no-tables (the published report reads each model's own routing; the datasheet routes uniformly)"
        )
    if assumed and (not args.load or args.memory or args.report or args.explain):
        raise ValueError(
            f"{assumed[0]}: only with --load, not with --memory, --report or --explain (the published report "
            "reads each run's own KV format and client, and the measured cost of a kernel's dispatch)"
        )
    if args.explain is not None and (
        conflict := next(
            (
                f
                for f, on in (
                    ("--load", args.load),
                    ("--memory", args.memory),
                    ("--no-tables", args.no_tables),
                    ("--report", args.report),
                    ("--csv", args.csv),
                    ("--every", args.every),
                )
                if on
            ),
            None,
        )
    ):
        raise ValueError(
            f"--explain shows one run's steady prediction on both columns with its TTFT under its load: not with "
            f"{conflict}"
        )
    if args.explain is not None and not args.explain.strip():
        raise ValueError(
            f"--explain: expected a run id (validate --csv FILE lists every scored run's id), got {args.explain!r}"
        )
    if args.range_ratio is not None and not 0.0 < args.range_ratio <= 1.0:
        raise ValueError(f"--range-ratio: expected a number in (0, 1], got {args.range_ratio}")
    us = args.launch_overhead_us
    if us is not None and us > 1e6:
        raise ValueError(f"--launch-overhead-us: expected a number of microseconds in [0, 1000000], got {us}")
    require_writable("--csv", args.csv)  # before minutes of scoring, not after
    require_writable("--report", args.report)
    if args.memory:
        from roofline.startup_logs import render as render_memory
        from roofline.startup_logs import score as score_memory

        report = score_memory()
        print(dumps_strict(report) if args.json else render_memory(report))
        return
    if args.every is not None and not 1 <= args.every <= 100_000:
        raise ValueError(f"--every: expected an integer in [1, 100000], got {args.every}")
    if args.report:
        from roofline.accuracy import build_report, headline, write_report

        report = build_report(args.sample, args.every or 1)
        write_report(args.report, report)
        print(dumps_strict(headline(report)) if args.json else f"wrote {args.report}")
        return
    if args.load:
        from roofline.validate_load import LOAD_FIELDS, render_load, score_load

        report = score_load(
            load_silicon_sample(args.sample),
            args.every or 10,
            args.kv_dtype,
            args.range_ratio,
            args.moe_routing or "auto",
            None if us is None else us * 1e-6,
            args.clients,
        )
        if args.csv:
            write_csv(report["results"], args.csv, LOAD_FIELDS)
        print(dumps_strict(report) if args.json else render_load(report))
        return
    if args.explain:
        result = explain(args.explain, args.sample)
        print(dumps_strict(result) if args.json else render_explain(result))
        return
    report = validate(args.sample, tables=not args.no_tables, moe_routing=args.moe_routing)
    if args.csv:
        write_csv(report["results"], args.csv)
    print(dumps_strict(report) if args.json else render(report))
