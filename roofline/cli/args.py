"""Arguments: the parser, the value checks every number goes through, and the records built from them."""

from __future__ import annotations

import argparse
import math
import re

from roofline.datafiles import shown_path
from roofline.defaults import (
    ATTENTION_KERNELS,
    DEFAULT_BLOCK_SIZE,
    DEFAULT_CUDA_GRAPH_BYTES,
    DEFAULT_CUDA_GRAPHS,
    DEFAULT_GRAPH_LAUNCH_OVERHEAD_S,
    DEFAULT_INT4_GROUP_SIZE,
    DEFAULT_LAUNCH_OVERHEAD_S,
    DEFAULT_MEMORY_UTILIZATION,
    DEFAULT_NON_TORCH_BYTES,
    FP8_SCALINGS,
    KV_DTYPES,
    MATH_AUTO,
    MATH_CHOICES,
    WEIGHT_DTYPES,
)
from roofline.engines import vllm_default_words
from roofline.measured_roofs import MeasuredRoofs
from roofline.roofs import ENGINES, MOE_KERNELS
from roofline.routing import MOE_ROUTINGS
from roofline.workload import Precision

MAX_INT = 2**53  # every count must be exact in a float64


class CliError(Exception):
    """An input error reported as one line on stderr with exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """Reports a usage error as one line (``-h`` still prints the full usage)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        if len(message) > 400:  # a 100,000-character value is not echoed back whole
            message = f"{message[:300]}… ({len(message):,} characters)"
        self.exit(2, f"error: {self.prog}: {message}\n")


def positive_int(text: str) -> int:
    """A whole number from 1 to 2^53 (larger counts are not exact in float64 arithmetic)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text[:40]!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text[:40]!r}")
    if value > MAX_INT:
        raise argparse.ArgumentTypeError(f"expected an integer up to 2^53 (9007199254740992), got {text[:40]!r}")
    return value


def int_up_to(top: int):
    """A whole number from 1 to ``top``, refused with its flag named (not a field inside: "k must be")."""

    def parse(text: str) -> int:
        if (value := positive_int(text)) > top:
            raise argparse.ArgumentTypeError(f"expected an integer from 1 to {top:,}, got {text[:40]!r}")
        return value

    return parse


def non_negative_int(text: str) -> int:
    """A whole number from 0 to 2^53."""
    try:
        return 0 if text.strip() in ("0", "+0", "-0") else positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text[:40]!r}") from None


def _finite(text: str, what: str) -> float:
    try:
        if math.isfinite(value := float(text)):
            return value
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"expected {what}, got {text[:40]!r}")


def non_negative_float(text: str) -> float:
    value = _finite(text, "a finite number >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text[:40]!r}")
    return value


def positive_float(text: str) -> float:
    value = _finite(text, "a finite number > 0")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text[:40]!r}")
    return value


def fraction(text: str) -> float:
    value = _finite(text, "a number in (0, 1]")
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text[:40]!r}")
    return value


def fraction_or_zero(text: str) -> float:
    value = _finite(text, "a number in [0, 1]")
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text[:40]!r}")
    return value


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.add_argument(
        "--hardware-dir",
        default=None,
        help="a folder of your own device TOML files (adds to or overrides the shipped ones; "
        "$ROOFLINE_HARDWARE_DIR works too)",
    )


def add_engine(parser: argparse.ArgumentParser, moe: bool = True) -> None:
    parser.add_argument(
        "--engine",
        default="auto",
        choices=ENGINES,
        help="whose measured kernels the times are read from: auto (the newest vLLM where the device has its "
        "kernel tables, the datasheet elsewhere), vllm, sglang, trtllm (with that engine's host work per step), "
        "or ideal (the datasheet alone, the ideal bound)",
    )
    parser.add_argument(
        "--engine-version",
        default=None,
        type=engine_version,
        help="the engine's version whose tables to read (default the newest installed; `tables list` shows them)",
    )
    if not moe:  # one GEMM: no experts to run
        return
    parser.add_argument(
        "--moe-kernel",
        default="auto",
        choices=MOE_KERNELS,
        help="which kernels run a MoE model's routed experts, as the server's MoE backend names them (TensorRT-LLM's "
        "moe_config.backend TRTLLM: trtllm-gen; SGLang's --moe-runner-backend; vLLM's --moe-backend): auto is the "
        "fastest the engine's tables timed; a kernel the engine did not time is read from another engine's tables "
        "on the device, and labelled so",
    )
    parser.add_argument(
        "--moe-routing",
        default="auto",
        choices=MOE_ROUTINGS,
        help="how a MoE layer's tokens spread over its experts in the kernel tables read: balanced (every expert an "
        "equal share, a perfectly even spread), power-law-1.01 or power-law-1.2 (the database's estimates for "
        "DeepSeek-V3/R1 and Qwen3-235B serving real prompts); auto: the model's own as the database prices it "
        "(1.01 with shared experts, 1.2 without)",
    )


def engine_version(text: str) -> str:
    version = text[1:] if text[:1] in "vV" else text  # v0.24.0, as release tags write it
    pieces = re.split(r"[.+_-]", version)  # digits first, no empty piece between separators or at the end
    if not 0 < len(version) <= 40 or not version[0].isdigit() or not all(p.isalnum() and p.isascii() for p in pieces):
        raise argparse.ArgumentTypeError(f"expected a version such as 0.24.0 or 1.3.0rc20, got {text[:40]!r}")
    return version


def add_model_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-dir", default=None, help="a folder of your own model TOML files")


def add_overhead(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--launch-overhead-us",
        type=non_negative_float,
        default=DEFAULT_LAUNCH_OVERHEAD_S * 1e6,
        help="host time to dispatch one tiny eager PyTorch op, microseconds (default %(default)g, measured on an "
        "H100 host; linear layers and attention cost 1.75×, norms 1.55×); with --eager a step takes the longer "
        "of the host's dispatching and the device's work",
    )


def add_precision(parser: argparse.ArgumentParser, compute: bool = True) -> None:
    parser.add_argument(
        "--weight-dtype",
        default="bf16",
        choices=WEIGHT_DTYPES,
        help="storage of the linear weights; int4 is group-wise (--group-size), mxfp4/nvfp4 carry block scales",
    )
    if compute:  # the math, and the fp8 weights' scaling it reads kernels at, matter only where steps are timed
        parser.add_argument(
            "--act-dtype",
            default=MATH_AUTO,
            choices=MATH_CHOICES,
            help="compute (math) dtype of the linear layers; auto: the engines' for the weights on each device, fp8 "
            "weights W8A8 and nvfp4 W4A4 where the device has that math, every other case bf16 (default %(default)s)",
        )
        parser.add_argument(
            "--fp8-scaling",
            default="auto",
            choices=FP8_SCALINGS,
            help="how fp8 weights carry their scales, which sets the kernels an engine's tables are read at: one per "
            "tensor (NVIDIA's FP8 checkpoints, vLLM's --quantization fp8) or one per 128 x 128 block (DeepSeek-V3's, "
            "Qwen3's own FP8 releases); auto: the model's own FP8 checkpoint's, per-tensor where it records none "
            "(default %(default)s)",
        )
    parser.add_argument(
        "--expert-weight-dtype",
        default=None,
        choices=WEIGHT_DTYPES,
        help="storage of the routed MoE experts' weights, where it differs (gpt-oss ships mxfp4 experts)",
    )
    parser.add_argument("--kv-dtype", default="bf16", choices=KV_DTYPES)
    parser.add_argument(
        "--group-size",
        type=positive_int,
        default=DEFAULT_INT4_GROUP_SIZE,
        help="int4 weights: elements per scale (default %(default)s)",
    )


def add_memory(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--memory-utilization",
        type=fraction,
        default=DEFAULT_MEMORY_UTILIZATION,
        help="usable fraction of the memory the runtime exposes, in (0, 1] (default %(default)g)",
    )
    parser.add_argument(
        "--block-size",
        type=positive_int,
        default=DEFAULT_BLOCK_SIZE,
        help="paged-KV block, tokens (default %(default)s)",
    )
    parser.add_argument(
        "--max-batched-tokens",
        type=positive_int,
        default=None,
        help="tokens of a serving engine's largest forward pass (its token budget a step), sizing its activation "
        "workspace (default: the engine's own on each device; vLLM's, for the ideal bound, "
        f"{vllm_default_words('max_batched_tokens')})",
    )
    parser.add_argument(
        "--max-num-seqs",
        type=positive_int,
        default=None,
        help="the most sequences a step runs, and the rows of logits of that pass (default: vLLM's on each device, "
        f"{vllm_default_words('max_num_seqs')})",
    )
    parser.add_argument(
        "--non-torch-gb",
        type=non_negative_float,
        default=DEFAULT_NON_TORCH_BYTES / 1e9,
        help="CUDA context, library workspaces and communication buffers per device, GB (default %(default).2f)",
    )
    parser.add_argument(
        "--cuda-graph-gb",
        type=non_negative_float,
        default=DEFAULT_CUDA_GRAPH_BYTES / 1e9,
        help="memory CUDA-graph capture pins per device with --cuda-graphs, GB (default %(default).2f)",
    )


def attention_dp(text: str) -> int:
    """--attention-dp: attention ranks in a TP group, 1 to 1024 (each must divide the TP degree)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer from 1 to 1024, got {text!r}") from None
    if not 1 <= value <= 1024:
        raise argparse.ArgumentTypeError(f"must be an integer from 1 to 1024, got {text!r}")
    return value


def add_llm_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True)
    parser.add_argument("--hardware", default="h100-sxm")
    parser.add_argument("--batch", type=positive_int, default=1)
    add_precision(parser)
    parser.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel degree")
    parser.add_argument(
        "--attention-dp",
        type=attention_dp,
        default=1,
        help="attention data parallel ranks in the TP group (SGLang's --dp with --enable-dp-attention, TensorRT-LLM's "
        "enable_attention_dp; vLLM's --data-parallel-size with expert parallelism comes close for MoE models): each "
        "of them runs attention, the embedding and the LM head on its own --batch sequences at TP / this and holds "
        "only their cache; the MLP and experts run over every rank's tokens at --tp, every rank's step carrying "
        "as many. It must divide --tp (default 1)",
    )
    parser.add_argument("--attention", default="flash", choices=ATTENTION_KERNELS)
    launch = parser.add_mutually_exclusive_group()
    launch.add_argument(
        "--cuda-graphs",
        dest="cuda_graphs",
        action="store_true",
        default=DEFAULT_CUDA_GRAPHS,
        help="replay each step's kernels from a CUDA graph (the default: serving engines run decode this way)",
    )
    launch.add_argument(
        "--eager",
        dest="cuda_graphs",
        action="store_false",
        help="dispatch every kernel from the host (PyTorch eager): small steps become overhead-bound",
    )
    parser.add_argument(
        "--graph-launch-overhead-us",
        type=non_negative_float,
        default=DEFAULT_GRAPH_LAUNCH_OVERHEAD_S * 1e6,
        help="least device time of one kernel (its launch inside a CUDA graph, and the floor of any kernel), "
        "microseconds (default %(default)g)",
    )
    add_memory(parser)
    add_model_dir(parser)
    parser.add_argument(
        "--collectives",
        default=None,
        metavar="FILE",
        help="a measured all-reduce results file: its bus bandwidth and latency replace the datasheet link of the "
        "device it was measured on (a GPU with NCCL); the output says where it was applied and where not",
    )
    parser.add_argument(
        "--force-collectives",
        action="store_true",
        help="apply the --collectives measurement to every device, even one it was not measured on (a CPU gloo "
        "run on a GPU, say); the output says it was forced",
    )
    add_calibration(parser)
    add_engine(parser)
    add_overhead(parser)
    add_common(parser)


def add_calibration(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--calibration",
        default=None,
        metavar="FILE",
        help="a results file of `measure`: the achievable roofs fitted on its kernel sweeps (and the memory it "
        "measured) replace the datasheet for the device it was measured on",
    )


def precision_from_args(args: argparse.Namespace, model=None) -> Precision:
    """The precision the flags give, refused where they contradict each other or ``model``."""
    from roofline.cli.consistency import check_precision_flags

    precision = Precision(
        weight_dtype=args.weight_dtype,
        act_dtype=getattr(args, "act_dtype", MATH_AUTO),
        kv_dtype=args.kv_dtype,
        group_size=args.group_size,
        expert_weight_dtype=args.expert_weight_dtype,
        fp8_scaling=getattr(args, "fp8_scaling", "auto"),
    )
    check_precision_flags(precision, model, args)
    return precision


def measured_from_args(args: argparse.Namespace) -> MeasuredRoofs:
    """The measured results of ``--calibration`` and ``--collectives`` (read once per command),
    with where each applies."""
    cached = getattr(args, "measured_roofs", None)
    if isinstance(cached, MeasuredRoofs):
        return cached
    for option in ("collectives", "calibration"):
        if getattr(args, option, None) == "":
            raise CliError(f"--{option}: expected a results file, got an empty path")
    if getattr(args, "force_collectives", False) and not getattr(args, "collectives", None):
        raise CliError("--force-collectives: applies --collectives FILE to every device; give that file")
    calibration = collectives = None
    if getattr(args, "calibration", None) or getattr(args, "collectives", None):
        from roofline.measure.schema import load_results
    if getattr(args, "calibration", None):
        calibration = load_results(args.calibration).calibration
        if calibration is None:
            raise CliError(f"{args.calibration}: has no calibration (measure it with: python -m roofline measure)")
    if getattr(args, "collectives", None):
        collectives = load_results(args.collectives)
        if collectives.collectives is None:
            raise CliError(f"{args.collectives}: has no all-reduce measurements (run roofline.measure.collectives)")
    measured = MeasuredRoofs(
        calibration=calibration,
        calibration_origin=shown_path(args.calibration) if calibration else "",
        collectives=collectives,
        collectives_origin=shown_path(args.collectives) if collectives else "",
        force_collectives=bool(getattr(args, "force_collectives", False)),
    )
    args.measured_roofs = measured
    return measured


def calibration_from_args(args: argparse.Namespace):
    """The calibration of ``--calibration FILE``, or None."""
    return measured_from_args(args).calibration
