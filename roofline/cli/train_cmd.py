"""``train``: a training step's memory and time, the levers that move them, and with ``--measure`` a
real step of the same setup run here with PyTorch beside the prediction."""

from __future__ import annotations

import argparse

import roofline.cli.render as render
from roofline.cli.args import CliError, calibration_from_args
from roofline.cli.commands import emit
from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.settings import Settings


def train_setup_from_args(args: argparse.Namespace):
    from roofline.training import TrainSetup

    targets = None if args.lora_targets is None else tuple(t.strip() for t in args.lora_targets.split(",") if t.strip())
    return TrainSetup(
        model=get_model(args.model, args.model_dir),
        seq_len=args.seq_len,
        micro_batch=args.micro_batch,
        global_batch=args.global_batch,
        precision=args.precision,
        compute_dtype=args.compute_dtype,
        fp32_grads=args.fp32_grads,
        optimizer=args.optimizer,
        fused_optimizer=not args.unfused_optimizer,
        recompute=args.recompute,
        flash_attention=not args.naive_attention,
        method=args.method,
        **({} if args.lora_rank is None else {"lora_rank": args.lora_rank}),
        lora_targets=targets,
        dp=args.dp,
        zero=args.zero,
        offload_optimizer=args.offload_optimizer,
    )


def cmd_train(args: argparse.Namespace) -> None:
    from roofline.training import analyze_training, levers, plan_to_fit
    from roofline.training.setup import global_batch_problem

    if problem := global_batch_problem(args.global_batch, args.micro_batch, args.dp):
        raise CliError(f"--global-batch: {problem}")

    if args.method == "full" and (args.lora_rank is not None or args.lora_targets is not None):
        raise CliError("--lora-rank, --lora-targets: set LoRA's adapters; --method full trains every weight")
    setup = train_setup_from_args(args)
    hw = get_hardware(args.hardware, args.hardware_dir)
    settings = Settings(memory_utilization=args.memory_utilization, calibration=calibration_from_args(args))
    result = analyze_training(setup, hw, settings)
    data = result.to_json()
    data["levers"] = [lever.to_json() for lever in levers(setup, hw, settings)]
    plan, planned = plan_to_fit(setup, hw, settings)
    data["plan_to_fit"] = {
        "levers": plan,
        "fits": bool(planned.fits) if planned else True,
        "peak_bytes": float(planned.memory.peak_bytes) if planned else float(result.memory.peak_bytes),
        "step_time_s": planned.step_time_s if planned else result.step_time_s,
    }
    data["roofs"] = settings.ceilings(hw).source
    if args.measure:
        data["measured"] = _measure_training(setup, args.measure)
    emit(args, data, lambda: render.train(data, setup.model.name, hw.name), [hw.id])


def _measure_training(setup, device: str) -> dict:
    try:
        from roofline.measure.training import measure
    except ImportError as exc:
        raise CliError(f"measuring needs PyTorch ({exc}); install it with: pip install torch==2.13.0") from None
    try:
        return measure(setup, device)
    except ValueError as exc:  # a setup the harness does not run: named as the flag that set it
        field, _, rest = str(exc).partition(":")
        flag = _MEASURE_FLAGS.get(field)
        if flag is None:
            raise
        raise CliError(f"{flag}:{rest}" + ("" if flag == "--measure" else " (with --measure)")) from None


# The harness's fields as the flags that set them.
_MEASURE_FLAGS = {f: f"--{f}" for f in ("precision", "optimizer", "method", "model")} | {
    "dp, zero and offload": "--dp, --zero and --offload-optimizer",
    "device": "--measure",
}
