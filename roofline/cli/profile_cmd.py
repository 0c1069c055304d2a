"""``python -m roofline profile``: a profiler trace from any machine, or a model profiled here,
on a device's roofs: the step's regime split, the top ops, and what would move it."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from roofline.cli.args import CliError, add_common, add_model_dir, int_up_to, positive_int
from roofline.cli.outputs import require_writable
from roofline.datafiles import shown_path
from roofline.format import dumps_strict, fmt_bytes, fmt_flops, fmt_seconds, table

LEVELS = ("aten", "kernel", "module")


MAX_TRACE_MIB = 1024
DEVICE_PATTERN = re.compile(r"cpu|cuda(:[0-9]{1,2})?")  # where a model is profiled here
# Profiled steps: a trace past the importer's event cap (250,000) fails after the whole run, so
# the count is bounded before anything runs (3,000 steps of a small model ran 84 s, then failed).
MAX_PROFILED_STEPS = 100


def profiled_steps(text: str) -> int:
    steps = positive_int(text)
    if steps > MAX_PROFILED_STEPS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_PROFILED_STEPS} steps, got {steps}")
    return steps


def add_profile_parser(sub) -> None:
    p = sub.add_parser(
        "profile",
        help="your own model on the roofline: import a torch.profiler trace, or profile a model here",
        description="Import Chrome traces exported by torch.profiler (record_shapes=True; one file per rank), "
        "or profile a model from a Hugging Face config.json with random weights (forward or a training step).",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--trace", nargs="+", metavar="FILE", help="Chrome-trace JSON files, one per rank")
    source.add_argument("--hf-config", metavar="CONFIG", help="a Hugging Face config.json to build and profile")
    source.add_argument("--model", help="a model id of the database to build and profile")
    p.add_argument("--batch", type=int_up_to(1 << 20), default=1, help="sequences per step (profiling here)")
    p.add_argument("--seq", type=positive_int, default=128, help="tokens per sequence (profiling here)")
    p.add_argument("--train", action="store_true", help="a full training step (forward, backward, AdamW)")
    p.add_argument("--layers", type=positive_int, default=None, help="build only the first N layers")
    p.add_argument(
        "--steps", type=profiled_steps, default=3, help=f"profiled steps, 1 to {MAX_PROFILED_STEPS} (after one warm-up)"
    )
    p.add_argument("--device", default="cpu", help="cpu or cuda (profiling here)")
    p.add_argument(
        "--builder",
        default="auto",
        choices=("auto", "transformers", "project"),
        help="who builds the model from --hf-config: transformers where installed (auto), or this project's model",
    )
    p.add_argument("--save-trace", default=None, metavar="FILE", help="keep the exported Chrome trace (profiling here)")
    p.add_argument("--hardware", default=None, help="the datasheet roofs to use (default: the profiled GPU's)")
    p.add_argument("--results", default=None, help="a measurement results file whose measured roofs to use")
    p.add_argument("--level", default="aten", choices=LEVELS, help="the ops to list")
    p.add_argument("--top", type=positive_int, default=15, help="ops to list")
    p.add_argument("--max-trace-mib", type=positive_int, default=16, help="largest trace read, MiB (default 16)")
    p.add_argument("--out", default=None, help="write the profile record (JSON) here")
    add_model_dir(p)
    add_common(p)
    p.set_defaults(func=cmd_profile)


def _profile_here(args: argparse.Namespace):
    try:
        import torch  # checked before the model is built
    except ImportError as exc:
        raise CliError(f"profiling needs PyTorch ({exc}); install it with: pip install 'roofline[measure]'") from None
    if args.device.startswith("cuda"):
        index = int(args.device.partition(":")[2] or 0)
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if index >= count:
            raise CliError(
                f"--device {args.device}: PyTorch sees {count} CUDA device(s) here; profile on --device cpu, "
                "or import a trace from a GPU machine with --trace"
            )
    from roofline.profile.capture import profile

    use_transformers = False
    if args.hf_config:
        from importlib.util import find_spec

        has = find_spec("transformers") is not None
        if args.builder == "transformers" and not has:
            raise CliError("--builder transformers: transformers is not installed (pip install transformers)")
        use_transformers = args.builder == "transformers" or (args.builder == "auto" and has)
    if use_transformers:
        from roofline.datafiles import read_regular_file
        from roofline.profile.models import transformers_step

        config = json.loads(read_regular_file(args.hf_config, 1 << 20))
        step = transformers_step(config, args.batch, args.seq, args.train, args.layers, args.device)
    else:
        from roofline.profile.models import project_step

        if args.hf_config:
            from roofline.hf_config import load_hf_config

            model = load_hf_config(args.hf_config)
        else:
            from roofline.models import get_model

            model = get_model(args.model, args.model_dir)
        _check_it_fits(model, args)
        try:
            step = project_step(model, args.batch, args.seq, args.train, args.layers, args.device)
        except (MemoryError, RuntimeError) as exc:  # the allocator refused part way (a limit set on the process)
            if not isinstance(exc, MemoryError) and "allocate" not in str(exc):
                raise
            raise CliError(f"model: {model.id} could not be built in this process's memory; try --layers") from None
    return profile(step.run, module=step.module, steps=args.steps, label=step.label, trace_path=args.save_trace)


def cmd_profile(args: argparse.Namespace) -> None:
    from roofline.profile import import_trace_files, roofs_for, summarize

    for option, value in (("--hf-config", args.hf_config), ("--model", args.model), ("--save-trace", args.save_trace)):
        if value == "":
            raise CliError(f"{option}: expected a value, got an empty one")
    if not args.trace and not DEVICE_PATTERN.fullmatch(args.device):
        raise CliError(f"--device: expected cpu, cuda or cuda:N (profiling here), got {args.device!r}")
    if args.trace and any(not path for path in args.trace):
        raise CliError("--trace: expected trace files, got an empty path")
    if args.trace and (twice := _given_twice(args.trace)):  # one file per rank: a repeat is a rank counted twice
        raise CliError(f"--trace: {shown_path(twice)} is given twice; give each rank's trace once")
    require_writable("--out", args.out)  # before the profiling, not after it
    require_writable("--save-trace", args.save_trace)
    if args.max_trace_mib > MAX_TRACE_MIB:
        raise CliError(
            f"--max-trace-mib: at most {MAX_TRACE_MIB:,} MiB (traces are read whole), got {args.max_trace_mib:,}"
        )
    # The roofs' inputs are read before the profile: a bad --hardware or --results had been refused
    # only after the model was profiled.
    if args.hardware is not None:
        from roofline.hardware import get_hardware

        get_hardware(args.hardware)
    results = None
    if args.results:
        from roofline.measure.schema import load_results

        results = load_results(args.results)
    if args.trace:
        prof = import_trace_files(args.trace, max_bytes=args.max_trace_mib * 2**20)
    else:
        prof = _profile_here(args)
    roofs = roofs_for(prof, args.hardware, results)
    report = summarize(prof, roofs, level=args.level, top=args.top)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(prof.to_json())
    if args.json:
        print(dumps_strict(report))
        return
    print(render(report) + (f"\nwrote {args.out}" if args.out else ""))


def render(report: dict) -> str:
    """The report as text: the step, its regime split, the top ops, what would move it."""
    roofs = report["roofs"]
    lines = [
        f"{report['label'] or 'profile'} · {report['device']} ({report['activity']}, {report['source']}) "
        f"· roofs: {roofs['name']} [{roofs['source']}]",
        f"step: {fmt_seconds(report['wall_s'])} wall, {fmt_seconds(report['busy_s'])} busy, "
        f"{fmt_seconds(report['idle_s'])} idle (host gaps), {fmt_flops(report['flops'])} "
        f"over {report['steps']} profiled step(s)",
    ]
    if len(report["ranks"]) > 1:
        for r in report["ranks"]:
            lines.append(
                f"  rank {r['rank']}: {fmt_seconds(r['wall_s'])} wall, {fmt_seconds(r['communication_s'])} "
                f"in {r['collectives']} collective(s) of {fmt_bytes(r['communication_bytes'])}"
            )
        if report["skew_s"] is not None:
            lines.append(f"  skew between ranks: {fmt_seconds(report['skew_s'])}")
    total = sum(report["regime_split_s"].values()) or 1.0
    split = ", ".join(f"{r} {s / total:.0%}" for r, s in report["regime_split_s"].items() if s > 0)
    lines += [f"regimes: {split} → {report['step_bound']}-bound", ""]
    rows = [
        [
            r["name"][:48],
            r["shapes"][:40],
            f"{r['count']:g}",
            fmt_seconds(r["time_s"]),
            f"{r['share_of_step']:.0%}",
            fmt_flops(r["flops"]),
            fmt_bytes(r["bytes"]),
            f"{r['intensity']:.3g}" if r["intensity"] is not None else "—",
            f"{r['achieved_tflops'] * 1e3:.3g}",
            f"{r['fraction_of_roof']:.0%}" if r["fraction_of_roof"] is not None else "—",
            r["bound"],
        ]
        for r in report["top_ops"]
    ]
    headers = ["op", "shapes", "count", "time", "share", "FLOPs", "bytes", "FLOP/B", "GFLOP/s", "of roof", "bound"]
    lines.append(table(headers, rows))
    lines += ["", "what would move it:", *(f"- {tip}" for tip in report["what_would_move_it"])]
    lines += [f"note: {note}" for note in report["notes"]]
    return "\n".join(lines)


def _build_bytes(model, layers: int, args: argparse.Namespace) -> float:
    """What building and running the step takes, from the memory model: fp32 weights, and for a
    training step their gradients, AdamW's two states and the saved activations."""
    from roofline.training import TrainSetup, training_memory

    trimmed = model.model_copy(update={"num_layers": layers})
    setup = TrainSetup(model=trimmed, seq_len=args.seq, micro_batch=args.batch, precision="fp32", fused_optimizer=False)
    if args.train:
        return float(training_memory(setup).peak_bytes)
    logits = 2 * args.batch * args.seq * model.vocab_size * 4  # the logits and their fp32 loss
    return 4.0 * trimmed.param_counts()["total"] + logits


def _check_it_fits(model, args: argparse.Namespace) -> None:
    """Refuse, before anything is allocated, a model this machine cannot hold (with the most
    layers that would fit), rather than fail inside the allocator."""
    import torch

    from roofline.measure.local_device import free_memory_bytes

    layers = min(args.layers or model.num_layers, model.num_layers)
    free = 0.8 * free_memory_bytes(torch.device(args.device))
    need = _build_bytes(model, layers, args)
    if need <= free:
        return
    fits = [k for k in range(layers - 1, 0, -1) if _build_bytes(model, k, args) <= free]
    hint = f"; --layers {fits[0]} fits" if fits else "; not even one layer fits: profile a smaller model"
    raise CliError(
        f"model: {model.id} with {layers} layers needs about {need / 1e9:,.1f} GB to profile here "
        f"({'a training step' if args.train else 'a forward pass'}, fp32), and {free / 1e9:,.1f} GB is free{hint}"
    )


def _given_twice(paths: list[str]) -> str | None:
    """The first trace named again (the same file by another spelling counts), or None."""
    seen: set[str] = set()
    for path in paths:
        try:
            key = str(Path(path).resolve())
        except (OSError, RuntimeError):
            key = path
        if key in seen:
            return path
        seen.add(key)
    return None
