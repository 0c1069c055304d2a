"""The settings of a command's flags, and a setting's error as the flag that set it says it, in the
flag's own units."""

from __future__ import annotations

import argparse

from roofline.cli.args import CliError, measured_from_args
from roofline.cli.consistency import check_batch_wait_pair, check_batch_within_seqs
from roofline.defaults import DEFAULT_GRAPH_LAUNCH_OVERHEAD_S, DEFAULT_LAUNCH_OVERHEAD_S
from roofline.settings import _INTEGERS, _RANGES, Settings

# Settings fields set from a flag, with the flag's unit: (flag, field value x scale = flag value).
_SETTING_FLAGS = {
    "launch_overhead_s": ("--launch-overhead-us", 1e6),
    "graph_launch_overhead_s": ("--graph-launch-overhead-us", 1e6),
    "non_torch_bytes": ("--non-torch-gb", 1e-9),
    "cuda_graph_bytes": ("--cuda-graph-gb", 1e-9),
    "memory_utilization": ("--memory-utilization", 1.0),
    "batch_wait_ratio": ("--batch-wait-ratio", 1.0),
    "block_size": ("--block-size", 1),
    "max_batched_tokens": ("--max-batched-tokens", 1),
    "max_num_seqs": ("--max-num-seqs", 1),
    "recv_interval": ("--recv-interval", 1),
    "batch_wait_iters": ("--batch-wait-iters", 1),
    "attention_dp": ("--attention-dp", 1),
}


def flag_error(settings_error: ValueError, args: argparse.Namespace, flags: dict | None = None) -> ValueError:
    """A Settings field's error as the flag that set it says it, in the flag's units (``flags``:
    a command's own flags for fields, ``_SETTING_FLAGS``'s shape, over the common ones)."""
    field = getattr(settings_error, "field", None)  # roofline.settings.SettingError's
    named = _SETTING_FLAGS | (flags or {})
    if field not in named:
        return settings_error
    flag, scale = named[field]
    given = getattr(args, flag.removeprefix("--").replace("-", "_"), None)
    if field in _RANGES:
        lo, hi, lo_ok = _RANGES[field]
        low = f"[{lo * scale:g}" if lo_ok else f"({lo * scale:g}"
        return CliError(f"{flag}: expected a number in {low}, {hi * scale:g}], got {given!r}")
    lo, hi = _INTEGERS[field]
    return CliError(f"{flag}: expected an integer in [{lo}, {hi}], got {given!r}")


def settings_from_args(args: argparse.Namespace) -> Settings:
    check_batch_within_seqs(args)  # a --batch past the --max-num-seqs given beside it
    check_batch_wait_pair(args)  # one of TensorRT-LLM's two batch-waiting flags without the other
    measured = measured_from_args(args).settings_fields()
    try:
        return _settings(args, measured)
    except ValueError as exc:  # named as the flag that set it
        raise flag_error(exc, args) from None


def _settings(args: argparse.Namespace, measured: dict) -> Settings:
    return Settings(
        launch_overhead_s=getattr(args, "launch_overhead_us", DEFAULT_LAUNCH_OVERHEAD_S * 1e6) * 1e-6,
        graph_launch_overhead_s=getattr(args, "graph_launch_overhead_us", DEFAULT_GRAPH_LAUNCH_OVERHEAD_S * 1e6) * 1e-6,
        memory_utilization=args.memory_utilization,
        block_size=args.block_size,
        max_batched_tokens=args.max_batched_tokens,
        max_num_seqs=args.max_num_seqs,
        recv_interval=getattr(args, "recv_interval", 1),
        batch_wait_iters=getattr(args, "batch_wait_iters", 0),
        batch_wait_ratio=getattr(args, "batch_wait_ratio", 0.0),
        prompt_graph_tokens=getattr(args, "prompt_graph_tokens", None),
        non_torch_bytes=args.non_torch_gb * 1e9,
        cuda_graph_bytes=args.cuda_graph_gb * 1e9,
        engine=getattr(args, "engine", "ideal"),
        engine_version=getattr(args, "engine_version", None),
        moe_kernel=getattr(args, "moe_kernel", "auto"),
        moe_routing=getattr(args, "moe_routing", "auto"),
        attention_dp=getattr(args, "attention_dp", 1),
        **measured,
    )


def command_flags(settings: Settings, precision=None, model=None) -> tuple[list[str], list[str]]:
    """The flags that give a command ``settings`` and ``precision`` (the inverse of
    ``settings_from_args``; defaults left out, and the precision's fields that change nothing for
    ``model``, which the command would refuse; ``--engine`` always given), and what no flag can
    carry (a calibration or a measured link is a file the user picks; what-if scales)."""
    from roofline.workload import Precision

    flags = ["--engine", settings.engine]
    default = Settings()
    # TensorRT-LLM's batch waiting holds prompts only with both flags above 0 (one alone is refused)
    unpaired = (
        () if settings.batch_wait_iters and settings.batch_wait_ratio else ("batch_wait_iters", "batch_wait_ratio")
    )
    for field, (flag, scale) in _SETTING_FLAGS.items():
        value = getattr(settings, field)
        if value != getattr(default, field) and field not in unpaired:
            flags += [flag, f"{value * scale:g}"]
    dense = model is not None and model.moe is None  # the command refuses MoE flags on a dense model
    for field in ("engine_version", "moe_kernel", "moe_routing", "prompt_graph_tokens"):
        value = getattr(settings, field)
        if value != getattr(default, field) and not (dense and field.startswith("moe_")):
            flags += ["--" + field.replace("_", "-"), str(value)]
    if precision is not None:
        base = Precision()
        unused = precision.unused_fields(model)  # the command refuses those flags
        for field in ("weight_dtype", "act_dtype", "kv_dtype", "expert_weight_dtype", "fp8_scaling", "group_size"):
            value = getattr(precision, field)
            if value != getattr(base, field) and field not in unused:
                flags += ["--" + field.replace("_", "-"), str(value)]
    left = []
    if settings.calibration is not None:
        left.append("your calibration (--calibration FILE)")
    if settings.link_bandwidth_bytes_per_s is not None:
        left.append("your measured all-reduce (--collectives FILE)")
    scales = ("compute_scale", "memory_scale", "link_scale", "capacity_scale")
    if any(getattr(settings, s) != 1.0 for s in scales):
        left.append("the what-if scales of compute, memory, link or capacity")
    return flags, left
