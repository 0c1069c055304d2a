"""One call from a model, a device and a load to a simulated benchmark: what the command line
and the Serving page run."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from roofline.defaults import MAX_REPLICAS
from roofline.engines import engine_profile, prompt_modes, whole_prompt_refusal
from roofline.hardware import Hardware
from roofline.models import ModelConfig
from roofline.roofs import resolved_engine
from roofline.serving.simulation.fleet import check, least_loaded, merge, share, split
from roofline.serving.simulation.load import Requests
from roofline.serving.simulation.metrics import Targets, summary
from roofline.serving.simulation.run import Run, simulate
from roofline.serving.simulation.scheduler import EngineKnobs
from roofline.serving.simulation.steptime import StepTimes, step_times
from roofline.settings import Settings
from roofline.workload import Precision

SERIES_POINTS = 400
SCHEDULER_WORDS = {
    "vllm": "continuous batching, vLLM V1's policy (running first, then FCFS admission; recompute preemption)",
    "sglang": "SGLang's policy (a prefill batch whenever one can run, else every running request decodes; "
    "retraction when the cache is short)",
    "trtllm": "TensorRT-LLM's in-flight batching (GUARANTEED_NO_EVICT: a request is admitted with the blocks of its "
    "whole output, never evicted)",
}  # rows of the time series a result carries (the run is sampled evenly)


@dataclass(frozen=True)
class Simulated:
    run: Run
    times: StepTimes
    knobs: EngineKnobs
    kv_blocks: int  # per replica
    replicas: int = 1
    router: str = "round-robin"
    attention_dp: int = 1  # attention ranks per replica, each with its own scheduler and cache


def rank_settings(settings: Settings, hw: Hardware | None = None) -> Settings:
    """The settings one attention data parallel rank runs with on ``hw`` (a token budget or
    sequence cap left unset: the engine's default there, ``Settings.for_device``). SGLang reads its token budget
    (``--chunked-prefill-size``) and sequence cap (``--max-running-requests``) as the whole
    server's and gives each of its D ranks a D-th (``server_args._handle_data_parallelism``:
    ``chunked_prefill_size // dp_size``; its pool configurator: ``max_running_requests // dp_size``
    a worker); TensorRT-LLM's and vLLM's settings are each rank's already."""
    settings = settings.for_device(hw) if hw is not None else settings
    settings.require_device("rank_settings")
    d = settings.attention_dp
    engine = resolved_engine(settings.engine, hw.id) if hw is not None else settings.engine
    if d <= 1 or engine != "sglang":
        return settings
    return replace(
        settings,
        max_batched_tokens=max(1, settings.max_batched_tokens // d),
        max_num_seqs=max(1, settings.max_num_seqs // d),
    )


def most_in_flight(settings: Settings, hw: Hardware) -> int:
    """The most requests a server runs at once on ``hw``: its sequence cap, on every attention rank."""
    return rank_settings(settings, hw).max_num_seqs * settings.attention_dp


def knobs_from(settings: Settings, chunked_prefill: bool | None = None, hw: Hardware | None = None) -> EngineKnobs:
    """The scheduler of ``settings.engine`` on ``hw`` (vLLM's where the prediction is ideal) with
    the settings' token budget, sequence cap and block size there (``Settings.for_device``), its
    prompts split over steps past the budget or kept whole as ``chunked_prefill`` says (None: as
    the engine does by default, ``roofline.engines.prompt_defaults``: TensorRT-LLM keeps them whole); it
    composes each step while the one before runs where the engine's version does
    (``EngineProfile.overlaps``), and replays steps with prompt tokens from a CUDA graph up to the
    settings' or the engine's limit."""
    settings = settings.for_device(hw) if hw is not None else settings
    settings.require_device("knobs_from")
    profile = engine_profile(resolved_engine(settings.engine, hw.id)) if hw is not None else None
    # The ideal engine has no host, so its steps' graphs do not matter: vLLM's default stands.
    graph_tokens = (profile or engine_profile("vllm")).prompt_graph_limit(
        settings.max_num_seqs, settings.prompt_graph_tokens
    )
    return EngineKnobs(
        max_num_batched_tokens=settings.max_batched_tokens,
        max_num_seqs=settings.max_num_seqs,
        block_size=settings.block_size,
        chunked_prefill=prompt_modes(chunked_prefill, settings.engine)[1],
        policy=profile.scheduler if profile else "vllm",
        recv_interval=settings.recv_interval,
        batch_wait_iters=settings.batch_wait_iters,
        batch_wait_ratio=settings.batch_wait_ratio,
        schedules_ahead=bool(profile and profile.overlaps(settings.engine_version)),
        prompt_graph_tokens=graph_tokens,
    )


def graph_words(engine: dict) -> str:
    """Which steps the engine replays from a CUDA graph, from ``to_json``'s engine part ("" where
    the prediction has no host work: the ideal engine)."""
    eager, limit = engine.get("eager_dispatch_s") or 0.0, engine.get("prompt_graph_tokens", 0)
    if not eager:
        return ""
    from roofline.format import fmt_seconds

    each = f"kernel by kernel from the host ({fmt_seconds(eager)} of dispatch a step, beside the device's work)"
    if limit <= 0:
        return f"decode steps replayed from a CUDA graph; steps with prompt tokens dispatched {each}"
    graphed = f"steps of up to {limit:,} tokens replayed from a CUDA graph"
    return f"{graphed}; larger steps with prompt tokens dispatched {each}"


def chunking_words(engine: dict) -> str:
    """Where the run splits prompts over steps otherwise than its engine does by default, which way
    each goes, from ``to_json``'s engine part ("" where they agree)."""
    default = engine.get("engine_chunked_prefill")
    if default is None or default == engine["chunked_prefill"]:
        return ""
    name = engine.get("engine_name", "the engine")
    if default:
        return f"Prompts kept whole (chunked prefill off), where {name} splits them over steps by default"
    return (
        f"Prompts split over steps (chunked prefill on), where {name} keeps them whole unless "
        "enable_chunked_prefill is set; --chunked-prefill auto (the Serving page: Chunked prefill, the engine's "
        "default) runs it as it runs by default"
    )


# The most tokens (prompts and outputs of every request) a run simulates: about 80 times the
# 10,000-request benchmark of 1,024 + 256 tokens (benchmarks/serving_simulation.py).
MAX_WORK_TOKENS = 1_000_000_000


def simulate_serving(
    model: ModelConfig,
    hw: Hardware,
    requests: Requests,
    precision: Precision | None = None,
    tp: int = 1,
    settings: Settings | None = None,
    chunked_prefill: bool | None = None,
    times: StepTimes | None = None,
    replicas: int = 1,
    router: str = "round-robin",
    seed: int = 0,
) -> Simulated:
    """Run ``requests`` through ``replicas`` replicas of ``model``, each on ``tp`` devices of
    ``hw``, behind ``router`` (``roofline.serving.simulation.fleet``)."""
    settings = rank_settings(settings or Settings(), hw)
    precision = precision or Precision()
    knobs = knobs_from(settings, chunked_prefill, hw)
    blocks = kv_blocks(model, hw, precision, tp, settings)
    if blocks < 1:
        raise ValueError(f"{model.name} leaves no memory for a KV cache on {tp} x {hw.name}")
    most = int((requests.prompt_tokens + requests.output_tokens).max())
    if most > model.max_context:
        raise ValueError(
            f"prompt + output: {most:,} tokens exceed {model.name}'s maximum context of {model.max_context:,}"
        )
    work = int(requests.prompt_tokens.sum()) + int(requests.output_tokens.sum())
    if work > MAX_WORK_TOKENS:  # sized before anything runs: a run this large takes minutes to hours
        raise ValueError(
            f"requests: {requests.count:,} requests of {work / requests.count:,.0f} tokens on average (prompt and "
            f"output) are {work:,} tokens, more than a simulated run takes ({MAX_WORK_TOKENS:,}); fewer requests, "
            "or shorter prompts or outputs"
        )
    longest = int(requests.prompt_tokens.max())
    budget = knobs.max_num_batched_tokens
    if why := whole_prompt_refusal(chunked_prefill, settings.engine, budget, longest, "the longest"):
        raise ValueError(why)
    if times is None:
        times = step_times(model, hw, precision, tp, settings, knobs.max_num_batched_tokens, knobs.max_num_seqs)
    check(replicas, router)
    # Under attention data parallelism each replica is ``attention_dp`` ranks, each with its own
    # scheduler and cache; the router hands requests to ranks (SGLang's default: round-robin), and
    # the step times already hold the other ranks' tokens in the MLP (the ranks assumed alike).
    dp = settings.attention_dp
    ranks = replicas * dp
    if ranks > MAX_REPLICAS:
        raise ValueError(f"attention_dp: {replicas} replicas x {dp} attention ranks exceed {MAX_REPLICAS:,} ranks")
    if dp > 1 and requests.concurrency is not None and requests.concurrency < ranks:
        raise ValueError(
            f"attention_dp: {ranks} attention ranks ({replicas} x {dp}) for {requests.concurrency} clients leave "
            "some ranks idle; use more clients or fewer ranks"
        )
    if ranks == 1 and router == "round-robin":
        return Simulated(simulate(requests, times, blocks, knobs), times, knobs, blocks)
    if router == "least-loaded":
        runs, parts = least_loaded(requests, times, blocks, knobs, ranks)
        return Simulated(merge(runs, parts, requests.count), times, knobs, blocks, replicas, router, dp)
    ramped = requests.concurrency is not None and np.any(requests.arrival_s[: requests.concurrency] > 0)
    if ramped and ranks > 1:
        raise ValueError(
            f"a closed loop whose clients start one at a time spends one budget of requests across the "
            f"{'attention ranks' if dp > 1 else 'fleet'}; the {router} router simulates each "
            f"{'rank' if dp > 1 else 'replica'}'s share apart: use the least-loaded router"
        )
    parts = split(requests, ranks, router, seed)
    clients = [None] * ranks
    if requests.concurrency is not None:
        owner = np.arange(requests.count) % requests.concurrency
        clients = [len(set(owner[p].tolist())) for p in parts]
    runs = [simulate(share(requests, p, c), times, blocks, knobs) for p, c in zip(parts, clients)]
    return Simulated(merge(runs, parts, requests.count), times, knobs, blocks, replicas, router, dp)


def _engine_default(policy: str) -> dict[str, object]:
    """The engine whose scheduler runs the simulation (vLLM's for the ideal roofs): its name and
    whether it splits prompts over steps by default."""
    profile = engine_profile(policy)
    return {"engine_name": profile.name, "engine_chunked_prefill": profile.chunked_prefill} if profile else {}


def to_json(sim: Simulated, targets: Targets | None = None) -> dict[str, object]:
    """The summary, the engine's settings and an evenly sampled time series of the server."""
    run = sim.run
    data = summary(run, targets)
    data["engine"] = {
        "scheduler": SCHEDULER_WORDS[sim.knobs.policy],
        "max_num_batched_tokens": sim.knobs.max_num_batched_tokens,
        "max_num_seqs": sim.knobs.max_num_seqs,
        "block_size": sim.knobs.block_size,
        "chunked_prefill": sim.knobs.chunked_prefill,
        **_engine_default(sim.knobs.policy),
        "recv_interval": sim.knobs.recv_interval,
        "batch_wait_iters": sim.knobs.batch_wait_iters,
        "batch_wait_ratio": sim.knobs.batch_wait_ratio,
        "schedules_ahead": sim.knobs.schedules_ahead,
        "prompt_graph_tokens": sim.knobs.prompt_graph_tokens,
        "eager_dispatch_s": sim.times.eager_dispatch_s,
        "kv_blocks": sim.kv_blocks,
        "kv_tokens": sim.kv_blocks * sim.knobs.block_size,
        "replicas": sim.replicas,
        "router": sim.router,
        "attention_dp": sim.attention_dp,
        "steps": run.steps,
        "step_overhead_s": sim.times.step_overhead_s,
        "what_the_times_rest_on": run.roofs,
    }
    if targets is not None:
        data["targets"] = {"ttft_s": targets.ttft_s, "tpot_s": targets.tpot_s, "e2e_s": targets.e2e_s}
    pick = np.unique(
        np.linspace(0, max(run.step_end_s.size - 1, 0), min(SERIES_POINTS, run.step_end_s.size)).astype(int)
    )
    time_s, columns = run.step_end_s[pick], [run.step_running[pick], run.step_waiting[pick], run.step_kv_used[pick]]
    idle = idle_spans(run.arrival_s, run.finish_s, SERIES_POINTS // 2)
    if idle.size:  # the server empty between steps: drawn at 0, not joined across
        time_s = np.concatenate([time_s, idle.ravel()])
        columns = [np.concatenate([c, np.zeros(idle.size, c.dtype)]) for c in columns]
        order = np.argsort(time_s, kind="stable")
        time_s, columns = time_s[order], [c[order] for c in columns]
    data["series"] = {
        "of": _series_of(sim.replicas, sim.attention_dp),
        "time_s": time_s.tolist(),
        "running": columns[0].tolist(),
        "waiting": columns[1].tolist(),
        "kv_used": columns[2].tolist(),
    }
    return data


def _series_of(replicas: int, attention_dp: int) -> str:
    """Whose time series a result carries: the one engine, or the busiest replica or attention rank."""
    if attention_dp > 1:
        return f"the busiest of {replicas * attention_dp} attention ranks, {attention_dp} to a replica"
    return f"the busiest of {replicas} replicas" if replicas > 1 else "the replica"


def idle_spans(arrival_s: np.ndarray, finish_s: np.ndarray, most: int) -> np.ndarray:
    """(start, end) of the ``most`` longest spans in which no request was in the server (after one
    finished and before the next arrived), shape (n, 2)."""
    ok = np.isfinite(arrival_s) & np.isfinite(finish_s)
    a, f = arrival_s[ok], finish_s[ok]
    if a.size < 2:
        return np.zeros((0, 2))
    order = np.argsort(a, kind="stable")
    a, f = a[order], f[order]
    last_finish = np.maximum.accumulate(f)[:-1]  # when the server emptied, if it did, before each next arrival
    gap = a[1:] - last_finish
    spans = np.flatnonzero(gap > 0)
    spans = spans[np.argsort(gap[spans])[::-1][:most]]
    pairs = np.column_stack([last_finish[spans], a[1:][spans]])
    return pairs[np.argsort(pairs[:, 0], kind="stable")]


def kv_blocks(model, hw, precision, tp: int, settings) -> int:
    """The KV cache's blocks on one replica (one attention rank under attention data parallelism):
    the memory model's KV budget per device over one block's bytes per device (every layer's K and
    V for ``block_size`` tokens)."""
    from roofline.memory import footprint, kv_cache_bytes
    from roofline.workload import Workload

    w = Workload(
        model, "decode", 1, 1, precision=precision, tp=tp, cuda_graphs=True, attention_dp=settings.attention_dp
    )
    budget = footprint(w, hw, settings, with_smallest_tp=False).kv_budget_bytes
    block = float(kv_cache_bytes(model, precision, w.attention_tp, 1, settings.block_size, settings.block_size))
    return int(budget // block) if block > 0 else 0
