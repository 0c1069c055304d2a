"""The arguments of ``serve``'s simulated load (``--rate``, ``--concurrency``, ``--trace``,
``--measured`` and their settings), each checked as it is read, and the checks that span several:
what asks for a simulation, and vllm bench serve's ramp-up of the rate."""

from __future__ import annotations

import argparse

from roofline.cli.args import (
    CliError,
    attention_dp,
    fraction_or_zero,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)
from roofline.cli.consistency import check_serve_flags
from roofline.defaults import (
    CHUNKED_SETTINGS,
    DEFAULT_LAUNCH_OVERHEAD_S,
    MAX_RATE_PER_S,
    RATE_RAMPS,
    RECV_OTHER_WEIGHT,
    ROUTERS,
)


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


def burstiness(text: str) -> float:
    """A gamma shape (``Load.burstiness``): a number in (0, 1000]."""
    try:
        value = positive_float(text)
    except argparse.ArgumentTypeError:
        value = 0.0
    if not 0 < value <= 1000:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1000], got {text[:40]!r}")
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
        "--burstiness", type=burstiness, default=1.0, help="gamma arrivals' shape: 1 Poisson, < 1 burstier"
    )
    group.add_argument(
        "--capacity",
        action="store_true",
        help="rank devices (and --tp degrees) by the largest rate (Poisson, or gamma with --burstiness) whose "
        "--percentile TTFT and TPOT meet the targets, --requests per probe (default 1000)",
    )
    group.add_argument(
        "--sweep",
        action="store_true",
        help="latency against request rate: p50/p90/p99 TTFT and TPOT at 12 rates (Poisson, or gamma with "
        "--burstiness) up to twice saturation, --requests each (default 300)",
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
        "--attention-dp",
        type=attention_dp,
        default=1,
        help="attention data parallel ranks in each TP group (SGLang's --dp with --enable-dp-attention, TensorRT-LLM's "
        "enable_attention_dp; vLLM's --data-parallel-size with expert parallelism comes close for MoE models): each "
        "rank runs attention on its own requests at TP / this, with its own scheduler and KV cache, taking the "
        "requests in turn, and the MLP and experts run over every rank's tokens at TP, each rank's step carrying as "
        "many tokens as this one's (at a trickle, with most ranks idle, that overstates the MLP's work); SGLang's "
        "--max-batched-tokens and --max-num-seqs are the whole server's, split over the ranks as SGLang splits "
        "them. It must divide --tp (default 1)",
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


def chunked_setting(args: argparse.Namespace) -> bool | None:
    """--chunked-prefill as a setting: True or False, None for the engine's own default (auto)."""
    if args.no_chunked_prefill:
        if args.chunked_prefill == "on":
            raise CliError("--no-chunked-prefill and --chunked-prefill on contradict each other: give one")
        return False
    return CHUNKED_SETTINGS[args.chunked_prefill]


def wants_simulation(args: argparse.Namespace) -> bool:
    return (
        args.capacity
        or args.sweep
        or any(getattr(args, k) is not None for k in ("rate", "concurrency", "trace", "measured", "ramp_up_strategy"))
    )


def _loads_given(args: argparse.Namespace) -> list[str]:
    """The load flags given (--rate, --concurrency, --trace, --measured), as typed."""
    given = (("--rate", args.rate), ("--concurrency", args.concurrency), ("--trace", args.trace))
    return [f for f, v in (*given, ("--measured", args.measured)) if v is not None]


def check_one_load(args: argparse.Namespace) -> None:
    """One kind of run a command: a load (--rate, --concurrency, --trace, --measured), a sweep of
    rates or a capacity ranking; --target-rate plans replicas only for the ranking."""
    load = next(iter(_loads_given(args)), None)
    modes = [f for f, on in (("--sweep", args.sweep), ("--capacity", args.capacity), (load, load)) if on]
    if len(modes) > 1:
        raise CliError(f"{modes[0]} and {modes[1]} are two kinds of run: give one")
    if args.target_rate is not None and not args.capacity:
        raise CliError("--target-rate: the replicas a rate needs come with --capacity")
    if args.target_rate is not None and not args.target_rate > 0:
        raise CliError(f"--target-rate: expected a rate above 0 requests/s, got {args.target_rate:g}")


def rate_ramp(args: argparse.Namespace) -> tuple[str, float, float] | None:
    """vllm bench serve's ramp-up of the rate, checked as it checks it; None without one."""
    start, end = args.ramp_up_start_rps, args.ramp_up_end_rps
    if args.ramp_up_strategy is None:
        if start is not None or end is not None:
            raise CliError("--ramp-up-start-rps and --ramp-up-end-rps: give them with --ramp-up-strategy")
        return None
    others = _loads_given(args)
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


# Each simulation flag's default and the runs it shapes; given anywhere else it would be dropped
# in silence.
_FLAG_RUNS = {
    "--requests": (None, ("--rate", "--concurrency", "--trace", "--measured", "--sweep", "--capacity")),
    "--seed": (0, ("--rate", "--concurrency", "--trace", "--measured", "--sweep", "--capacity")),
    "--burstiness": (1.0, ("--rate", "--sweep", "--capacity")),
    "--percentile": (90, ("--capacity",)),
    "--replicas": (1, ("--rate", "--concurrency", "--trace")),
    "--router": ("round-robin", ("--rate", "--concurrency", "--trace")),
    "--prompt-max": (None, ("--rate", "--concurrency", "--sweep", "--capacity")),
    "--output-max": (None, ("--rate", "--concurrency", "--sweep", "--capacity")),
    # None: the steady-state plan (serve with no load), which prices and disaggregates.
    "--price": ([], (None, "--capacity")),
    "--kv-link-gb-per-s": (None, (None,)),
}


def arrivals_words(burstiness: float) -> str:
    """An open loop's arrivals in words: "Poisson", or "gamma (burstiness 0.5)"."""
    return "Poisson" if burstiness == 1 else f"gamma (burstiness {burstiness:g})"


def check_flags_used(args: argparse.Namespace) -> None:
    """Refuse a simulation flag the run asked for would ignore (``--replicas`` with ``--sweep``,
    ``--burstiness`` with a closed loop, ``--seed`` with no simulation at all), naming the runs
    it shapes."""
    given = _loads_given(args)
    run = "--capacity" if args.capacity else "--sweep" if args.sweep else (given or [None])[0]
    if run is None and args.ramp_up_strategy is not None:
        run = "--rate"
    check_serve_flags(args, run)  # speculative decoding beside a load, lengths beside a trace
    for flag, (default, runs) in _FLAG_RUNS.items():
        if getattr(args, flag[2:].replace("-", "_")) == default or run in runs:
            continue
        where = f"with {run}" if run else "without a simulated load (the steady-state frontier)"
        loads = [r for r in runs if r]
        shapes = ["the steady-state plan (serve with no load)"] if None in runs else []
        shapes += [f"a run of {', '.join(loads)}"] if loads else []
        raise CliError(f"{flag}: it shapes {' and '.join(shapes)}; {where} it would be ignored")
    for most, least in (("prompt_max", "prompt_len"), ("output_max", "output_len")):
        high, low = getattr(args, most), getattr(args, least)
        if high is not None and high < low:  # else the draw's own check says "length range: ..."
            shown = f"--{least.replace('_', '-')}"
            raise CliError(f"--{most.replace('_', '-')}: expected at least {shown} ({low:,} tokens), got {high:,}")
    for flag in ("--ramp-up-start-rps", "--ramp-up-end-rps"):
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None and value > MAX_RATE_PER_S:
            raise CliError(f"{flag}: expected a rate of at most {MAX_RATE_PER_S:g} requests/s, got {value:g}")
