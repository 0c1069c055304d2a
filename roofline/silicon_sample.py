"""The silicon sample (``kernel_db/silicon_sample.csv.gz``, converted from aiconfigurator-core
with the kernel tables): measured TTFT and TPOT of real vLLM, SGLang and TensorRT-LLM serving
runs, a test set (no value of it enters a fit or a default anywhere in roofline, but the engines'
host work on its declared split: ``roofline.engines``). Its rows read, and each mapped to a model,
a device, a precision and the kernel tables it reads.

Mapping of names and precisions (documented choices, not fitted):
- ``MODEL_IDS`` below; Kimi-K2.5 runs as ``kimi-k2`` (the same text decoder: DeepSeek-V3 layout,
  64 heads, 384 experts) and DeepSeek-V3.1 as ``deepseek-v3`` (same architecture).
- ``gemm_quant_mode`` empty: bf16; ``fp8`` and ``fp8_block``: fp8 weights and fp8 math (W8A8);
  ``nvfp4``: nvfp4 weights and fp4 math (W4A4); ``int4_wo``: int4 weights, bf16 math. The MoE
  experts take ``moe_quant_mode`` the same way. gpt-oss keeps its released format (bf16, MXFP4
  experts) whatever the column says.
- KV cache: where the row's source documents the script that ran it, the format that script set
  on the run's measured date (``documented_kv_dtype``: InferenceX's scripts, version by version, in
  ``engine_db/inferencex_kv.toml``, written by ``scripts/inferencex_kv.py``); elsewhere bf16, the
  engines' default (``auto``), which the sample does not contradict.
- The benchmark client, where the row's source names one: ``roofline.benchmark_clients``.
- The scheduler, where the row's source documents the script that ran it (``documented_setup``):
  the settings that script gave the server for the run's own lengths, TP and concurrency
  (``roofline.script_setup`` runs each script version's deciding lines; every version in
  ``engine_db/inferencex_setup.toml``, written by ``scripts/inferencex_kv.py``): the token budget
  (vLLM's ``--max-num-batched-tokens``, SGLang's ``--chunked-prefill-size``, TensorRT-LLM's
  ``max_num_tokens``), SGLang's ``--scheduler-recv-interval`` and TensorRT-LLM's
  ``batch_wait_timeout_iters`` / ``batch_wait_max_tokens_ratio``. A setting counts where every
  version in effect that day gives it the same value; elsewhere the engine's default stands.
- The sequences a step runs, where the script caps them (vLLM's ``--max-num-seqs``): the rest of
  the clients' requests wait. Else at least the run's concurrency (``SEQUENCE_CAP_KNOB``).
- Which steps replay a CUDA graph, where the script says: vLLM's ``--max-num-seqs`` (its default
  largest graph is twice it, at most 512 tokens), ``max-cudagraph-capture-size`` (``cuda-graph-sizes``
  before it) and a ``cudagraph_mode`` of ``FULL_DECODE_ONLY`` in its compilation config (no step
  with prompt tokens); TensorRT-LLM's ``enable_piecewise_cuda_graph``, captured up to the token
  budget. Elsewhere each engine's default (``engine_db/engines.toml``).
- TP and the experts' split as aiconfigurator's convention has them (``moe_tp_size x moe_ep_size =
  tp_size``, the GPUs of one TP group); InferenceX's rows of runs with expert parallelism that
  record TP x EP as ``tp_size`` (TP 16 or 64 on an 8-GPU board) are read as their config ran them
  (``_config_parallelism``).
- Expert parallelism counts as tensor parallelism over the experts on the datasheet; the MoE
  tables are read at the run's own (moe_tp, moe_ep), for the MoE kernels the script set
  (``roofline.roofs.MOE_BACKENDS``) where the tables tell them apart, else the fastest the engine
  timed; at the experts' split the script set where it decided it itself (``--ep_size=$TP``, an
  ``EP_SIZE`` it assigns). A row that records attention data parallelism runs as one of its ranks
  (``roofline.sample_ranks``); one whose script alone turns it on (``enable_attention_dp``) is
  left out: the row does not say how its clients were split.
- A run that InferenceX's configurations decoded speculatively (MTP), or may have, is left out
  (``roofline.inferencex_runs``): the simulation decodes one token a step.
- A run the sample holds more than once (InferenceX's three exports) counts once (``sample_twins``).
"""

from __future__ import annotations

import csv
import math
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from roofline.benchmark_clients import (  # noqa: F401  (the clients are read from here too)
    INFERENCEX_CLIENT,
    RECORDED_CLIENT,
    BenchmarkClient,
    benchmark_client,
    measured_date,
)
from roofline.hardware import get_hardware
from roofline.inferencex_runs import why_speculative
from roofline.inferencex_scripts import (
    INFERENCEX_MODELS,
    INFERENCEX_SETUP,
    inferencex_kv_scripts,
    scripts_in_effect,
    where_read,
)
from roofline.models import ModelConfig
from roofline.roofs import MOE_KERNEL_WORDS, moe_kernel_of_backend
from roofline.sample_checks import check_sample_columns, check_sample_path, unreadable, why_figures_not_a_run
from roofline.sample_clients import why_clients_not_batch
from roofline.sample_precision import QUANT, QUANT_WEIGHT_ONLY, block_fp8_checkpoints, fp8_tables  # noqa: F401
from roofline.sample_ranks import why_ranks_not_scored
from roofline.sample_twins import SAME_RUN_REASON, mark_twins
from roofline.tables import TablePredictor, store
from roofline.tables.convert import SYSTEM_TO_HARDWARE
from roofline.tables.source import KernelTables
from roofline.workload import Precision

MODEL_IDS = {
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b",
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
    "Qwen/Qwen3-32B": "qwen3-32b",
    "nvidia/Qwen3-32B-NVFP4": "qwen3-32b",
    "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b",
    "deepseek-ai/DeepSeek-R1": "deepseek-r1",
    "nvidia/DeepSeek-R1-NVFP4": "deepseek-r1",
    "deepseek-ai/DeepSeek-V3": "deepseek-v3",
    "nvidia/DeepSeek-V3.1-NVFP4": "deepseek-v3",
    "moonshotai/Kimi-K2.5": "kimi-k2",
    "openai/gpt-oss-120b": "gpt-oss-120b",
}
# The sample's system names: the converter's one mapping to hardware_db ids.
DEVICE_IDS = {system: hw for system, hw in SYSTEM_TO_HARDWARE.items() if hw}


def _scripts_in_effect(row: dict[str, str], scripts: tuple[dict, ...]) -> tuple[str, dict[str, list]] | None:
    """The measured date of an InferenceX run and the versions of its scripts in effect that day
    (``roofline.inferencex_scripts``); None for another source, no date or no model known to InferenceX."""
    date = measured_date(row)
    model = INFERENCEX_MODELS.get(row.get("model_path", ""))
    if date is None or model is None:
        return None
    gpu = (row.get("system") or "").removesuffix("_sxm")
    return date, scripts_in_effect(scripts, (model, row.get("precision"), gpu, row.get("backend")), date)


def documented_kv_dtype(row: dict[str, str]) -> tuple[str, str] | None:
    """The KV-cache format the script that ran an InferenceX run set on its measured date, and which
    script versions say so; None where that cannot be told (another source, no date, no script of
    the run's model, precision, GPU and engine, or its scripts disagreeing on that date)."""
    effect = _scripts_in_effect(row, inferencex_kv_scripts())
    if effect is None:
        return None
    date, found = effect
    formats = {kv for versions in found.values() for _, _, kv in versions}
    if len(formats) != 1 or not formats <= {"fp8", "bf16"}:  # disagreeing, "mixed" or unknown to roofline
        return None
    return formats.pop(), where_read(date, found)


# Each engine's name for its token budget per step (roofline's max_num_batched_tokens), and for its
# cap on the sequences a step runs (roofline's max_num_seqs). SGLang's --max-running-requests is not
# read: 12 DeepSeek-R1 runs on B200 at 256 and 512 clients, whose script sets 128, measured TPOTs
# and TTFTs that only a larger batch gives (README, "How close the predictions come"). Nor is
# TensorRT-LLM's max_batch_size: its scripts also name the CUDA graphs' largest batch so.
TOKEN_BUDGET_KNOB = {"vllm": "max_num_batched_tokens", "sglang": "chunked_prefill_size", "trtllm": "max_num_tokens"}
SEQUENCE_CAP_KNOB = {"vllm": "max_num_seqs"}


@dataclass(frozen=True)
class ScriptSetup:
    """The scheduler settings a run's script gave its server (None: the engine's default)."""

    token_budget: int | None = None
    recv_interval: int | None = None  # SGLang's --scheduler-recv-interval
    batch_wait_iters: int | None = None  # TensorRT-LLM's batch_wait_timeout_iters ...
    batch_wait_ratio: float | None = None  # ... and batch_wait_max_tokens_ratio
    moe_kernel: str | None = None  # the MoE kernel family its MoE backend setting names (roofline.roofs)
    ep_size: int | None = None  # the experts' parallel degree it set (TensorRT-LLM's --ep_size, SGLang's --ep-size)
    attention_dp: bool | None = None  # TensorRT-LLM's enable_attention_dp
    max_num_seqs: int | None = None  # the running sequences' cap: vLLM's --max-num-seqs
    prompt_graph_tokens: int | None = None  # the largest step with prompt tokens replayed from a CUDA graph
    where: str = ""

    def words(self) -> str:
        parts = []
        if self.token_budget is not None:
            parts.append(f"{self.token_budget:,} tokens a step")
        if self.recv_interval is not None:
            parts.append(f"new requests taken in every {self.recv_interval} decode steps")
        if self.batch_wait_iters:
            ratio = self.batch_wait_ratio or 0.0
            parts.append(f"prompts held up to {self.batch_wait_iters} steps for {ratio:.0%} of the budget")
        if self.moe_kernel is not None:
            parts.append(f"{MOE_KERNEL_WORDS[self.moe_kernel]} MoE kernels")
        if self.ep_size is not None:
            parts.append(
                f"experts split over {self.ep_size} GPUs by EP" if self.ep_size > 1 else "no expert parallelism"
            )
        if self.attention_dp:
            parts.append("attention data parallel")
        if self.max_num_seqs is not None:
            parts.append(f"at most {self.max_num_seqs:,} sequences")
        if self.prompt_graph_tokens is not None:
            parts.append(f"CUDA graphs for steps of up to {self.prompt_graph_tokens:,} tokens")
        return ", ".join(parts) or "the engine's defaults"


@cache
def _inferencex_digests() -> tuple[tuple[dict, ...], dict[str, list[str]]]:
    with open(INFERENCEX_SETUP, "rb") as f:
        data = tomllib.load(f)
    return tuple(data.get("script", ())), data.get("digest", {})


def run_variables(row: dict[str, str]) -> dict[str, str] | None:
    """The variables InferenceX's workflow gives a benchmark script, as far as the row tells them:
    lengths, TP, concurrency, expert parallelism, attention DP, and the throughput run's EVAL_ONLY
    unset (an eval-only run measures no throughput)."""
    tp, conc = _number(row, "tp_size", 1), _number(row, "batch_size")
    if row.get("mode") not in (None, "", "agg") or not (math.isfinite(tp) and math.isfinite(conc)):
        return None  # a disaggregated run, or one without its TP or concurrency: not a single-node script's
    env = {"ISL": row.get("isl", ""), "OSL": row.get("osl", ""), "EVAL_ONLY": "", "RUN_EVAL": ""}
    env |= {"TP": str(int(tp)), "CONC": str(int(conc))}
    env["RANDOM_RANGE_RATIO"] = str(INFERENCEX_CLIENT.range_ratio)
    if _number(row, "moe_ep_size", 0) >= 1:
        env["EP_SIZE"] = str(int(_number(row, "moe_ep_size")))
    env["DP_ATTENTION"] = "true" if _number(row, "attention_dp_size", 1) > 1 else "false"
    return env


def documented_setup(row: dict[str, str]) -> ScriptSetup | None:
    """The scheduler settings the scripts that ran an InferenceX run gave its server on its
    measured date, each run for the row's variables (``roofline.script_setup``): a setting counts
    where every script version in effect gives it the same value; None for another source."""
    return _documented_setup(tuple(row.items()))


@cache
def _documented_setup(items: tuple[tuple[str, str], ...]) -> ScriptSetup | None:
    from roofline.script_setup import evaluate

    row = dict(items)
    scripts, digests = _inferencex_digests()
    effect = _scripts_in_effect(row, scripts)
    if effect is None or not effect[1]:
        return None
    date, found = effect
    env = run_variables(row)
    if env is None:
        return None
    settings = [evaluate(digests[key], env) for versions in found.values() for _, _, key in versions]
    budget_knob = TOKEN_BUDGET_KNOB.get(row.get("backend", ""), "")

    def agreed(knob: str, kind: type, low: float, high: float) -> int | float | None:
        values = {s.get(knob, "default") for s in settings}
        if len(values) != 1:
            return None
        value = values.pop()
        try:
            number = kind(value)
        except (TypeError, ValueError):
            return None
        return number if low <= number <= high else None

    engine = row.get("backend")
    backends = {s.get("moe_backend", "default") for s in settings}
    moe_kernel = moe_kernel_of_backend(backends.pop()) if len(backends) == 1 else None
    attention_dp = {str(s.get("enable_attention_dp", "default")).lower() for s in settings}
    attention_dp = {"true": True, "false": False}.get(attention_dp.pop()) if len(attention_dp) == 1 else None
    # TensorRT-LLM skips batch waiting under attention data parallelism.
    waits = engine == "trtllm" and env["DP_ATTENTION"] == "false"
    budget = agreed(budget_knob, int, 1, 1 << 24) if budget_knob else None
    # The steps replayed from a CUDA graph: vLLM's largest captured step where set (else its default,
    # from the sequence cap), none with prompt tokens under its FULL_DECODE_ONLY mode; TensorRT-LLM's
    # piecewise graphs, which InferenceX's scripts capture up to the token budget (capture_num_tokens
    # ending at max_num_tokens).
    graph_tokens = agreed("cudagraph_capture_size", int, 1, 1 << 24) if engine == "vllm" else None
    modes = {s.get("cudagraph_mode", "default") for s in settings}
    if engine == "vllm" and modes == {"FULL_DECODE_ONLY"}:  # graphs for decode steps alone
        graph_tokens = 0
    piecewise = {str(s.get("enable_piecewise_cuda_graph", "false")).lower() for s in settings}
    if engine == "trtllm" and piecewise == {"true"}:
        graph_tokens = budget
    return ScriptSetup(
        token_budget=budget,
        recv_interval=agreed("scheduler_recv_interval", int, 1, 1000) if engine == "sglang" else None,
        batch_wait_iters=agreed("batch_wait_timeout_iters", int, 0, 1 << 20) if waits else None,
        batch_wait_ratio=agreed("batch_wait_max_tokens_ratio", float, 0.0, 1.0) if waits else None,
        moe_kernel=moe_kernel,
        ep_size=agreed("ep_size", int, 1, 1024),
        attention_dp=attention_dp,
        max_num_seqs=agreed(SEQUENCE_CAP_KNOB[engine], int, 1, 1 << 20) if engine in SEQUENCE_CAP_KNOB else None,
        prompt_graph_tokens=graph_tokens,
        where=where_read(date, found),
    )


def load_silicon_sample(path: Path | None = None) -> list[dict[str, str]]:
    """The sample's rows as strings (empty where the run left a column blank), each repeat of a
    run marked ``same_as`` the row kept (``roofline.sample_twins``)."""
    import gzip

    if path is None:
        dirs = [d for d in store.search_dirs() if (d / "silicon_sample.csv.gz").exists()]
        if not dirs:
            raise FileNotFoundError("no silicon_sample.csv.gz: run `python -m roofline tables import`")
        path = dirs[0] / "silicon_sample.csv.gz"
    else:
        path = Path(path)
        check_sample_path(path)
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rt", newline="") as f:
            reader = csv.DictReader(f)
            check_sample_columns(path, reader.fieldnames)
            rows = list(reader)
    except (UnicodeDecodeError, OSError, csv.Error) as exc:
        raise unreadable(path, exc) from None
    return mark_twins([_config_parallelism(row) for row in rows])


def _config_parallelism(row: dict[str, str]) -> dict[str, str]:
    """The row with its TP and expert split as the run's config set them (module notes). The
    sample's other rows follow aiconfigurator's convention, ``moe_tp_size x moe_ep_size = tp_size``
    over the GPUs of one TP group (InferenceX's ``{ tp: 4, ep: 4 }`` as ``tp_size`` 4,
    ``moe_tp_size`` 1, ``moe_ep_size`` 4, its 2026-03-25 export), but some of InferenceX's runs with
    expert parallelism record TP x EP as ``tp_size`` and the config's TP as ``moe_tp_size`` (the same
    config as 16, 4, 4): read so where that TP exceeds the scale-up domain of the device (an
    8-GPU HGX board running TP 16 or 64), which no single-node run can. The row's own figures are
    kept as ``recorded_parallelism``."""
    if benchmark_client(row) is not INFERENCEX_CLIENT or _number(row, "attention_dp_size", 1) > 1:
        return row
    tp, moe_tp, ep = (_number(row, k, 0) for k in ("tp_size", "moe_tp_size", "moe_ep_size"))
    if not (ep > 1 and moe_tp >= ep and tp == moe_tp * ep and moe_tp % ep == 0) or row.get("system") not in DEVICE_IDS:
        return row
    link = get_hardware(DEVICE_IDS[row["system"]]).interconnect
    if link is None or link.domain_size is None or tp <= link.domain_size:
        return row
    recorded = f"tp_size {tp:g}, moe_tp_size {moe_tp:g}, moe_ep_size {ep:g}"
    return row | {"tp_size": f"{moe_tp:g}", "moe_tp_size": f"{moe_tp / ep:g}", "recorded_parallelism": recorded}


def _number(row: dict[str, str], key: str, default: float = float("nan")) -> float:
    value = row.get(key, "")
    return float(value) if value not in ("", None) else default


def precision_for(row: dict[str, str], model: ModelConfig) -> Precision:
    """The run's precision as roofline's Precision (see the module notes), its fp8 scaling its GEMMs'
    (``run_tables`` reads the experts at their own, which may differ: Qwen3.5's, GLM-5's)."""
    kv, scaling = kv_dtype_for(row), "block" if fp8_tables(row)[0] else "per-tensor"
    if model.id.startswith("gpt-oss"):
        return Precision("bf16", "bf16", kv, expert_weight_dtype="mxfp4", fp8_scaling=scaling)
    gemm = row.get("gemm_quant_mode") or ""
    moe = row.get("moe_quant_mode") or gemm
    if gemm in QUANT_WEIGHT_ONLY:
        expert = QUANT_WEIGHT_ONLY.get(moe, QUANT.get(moe, ("bf16",))[0])
        return Precision(QUANT_WEIGHT_ONLY[gemm], "bf16", kv, expert_weight_dtype=expert, fp8_scaling=scaling)
    if gemm not in QUANT:
        raise ValueError(f"quant mode {gemm!r} not mapped")
    weight, math_dtype = QUANT[gemm]
    expert = QUANT_WEIGHT_ONLY.get(moe) or QUANT.get(moe, (weight,))[0]
    expert = expert if expert != weight else None
    return Precision(weight, math_dtype, kv, expert_weight_dtype=expert, fp8_scaling=scaling)


def kv_dtype_for(row: dict[str, str]) -> str:
    """The run's KV-cache format: its script's where documented, else bf16 (module notes)."""
    documented = documented_kv_dtype(row)
    return documented[0] if documented else "bf16"


def run_tables(
    row: dict[str, str], predictors: dict | None = None, moe_routing: str | None = None
) -> KernelTables | None:
    """The kernel tables of the run's engine (its version, or the nearest converted) on its device,
    read the way the run's checkpoint runs (block-fp8, the experts' TP x EP split) and its MoE
    tokens routed as ``moe_routing`` says (None or "auto": the model's own, ``roofline.routing``);
    None where none are installed."""
    device = DEVICE_IDS[row["system"]]
    key = (device, row["backend"], row.get("backend_version") or "")
    predictors = {} if predictors is None else predictors
    if key not in predictors:
        predictors[key] = TablePredictor.open(device, row["backend"], row.get("backend_version") or None, False)
    predictor = predictors[key]
    if predictor is None:
        return None
    gemm_dtype, moe_dtype = fp8_tables(row)
    moe_tp, moe_ep = int(_number(row, "moe_tp_size", 0)), int(_number(row, "moe_ep_size", 0))
    moe_parallel = (moe_tp, moe_ep) if moe_tp >= 1 and moe_ep >= 1 else None
    setup = documented_setup(row)  # the MoE kernels and expert parallelism its script set, where it did
    tp = int(_number(row, "tp_size", 1))
    if setup is not None and setup.ep_size is not None and tp % setup.ep_size == 0:
        moe_parallel = (tp // setup.ep_size, setup.ep_size)  # the script's, where the row says otherwise
    return KernelTables(
        predictor,
        gemm_dtype=gemm_dtype,
        moe_parallel=moe_parallel,
        moe_dtype=moe_dtype,
        moe_kernel=None if setup is None else setup.moe_kernel,
        moe_routing=None if moe_routing in (None, "auto") else moe_routing,
    )


def why_not_scored(row: dict[str, str]) -> str | None:
    if row.get("same_as"):
        return SAME_RUN_REASON
    if row.get("mode") != "agg":
        return "disaggregated run (needs the serving simulation)"
    if row.get("model_path") not in MODEL_IDS:
        return "model not in model_db"
    if row.get("system") not in DEVICE_IDS:
        return "device not in hardware_db"
    if not math.isfinite(_number(row, "silicon_tpot_ms")) or not math.isfinite(_number(row, "batch_size")):
        return "no measured TPOT or concurrency"
    if not_a_run := why_figures_not_a_run(row):
        return not_a_run
    if _number(row, "pp_size", 1) > 1:
        return "pipeline parallel"
    if parallel := why_ranks_not_scored(row) or why_clients_not_batch(row):
        return parallel
    if speculative := why_speculative(row):
        return speculative
    setup = documented_setup(row)
    if setup is not None and setup.attention_dp and not _number(row, "attention_dp_size", 1) > 1:
        return "attention data parallel (its script sets it; the row does not say)"
    return None
