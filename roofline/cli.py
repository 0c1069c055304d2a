"""``python -m roofline``: the dashboard's numbers on the command line, with ``--json``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from roofline.api import hardware_summary, matmul_result
from roofline.dtypes import COMPUTE_DTYPES
from roofline.engine import DEFAULT_LAUNCH_OVERHEAD_S, Ceilings
from roofline.format import fmt_bytes, fmt_flops, fmt_seconds, table
from roofline.hardware import DataError, get_hardware, load_hardware


class CliError(Exception):
    """An input error reported as one line on stderr with exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """Reports a usage error as one line (``-h`` still prints the full usage)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {self.prog}: {message}\n")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _emit(args: argparse.Namespace, data: object, text: Callable[[], str]) -> None:
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(text())


def cmd_hardware_list(args: argparse.Namespace) -> None:
    devices = load_hardware(args.hardware_dir)
    data = [hardware_summary(hw) for hw in devices.values()]

    def text() -> str:
        rows = [
            [
                d["id"],
                d["name"],
                _num(d["peak_tflops"].get("bf16")),
                _num(d["peak_tflops"].get("fp8")),
                _num(d["memory_bandwidth_tbps"]),
                _num(d["memory_gb"]),
            ]
            for d in data
        ]
        return table(["id", "name", "bf16 TFLOPS", "fp8 TFLOPS", "TB/s", "GB"], rows)

    _emit(args, data, text)


def _num(value: object) -> str:
    return "unknown" if value is None else f"{value:g}"


def cmd_hardware_show(args: argparse.Namespace) -> None:
    hw = get_hardware(args.id, args.hardware_dir)
    data = hardware_summary(hw)

    def text() -> str:
        link = data["interconnect"]
        lines = [
            f"{hw.name} ({hw.id}), {hw.vendor}, {hw.launch_year}",
            f"memory: {_num(hw.memory_gb)} GB {hw.memory_type or ''} at {hw.memory_bandwidth_tbps:g} TB/s",
            f"last-level cache: {_num(hw.l2_cache_mb)} MB; compute units: {_num(hw.compute_units)}",
            f"TDP: {_num(hw.tdp_w)} W",
            "interconnect: "
            + (
                f"{link['kind']}, {link['bandwidth_gb_per_s']:g} GB/s "
                f"({'both directions' if link['bidirectional'] else 'per direction'})"
                if link
                else "unknown"
            ),
            "dense peaks (ridge point):",
        ]
        for dtype, peak in data["peak_tflops"].items():
            lines.append(f"  {dtype:>5}: {peak:>9g} TFLOPS  (ridge {data['ridge_intensity'][dtype]:.0f} FLOP/B)")
        if hw.notes:
            lines.append(f"notes: {hw.notes}")
        lines.append("sources:")
        lines.extend(f"  - {s.name}: {s.url}" for s in hw.sources)
        return "\n".join(lines)

    _emit(args, data, text)


def ceilings_from_args(args: argparse.Namespace, hardware_id: str | None = None) -> Ceilings:
    hw = get_hardware(hardware_id or args.hardware, args.hardware_dir)
    return Ceilings.from_hardware(hw, launch_overhead_s=args.launch_overhead_us * 1e-6)


def cmd_matmul(args: argparse.Namespace) -> None:
    ceilings = ceilings_from_args(args)
    data = matmul_result(ceilings, args.m, args.n, args.k, args.dtype, args.out_dtype)

    def text() -> str:
        return "\n".join(
            [
                f"GEMM M={args.m} N={args.n} K={args.k} {args.dtype} on {ceilings.name} ({ceilings.source} roofs)",
                f"  FLOPs:      {fmt_flops(data['flops'])}",
                f"  bytes:      {fmt_bytes(data['bytes'])}",
                f"  intensity:  {data['intensity']:.1f} FLOP/B (ridge {data['ridge_intensity']:.1f})",
                f"  time:       {fmt_seconds(data['time_s'])}  "
                f"(compute {fmt_seconds(data['compute_s'])}, memory {fmt_seconds(data['memory_s'])}, "
                f"launch {fmt_seconds(data['overhead_s'])})",
                f"  bound:      {data['bound_label']}",
                f"  attainable: {data['attainable_tflops']:.1f} TFLOPS of {data['peak_tflops']:g} peak",
            ]
        )

    _emit(args, data, text)


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.add_argument(
        "--hardware-dir",
        default=None,
        help="a folder of your own device TOML files (adds to or overrides the shipped ones; "
        "$ROOFLINE_HARDWARE_DIR works too)",
    )


def add_overhead(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--launch-overhead-us",
        type=non_negative_float,
        default=DEFAULT_LAUNCH_OVERHEAD_S * 1e6,
        help="cost of one kernel launch in microseconds (default %(default)g)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m roofline", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    hw = sub.add_parser("hardware", help="the accelerator database")
    hw_sub = hw.add_subparsers(dest="hardware_command", required=True, parser_class=OneLineParser)
    p = hw_sub.add_parser("list", help="all devices")
    add_common(p)
    p.set_defaults(func=cmd_hardware_list)
    p = hw_sub.add_parser("show", help="one device with its sources")
    p.add_argument("id")
    add_common(p)
    p.set_defaults(func=cmd_hardware_show)

    p = sub.add_parser("matmul", help="one GEMM on the roofline")
    p.add_argument("--m", type=positive_int, required=True)
    p.add_argument("--n", type=positive_int, required=True)
    p.add_argument("--k", type=positive_int, required=True)
    p.add_argument("--dtype", default="bf16", choices=COMPUTE_DTYPES)
    p.add_argument("--out-dtype", default=None, choices=COMPUTE_DTYPES)
    p.add_argument("--hardware", default="h100-sxm")
    add_overhead(p)
    add_common(p)
    p.set_defaults(func=cmd_matmul)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except (ValueError, DataError, CliError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
