"""``python -m roofline``: the dashboard's numbers on the command line, with ``--json``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from roofline.api import hardware_summary, matmul_result, model_summary
from roofline.datafiles import DataError
from roofline.dtypes import COMPUTE_DTYPES
from roofline.engine import DEFAULT_LAUNCH_OVERHEAD_S, Ceilings
from roofline.format import fmt_bytes, fmt_flops, fmt_seconds, table
from roofline.hardware import get_hardware, load_hardware
from roofline.inference import DEFAULT_GRAPH_LAUNCH_OVERHEAD_S, Settings, analyze_request, analyze_step
from roofline.kvcache import DEFAULT_BLOCK_SIZE, DEFAULT_MAX_BATCHED_TOKENS, KVConfig, analyze_kv
from roofline.llm import ACT_DTYPES, ATTENTION_KERNELS, KV_DTYPES, WEIGHT_DTYPES, Precision, StepConfig
from roofline.models import get_model, load_models


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


def cmd_model_list(args: argparse.Namespace) -> None:
    data = [model_summary(m) for m in load_models(args.model_dir).values()]

    def text() -> str:
        rows = [
            [
                d["id"],
                d["name"],
                d["attention"],
                f"{d['params']['total'] / 1e9:.2f}B",
                f"{d['params']['active_per_token'] / 1e9:.2f}B",
                d["num_layers"],
                d["max_context"],
                fmt_bytes(d["kv_bytes_per_token"]["bf16"]),
            ]
            for d in data
        ]
        return table(["id", "name", "attention", "params", "active", "layers", "max ctx", "KV/token (bf16)"], rows)

    _emit(args, data, text)


def cmd_model_show(args: argparse.Namespace) -> None:
    model = get_model(args.id, args.model_dir)
    data = model_summary(model)

    def text() -> str:
        skip = {"params", "kv_bytes_per_token", "sources"}
        lines = [f"{k}: {v}" for k, v in data.items() if k not in skip and v is not None]
        lines.append("params: " + ", ".join(f"{k} {v / 1e9:.3f}B" for k, v in data["params"].items()))
        lines.append(
            "KV bytes per token: " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in data["kv_bytes_per_token"].items())
        )
        lines.extend(f"source: {s['name']}: {s['url']}" for s in data["sources"])
        return "\n".join(lines)

    _emit(args, data, text)


def settings_from_args(args: argparse.Namespace) -> Settings:
    link, latency = None, 10e-6
    if args.collectives:
        from roofline.measure.schema import load_results

        measured = load_results(args.collectives)
        if measured.collectives is None:
            raise CliError(f"{args.collectives}: has no all-reduce measurements (run roofline.measure.collectives)")
        link, latency = measured.collectives.link_bandwidth_bytes_per_s, measured.collectives.latency_s
    return Settings(
        launch_overhead_s=args.launch_overhead_us * 1e-6,
        graph_launch_overhead_s=args.graph_launch_overhead_us * 1e-6,
        cuda_graphs=args.cuda_graphs,
        memory_utilization=args.memory_utilization,
        link_bandwidth_bytes_per_s=link,
        collective_latency_s=latency,
    )


def _llm_inputs(args: argparse.Namespace):
    model = get_model(args.model, args.model_dir)
    hw = get_hardware(args.hardware, args.hardware_dir)
    precision = Precision(weight=args.weight_dtype, act=args.act_dtype, kv=args.kv_dtype)
    hw.peak_flops_per_s(precision.act)  # a clear error where the device lacks the compute dtype
    return model, hw, precision


def cmd_analyze(args: argparse.Namespace) -> None:
    model, hw, precision = _llm_inputs(args)
    step = StepConfig(model, args.phase, args.batch, args.seq_len, precision, args.tp, args.attention)
    data = analyze_step(step, hw, settings_from_args(args))

    def text() -> str:
        rows = [
            [
                r["name"],
                r["count"],
                fmt_flops(r["flops"]),
                fmt_bytes(r["bytes"]),
                "inf" if r["intensity"] is None else f"{r['intensity']:.1f}",
                fmt_seconds(r["time_s"]),
                r["bound"],
            ]
            for r in data["ops"]
        ]
        t, mem = data["total"], data["memory"]
        head = (
            f"{model.name} {args.phase} batch={args.batch} seq_len={args.seq_len} tp={args.tp} on {hw.name} "
            f"(weights {precision.weight}, math {precision.act}, KV {precision.kv})"
        )
        foot = [
            f"step: {fmt_seconds(t['time_s'])}, {t['bound_label']}; {fmt_flops(t['flops'])}, {fmt_bytes(t['bytes'])} "
            f"({t['intensity']:.1f} FLOP/B)",
            f"memory per device: weights {fmt_bytes(mem['weights_bytes'])}, KV {fmt_bytes(mem['kv_cache_bytes'])}, "
            f"activations {fmt_bytes(mem['activation_bytes'])} of {fmt_bytes(mem['capacity_bytes'])} usable: "
            + ("fits" if mem["fits"] else "DOES NOT FIT"),
        ]
        return "\n".join([head, table(["op", "count", "FLOPs", "bytes", "FLOP/B", "time", "bound"], rows), *foot])

    _emit(args, data, text)


def cmd_request(args: argparse.Namespace) -> None:
    model, hw, precision = _llm_inputs(args)
    data = analyze_request(
        model,
        hw,
        args.batch,
        args.prompt_len,
        args.output_len,
        precision,
        args.tp,
        args.attention,
        settings_from_args(args),
    )

    def text() -> str:
        mem = data["memory"]
        return "\n".join(
            [
                f"{model.name} on {hw.name} x{args.tp}: batch {args.batch}, prompt {args.prompt_len}, "
                f"output {args.output_len}",
                f"  TTFT: {fmt_seconds(data['ttft_s'])} (prefill {data['prefill_bound']}-bound)",
                "  TPOT: "
                + (
                    f"{fmt_seconds(data['tpot_s'])} (decode {data['decode_bound']}-bound)"
                    if data["tpot_s"]
                    else "n/a (one output token)"
                ),
                f"  end to end: {fmt_seconds(data['e2e_s'])}",
                f"  tokens/s: {data['tokens_per_s']:,.1f} total, {data['tokens_per_s_per_user']:,.1f} per user",
                f"  MFU: {data['mfu'] * 100:.1f}%",
                f"  memory per device: {fmt_bytes(mem['total_bytes'])} of {fmt_bytes(mem['capacity_bytes'])} usable: "
                + ("fits" if mem["fits"] else "DOES NOT FIT"),
            ]
        )

    _emit(args, data, text)


def cmd_kv(args: argparse.Namespace) -> None:
    model = get_model(args.model, args.model_dir)
    hw = get_hardware(args.hardware, args.hardware_dir)
    cfg = KVConfig(
        model,
        Precision(weight=args.weight_dtype, kv=args.kv_dtype),
        args.tp,
        args.memory_utilization,
        args.block_size,
        args.max_batched_tokens,
    )
    context = args.context or min(8192, model.max_context)
    data = analyze_kv(cfg, hw, args.batch, context)

    def text() -> str:
        lines = [
            f"{model.name} on {hw.name} x{args.tp}, KV {args.kv_dtype}, weights {args.weight_dtype}, "
            f"{args.memory_utilization:g} of memory, blocks of {args.block_size}",
            f"  KV per token: {fmt_bytes(data['kv_bytes_per_token'])} "
            f"({fmt_bytes(data['kv_bytes_per_token_per_layer'])} per layer per device)",
            f"  usable {fmt_bytes(data['capacity_bytes'])} - weights {fmt_bytes(data['weights_bytes'])} - "
            f"workspace {fmt_bytes(data['workspace_bytes'])} = KV budget {fmt_bytes(data['kv_budget_bytes'])}",
        ]
        if "message" in data:
            lines.append(f"  does not fit: {data['message']}")
            return "\n".join(lines)
        crossover = data["kv_crossover_context"]
        lines += [
            f"  at {context} tokens: {fmt_bytes(data['kv_bytes_per_sequence'])} per sequence "
            f"({fmt_bytes(data['paging_waste_bytes'])} paging waste); max batch {data['max_batch']}",
            f"  at batch {args.batch}: max context {data['max_context']}",
            f"  decode reads more KV than weights from {crossover} tokens of context at batch {args.batch}"
            if crossover
            else f"  at batch {args.batch} the KV cache never outweighs the weights",
            "  context -> max batch: " + ", ".join(f"{p['context']}: {p['max_batch']}" for p in data["curve"][::4]),
        ]
        return "\n".join(lines)

    _emit(args, data, text)


def cmd_measure(args: argparse.Namespace) -> None:
    try:
        from roofline.measure.suite import run_suite  # torch is imported here, not before
    except ImportError as exc:
        raise CliError(f"measuring needs PyTorch ({exc}); install it with: pip install torch==2.13.0") from None
    from roofline.measure.schema import save_results

    def progress(fraction: float, message: str) -> None:
        if not args.json:
            print(f"[{fraction * 100:3.0f}%] {message}", file=sys.stderr)

    results = run_suite(device=args.device, quick=args.quick, model_id=args.model, progress=progress)
    if args.out:
        save_results(results, args.out)
    if args.json:
        print(results.to_json())
        return
    c = results.ceilings
    lines = [
        f"{results.device.name} ({results.device.kind}, torch {results.device.torch_version}, {results.device.date})",
        f"  copy bandwidth {c.memory_bandwidth_tbps * 1e3:,.1f} GB/s, read {c.read_bandwidth_tbps * 1e3:,.1f} GB/s",
        "  peak: " + ", ".join(f"{d} {v:,.2f} TFLOP/s" for d, v in c.peak_tflops.items()),
        f"  launch overhead {c.launch_overhead_s * 1e6:.2f} µs"
        + (f", from a CUDA graph {c.graph_launch_overhead_s * 1e6:.2f} µs" if c.graph_launch_overhead_s else ""),
    ]
    rows = [
        [
            op.name,
            fmt_seconds(op.time_s),
            fmt_seconds(op.predicted_time_s),
            f"{op.ratio:.2f}",
            f"{op.achieved_tflops:,.2f}",
            f"{op.achieved_tbps * 1e3:,.1f}",
            fmt_seconds(op.predicted_datasheet_time_s) if op.predicted_datasheet_time_s else "n/a",
        ]
        for op in results.ops
    ]
    lines.append(table(["op", "measured", "predicted", "ratio", "TFLOP/s", "GB/s", "datasheet prediction"], rows))
    if args.out:
        lines.append(f"wrote {args.out}")
    print("\n".join(lines))


def cmd_advise(args: argparse.Namespace) -> None:
    from roofline.advisor import OBJECTIVES, Workload, advise

    if args.objective not in OBJECTIVES:
        raise CliError(f"--objective: {args.objective!r} is not allowed; allowed: {', '.join(OBJECTIVES)}")
    model = get_model(args.model, args.model_dir)
    precision = Precision(weight=args.weight_dtype, act=args.act_dtype, kv=args.kv_dtype)
    workload = Workload(
        model, args.phase, args.batch, args.seq_len, args.output_len, precision, args.tp, args.attention
    )
    devices = list(load_hardware(args.hardware_dir).values())
    target = get_hardware(args.hardware, args.hardware_dir)
    data = advise(workload, devices, target, args.objective, settings_from_args(args))

    def text() -> str:
        rows = [
            [
                r["rank"] or "-",
                r["hardware"],
                fmt_seconds(r["time_s"]) if r["time_s"] else "n/a",
                f"{r['tokens_per_s']:,.0f}" if r["tokens_per_s"] else "n/a",
                r["bound"] or "-",
                "yes" if r["fits"] else f"no: {r['why_not']}",
            ]
            for r in data["ranking"]
        ]
        lines = [
            f"{model.name} {args.phase}, batch {args.batch}, seq {args.seq_len}, TP={args.tp}; "
            f"ranked by {args.objective}",
            table(["#", "hardware", "time", "tokens/s", "bound", "fits"], rows),
            "",
        ]
        if not data["fits_anywhere"]:
            lines.append("It fits on no device at this TP degree; the 'fits' column gives the TP that would.")
        lines += data["diagnosis"]["summary"]
        lines.append(
            "speed-up from 2x of each resource alone: "
            + ", ".join(f"{k} {v:.2f}x" for k, v in data["sensitivity"].items())
        )
        return "\n".join(lines)

    _emit(args, data, text)


def add_llm_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True)
    parser.add_argument("--hardware", default="h100-sxm")
    parser.add_argument("--batch", type=positive_int, default=1)
    parser.add_argument("--weight-dtype", default="bf16", choices=WEIGHT_DTYPES)
    parser.add_argument("--act-dtype", default="bf16", choices=ACT_DTYPES, help="compute dtype of the linear layers")
    parser.add_argument("--kv-dtype", default="bf16", choices=KV_DTYPES)
    parser.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel degree")
    parser.add_argument("--attention", default="flash", choices=ATTENTION_KERNELS)
    parser.add_argument("--cuda-graphs", action="store_true", help="launch kernels from a CUDA graph")
    parser.add_argument(
        "--graph-launch-overhead-us",
        type=non_negative_float,
        default=DEFAULT_GRAPH_LAUNCH_OVERHEAD_S * 1e6,
        help="per-kernel cost with --cuda-graphs, microseconds (default %(default)g)",
    )
    parser.add_argument(
        "--memory-utilization",
        type=fraction,
        default=0.9,
        help="usable fraction of device memory (default %(default)g)",
    )
    parser.add_argument("--model-dir", default=None, help="a folder of your own model TOML files")
    parser.add_argument(
        "--collectives",
        default=None,
        metavar="FILE",
        help="a measured all-reduce results file: its bus bandwidth and latency replace the datasheet link",
    )
    add_overhead(parser)
    add_common(parser)


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


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

    md = sub.add_parser("model", help="the model database")
    md_sub = md.add_subparsers(dest="model_command", required=True, parser_class=OneLineParser)
    p = md_sub.add_parser("list", help="all models")
    p.add_argument("--model-dir", default=None)
    add_common(p)
    p.set_defaults(func=cmd_model_list)
    p = md_sub.add_parser("show", help="one model: shape, parameters, KV bytes per token")
    p.add_argument("id")
    p.add_argument("--model-dir", default=None)
    add_common(p)
    p.set_defaults(func=cmd_model_show)

    p = sub.add_parser("analyze", help="every op of one prefill or decode step")
    p.add_argument("--phase", required=True, choices=("prefill", "decode"))
    p.add_argument(
        "--seq-len", type=positive_int, required=True, help="prompt length (prefill) or tokens already cached (decode)"
    )
    add_llm_options(p)
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser("request", help="TTFT, TPOT, end-to-end latency and tokens/s of a batch of requests")
    p.add_argument("--prompt-len", type=positive_int, required=True)
    p.add_argument("--output-len", type=positive_int, required=True)
    add_llm_options(p)
    p.set_defaults(func=cmd_request)

    p = sub.add_parser("advise", help="rank every device for a workload, diagnose it, and evaluate the levers")
    p.add_argument("--phase", required=True, choices=("prefill", "decode", "request"))
    p.add_argument(
        "--seq-len",
        type=positive_int,
        required=True,
        help="prompt length (prefill, request) or tokens already cached (decode)",
    )
    p.add_argument("--output-len", type=positive_int, default=128, help="generated tokens (request)")
    p.add_argument("--objective", default="latency", help="latency, throughput or per-watt")
    add_llm_options(p)
    p.set_defaults(func=cmd_advise)

    p = sub.add_parser("measure", help="measure ceilings and kernels on the local device (needs torch)")
    p.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda if present, else cpu")
    p.add_argument("--quick", action="store_true", help="a run of seconds instead of the full suite")
    p.add_argument(
        "--model",
        default=None,
        help="the decoder layer's model shapes (default llama-3.1-8b on GPUs, llama-3.2-1b on CPUs)",
    )
    p.add_argument("--out", default=None, help="write the results file (JSON) here")
    p.add_argument("--json", action="store_true", help="print the results file")
    p.set_defaults(func=cmd_measure)

    p = sub.add_parser("kv", help="KV-cache capacity: sequences that fit against context length")
    p.add_argument("--model", required=True)
    p.add_argument("--hardware", default="h100-sxm")
    p.add_argument("--kv-dtype", default="bf16", choices=KV_DTYPES)
    p.add_argument("--weight-dtype", default="bf16", choices=WEIGHT_DTYPES)
    p.add_argument("--tp", type=positive_int, default=1)
    p.add_argument(
        "--memory-utilization",
        type=fraction,
        default=0.9,
        help="usable fraction of device memory, in (0, 1] (default %(default)g)",
    )
    p.add_argument("--block-size", type=positive_int, default=DEFAULT_BLOCK_SIZE, help="paged-KV block, tokens")
    p.add_argument(
        "--max-batched-tokens",
        type=positive_int,
        default=DEFAULT_MAX_BATCHED_TOKENS,
        help="tokens of one forward pass, sizing the activation workspace (default %(default)s)",
    )
    p.add_argument("--batch", type=positive_int, default=1, help="for the max context and the KV crossover")
    p.add_argument(
        "--context", type=positive_int, default=None, help="for the max batch (default min(8192, the model's maximum))"
    )
    p.add_argument("--model-dir", default=None)
    add_common(p)
    p.set_defaults(func=cmd_kv)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except (ValueError, DataError, CliError) as exc:  # ResultsError is a ValueError
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
