"""The argument parser of every command."""

from __future__ import annotations

import argparse

import roofline.cli.commands as commands
import roofline.cli.kernel_tables as kernel_tables
from roofline.cli.args import (
    OneLineParser,
    add_calibration,
    add_common,
    add_engine,
    add_llm_options,
    add_memory,
    add_model_dir,
    add_precision,
    attention_dp,
    fraction,
    fraction_or_zero,
    int_up_to,
    non_negative_float,
    positive_float,
    positive_int,
)
from roofline.cli.consistency import SERVE_LENGTHS, SPEC_DEFAULTS
from roofline.cli.load_args import add_load
from roofline.cli.profile_cmd import add_profile_parser
from roofline.cli.train_cmd import cmd_train
from roofline.defaults import (
    CHUNKED_SETTINGS,
    DEFAULT_GRAPH_LAUNCH_OVERHEAD_S,
    DEFAULT_MEMORY_UTILIZATION,
    OBJECTIVES,
)
from roofline.dtypes import COMPUTE_DTYPES
from roofline.loading import CHECKPOINT_DTYPES
from roofline.training import LORA_TARGETS, METHODS, OPTIMIZERS, RECOMPUTE, TRAIN_PRECISIONS, ZERO_STAGES


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m roofline", description="roofline: why an LLM is slow, and which hardware would fix it."
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    hw = sub.add_parser("hardware", help="the accelerator database")
    hw_sub = hw.add_subparsers(dest="hardware_command", required=True, parser_class=OneLineParser)
    p = hw_sub.add_parser("list", help="all devices")
    add_common(p)
    p.set_defaults(func=commands.cmd_hardware_list)
    p = hw_sub.add_parser("show", help="one device with its sources")
    p.add_argument("id")
    add_common(p)
    p.set_defaults(func=commands.cmd_hardware_show)

    p = sub.add_parser("matmul", help="one GEMM on the roofline")
    p.add_argument("--m", type=positive_int, required=True)
    p.add_argument("--n", type=positive_int, required=True)
    p.add_argument("--k", type=positive_int, required=True)
    p.add_argument("--dtype", default="bf16", choices=COMPUTE_DTYPES)
    p.add_argument("--out-dtype", default=None, choices=COMPUTE_DTYPES)
    p.add_argument("--hardware", default="h100-sxm")
    p.add_argument(
        "--kernel-floor-us",
        type=non_negative_float,
        default=DEFAULT_GRAPH_LAUNCH_OVERHEAD_S * 1e6,
        help="least device time of one kernel, microseconds (default %(default)g)",
    )
    add_engine(p, moe=False)
    add_common(p)
    p.set_defaults(func=commands.cmd_matmul)

    md = sub.add_parser("model", help="the model database")
    md_sub = md.add_subparsers(dest="model_command", required=True, parser_class=OneLineParser)
    p = md_sub.add_parser("list", help="all models")
    add_model_dir(p)
    add_common(p)
    p.set_defaults(func=commands.cmd_model_list)
    p = md_sub.add_parser("show", help="one model: shape, parameters, KV bytes per token")
    p.add_argument("id")
    add_model_dir(p)
    add_common(p)
    p.set_defaults(func=commands.cmd_model_show)

    p = sub.add_parser("analyze", help="every op of one prefill or decode step")
    p.add_argument("--phase", required=True, choices=("prefill", "decode"))
    p.add_argument(
        "--seq-len", type=positive_int, required=True, help="prompt length (prefill) or tokens already cached (decode)"
    )
    add_llm_options(p)
    p.set_defaults(func=commands.cmd_analyze)

    p = sub.add_parser("request", help="TTFT, TPOT, end-to-end latency and tokens/s of a batch of requests")
    p.add_argument("--prompt-len", type=positive_int, required=True)
    p.add_argument("--output-len", type=positive_int, required=True)
    add_llm_options(p)
    p.set_defaults(func=commands.cmd_request)

    p = sub.add_parser("advise", help="rank every device for a workload, diagnose it, and evaluate the levers")
    p.add_argument("--phase", required=True, choices=("prefill", "decode", "request"))
    p.add_argument(
        "--seq-len",
        type=positive_int,
        required=True,
        help="prompt length (prefill, request) or tokens already cached (decode)",
    )
    p.add_argument("--output-len", type=positive_int, default=None, help="generated tokens (request; default 128)")
    p.add_argument("--objective", default="latency", choices=OBJECTIVES)
    add_llm_options(p)
    p.set_defaults(func=commands.cmd_advise)

    p = sub.add_parser("measure", help="measure ceilings and kernels on the local device (needs torch)")
    p.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda if present, else cpu")
    p.add_argument("--quick", action="store_true", help="a run of seconds instead of the full suite")
    p.add_argument(
        "--model",
        default=None,
        help="the model whose shapes the sweeps use and whose steps are measured, an id or a config.json "
        "(default llama-3.1-8b on GPUs, llama-3.2-1b on CPUs)",
    )
    add_model_dir(p)
    p.add_argument("--out", default=None, help="write the results file (JSON) here")
    p.add_argument("--json", action="store_true", help="print the results file")
    p.set_defaults(func=commands.cmd_measure)

    p = sub.add_parser("kv", help="KV-cache capacity: sequences that fit against context length")
    p.add_argument("--model", required=True)
    p.add_argument("--hardware", default="h100-sxm")
    add_precision(p, compute=False)
    p.add_argument("--tp", type=positive_int, default=1)
    p.add_argument(
        "--attention-dp",
        type=attention_dp,
        default=1,
        help="attention data parallel ranks in the TP group: each holds the cache of its own sequences only, and "
        "every figure is one rank's, --max-batched-tokens too (SGLang gives each rank its --chunked-prefill-size "
        "over the ranks) (default 1)",
    )
    p.add_argument("--cuda-graphs", action="store_true", help="reserve the memory CUDA-graph capture pins")
    add_memory(p)
    add_calibration(p)
    p.add_argument("--batch", type=positive_int, default=1, help="for the max context and the KV crossover")
    p.add_argument(
        "--context", type=positive_int, default=None, help="for the max batch (default min(8192, the model's maximum))"
    )
    add_model_dir(p)
    add_common(p)
    p.set_defaults(func=commands.cmd_kv)

    p = sub.add_parser("train", help="training memory by term, what fits, the step on the roofline, the levers")
    add_train_options(p)
    p.add_argument(
        "--measure",
        choices=("cpu", "cuda"),
        default=None,
        help="also run a real training step of this setup here (needs torch) and print its peak memory and time",
    )
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("load", help="peak host RAM and device memory of each way to load a checkpoint")
    p.add_argument("--model", required=True, help="a model id or a config.json")
    p.add_argument("--hardware", default="h100-sxm")
    p.add_argument("--checkpoint-dtype", default="bf16", choices=CHECKPOINT_DTYPES)
    p.add_argument("--load-dtype", default="bf16", choices=CHECKPOINT_DTYPES)
    p.add_argument("--shards", type=positive_int, default=1, help="files the checkpoint is split into")
    p.add_argument(
        "--tp", type=positive_int, default=1, help="devices the model is split over, one process each on one host"
    )
    p.add_argument("--host-ram-gb", type=positive_float, default=None, help="the host's RAM, GB, to check against")
    p.add_argument(
        "--measure",
        action="store_true",
        help="also write this model's checkpoint here and load it each way, measuring peak resident memory "
        "(needs torch and safetensors)",
    )
    add_model_dir(p)
    add_common(p)
    p.set_defaults(func=commands.cmd_load)

    p = sub.add_parser(
        "serve", help="serving: latency against throughput per device, the best setup under targets, cost, levers"
    )
    p.add_argument("--model", required=True, help="a model id or a config.json")
    p.add_argument(
        "--hardware", action="append", default=None, help="a device to plan for (repeat; default: every device)"
    )
    p.add_argument("--prompt-len", type=positive_int, default=SERVE_LENGTHS["--prompt-len"], help="mean prompt tokens")
    p.add_argument("--output-len", type=positive_int, default=SERVE_LENGTHS["--output-len"], help="mean output tokens")
    p.add_argument("--ttft-ms", type=non_negative_float, default=2000.0, help="TTFT target (p50), ms")
    p.add_argument("--tpot-ms", type=non_negative_float, default=50.0, help="TPOT target (p50), ms")
    p.add_argument("--tp", type=positive_int, action="append", default=None, help="TP degrees to try (repeat)")
    p.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="ID=USD",
        help="a device-hour's price, overriding the shipped defaults (repeat)",
    )
    p.add_argument(
        "--chunked-prefill",
        choices=tuple(CHUNKED_SETTINGS),
        default="auto",
        help="on: prompt tokens run in the decodes' steps (the frontier) and a prompt past the token budget over "
        "several steps (the simulation); off: prompts in prefill steps of their own, each whole; auto (default): "
        "as --engine runs them by default (vLLM: on; SGLang: prefill steps of their own, prompts split; "
        "TensorRT-LLM: prompts whole, in the decodes' steps)",
    )
    p.add_argument("--no-chunked-prefill", action="store_true", help="the same as --chunked-prefill off")
    add_precision(p)
    p.add_argument(
        "--spec-k",
        type=int_up_to(64),
        default=SPEC_DEFAULTS["--spec-k"],
        help="speculative decoding: drafted tokens per step",
    )
    p.add_argument(
        "--spec-alpha",
        type=fraction_or_zero,
        default=SPEC_DEFAULTS["--spec-alpha"],
        help="speculative decoding: acceptance rate",
    )
    p.add_argument("--draft-model", default=None, help="speculative decoding's draft model (default: n-gram drafting)")
    p.add_argument(
        "--kv-link-gb-per-s",
        type=positive_float,
        default=None,
        help="disaggregation: the link prompts' KV caches cross, GB/s (default the device's scale-up link)",
    )
    add_memory(p)
    add_calibration(p)
    add_engine(p)
    add_model_dir(p)
    add_common(p)
    add_load(p)
    p.set_defaults(func=commands.cmd_serve)

    kernel_tables.add_parsers(sub)
    add_profile_parser(sub)
    return parser


def add_train_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="a model id or a config.json")
    p.add_argument("--hardware", default="h100-sxm")
    p.add_argument("--seq-len", type=positive_int, default=2048)
    p.add_argument(
        "--micro-batch", type=int_up_to(1 << 20), default=1, help="sequences per device per forward/backward"
    )
    p.add_argument(
        "--global-batch", type=positive_int, default=None, help="sequences per optimizer step over all devices"
    )
    p.add_argument(
        "--precision",
        default="mixed",
        choices=TRAIN_PRECISIONS,
        help="mixed: 16-bit weights and gradients with an fp32 master copy (Megatron, DeepSpeed); amp: PyTorch "
        "autocast over fp32 weights; fp32; pure-bf16: bf16 weights, gradients and optimizer state, no master copy",
    )
    p.add_argument("--compute-dtype", default="bf16", choices=("bf16", "fp16"))
    p.add_argument(
        "--fp32-grads",
        action="store_true",
        help="mixed precision: accumulate gradients in fp32 (Megatron's bf16 default, DeepSpeed's partitions)",
    )
    p.add_argument("--optimizer", default="adamw", choices=OPTIMIZERS)
    p.add_argument("--unfused-optimizer", action="store_true", help="for-each AdamW instead of the fused kernel")
    p.add_argument("--recompute", default="none", choices=RECOMPUTE, help="activation checkpointing")
    p.add_argument("--naive-attention", action="store_true", help="an attention kernel that keeps the s x s scores")
    p.add_argument("--method", default="full", choices=METHODS)
    p.add_argument("--lora-rank", type=positive_int, default=None, help="LoRA's adapter rank (default 16)")
    p.add_argument(
        "--lora-targets",
        default=None,
        help="comma-separated matrices the adapters train: "
        + ", ".join(LORA_TARGETS)
        + " (default: q,v; o on MLA models, whose q, k, v are not modelled)",
    )
    p.add_argument("--dp", type=positive_int, default=1, help="data-parallel devices")
    p.add_argument("--zero", type=int, default=0, choices=ZERO_STAGES, help="ZeRO stage (3 = FSDP full shard)")
    p.add_argument("--offload-optimizer", action="store_true", help="optimizer state and master weights on the host")
    p.add_argument(
        "--memory-utilization",
        type=fraction,
        default=DEFAULT_MEMORY_UTILIZATION,
        help="usable fraction of the memory the runtime exposes (context, workspaces, fragmentation), "
        "default %(default)g",
    )
    add_calibration(p)
    add_model_dir(p)
    add_common(p)
