"""Flags that each parse but contradict one another or the model: refused by name before any work,
where the command would otherwise drop one of them in silence (a ``--group-size`` beside bf16
weights, a batch past ``--max-num-seqs``, speculative decoding beside a simulated load)."""

from __future__ import annotations

import argparse

from roofline.cli.args import CliError


def check_precision_flags(precision, model=None, args: argparse.Namespace | None = None) -> None:
    """Refuse precision flags that change nothing (``Precision.unused_fields``): ``--group-size``
    without int4 weights, ``--fp8-scaling`` other than auto without fp8 weights, and, where the
    model is known, ``--expert-weight-dtype`` on a model with no routed experts."""
    unused = precision.unused_fields(model)
    if "expert_weight_dtype" in unused:
        raise CliError(
            f"--expert-weight-dtype: {model.name} has no routed experts (a dense model); give its weights' "
            "format with --weight-dtype"
        )
    if args is not None:
        check_moe_flags(args, model)
    experts = precision.expert_weight_dtype
    weights = precision.weight_dtype + (f" (experts {experts})" if experts else "")
    if "group_size" in unused:
        raise CliError(
            f"--group-size: sets int4 weights' elements per scale; the weights here are {weights} "
            "(give --weight-dtype int4 or --expert-weight-dtype int4)"
        )
    if "fp8_scaling" in unused:
        raise CliError(
            f"--fp8-scaling: sets how fp8 weights carry their scales; the weights here are {weights} "
            "(give --weight-dtype fp8 or --expert-weight-dtype fp8)"
        )


def check_moe_flags(args: argparse.Namespace, model=None) -> None:
    """Refuse ``--moe-kernel`` and ``--moe-routing`` other than auto on a model with no routed
    experts: they pick the experts' kernels and spread, and a dense model has none (they had been
    taken and changed nothing)."""
    if model is None or model.moe is not None:
        return
    given = [
        flag
        for flag in ("--moe-kernel", "--moe-routing")
        if getattr(args, flag[2:].replace("-", "_"), "auto") != "auto"
    ]
    if given:
        raise CliError(f"{' and '.join(given)}: {model.name} has no routed experts (a dense model); leave them on auto")


def check_batch_within_seqs(args: argparse.Namespace) -> None:
    """Refuse a ``--batch`` of more sequences than the ``--max-num-seqs`` given beside it: no step of
    that engine runs them (left to the engine's own cap where the flag is not given)."""
    cap = getattr(args, "max_num_seqs", None)
    batch = getattr(args, "batch", None)
    if cap is not None and batch is not None and batch > cap:
        raise CliError(
            f"--batch: {batch:,} sequences exceed --max-num-seqs {cap:,}, the most a step runs; raise "
            "--max-num-seqs or lower --batch"
        )


def check_batch_wait_pair(args: argparse.Namespace) -> None:
    """Refuse one of TensorRT-LLM's two batch-waiting flags without the other: its scheduler holds a
    step's prompts while fewer steps have waited than ``--batch-wait-iters`` *and* the step's tokens
    are under ``--batch-wait-ratio`` of the token budget, so either alone holds nothing (the engine
    takes it and changes nothing; here it would be dropped in silence)."""
    if getattr(args, "engine", None) != "trtllm":
        return  # on another engine (auto and ideal too) refused as TensorRT-LLM's, whichever is given
    iters, ratio = getattr(args, "batch_wait_iters", 0), getattr(args, "batch_wait_ratio", 0.0)
    if bool(iters) != bool(ratio):
        given, missing = (
            ("--batch-wait-iters", "--batch-wait-ratio") if iters else ("--batch-wait-ratio", "--batch-wait-iters")
        )
        raise CliError(
            f"{given}: holds prompts only beside {missing} above 0 (TensorRT-LLM holds a step's prompts while fewer "
            "steps have waited than --batch-wait-iters and its tokens are under --batch-wait-ratio of the token "
            "budget); either alone holds nothing"
        )


# serve's defaults (the parser reads them here): a value other than these was given.
SPEC_DEFAULTS = {"--spec-k": 4, "--spec-alpha": 0.7, "--draft-model": None}
SERVE_LENGTHS = {"--prompt-len": 1024, "--output-len": 256}


def check_serve_flags(args: argparse.Namespace, load: str | None) -> None:
    """Refuse ``serve`` flags the run asked for would ignore: speculative decoding beside a
    simulated load or rate sweep (``load``: the run's flag, None for the steady-state plan), and
    the lengths beside a trace or a measured file, which carry their own."""
    if load is not None:
        for flag, default in SPEC_DEFAULTS.items():
            if getattr(args, flag[2:].replace("-", "_")) != default:
                raise CliError(
                    f"{flag}: speculative decoding is priced beside the steady-state plan (serve without a load); "
                    f"the simulation of {load} decodes one token a step, so it would be ignored"
                )
    if load in ("--trace", "--measured"):
        for flag, default in SERVE_LENGTHS.items():
            if getattr(args, flag[2:].replace("-", "_")) != default:
                carried = "its lines' lengths" if load == "--trace" else "each point's own lengths"
                raise CliError(f"{flag}: {load} carries {carried}; it would be ignored")


def serve_models(args: argparse.Namespace):
    """``serve``'s model and its ``--draft-model`` (None: n-gram drafting), a draft no smaller than
    the target refused by the parameters one token reads (an MoE's active ones): its k steps would
    cost more than the target steps they save."""
    from roofline.models import get_model

    model = get_model(args.model, args.model_dir)
    if args.draft_model is None:
        return model, None
    draft = get_model(args.draft_model, args.model_dir)
    draft_b, target_b = (m.param_counts()["active_per_token"] / 1e9 for m in (draft, model))
    if draft_b >= target_b:
        raise CliError(
            f"--draft-model: {draft.name} ({draft_b:,.1f} B parameters a token) is not smaller than the target "
            f"{model.name} ({target_b:,.1f} B); a draft model drafts for a larger one"
        )
    return model, draft
