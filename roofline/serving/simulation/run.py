"""The simulation loop: requests arrive, the scheduler builds a step, the step takes its time
from the tabulated roofline step model, tokens are sampled, finished requests leave."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from roofline.serving.simulation.load import Requests
from roofline.serving.simulation.scheduler import EngineKnobs, Pool, release, schedule
from roofline.serving.simulation.steptime import StepTimes

MAX_STEPS = 20_000_000


@dataclass(frozen=True)
class Run:
    """What happened to every request, and the server over time (one row per step)."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    preemptions: np.ndarray
    rejected: np.ndarray  # could never fit in the KV cache
    itl_s: np.ndarray  # gaps between two tokens of one request ...
    itl_weight: np.ndarray  # ... and how many gaps each stands for
    steps: int
    # The server over time: one row per step, or per stretch of identical decode steps.
    step_end_s: np.ndarray
    step_tokens: np.ndarray
    step_running: np.ndarray
    step_waiting: np.ndarray
    step_kv_used: np.ndarray  # fraction of the KV blocks in use
    kv_blocks: int
    roofs: str


def simulate(requests: Requests, times: StepTimes, kv_blocks: int, knobs: EngineKnobs) -> Run:
    """Run ``requests`` through one engine replica with ``kv_blocks`` blocks of KV cache."""
    n = requests.count
    prompt, output = requests.prompt_tokens.astype(np.int64), requests.output_tokens.astype(np.int64)
    arrival = requests.arrival_s.astype(float).copy()
    most_blocks = -(-(prompt + output) // knobs.block_size)
    rejected = most_blocks > kv_blocks
    pool = Pool(
        tokens=prompt.copy(),
        computed=np.zeros(n, np.int64),
        blocks=np.zeros(n, np.int64),
        free_blocks=int(kv_blocks),
        running=[],
        waiting=deque(),
        preemptions=np.zeros(n, np.int64),
        final=prompt + output,
    )
    generated = np.zeros(n, np.int64)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    last_token = np.full(n, np.nan)
    itl_values: list[np.ndarray] = []
    itl_weights: list[np.ndarray] = []
    total_steps = 0
    log = {k: [] for k in ("end", "tokens", "running", "waiting", "kv")}

    closed = requests.concurrency is not None
    order = np.arange(n)
    sent = 0  # requests handed to the server so far (in order)
    if closed:
        starting = min(requests.concurrency, n)
        arrival[:starting] = np.nan_to_num(arrival[:starting], nan=0.0)
    now = 0.0
    remaining = int(n - rejected.sum())

    def send_until(t: float) -> None:
        nonlocal sent
        while sent < n and not np.isnan(arrival[order[sent]]) and arrival[order[sent]] <= t:
            i = order[sent]
            sent += 1
            if not rejected[i]:
                pool.waiting.append(i)
            elif closed:
                _next_client_request(arrival, sent, n, t)

    for _ in range(MAX_STEPS):
        if remaining == 0:
            break
        send_until(now)
        if not pool.running and not pool.waiting:
            upcoming = arrival[order[sent]] if sent < n else np.nan
            if np.isnan(upcoming):
                break
            now = max(now, float(upcoming))
            continue
        chosen, take = schedule(pool, knobs)
        waiting_now = len(pool.waiting)
        if not chosen.size:  # nothing fits until something finishes: should not happen with running work
            raise RuntimeError("the scheduler could not place any request")
        before = pool.computed[chosen]
        decoding = (pool.tokens[chosen] - before == 1) & (before >= prompt[chosen])
        samples = before + take >= pool.tokens[chosen]
        mean_context = float(np.mean(before[decoding] + 1)) if decoding.any() else 1.0
        step_s = times.step_s(
            float(take.sum()),
            float(samples.sum()),
            float(decoding.sum()),
            mean_context,
            take[~decoding].tolist(),
            before[~decoding].tolist(),
        )
        steps, first_step_s = 1, step_s
        if decoding.all() and not pool.waiting and len(pool.running) == chosen.size:
            # The same decode step repeats until a request finishes or arrives: take them together.
            upcoming = arrival[order[sent]] if sent < n else np.nan
            steps, step_s = _decode_stretch(
                pool, chosen, generated, output, times, mean_context, step_s, float(upcoming) - now, knobs.block_size
            )
        end = now + step_s
        pool.computed[chosen] = before + take + (steps - 1)
        sampled = chosen[samples]
        fresh = sampled[np.isnan(first[sampled])]
        first[fresh] = end if steps == 1 else np.nan  # a stretch only ever has decodes
        gaps = sampled[~np.isnan(last_token[sampled])]
        if gaps.size:
            itl_values.append(now + first_step_s - last_token[gaps])
            itl_weights.append(np.ones(gaps.size))
            if steps > 1:
                itl_values.append(np.array([(step_s - first_step_s) / (steps - 1)]))  # the stretch's mean step
                itl_weights.append(np.array([float(gaps.size * (steps - 1))]))
        now = end
        last_token[sampled] = now
        generated[sampled] += steps
        pool.tokens[sampled] += steps
        done = sampled[generated[sampled] >= output[sampled]]
        if done.size:
            finish[done] = now
            release(pool, done)
            remaining -= int(done.size)
            if closed:
                for _ in range(done.size):
                    _next_client_request(arrival, sent, n, now)
        total_steps += steps
        log["end"].append(now)
        log["tokens"].append(int(take.sum()) * steps)
        log["running"].append(int(chosen.size))
        log["waiting"].append(waiting_now)
        log["kv"].append(1 - pool.free_blocks / kv_blocks)
    else:
        raise RuntimeError(f"the simulation did not finish within {MAX_STEPS:,} steps")
    return Run(
        arrival_s=arrival,
        first_token_s=first,
        finish_s=finish,
        prompt_tokens=prompt,
        output_tokens=output,
        preemptions=pool.preemptions,
        rejected=rejected,
        itl_s=np.concatenate(itl_values) if itl_values else np.zeros(0),
        itl_weight=np.concatenate(itl_weights) if itl_weights else np.zeros(0),
        steps=total_steps,
        step_end_s=np.asarray(log["end"]),
        step_tokens=np.asarray(log["tokens"]),
        step_running=np.asarray(log["running"]),
        step_waiting=np.asarray(log["waiting"]),
        step_kv_used=np.asarray(log["kv"]),
        kv_blocks=int(kv_blocks),
        roofs=times.roofs,
    )


def _next_client_request(arrival: np.ndarray, sent: int, n: int, t: float) -> None:
    """A closed-loop client whose request ended sends the next unsent one at ``t``."""
    pending = np.flatnonzero(np.isnan(arrival[sent:]))
    if pending.size:
        arrival[sent + pending[0]] = t


def _decode_stretch(pool, chosen, generated, output, times, mean_context, first_s, until_arrival_s, block_size):
    """How many identical decode steps run before a request finishes or a new one arrives (the
    step that sees the arrival included), and their total time. The step's cost grows with the
    context, linearly for the attention's cache read, so the steps' times are summed as an
    arithmetic series from the first step's time."""
    left = int((output[chosen] - generated[chosen]).min())
    if left <= 1:
        return 1, first_s
    d = float(chosen.size)
    slope = times.decode_attention_s(d, mean_context + 1) - times.decode_attention_s(d, mean_context)
    if times.overhead_overlaps and first_s <= times.host_s(d):
        slope = 0.0  # the host's work sets these steps, not the growing cache read
    k = np.arange(1, left + 1)
    elapsed = k * first_s + slope * k * (k - 1) / 2
    if np.isfinite(until_arrival_s):
        k_arrival = int(np.searchsorted(elapsed, until_arrival_s, side="left")) + 1
        left = max(1, min(left, k_arrival))
    # Each request needs blocks for the tokens the stretch adds.
    need = -(-(pool.computed[chosen] + left) // block_size) - pool.blocks[chosen]
    while left > 1 and int(np.maximum(need, 0).sum()) > pool.free_blocks:
        left = max(1, left // 2)
        need = -(-(pool.computed[chosen] + left) // block_size) - pool.blocks[chosen]
    need = np.maximum(need, 0)
    pool.blocks[chosen] += need
    pool.free_blocks -= int(need.sum())
    return left, float(elapsed[left - 1])


def kv_blocks(model, hw, precision, tp: int, settings) -> int:
    """The KV cache's blocks on one replica: the memory model's KV budget per device over one
    block's bytes per device (every layer's K and V for ``block_size`` tokens)."""
    from roofline.memory import footprint, kv_cache_bytes
    from roofline.workload import Workload

    w = Workload(model, "decode", 1, 1, precision=precision, tp=tp, cuda_graphs=True)
    budget = footprint(w, hw, settings, with_smallest_tp=False).kv_budget_bytes
    block = float(kv_cache_bytes(model, precision, tp, 1, settings.block_size, settings.block_size))
    return int(budget // block) if block > 0 else 0
