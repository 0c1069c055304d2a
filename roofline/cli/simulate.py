"""``serve --rate | --concurrency | --trace``: a simulated benchmark of one device setup, with
the metrics ``vllm bench serve``, GuideLLM and aiperf report."""

from __future__ import annotations

import argparse
import os

from roofline.cli.args import (
    CliError,
    fraction_or_zero,
    non_negative_float,
    non_negative_int,
    positive_int,
    precision_from_args,
    settings_from_args,
)
from roofline.cli.render_load import render_capacity, render_measured, render_text
from roofline.defaults import DEFAULT_LAUNCH_OVERHEAD_S, MAX_REPLICAS, RATE_RAMPS, RECV_OTHER_WEIGHT, ROUTERS
from roofline.format import fmt_seconds
from roofline.hardware import get_hardware
from roofline.models import get_model

MAX_SIMULATED_REQUESTS = 200_000
DEFAULT_REQUESTS = 1000


def recv_interval(text: str) -> int:
    value = positive_int(text)
    if value > RECV_OTHER_WEIGHT:  # SGLang counts a prefill as this many decode steps
        raise argparse.ArgumentTypeError(f"expected an integer in [1, {RECV_OTHER_WEIGHT}], got {text[:40]!r}")
    return value


def graph_tokens(text: str) -> int:
    value = non_negative_int(text)
    if value > 1 << 24:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, {1 << 24}], got {text[:40]!r}")
    return value


def launch_us(text: str) -> float:
    value = non_negative_float(text)
    if value > 1e6:  # Settings.launch_overhead_s: at most a second
        raise argparse.ArgumentTypeError(f"expected microseconds in [0, 1000000], got {text[:40]!r}")
    return value


def ramp_seconds(text: str) -> float:
    value = non_negative_float(text)
    if value > 1e7:  # Load.ramp_s
        raise argparse.ArgumentTypeError(f"expected seconds in [0, 10000000], got {text[:40]!r}")
    return value


def add_load(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("simulated load (one device setup, one run)")
    which = group.add_mutually_exclusive_group()
    which.add_argument("--rate", type=non_negative_float, default=None, help="open loop: requests per second")
    which.add_argument("--concurrency", type=positive_int, default=None, help="closed loop: this many clients")
    which.add_argument("--trace", default=None, metavar="FILE", help="a JSONL trace of arrivals and lengths")
    which.add_argument(
        "--measured",
        default=None,
        metavar="FILE",
        help="a vllm bench serve, GuideLLM or aiperf result file: simulate each of its points, show measured beside",
    )
    group.add_argument(
        "--ramp-up-strategy",
        choices=RATE_RAMPS,
        default=None,
        help="an open loop whose rate ramps, as vllm bench serve --ramp-up-strategy ramps it: request i of N at "
        "the start rate + (end - start) x i / (N - 1) (linear) or start x (end / start) ^ (i / (N - 1)) "
        "(exponential); with --ramp-up-start-rps and --ramp-up-end-rps, in place of --rate",
    )
    group.add_argument("--ramp-up-start-rps", type=non_negative_float, default=None, help="the ramp's first rate")
    group.add_argument("--ramp-up-end-rps", type=non_negative_float, default=None, help="the ramp's last rate")
    group.add_argument(
        "--ramp-s",
        type=ramp_seconds,
        default=0.0,
        help="with --concurrency: start the clients one at a time over this many seconds, as aiperf's "
        "--concurrency-ramp-duration does (default 0: all at once, as vllm bench serve, GuideLLM and aiperf do "
        "by default; on identical requests such clients stay in step, each round's prompts arriving together)",
    )
    group.add_argument(
        "--requests",
        type=positive_int,
        default=None,
        help="requests to send (default 1000); with --trace, the trace's first N lines (default all of them)",
    )
    group.add_argument("--seed", type=int, default=0, help="random seed of arrivals and lengths")
    group.add_argument(
        "--burstiness", type=non_negative_float, default=1.0, help="gamma arrivals' shape: 1 Poisson, < 1 burstier"
    )
    group.add_argument(
        "--capacity",
        action="store_true",
        help="rank devices (and --tp degrees) by the largest rate whose --percentile TTFT and TPOT meet the targets",
    )
    group.add_argument(
        "--sweep",
        action="store_true",
        help="latency against request rate: p50/p90/p99 TTFT and TPOT at 12 Poisson rates up to twice saturation",
    )
    group.add_argument("--percentile", type=int, choices=(50, 90, 99), default=90, help="the targets' percentile")
    group.add_argument("--target-rate", type=non_negative_float, default=None, help="requests/s to plan replicas for")
    group.add_argument(
        "--replicas", type=positive_int, default=1, help="replicas of the setup behind a router (default 1)"
    )
    group.add_argument(
        "--router",
        default="round-robin",
        choices=ROUTERS,
        help="how the replicas share the requests: round-robin (every N-th request; a closed loop's clients split "
        "evenly), random (seeded) or least-loaded (each request to the replica holding the fewest outstanding)",
    )
    group.add_argument(
        "--recv-interval",
        type=recv_interval,
        default=1,
        help="SGLang's --scheduler-recv-interval: decode steps between two intakes of new requests (--engine sglang; "
        "default 1, every step)",
    )
    group.add_argument(
        "--batch-wait-iters",
        type=non_negative_int,
        default=0,
        help="TensorRT-LLM's batch_wait_timeout_iters: steps prompts may be held back beside decodes (--engine trtllm; "
        "default 0)",
    )
    group.add_argument(
        "--batch-wait-ratio",
        type=fraction_or_zero,
        default=0.0,
        help="TensorRT-LLM's batch_wait_max_tokens_ratio: with --batch-wait-iters above 0, prompts are held until the "
        "step's tokens reach this share of the token budget (--engine trtllm; default 0)",
    )
    group.add_argument(
        "--prompt-graph-tokens",
        type=graph_tokens,
        default=None,
        help="the most new tokens of a step with prompt tokens that the engine replays from a CUDA graph; a larger "
        "step dispatches every kernel from the host (default the engine's own: vLLM 512, SGLang and TensorRT-LLM 0, "
        "their piecewise graphs being off by default)",
    )
    group.add_argument(
        "--launch-overhead-us",
        type=launch_us,
        default=DEFAULT_LAUNCH_OVERHEAD_S * 1e6,
        help="host time to dispatch one tiny eager op in a step run without a CUDA graph, microseconds (default "
        "%(default)g, measured on an H100 host; linear layers and attention cost 1.75x, norms 1.55x)",
    )
    group.add_argument("--prompt-max", type=positive_int, default=None, help="prompts uniform up to this many tokens")
    group.add_argument("--output-max", type=positive_int, default=None, help="outputs uniform up to this many tokens")


def wants_simulation(args: argparse.Namespace) -> bool:
    return (
        args.capacity
        or args.sweep
        or any(getattr(args, k) is not None for k in ("rate", "concurrency", "trace", "measured", "ramp_up_strategy"))
    )


def rate_ramp(args: argparse.Namespace) -> tuple[str, float, float] | None:
    """vllm bench serve's ramp-up of the rate, checked as it checks it; None without one."""
    start, end = args.ramp_up_start_rps, args.ramp_up_end_rps
    if args.ramp_up_strategy is None:
        if start is not None or end is not None:
            raise CliError("--ramp-up-start-rps and --ramp-up-end-rps: give them with --ramp-up-strategy")
        return None
    others = [
        f
        for f, v in (
            ("--rate", args.rate),
            ("--concurrency", args.concurrency),
            ("--trace", args.trace),
            ("--measured", args.measured),
        )
        if v is not None
    ]
    if others or args.sweep or args.capacity:
        which = (others or ["--sweep or --capacity"])[0]
        raise CliError(f"--ramp-up-strategy: the rate's ramp is the load itself; not with {which}")
    if start is None or end is None:
        raise CliError("--ramp-up-strategy: give both --ramp-up-start-rps and --ramp-up-end-rps")
    if not 0 < start <= end:
        raise CliError(
            f"--ramp-up-start-rps: expected a rate above 0 and at most the end rate ({end:g}), got {start:g}"
        )
    return args.ramp_up_strategy, start, end


def cmd_capacity(args: argparse.Namespace, emit, devices, prices: dict[str, float]) -> None:
    from roofline.known_error import for_settings
    from roofline.serving.simulation.capacity import rank_capacity
    from roofline.serving.simulation.load import Lengths
    from roofline.serving.simulation.metrics import Targets

    if args.requests > 20_000:
        raise CliError(f"--requests: at most 20,000 per probe with --capacity, got {args.requests:,}")
    model = get_model(args.model, args.model_dir)
    targets = Targets(ttft_s=args.ttft_ms / 1e3, tpot_s=args.tpot_ms / 1e3)
    settings = settings_from_args(args)
    found, why_not = rank_capacity(
        model,
        devices,
        Lengths(args.prompt_len, args.prompt_max),
        Lengths(args.output_len, args.output_max),
        targets,
        precision_from_args(args),
        tuple(dict.fromkeys(args.tp or (1,))),
        settings,
        prices,
        args.percentile,
        args.requests,
        args.seed,
        workers=min(os.cpu_count() or 1, 8),
    )
    known = {hw.id: for_settings(settings, hw) for hw in devices}
    data = {
        "model": model.id,
        "targets": {"ttft_s": targets.ttft_s, "tpot_s": targets.tpot_s, "percentile": args.percentile},
        "target_rate_per_s": args.target_rate,
        "ranking": [c.to_json(args.target_rate) | {"known_error": known[c.hardware].to_json()} for c in found],
        "not_run": why_not,
        "method": f"largest Poisson rate whose p{args.percentile} TTFT and TPOT meet the targets, by bisection over "
        f"simulated benchmarks of {args.requests:,} requests each (a finite run, as a benchmark is)",
    }
    emit(args, data, lambda: render_capacity(data, model.name))


def cmd_simulate(args: argparse.Namespace, emit, render) -> None:
    from roofline.known_error import for_settings
    from roofline.serving.simulation.api import simulate_serving, to_json
    from roofline.serving.simulation.load import Lengths, Load, make_requests
    from roofline.serving.simulation.metrics import Targets
    from roofline.serving.simulation.traces import read_trace

    if args.ramp_s and (args.concurrency is None or args.sweep or args.capacity):
        raise CliError(
            "--ramp-s: the clients' ramp is a closed loop's; give it with --concurrency (not with --sweep or "
            "--capacity, which run Poisson rates)"
        )
    trace_first, args.requests = args.requests, args.requests or DEFAULT_REQUESTS
    ramp = rate_ramp(args)
    if args.capacity:
        from roofline.hardware import load_hardware
        from roofline.serving import load_prices

        every = load_hardware(args.hardware_dir)
        devices = [get_hardware(h, args.hardware_dir) for h in args.hardware] if args.hardware else list(every.values())
        prices = {k: v.usd_per_hour for k, v in load_prices().items()}
        return cmd_capacity(args, emit, devices, prices)
    if args.sweep:
        return cmd_sweep(args, emit)
    if not args.hardware or len(args.hardware) != 1:
        raise CliError(
            "--rate, --concurrency, --trace and --measured simulate one device setup: give exactly one --hardware"
        )
    if args.tp and len(args.tp) != 1:
        raise CliError("--rate, --concurrency, --trace and --measured simulate one TP degree: give at most one --tp")
    if args.requests > MAX_SIMULATED_REQUESTS:
        raise CliError(f"--requests: at most {MAX_SIMULATED_REQUESTS:,}, got {args.requests:,}")
    if not 0 <= args.seed < 2**62:
        raise CliError(f"--seed: expected an integer in [0, 2^62), got {args.seed}")
    model = get_model(args.model, args.model_dir)
    hw = get_hardware(args.hardware[0], args.hardware_dir)
    if args.measured is not None:
        return cmd_measured(args, model, hw, emit)
    if args.trace is not None:
        requests = read_trace(args.trace, MAX_SIMULATED_REQUESTS, first=trace_first)
        load = {"kind": "trace", "file": args.trace, "requests": requests.count, "skipped": requests.skipped}
    else:
        prompt = Lengths(args.prompt_len, args.prompt_max)
        output = Lengths(args.output_len, args.output_max)
        if args.rate is not None or ramp is not None:
            if ramp is None and args.rate <= 0:
                raise CliError("--rate: expected a positive number of requests per second")
            kind = "poisson" if args.burstiness == 1 else "gamma"
            spec = Load(
                kind,
                args.requests,
                prompt,
                output,
                rate_per_s=args.rate if ramp is None else ramp[2],
                burstiness=args.burstiness,
                seed=args.seed,
                rate_ramp=ramp,
            )
        else:
            spec = Load(
                "concurrency",
                args.requests,
                prompt,
                output,
                concurrency=args.concurrency,
                seed=args.seed,
                ramp_s=args.ramp_s,
            )
        requests = make_requests(spec)
        load = {
            "kind": spec.kind,
            "rate_per_s": spec.rate_per_s,
            "concurrency": spec.concurrency,
            "burstiness": spec.burstiness,
            "ramp_s": spec.ramp_s,
            "rate_ramp": None
            if spec.rate_ramp is None
            else dict(zip(("strategy", "start_per_s", "end_per_s"), spec.rate_ramp)),
            "requests": spec.requests,
            "prompt_tokens": [prompt.low, prompt.most],
            "output_tokens": [output.low, output.most],
            "seed": spec.seed,
        }
    tp = args.tp[0] if args.tp else 1
    if args.replicas > MAX_REPLICAS:
        raise CliError(f"--replicas: at most {MAX_REPLICAS}, got {args.replicas}")
    settings = settings_from_args(args)
    sim = simulate_serving(
        model,
        hw,
        requests,
        precision_from_args(args),
        tp,
        settings,
        not args.no_chunked_prefill,
        replicas=args.replicas,
        router=args.router,
        seed=args.seed,
    )
    data = {"model": model.id, "hardware": hw.id, "tp": tp, "load": load}
    data |= to_json(sim, Targets(ttft_s=args.ttft_ms / 1e3, tpot_s=args.tpot_ms / 1e3))
    data["known_error"] = for_settings(settings, hw).to_json()
    emit(args, data, lambda: render_text(data, model.name, hw.name))


def cmd_measured(args: argparse.Namespace, model, hw, emit) -> None:
    """Each point of a measured result file simulated at its load, measured beside predicted."""
    from roofline.serving.measured import compare, read_measured, simulator

    runs = read_measured(args.measured)
    simulated = sum(min(r.requests or args.requests, MAX_SIMULATED_REQUESTS) for r in runs)
    if simulated > 4 * MAX_SIMULATED_REQUESTS:
        raise CliError(
            f"--measured: {simulated:,} requests over {len(runs)} points; at most {4 * MAX_SIMULATED_REQUESTS:,}"
        )
    tp = args.tp[0] if args.tp else 1
    simulate_fn = simulator(
        model,
        hw,
        precision_from_args(args),
        tp,
        settings_from_args(args),
        not args.no_chunked_prefill,
        args.seed,
        args.requests,
    )
    data = {
        "model": model.id,
        "hardware": hw.id,
        "tp": tp,
        "file": str(args.measured),
        "format": runs[0].format,
        "fitted": False,
        "ratio": "predicted / measured",
        "points": compare(runs, simulate_fn),
    }
    emit(args, data, lambda: render_measured(data, model.name, hw.name))


def cmd_sweep(args: argparse.Namespace, emit) -> None:
    from roofline.serving import Traffic
    from roofline.serving.simulation.sweep import latency_sweep

    if not args.hardware or len(args.hardware) != 1:
        raise CliError("--sweep simulates one device setup: give exactly one --hardware")
    model = get_model(args.model, args.model_dir)
    hw = get_hardware(args.hardware[0], args.hardware_dir)
    tp = args.tp[0] if args.tp else 1
    sweep = latency_sweep(
        model,
        hw,
        Traffic(args.prompt_len, args.output_len),
        precision_from_args(args),
        tp,
        settings_from_args(args),
        not args.no_chunked_prefill,
        args.seed,
    )
    data = {
        "model": model.id,
        "hardware": hw.id,
        "tp": tp,
        "roofs": sweep["roofs"],
        "saturation_rate_per_s": sweep["saturation_per_s"],
        "points": [
            {
                "rate_per_s": float(rate),
                **{
                    f"p{p}_{metric}": float(sweep["percentiles"][metric][p][i])
                    for metric in ("ttft_s", "tpot_s")
                    for p in sweep["percentiles"][metric]
                },
                "mean_running": float(sweep["mean_running"][i]),
                "mean_waiting": float(sweep["mean_waiting"][i]),
            }
            for i, rate in enumerate(sweep["rate_per_s"])
        ],
    }

    def text() -> str:
        lines = [
            f"{model.name} on {tp} x {hw.name}, saturation {data['saturation_rate_per_s']:.2f} requests/s "
            f"({data['roofs']})",
            "   req/s   TTFT p50   TTFT p99   TPOT p50   TPOT p99  waiting",
        ]
        for pt in data["points"]:
            lines.append(
                f"  {pt['rate_per_s']:>6.2f} {fmt_seconds(pt['p50_ttft_s']):>10} {fmt_seconds(pt['p99_ttft_s']):>10} "
                f"{fmt_seconds(pt['p50_tpot_s']):>10} {fmt_seconds(pt['p99_tpot_s']):>10} {pt['mean_waiting']:>8.1f}"
            )
        return "\n".join(lines)

    emit(args, data, text)
