"""Serving in steady state: latency against throughput over batch, on many devices at once.

Continuous batching with chunked prefill: B sequences decode together, and new prompts' tokens
arrive at c = B x prompt / output per step so that prefills keep pace with the requests that
finish. The engine puts each prompt in whole (or in chunks of what its budget leaves beside the
decodes, q = min(prompt, budget - B)): a share s = c / q of the steps carries one, the rest only
decode (``steps.prompt_chunks``; every step carries c where the prompts need more). Then

    TPOT = s T(B, q) + (1 - s) T(B, 0),  tokens/s per group = B / TPOT,  tokens/s per user = 1 / TPOT,

and a new prompt's first token comes after ceil(prompt / (budget - B)) steps of T(B, budget - B)
(``budget``: the engine's max batched tokens per step). Without chunking, prefills run as their
own steps, as many of the prompts waiting as the budget holds in one (k of them,
``roofline.serving.prefill_batches``), and every running sequence waits for them: TPOT =
T_decode(B) + (B / output / k) x T_prefill(k prompts), TTFT = T_prefill(k prompts). A step with
prompt tokens past the engine's CUDA-graph limit has the host dispatch every kernel, as the serving
simulation runs it (none on the datasheet). A batch fits where the sequences' caches at their final
length fit beside the weights and the engine's largest step (its profile run at the budget; no step
takes in more prompt tokens), and an engine that takes a prompt in whole beside the decodes
(TensorRT-LLM's default) decodes at most budget - prompt sequences. Queueing is not modelled:
these are the times of a loaded server at steady state, the p50 of a well-provisioned one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from roofline.engine import REGIMES, Ceilings, evaluate_devices
from roofline.hardware import Hardware
from roofline.memory import footprint
from roofline.models import ModelConfig
from roofline.ops import step_ops
from roofline.serving.steps import mixed_step_ops, prefill_batches, prompt_chunks, whole_neighbours
from roofline.serving.traffic import Traffic
from roofline.settings import Settings
from roofline.workload import Precision, Workload

DEFAULT_BATCHES = np.unique(np.round(np.geomspace(1, 4096, 40)).astype(int))


def _total(ops, field: str) -> np.ndarray:
    """A step's FLOPs or bytes over its ops (arrays over the batch)."""
    return sum(np.asarray(getattr(op, field), float) * op.count for op in ops)


@dataclass(frozen=True)
class ServingPoints:
    """A batch sweep on several devices at one TP and precision; arrays are (devices, batches)."""

    model: str
    devices: list[str]
    tp: int
    precision: Precision
    traffic: Traffic
    chunked: bool
    batch: np.ndarray
    tpot_s: np.ndarray
    ttft_s: np.ndarray
    tokens_per_s: np.ndarray  # output tokens per second of the TP group
    fits: np.ndarray
    memory_bytes: np.ndarray
    capacity_bytes: np.ndarray  # per device
    bound: np.ndarray  # the regime that decides the step
    mfu: np.ndarray
    mbu: np.ndarray
    prefill_share: np.ndarray  # of the step's time, spent on prompts
    usd_per_hour: np.ndarray  # per device (NaN: no price set)
    tdp_w: np.ndarray  # per device (NaN: unknown)
    why_not: dict[str, str] = field(default_factory=dict)  # devices that cannot run it
    # Per device, the most sequences the engine runs at once (its cap there: vLLM's default unless
    # set; one rank's under attention data parallelism). A larger batch is never formed.
    seq_cap: np.ndarray | None = None

    @property
    def runs(self) -> np.ndarray:
        """Points that fit in memory at a batch the engine forms (within its sequence cap)."""
        cap = np.full(len(self.devices), np.inf) if self.seq_cap is None else self.seq_cap
        return self.fits & (self.batch[None, :] <= cap[:, None])

    @property
    def per_device(self) -> np.ndarray:
        return self.tokens_per_s / self.tp

    @property
    def per_user(self) -> np.ndarray:
        return 1.0 / self.tpot_s

    def usd_per_million(self) -> dict[str, np.ndarray]:
        """Cost per million tokens: ``output_all_in``, every device-second over the output tokens
        (what the plans rank by: for one traffic it orders setups as their cost per request
        does); ``output`` and ``input``, the same cost split by the step's time between decoding
        and prompts (an API's price per output and per input token); ``all``, over every token in
        and out."""
        per_s = (self.usd_per_hour[:, None] * self.tp) / 3600.0
        out_rate = self.tokens_per_s
        in_rate = out_rate * self.traffic.prompt_len / self.traffic.output_len
        with np.errstate(divide="ignore", invalid="ignore"):
            return {
                "output_all_in": per_s / out_rate * 1e6,
                "output": per_s * (1 - self.prefill_share) / out_rate * 1e6,
                "input": per_s * self.prefill_share / in_rate * 1e6,
                "all": per_s / (out_rate + in_rate) * 1e6,
            }

    def tokens_per_joule(self) -> np.ndarray:
        return self.tokens_per_s / (self.tdp_w[:, None] * self.tp)

    def frontier(self) -> np.ndarray:
        """Points no other fitting point of the same device beats on both tokens/s per device and
        per user (the latency-throughput frontier)."""
        x, y = self.per_device, self.per_user
        ok = self.runs & np.isfinite(x) & np.isfinite(y)
        better = (x[:, None, :] >= x[:, :, None]) & (y[:, None, :] >= y[:, :, None])
        strictly = (x[:, None, :] > x[:, :, None]) | (y[:, None, :] > y[:, :, None])
        dominated = np.any(better & strictly & ok[:, None, :], axis=2)
        return ok & ~dominated

    def row(self, d: int, j: int) -> dict[str, object]:
        """One point as the command line's JSON and the page's hovers give it."""
        cost = {k: float(v[d, j]) for k, v in self.usd_per_million().items()}
        return {
            "hardware": self.devices[d],
            "tp": self.tp,
            "batch": int(self.batch[j]),
            "ttft_s": float(self.ttft_s[d, j]),
            "tpot_s": float(self.tpot_s[d, j]),
            "tokens_per_s": float(self.tokens_per_s[d, j]),
            "tokens_per_s_per_device": float(self.per_device[d, j]),
            "tokens_per_s_per_user": float(self.per_user[d, j]),
            "fits": bool(self.fits[d, j]),
            "within_sequence_cap": bool(self.seq_cap is None or self.batch[j] <= self.seq_cap[d]),
            "memory_bytes": float(self.memory_bytes[d, j]),
            "bound": str(self.bound[d, j]),
            "mfu": float(self.mfu[d, j]),
            "mbu": float(self.mbu[d, j]),
            "usd_per_million_output_all_in": _finite_or_none(cost["output_all_in"]),
            "usd_per_million_output": _finite_or_none(cost["output"]),
            "usd_per_million_input": _finite_or_none(cost["input"]),
            "usd_per_million_tokens": _finite_or_none(cost["all"]),
            "tokens_per_joule": _finite_or_none(float(self.tokens_per_joule()[d, j])),
        }


def _finite_or_none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def graph_limit(settings: Settings, hw: Hardware) -> float:
    """The most new tokens of a step with prompt tokens that the engine replays from a CUDA graph
    on ``hw`` (``roofline.engines.EngineProfile.prompt_graph_limit``); infinite on the datasheet,
    which has no host."""
    from roofline.engines import engine_profile
    from roofline.roofs import resolved_engine

    profile = engine_profile(resolved_engine(settings.engine, hw.id))
    if profile is None:
        return np.inf
    return float(profile.prompt_graph_limit(settings.for_device(hw).max_num_seqs, settings.prompt_graph_tokens))


def eager_ceilings(ceilings: Ceilings, settings: Settings) -> Ceilings:
    """``ceilings`` with every kernel dispatched from the host (``settings.launch_overhead_s`` a
    launch, no graph replay): a step past its engine's CUDA-graph limit."""
    return replace(ceilings, launch_overhead_s=settings.launch_overhead_s, graph_replay_s=0.0)


def _graph_limits(settings: Settings, devices: list[Hardware]) -> np.ndarray:
    return np.array([graph_limit(settings, hw) for hw in devices], float)


def _prompt_step(ops, ceilings, settings: Settings, limits: np.ndarray, tokens) -> tuple[np.ndarray, np.ndarray]:
    """``evaluate_devices`` of a step carrying prompt tokens (``tokens`` new ones in all): replayed
    from a CUDA graph up to each device's engine's limit, past it dispatched kernel by kernel from
    the host (``settings.launch_overhead_s`` a launch), as the serving simulation runs it."""
    step, regimes = evaluate_devices(ops, ceilings)
    limit = limits.reshape((len(ceilings),) + (1,) * (step.ndim - 1))
    over = np.broadcast_to(np.asarray(tokens, float) > limit, step.shape)
    if np.any(over):
        eager_step, eager_regimes = evaluate_devices(ops, [eager_ceilings(c, settings) for c in ceilings])
        step, regimes = np.where(over, eager_step, step), np.where(over[None], eager_regimes, regimes)
    return step, regimes


def whole_prompt_cap(ranked: Settings, prompt_len: int, mixed: bool, split: bool) -> int:
    """The most sequences that decode in a steady state: the engine's cap (max_num_seqs), and where a
    prompt goes whole into the decodes' steps (TensorRT-LLM's default) what the token budget leaves
    beside one prompt, budget - prompt (at least 1): a prompt is taken in only with the decodes in
    its step, so past that batch no new request starts until enough others end."""
    if not mixed or split:
        return ranked.max_num_seqs
    return max(1, min(ranked.max_num_seqs, ranked.max_batched_tokens - prompt_len))


def serving_sweep(
    model: ModelConfig,
    devices: list[Hardware],
    traffic: Traffic,
    precision: Precision | None = None,
    tp: int = 1,
    settings: Settings | None = None,
    prices: dict[str, float] | None = None,
    batches: np.ndarray = DEFAULT_BATCHES,
    chunked: bool | None = None,
) -> ServingPoints:
    """Every device at every batch: TPOT, TTFT, throughput, memory, regime, cost (one vectorised
    evaluation of the mixed step over all devices and batches). ``chunked``: prompts run in the
    decodes' steps (True), a prompt past the budget left beside them in parts, or in prefill steps
    of their own (False); None as the settings' engine runs them by default
    (``roofline.engines.prompt_defaults``: SGLang's own steps). An engine that keeps a prompt
    whole (off, or TensorRT-LLM's default) cannot run one longer than its token budget: refused."""
    from roofline.engines import prompt_modes, whole_prompt_refusal
    from roofline.serving.simulation.api import rank_settings

    settings = settings or Settings()
    setting, (chunked, split) = chunked, prompt_modes(chunked, settings.engine)
    precision = precision or Precision()
    prices = prices or {}
    batch = np.asarray(batches, float)
    if traffic.prompt_len + traffic.output_len > model.max_context:  # as vLLM: prompt + max_tokens <= max_model_len
        raise ValueError(
            f"prompt + output: {traffic.prompt_len + traffic.output_len:,} tokens exceed {model.name}'s "
            f"maximum context of {model.max_context:,}"
        )
    # Under attention data parallelism (the simulation's settings) the batch is one rank's. The mean
    # cache rounded up stays within the context (a step's new token beside it).
    context = min(int(round(traffic.mean_context)), model.max_context - 1)
    w = Workload(
        model,
        "decode",
        batch,
        context,
        precision=precision,
        tp=tp,
        cuda_graphs=True,
        attention_dp=settings.attention_dp,
    )
    # One rank's budget and sequence cap on each device, as the batch is one rank's.
    ranked = {hw.id: rank_settings(settings, hw) for hw in devices}
    runnable, why_not = [], {}
    for hw in devices:
        try:
            run, _ = w.on(hw)
            if run.precision.act_dtype not in hw.peak_tflops.as_dict():
                # Its times would be lower bounds only: a plan cannot claim it meets a target.
                raise ValueError(f"{hw.id} publishes no {run.precision.act_dtype} peak: its TTFT is only a lower bound")
            if tp > 1 and hw.group_link(tp)[0] is None:
                raise ValueError(f"TP={tp}: {hw.group_link(tp)[1]}")
            budget = ranked[hw.id].max_batched_tokens
            if why := whole_prompt_refusal(setting, settings.engine, budget, traffic.prompt_len):
                raise ValueError(why)
        except ValueError as exc:
            why_not[hw.id] = str(exc)
            continue
        runnable.append((hw, run))
    shape = (len(devices), batch.size)
    nan = np.full(shape, np.nan)
    out = {k: nan.copy() for k in ("tpot", "ttft", "mfu", "mbu", "share", "memory")}
    fits = np.zeros(shape, bool)
    bound = np.full(shape, "", dtype=object)
    capacity = np.full(len(devices), np.nan)
    index = {hw.id: i for i, hw in enumerate(devices)}
    # Devices of one precision and token budget (the engine's default differs by device) share their
    # ops: one evaluation for the group.
    groups: dict[tuple[Precision, int], list[tuple[Hardware, Workload]]] = {}
    for hw, run in runnable:
        groups.setdefault((run.precision, ranked[hw.id].max_batched_tokens), []).append((hw, run))
    for (_, budget), members in groups.items():
        run = members[0][1]
        ceilings = [settings.ceilings(hw, tp, cuda_graphs=True) for hw, _ in members]
        limits = _graph_limits(settings, [hw for hw, _ in members])
        rows = [index[hw.id] for hw, _ in members]
        if chunked:
            # A share of the steps carries a prompt (or a budget's chunk of one), the rest only decode.
            chunk, carrying = prompt_chunks(batch, traffic.prompt_len, traffic.output_len, budget)
            mixed_ops = mixed_step_ops(run, batch, chunk, traffic.prompt_len)
            plain_ops = mixed_step_ops(run, batch, 0.0, traffic.prompt_len)
            mixed, mixed_regimes = _prompt_step(mixed_ops, ceilings, settings, limits, batch + chunk)
            plain, plain_regimes = evaluate_devices(plain_ops, ceilings)
            step = carrying * mixed + (1 - carrying) * plain
            by_regime = carrying * mixed_regimes + (1 - carrying) * plain_regimes
            # A prompt takes ceil(prompt / q) steps, q = min(prompt, budget - B) of it a step; each such
            # step carries the chunk: q, or every step's c where the prompts need more (T(B, chunk) >= T(B, q)).
            first = np.clip(budget - batch, 1, traffic.prompt_len)
            ttft = np.ceil(traffic.prompt_len / first) * mixed
            tpot = step
            share = np.clip(1 - plain / step, 0, 1)
            flops = carrying * _total(mixed_ops, "flops") + (1 - carrying) * _total(plain_ops, "flops")
            moved = carrying * _total(mixed_ops, "bytes") + (1 - carrying) * _total(plain_ops, "bytes")
        else:
            ops = step_ops(run)
            plain, by_regime = evaluate_devices(ops, ceilings)
            # The prompts waiting at each output step, k at a time in prefill steps of their own (a
            # fractional k: its two whole neighbours' steps, weighted).
            k, steps = prefill_batches(batch, traffic.prompt_len, traffic.output_len, budget)
            pre = np.zeros_like(plain)
            for prompts, weight in whole_neighbours(k):
                prefill = replace(run, phase="prefill", batch=prompts.astype(int), seq_len=traffic.prompt_len)
                t, _ = _prompt_step(step_ops(prefill), ceilings, settings, limits, prompts * traffic.prompt_len)
                pre = pre + weight * t
            ttft = pre  # a prompt's prefill step, beside the others waiting with it
            tpot = plain + steps * pre
            share = np.clip(1 - plain / tpot, 0, 1)
            step = tpot
            flops, moved = _total(ops, "flops") * np.ones_like(batch), _total(ops, "bytes") * np.ones_like(batch)
        for k, (hw, member) in enumerate(members):
            i = rows[k]
            out["tpot"][i], out["ttft"][i], out["share"][i] = tpot[k], ttft[k], share[k]
            peak = hw.peak_flops_per_s(member.precision.act_dtype)
            out["mfu"][i] = flops / step[k] / peak
            out["mbu"][i] = moved / step[k] / hw.memory_bandwidth_bytes_per_s
            bound[i] = np.array(REGIMES)[by_regime[:, k].argmax(axis=0)]
            # Every sequence's cache at its final length, and the engine's largest step: B decodes, or
            # its profile run at the token budget (the workspace). No step takes in more prompt tokens
            # than the budget, whatever the batch (not B prompts prefilled at once).
            final = traffic.prompt_len + traffic.output_len - 1
            fp = footprint(member.step("decode", max(final - 1, 1), batch), hw, settings, with_smallest_tp=False)
            fits[i] = np.broadcast_to(fp.fits, batch.shape)
            out["memory"][i] = np.broadcast_to(fp.total_bytes, batch.shape)
            capacity[i] = fp.capacity_bytes
    return ServingPoints(
        model=model.id,
        devices=[hw.id for hw in devices],
        tp=tp,
        precision=precision,
        traffic=traffic,
        chunked=chunked,
        batch=batch.astype(int),
        tpot_s=out["tpot"],
        ttft_s=out["ttft"],
        tokens_per_s=batch / out["tpot"],
        fits=fits,
        memory_bytes=out["memory"],
        capacity_bytes=capacity,
        bound=bound,
        mfu=out["mfu"],
        mbu=out["mbu"],
        prefill_share=out["share"],
        usd_per_hour=np.array([prices.get(hw.id, np.nan) for hw in devices], float),
        tdp_w=np.array([hw.tdp_w or np.nan for hw in devices], float),
        why_not=why_not,
        seq_cap=np.array(
            [whole_prompt_cap(ranked[hw.id], traffic.prompt_len, chunked, split) for hw in devices], float
        ),
    )
