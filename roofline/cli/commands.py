"""The commands: each builds its data with the engine (the same functions the pages call), then
prints it as JSON or as text."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import roofline.cli.render as render
from roofline.api import hardware_summary, matmul_result, model_summary
from roofline.cli.args import CliError, precision_from_args
from roofline.cli.consistency import serve_models
from roofline.cli.outputs import require_writable
from roofline.cli.setting_flags import flag_error, settings_from_args
from roofline.format import dumps_strict
from roofline.hardware import get_hardware, load_hardware
from roofline.models import get_model, load_models
from roofline.settings import Settings
from roofline.workload import Workload, validate_tp


def emit(args: argparse.Namespace, data: object, text: Callable[[], str], device_ids: list[str] | None = None) -> None:
    """Print ``data`` as JSON or as text. Where measured results were given (``--calibration``,
    ``--collectives``), say for each of ``device_ids`` which were applied and, if not, why."""
    measured = getattr(args, "measured_roofs", None)
    notes: list[str] = []
    if measured is not None and measured.any and device_ids is not None and isinstance(data, dict):
        tps = getattr(args, "tp", None) or ()  # the TP degrees asked for (serve takes several)
        tps = tps if isinstance(tps, list) else [tps]
        data["measured_roofs"] = measured.report(device_ids, tps)
        notes = measured.lines(device_ids, tps)
    print(dumps_strict(data) if args.json else "\n".join([text(), *notes]))


def cmd_hardware_list(args: argparse.Namespace) -> None:
    data = [hardware_summary(hw) for hw in load_hardware(args.hardware_dir).values()]
    emit(args, data, lambda: render.hardware_list(data))


def cmd_hardware_show(args: argparse.Namespace) -> None:
    data = hardware_summary(get_hardware(args.id, args.hardware_dir))
    emit(args, data, lambda: render.hardware_show(data))


def cmd_matmul(args: argparse.Namespace) -> None:
    hw = get_hardware(args.hardware, args.hardware_dir)
    try:
        settings = Settings(
            launch_overhead_s=0.0,  # one kernel on the roofline: its device time (host dispatch is a step's)
            graph_launch_overhead_s=args.kernel_floor_us * 1e-6,
            engine=args.engine,
            engine_version=args.engine_version,
        )
    except ValueError as exc:  # named as the flag that set it
        raise flag_error(exc, args, {"graph_launch_overhead_s": ("--kernel-floor-us", 1e6)}) from None
    ceilings = settings.ceilings(hw, serving=False)
    data = matmul_result(ceilings, args.m, args.n, args.k, args.dtype, args.out_dtype)
    emit(args, data, lambda: render.matmul(data))


def cmd_model_list(args: argparse.Namespace) -> None:
    data = [model_summary(m) for m in load_models(args.model_dir).values()]
    emit(args, data, lambda: render.model_list(data))


def cmd_model_show(args: argparse.Namespace) -> None:
    data = model_summary(get_model(args.id, args.model_dir))
    emit(args, data, lambda: render.model_show(data))


def workload_from_args(args: argparse.Namespace, phase: str, seq_len: int, output_len: int = 1) -> Workload:
    model = get_model(args.model, args.model_dir)
    return Workload(
        model,
        phase,
        args.batch,
        seq_len,
        output_len,
        precision_from_args(args, model),
        args.tp,
        getattr(args, "attention", "flash"),
        getattr(args, "cuda_graphs", False),
        getattr(args, "attention_dp", 1),
    )


def cmd_analyze(args: argparse.Namespace) -> None:
    from roofline.inference import analyze_step

    w = workload_from_args(args, args.phase, args.seq_len)
    hw = get_hardware(args.hardware, args.hardware_dir)
    data = analyze_step(w, hw, settings_from_args(args)).to_json()
    emit(args, data, lambda: render.analyze(data, hw.name, w.model.name), [hw.id])


def cmd_request(args: argparse.Namespace) -> None:
    from roofline.inference import analyze_request

    w = workload_from_args(args, "request", args.prompt_len, args.output_len)
    hw = get_hardware(args.hardware, args.hardware_dir)
    data = analyze_request(w, hw, settings_from_args(args)).to_json()
    emit(args, data, lambda: render.request(data, hw.name, w.model.name), [hw.id])


def cmd_kv(args: argparse.Namespace) -> None:
    from roofline.kvcache import analyze_kv

    model = get_model(args.model, args.model_dir)
    hw = get_hardware(args.hardware, args.hardware_dir)
    precision = precision_from_args(args, model)
    w = Workload(
        model, "decode", precision=precision, tp=args.tp, cuda_graphs=args.cuda_graphs, attention_dp=args.attention_dp
    )
    context = args.context or min(8192, model.max_context)
    data = analyze_kv(w, hw, args.batch, context, settings_from_args(args)).to_json()
    emit(args, data, lambda: render.kv(data, hw.name, model.name), [hw.id])


def cmd_advise(args: argparse.Namespace) -> None:
    from roofline.advisor import advise

    if args.output_len is not None and args.phase != "request":  # one step has no output to generate
        raise CliError(f"--output-len: sets a request's generated tokens; --phase {args.phase} is one step")
    w = workload_from_args(args, args.phase, args.seq_len, (args.output_len or 128) if args.phase == "request" else 1)
    devices = list(load_hardware(args.hardware_dir).values())
    target = get_hardware(args.hardware, args.hardware_dir)
    try:  # the ranking runs the workload on every device; the diagnosis on --hardware, maybe a default
        w.on(target)
    except ValueError as exc:
        raise CliError(f"--hardware {target.id} (the device diagnosed) cannot run this workload: {exc}") from None
    data = advise(w, devices, target, args.objective, settings_from_args(args))
    emit(args, data, lambda: render.advise(data, w.model.name), [d.id for d in devices])


def cmd_measure(args: argparse.Namespace) -> None:
    require_writable("--out", args.out)  # checked before anything is measured
    try:
        from roofline.measure.suite import run_suite  # torch is imported here, not before
    except ImportError as exc:
        raise CliError(f"measuring needs PyTorch ({exc}); install it with: pip install torch==2.13.0") from None
    from roofline.measure.schema import save_results

    def progress(fraction: float, message: str) -> None:
        if not args.json:
            print(f"[{fraction * 100:3.0f}%] {message}", file=sys.stderr)

    model = get_model(args.model, args.model_dir) if args.model else None
    results = run_suite(device=args.device, quick=args.quick, model_id=model, progress=progress)
    if args.out:
        save_results(results, args.out)
    if args.json:
        print(results.to_json())
        return
    print(render.measure(results) + (f"\nwrote {args.out}" if args.out else ""))


def cmd_load(args: argparse.Namespace) -> None:
    from roofline.loading import load_peaks

    model = get_model(args.model, args.model_dir)
    hw = get_hardware(args.hardware, args.hardware_dir)
    validate_tp(model, args.tp)  # a TP degree that splits the heads, as every other command asks
    peaks = load_peaks(model, args.checkpoint_dtype, args.load_dtype, args.shards, tp=args.tp)
    device_capacity = hw.memory_bytes
    host = args.host_ram_gb * 1e9 if args.host_ram_gb is not None else None
    rows = []
    for peak in peaks:
        row = peak.to_json()
        row["fits_device"] = peak.device_bytes <= device_capacity
        row["fits_host"] = None if host is None else peak.host_bytes <= host
        rows.append(row)
    data = {
        "model": model.id,
        "hardware": hw.id,
        "checkpoint_dtype": args.checkpoint_dtype,
        "load_dtype": args.load_dtype,
        "shards": args.shards,
        "tp": args.tp,
        "device_memory_bytes": device_capacity,
        "host_ram_bytes": host,
        "methods": rows,
    }
    if args.measure:
        try:
            from roofline.measure.loading import measure
        except ImportError as exc:
            raise CliError(f"measuring needs PyTorch and safetensors ({exc})") from None
        data["measured"] = measure(model, args.checkpoint_dtype)
    emit(args, data, lambda: render.load(data, model.name, hw.name))


def cmd_serve(args: argparse.Namespace) -> None:
    import numpy as np

    from roofline.cli.load_args import check_flags_used, chunked_setting, wants_simulation
    from roofline.cli.simulate import cmd_simulate
    from roofline.engines import prompt_modes
    from roofline.known_error import for_settings

    check_flags_used(args)
    if args.hardware:  # a device named twice is planned once
        args.hardware = list(dict.fromkeys(args.hardware))
    model, draft = serve_models(args)  # the draft model checked against the target
    if args.trace is None and args.measured is None:  # else the lengths are the file's
        longest = (args.prompt_max or args.prompt_len) + (args.output_max or args.output_len)
        if longest > model.max_context:
            raise CliError(
                f"--prompt-len + --output-len (or their --*-max): {longest:,} tokens exceed {model.name}'s maximum "
                f"context of {model.max_context:,}"
            )
    if wants_simulation(args):
        return cmd_simulate(args, emit, render)
    if args.ramp_s:
        raise CliError("--ramp-s: the clients' ramp is a closed loop's; give it with --concurrency")
    # (--prompt-graph-tokens and --launch-overhead-us time the frontier's eager prompt steps too)
    if args.recv_interval > 1 or args.batch_wait_iters or args.batch_wait_ratio or args.attention_dp > 1:
        raise CliError(
            "--recv-interval, --batch-wait-iters, --batch-wait-ratio and --attention-dp act in the simulation: add "
            "--rate, --concurrency, --trace, --measured, --sweep or --capacity"
        )
    if args.target_rate is not None:
        raise CliError("--target-rate: the replicas a rate needs come with --capacity")

    from roofline.precision import auto_math_summary
    from roofline.serving import (
        Traffic,
        best_under_targets,
        disaggregation,
        extra_precision,
        load_prices,
        parse_price,
        searched_sentence,
        serving_sweep,
        speculative,
        splittable_tps,
    )
    from roofline.serving.basis import MIXED_BASIS_WORDS
    from roofline.serving.plan import plan_basis_mixed

    every = load_hardware(args.hardware_dir)
    devices = [get_hardware(h, args.hardware_dir) for h in args.hardware] if args.hardware else list(every.values())
    if args.ttft_ms <= 0 or args.tpot_ms <= 0:
        raise CliError("--ttft-ms and --tpot-ms must be positive")
    traffic = Traffic(args.prompt_len, args.output_len)
    precision = precision_from_args(args, model)
    settings = settings_from_args(args)
    shipped = load_prices()
    prices = {k: v.usd_per_hour for k, v in shipped.items()}
    for text in args.price:
        device, usd = parse_price(text)
        if device not in every:
            raise CliError(f"--price: unknown device {device!r}")
        prices[device] = usd
    tps, skipped_tp = splittable_tps(model, tuple(dict.fromkeys(args.tp or (1, 2, 4, 8))))
    setting = chunked_setting(args)  # None: the engine's own way (a whole-prompt engine refuses long ones)
    chunked = (modes := prompt_modes(setting, settings.engine))[0]  # prompts in the decodes' steps or apart
    also = extra_precision(precision.resolved(model))  # the user's own precision, searched beside the defaults
    scaling = {"fp8_scaling": precision.fp8_scaling, "chunked": setting, "also": also}  # as the frontier runs
    frontier = []
    for tp in tps:
        pts = serving_sweep(
            model, devices, traffic, precision, tp=tp, settings=settings, prices=prices, chunked=setting
        )
        mask = pts.frontier()
        for d in range(len(pts.devices)):
            frontier += [pts.row(d, j) for j in np.flatnonzero(mask[d])]
    best = best_under_targets(
        model, devices, traffic, args.ttft_ms / 1e3, args.tpot_ms / 1e3, settings, prices, tps, **scaling
    )
    primary = next((b for b in best if b.meets), None)
    levers: dict[str, object] = {}
    if primary is not None:
        hw = every[primary.hardware]
        batch, tp = int(primary.point["batch"]), int(primary.point["tp"])
        spec_batches = np.unique(np.round(np.geomspace(1, max(batch, 2), 12)).astype(int))
        at = primary.precision  # the levers run at the chosen setup's precision, batch and TP
        spec = speculative(
            model, hw, traffic, spec_batches, args.spec_k, args.spec_alpha, draft, at, tp=tp, settings=settings
        )
        levers["speculative_decoding"] = {
            "k": args.spec_k,
            "acceptance_rate": args.spec_alpha,
            "draft": draft.id if draft else "n-gram (no draft model)",
            "points": [
                {
                    "batch": int(b),
                    "plain_tpot_s": float(spec["plain_tpot_s"][i]),
                    "spec_tpot_s": float(spec["spec_tpot_s"][i]),
                    "speedup": float(spec["speedup"][i]),
                    "verify_bound": str(spec["verify_bound"][i]),
                }
                for i, b in enumerate(spec["batch"])
            ],
        }
        link = args.kv_link_gb_per_s * 1e9 if args.kv_link_gb_per_s else None
        try:
            levers["disaggregation"] = disaggregation(
                model, hw, traffic, batch, at, tp=tp, settings=settings, link_bytes_per_s=link
            )
        except ValueError as exc:
            levers["disaggregation"] = {"error": str(exc)}
        unchunked = serving_sweep(
            model,
            [hw],
            traffic,
            at,
            tp=tp,
            settings=settings,
            prices=prices,
            batches=np.array([batch]),
            chunked=(other := not all(modes)),  # off where prompts run chunked in the decodes' steps, else on
        )
        levers["chunked_prefill" if other else "without_chunked_prefill"] = unchunked.row(0, 0)
    data = {
        "model": model.id,
        "prompt_len": traffic.prompt_len,
        "output_len": traffic.output_len,
        "targets": {"ttft_s": args.ttft_ms / 1e3, "tpot_s": args.tpot_ms / 1e3},
        "chunked_prefill": modes[1],  # a long prompt split over steps; mixed_steps: prompts beside the decodes
        "mixed_steps": chunked,
        "chunked_prefill_default": setting is None,  # left to the engine (--chunked-prefill auto)
        "precision": {
            "weights": precision.weight_dtype,
            "math": precision.act_dtype,  # "auto": math_note says what each device runs
            "math_note": auto_math_summary(precision, devices, moe=model.moe is not None),
            "kv": precision.kv_dtype,
            "fp8_scaling": precision.resolved(model).to_json()["fp8_scaling"],
        },
        "searched": searched_sentence(model, tps, precision.fp8_scaling, chunked, also, modes[1]),
        "skipped_tp": {str(tp): why for tp, why in skipped_tp.items()},
        "prices": {k: {"usd_per_hour": v, "source": _price_source(k, v, shipped)} for k, v in prices.items()},
        "roofs": {hw.id: settings.roofs_note(hw) for hw in devices},
        "known_error": {hw.id: for_settings(settings, hw, "steady").to_json() for hw in devices},
        "best": [b.to_json() for b in best],
        "ranking_basis": MIXED_BASIS_WORDS if plan_basis_mixed(best) else None,
        "frontier": frontier,
        "levers": levers,
    }
    emit(args, data, lambda: render.serve(data, model.name), [d.id for d in devices])


def _price_source(device: str, usd: float, shipped: dict) -> str:
    entry = shipped.get(device)
    if entry is not None and entry.usd_per_hour == usd:
        return f"{entry.provider}; {entry.source.name}; as of {entry.as_of} (a default: set your own)"
    return "--price"
