"""``serve --rate | --concurrency | --trace``: a simulated benchmark of one device setup, with
the metrics ``vllm bench serve``, GuideLLM and aiperf report."""

from __future__ import annotations

import argparse
import os
import sys

from roofline.cli.args import (
    CliError,
    precision_from_args,
)
from roofline.cli.load_args import arrivals_words, check_one_load, chunked_setting, rate_ramp
from roofline.cli.render_load import render_capacity, render_measured, render_text
from roofline.cli.setting_flags import settings_from_args
from roofline.defaults import MAX_REPLICAS
from roofline.engines import chunked_words
from roofline.format import fmt_seconds
from roofline.hardware import get_hardware
from roofline.models import get_model

MAX_SIMULATED_REQUESTS = 200_000
MAX_PROBE_REQUESTS = 20_000  # per probe of --capacity and per rate of --sweep: each runs many of them
DEFAULT_REQUESTS = 1000


def cmd_capacity(args: argparse.Namespace, emit, devices, prices: dict[str, float]) -> None:
    from roofline.known_error import for_settings
    from roofline.serving.basis import MIXED_BASIS_WORDS
    from roofline.serving.simulation.capacity import mixed_basis, rank_capacity
    from roofline.serving.simulation.load import Lengths
    from roofline.serving.simulation.metrics import Targets

    if args.requests > MAX_PROBE_REQUESTS:
        raise CliError(f"--requests: at most {MAX_PROBE_REQUESTS:,} per probe with --capacity, got {args.requests:,}")
    model = get_model(args.model, args.model_dir)
    targets = Targets(ttft_s=args.ttft_ms / 1e3, tpot_s=args.tpot_ms / 1e3)
    settings = settings_from_args(args)
    found, why_not = rank_capacity(
        model,
        devices,
        Lengths(args.prompt_len, args.prompt_max),
        Lengths(args.output_len, args.output_max),
        targets,
        precision_from_args(args, model),
        tuple(dict.fromkeys(args.tp or (1,))),
        settings,
        prices,
        args.percentile,
        args.requests,
        args.seed,
        workers=min(os.cpu_count() or 1, 8),
        chunked=(chunked := chunked_setting(args)),
        burstiness=args.burstiness,
        progress=_progress_line("--capacity: setups simulated") if sys.stderr.isatty() else None,
    )
    if sys.stderr.isatty():
        print(file=sys.stderr)  # past the progress line
    known = {hw.id: for_settings(settings, hw) for hw in devices}
    data = {
        "model": model.id,
        "targets": {"ttft_s": targets.ttft_s, "tpot_s": targets.tpot_s, "percentile": args.percentile},
        "target_rate_per_s": args.target_rate,
        "ranking": [c.to_json(args.target_rate) | {"known_error": known[c.hardware].to_json()} for c in found],
        "not_run": why_not,
        "ranking_basis": MIXED_BASIS_WORDS if mixed_basis(found) else None,
        "method": f"largest {arrivals_words(args.burstiness)} rate whose p{args.percentile} TTFT and TPOT meet the "
        f"targets, by bisection over simulated benchmarks of {args.requests:,} requests each (a finite run, as a "
        f"benchmark is), {chunked_words(chunked, settings.engine)}",
    }
    emit(args, data, lambda: render_capacity(data, model.name))


def cmd_simulate(args: argparse.Namespace, emit, render) -> None:
    from roofline.known_error import for_settings
    from roofline.precision import auto_math_summary
    from roofline.serving.simulation.api import simulate_serving, to_json
    from roofline.serving.simulation.load import Lengths, Load, make_requests
    from roofline.serving.simulation.metrics import Targets
    from roofline.serving.simulation.traces import read_trace

    check_one_load(args)
    if args.ramp_s and (args.concurrency is None or args.sweep or args.capacity):
        raise CliError(
            "--ramp-s: the clients' ramp is a closed loop's; give it with --concurrency (not with --sweep or "
            "--capacity, which run Poisson rates)"
        )
    trace_first, args.requests = args.requests, args.requests or DEFAULT_REQUESTS
    ramp = rate_ramp(args)
    if not 0 <= args.seed < 2**62:
        raise CliError(f"--seed: expected an integer in [0, 2^62), got {args.seed}")
    if args.capacity:
        from roofline.hardware import load_hardware
        from roofline.serving import load_prices

        every = load_hardware(args.hardware_dir)
        devices = [get_hardware(h, args.hardware_dir) for h in args.hardware] if args.hardware else list(every.values())
        prices = {k: v.usd_per_hour for k, v in load_prices().items()}
        return cmd_capacity(args, emit, devices, prices)
    if args.sweep:
        return cmd_sweep(args, emit, trace_first)
    if not args.hardware or len(args.hardware) != 1:
        raise CliError(
            "--rate, --concurrency, --trace and --measured simulate one device setup: give exactly one --hardware"
        )
    if args.tp and len(args.tp) != 1:
        raise CliError("--rate, --concurrency, --trace and --measured simulate one TP degree: give at most one --tp")
    if args.requests > MAX_SIMULATED_REQUESTS:
        raise CliError(f"--requests: at most {MAX_SIMULATED_REQUESTS:,}, got {args.requests:,}")
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
    precision = precision_from_args(args, model)
    sim = simulate_serving(
        model,
        hw,
        requests,
        precision,
        tp,
        settings,
        chunked_setting(args),
        replicas=args.replicas,
        router=args.router,
        seed=args.seed,
    )
    data = {"model": model.id, "hardware": hw.id, "tp": tp, "load": load}
    data |= to_json(sim, Targets(ttft_s=args.ttft_ms / 1e3, tpot_s=args.tpot_ms / 1e3))
    data["known_error"] = for_settings(settings, hw).to_json()
    data["math_note"] = auto_math_summary(precision, [hw], moe=model.moe is not None)
    emit(args, data, lambda: render_text(data, model.name, hw.name))


def cmd_measured(args: argparse.Namespace, model, hw, emit) -> None:
    """Each point of a measured result file simulated at its load, measured beside predicted."""
    from roofline.models import load_models
    from roofline.serving.measured import compare, read_measured, simulator
    from roofline.serving.measured.naming import model_mismatch

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
        precision_from_args(args, model),
        tp,
        settings_from_args(args),
        chunked_setting(args),
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
        "model_check": model_mismatch(model, (r.model for r in runs), load_models(args.model_dir).values()),
    }
    emit(args, data, lambda: render_measured(data, model.name, hw.name))


def cmd_sweep(args: argparse.Namespace, emit, requests: int | None) -> None:
    from roofline.serving import Traffic
    from roofline.serving.simulation.load import Lengths
    from roofline.serving.simulation.sweep import SWEEP_RATES, SWEEP_REQUESTS, latency_sweep

    if not args.hardware or len(args.hardware) != 1:
        raise CliError("--sweep simulates one device setup: give exactly one --hardware")
    requests = requests or SWEEP_REQUESTS
    if requests > MAX_PROBE_REQUESTS:
        raise CliError(f"--requests: at most {MAX_PROBE_REQUESTS:,} per rate with --sweep, got {requests:,}")
    model = get_model(args.model, args.model_dir)
    hw = get_hardware(args.hardware[0], args.hardware_dir)
    tp = args.tp[0] if args.tp else 1
    sweep = latency_sweep(
        model,
        hw,
        Traffic(args.prompt_len, args.output_len),
        precision_from_args(args, model),
        tp,
        settings_from_args(args),
        (chunked := chunked_setting(args)),
        args.seed,
        requests,
        args.burstiness,
        (Lengths(args.prompt_len, args.prompt_max), Lengths(args.output_len, args.output_max)),
    )
    data = {
        "model": model.id,
        "hardware": hw.id,
        "tp": tp,
        "roofs": sweep["roofs"],
        "method": f"{SWEEP_RATES} {arrivals_words(args.burstiness)} rates from 1/30 to twice the saturation rate, "
        f"{requests:,} requests each (seed {args.seed}), {chunked_words(chunked, args.engine)}; "
        "past saturation a finite run sees only the start of the queue that grows without bound",
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
        return "\n".join([*lines, data["method"]])

    emit(args, data, text)


def _progress_line(what: str):
    """A callback that rewrites one line of the terminal with (done, total): minutes of work say
    how far they are (only on a terminal; a file or a pipe gets no progress)."""

    def show(done: int, total: int) -> None:
        print(f"\r{what} {done}/{total}", end="", file=sys.stderr, flush=True)

    return show
