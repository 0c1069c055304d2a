"""Every default and every list of choices, in one place: the command line and the pages import these.

Numbers here are settings, not hardware facts: each says where its default comes from, and each
can be changed by the user (a command-line flag, a page widget, a ``Settings`` field).
"""

from __future__ import annotations

# ---- choices ---------------------------------------------------------------------------------
PHASES: tuple[str, ...] = ("prefill", "decode")
WORKLOAD_PHASES: tuple[str, ...] = ("prefill", "decode", "request")
ATTENTION_KERNELS: tuple[str, ...] = ("flash", "naive")
# Storage formats of linear-layer weights (roofline.dtypes.WEIGHT_FORMATS says what each stores).
WEIGHT_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "mxfp4", "nvfp4")
# The dtype the linear layers compute in; its peak is used (fp8 = W8A8, fp4 = W4A4).
ACT_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8", "fp4")
# The math a command or page is asked for: a dtype, or "auto", the math the serving engines run the
# weights in on each device (roofline.precision.engine_math: fp8 checkpoints W8A8 and NVFP4 W4A4
# where the device has that math, every other format, or a mix of formats, in bf16).
MATH_AUTO = "auto"
MATH_CHOICES: tuple[str, ...] = (MATH_AUTO, *ACT_DTYPES)
KV_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
# How fp8 weights carry their scales, which sets the kernels an engine runs for them: one scale per
# tensor (NVIDIA ModelOpt's FP8 checkpoints, vLLM's online --quantization fp8) or one per 128 x 128
# block (DeepSeek-V3's format, Qwen3's own FP8 releases). auto: the model's own published FP8
# checkpoint's (model_db's fp8_checkpoint), per-tensor where the model records none.
FP8_SCALINGS: tuple[str, ...] = ("auto", "per-tensor", "block")
# How a closed loop's clients send their first requests, as `validate --load --clients` scores them:
# together (as vllm bench serve, GuideLLM and aiperf start them by default) or spread out of step.
CLIENT_STARTS: tuple[str, ...] = ("together", "out-of-step")
# What an op timed within the fused MoE layer it runs in says it rests on, before that layer's source.
FUSED_MOE_PREFIX = "inside the fused MoE layer: "
# The highest request rate a simulated open loop takes, requests/s.
MAX_RATE_PER_S = 1e9
# How an open loop's rate ramps (vllm bench serve's --ramp-up-strategy).
RATE_RAMPS: tuple[str, ...] = ("linear", "exponential")
# Chunked prefill as the command line and the Serving page take it: the engine's own way (auto, None), on or off.
CHUNKED_SETTINGS: dict[str, bool | None] = {"auto": None, "on": True, "off": False}
# Tensor-parallel degrees searched for the smallest one that fits, and offered by the pages.
TP_DEGREES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
TP_CHOICES: tuple[int, ...] = (1, 2, 4, 8, 16)
OBJECTIVES: tuple[str, ...] = ("latency", "throughput", "per-watt")

# ---- overheads -------------------------------------------------------------------------------
# Host time to dispatch one tiny PyTorch op in eager mode, measured on an H100 host (torch 2.11,
# CUDA 13; ../shared kernel sweeps: a tiny add 10.6 us). A setting, not a hardware fact: a fast
# bare-metal host takes less.
DEFAULT_LAUNCH_OVERHEAD_S = 10.6e-6
# Other ops cost more to dispatch than a tiny add, relative to it (same measurement: a linear
# layer 18.5 us, an RMSNorm 16.4 us). Attention (an SDPA call) was not measured apart and is
# taken to cost what a linear layer does.
HOST_COST_FACTORS = {
    "linear": 18.5 / 10.6,
    "attention_prefill": 18.5 / 10.6,
    "attention_decode": 18.5 / 10.6,
    "norm": 16.4 / 10.6,
}
# The least device time of one kernel: 200 tiny kernels replayed from a CUDA graph took 1.2 us
# each on the same H100. With CUDA graphs the host cost per kernel is gone.
DEFAULT_GRAPH_LAUNCH_OVERHEAD_S = 1.2e-6
# Serving engines (vLLM, SGLang, TensorRT-LLM) replay decode steps from CUDA graphs, so the
# command line and the pages time steps that way unless told --eager.
DEFAULT_CUDA_GRAPHS = True
# Host cost of replaying a CUDA graph, once per step (a tiny add dispatch stands in).
DEFAULT_GRAPH_REPLAY_S = 10.6e-6
# Fixed cost of one collective (NCCL all-reduce of a small message within one node).
DEFAULT_COLLECTIVE_LATENCY_S = 10e-6

# ---- memory (a serving engine's settings, named as vLLM names them) --------------------------
DEFAULT_MEMORY_UTILIZATION = 0.9  # vLLM's gpu_memory_utilization default
DEFAULT_BLOCK_SIZE = 16  # vLLM's default KV block, tokens
# vLLM's OpenAI server, told neither, sets max_num_batched_tokens and max_num_seqs by the GPU
# (vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults): 8192 and 1024 on one exposing 70 GiB or
# more that is not an A100 (its name excluded: a larger budget had cost it throughput, vLLM PR #17885),
# else 2048 and 256. roofline.engines.vllm_batch_defaults applies the rule to a device.
VLLM_LARGE_GPU_BYTES = 70 * 2**30
VLLM_LARGE_GPU_DEFAULTS = (8192, 1024)  # (max_num_batched_tokens, max_num_seqs)
VLLM_OTHER_GPU_DEFAULTS = (2048, 256)
DEFAULT_INT4_GROUP_SIZE = 128  # GPTQ / AWQ group size

# ---- request evaluation ----------------------------------------------------------------------
# A request's decode steps are evaluated one by one up to this many; beyond it, at this many
# evenly spaced contexts (the step time is smooth in the context), each standing for its share.
MAX_DECODE_POINTS = 256

# ---- memory a serving engine keeps outside its KV cache ----------------------------------------
# From vLLM v0.19.0's start-up log of Llama 3.1 8B on one H100 80GB (llm-d-planner,
# accuracy/results/v0.19.0/logs/meta-llama-llama-3-1-8b--h100-80gb--tp1pp1dp1--16384.log):
# "non-torch forward increase memory: 0.25GiB" (cuBLAS and other library workspaces), which vLLM
# subtracts from its budget. The CUDA context it found at start-up (0.51 GiB) is not subtracted:
# it sits in the 1 - memory_utilization margin.
DEFAULT_NON_TORCH_BYTES = 0.25 * 2**30
# With tensor parallelism NCCL's buffers add to it: the same project's TP=2 run logs 2.07 GiB of
# non-torch forward growth per GPU against 0.25 GiB at TP=1 -> 1.82 GiB per device when TP > 1.
DEFAULT_COMM_BUFFER_BYTES = 1.82 * 2**30
# "Graph capturing finished in 3 secs, took 0.91 GiB" in the same log: the memory CUDA-graph
# capture pins (model-dependent; a setting).
DEFAULT_CUDA_GRAPH_BYTES = 0.91 * 2**30

# Replicas behind a router in the serving simulation (serve --replicas, --router).
ROUTERS = ("round-robin", "random", "least-loaded")
MAX_REPLICAS = 1024
# SGLang's intake counter: a decode step adds 1, any other step this much (its
# SchedulerRecvSkipper's default weight), so --scheduler-recv-interval is at most this.
RECV_OTHER_WEIGHT = 1000
