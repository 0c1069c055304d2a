"""The simulation loop: requests arrive, the scheduler builds a step, the step takes its time
from the tabulated roofline step model, tokens are sampled, finished requests leave."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass

import numpy as np

from roofline.serving.simulation.clients import next_client_request, start_arrivals
from roofline.serving.simulation.load import Requests
from roofline.serving.simulation.scheduler import EngineKnobs, Pool, array_sum, release, schedule
from roofline.serving.simulation.steptime import StepTimes

MAX_STEPS = 20_000_000


class SimulationTooLong(ValueError):
    """A run that did not finish within ``MAX_STEPS``: said as an input error (fewer requests, a lower
    rate, shorter outputs), never a traceback."""

    def __str__(self) -> str:
        return (
            f"{self.args[0]}: a server this far past its capacity keeps preempting; fewer requests, a lower rate "
            "or shorter outputs"
        )


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


class Replica:
    """One engine replica: the requests it holds (arrays over every request of the load, indexed
    as the load is) and its clock. ``step`` runs one scheduling decision at ``now``: the state
    changes at once and ``now`` moves to the step's end, where the requests it finished
    (``finishing``) leave."""

    def __init__(
        self,
        prompt: np.ndarray,
        output: np.ndarray,
        times: StepTimes,
        kv_blocks: int,
        knobs: EngineKnobs,
        beside: Replica | None = None,
    ):
        """``beside``: another replica of the same fleet, whose per-request arrays this one shares
        (each request is held by one replica only), so a fleet's memory grows with its requests,
        not with requests x replicas."""
        n = prompt.size
        self.prompt, self.output = prompt, output
        self.times, self.knobs, self.kv_blocks = times, knobs, int(kv_blocks)
        if beside is None:
            self.rejected = -(-(prompt + output) // knobs.block_size) > kv_blocks
            tokens, computed, blocks = prompt.copy(), np.zeros(n, np.int64), np.zeros(n, np.int64)
            preemptions, final = np.zeros(n, np.int64), prompt + output
            self.first, self.finish, self.last_token = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
        else:
            b = beside.pool
            self.rejected = beside.rejected
            tokens, computed, blocks, preemptions, final = b.tokens, b.computed, b.blocks, b.preemptions, b.final
            self.first, self.finish = beside.first, beside.finish
            self.last_token = beside.last_token
        self.pool = Pool(
            tokens=tokens,
            computed=computed,
            blocks=blocks,
            free_blocks=int(kv_blocks),
            running=[],
            waiting=deque(),
            preemptions=preemptions,
            final=final,
            inbox=deque(),
        )
        self.itl_values: list[np.ndarray] = []
        self.itl_weights: list[float] = []  # one weight for each array of gaps
        self.steps = 0
        self.log: dict[str, list] = {k: [] for k in ("end", "tokens", "running", "waiting", "kv")}
        self.now = 0.0
        self.finishing = np.zeros(0, np.int64)
        self._undo: tuple | None = None  # the state before a stretch under way (``cuttable_step``)
        self._stretched = False
        self.arriving: deque[tuple[float, int]] = deque()  # (arrival, request) not yet in the scheduler's view
        self.last_step = (-math.inf, -math.inf)  # (start, end) of the last step run

    @property
    def has_work(self) -> bool:
        """Requests the scheduler holds: running, waiting, or arrived and held for its intake."""
        return bool(self.pool.running or self.pool.waiting or self.pool.inbox)

    @property
    def busy(self) -> bool:
        return self.has_work or bool(self.arriving)

    def receive(self, i: int, t: float) -> None:
        """Request ``i`` arrives at ``t``; the scheduler sees it at the first step composed after
        it arrived (``_admit``)."""
        self.arriving.append((t, i))

    def _admit(self, now: float) -> None:
        """Hand the scheduler the requests that had arrived when the step starting at ``now`` was
        composed. Where a step ends at ``now``, that is at ``now`` (a request arriving then, as a
        closed loop's next does when another ends, comes a moment too late), or where the engine
        schedules ahead at the start of the step that ends at ``now``, unless it then had nothing to
        compose. A server with nothing to run takes in a request as it arrives. Each then queues, or
        waits for the scheduler's next intake (SGLang's ``recv_interval``)."""
        pool, arriving = self.pool, self.arriving
        queue = pool.inbox if self.knobs.recv_interval > 1 else pool.waiting

        def take(cutoff: float, inclusive: bool) -> None:
            while arriving and (arriving[0][0] <= cutoff if inclusive else arriving[0][0] < cutoff):
                queue.append(arriving.popleft()[1])

        start, end = self.last_step
        if end == now:
            if self.knobs.schedules_ahead:
                take(start, False)
            if not self.knobs.schedules_ahead or not self.has_work:
                take(now, False)
        if not self.has_work:
            take(now, True)

    def step(self, upcoming_s: float) -> np.ndarray:
        """One scheduling decision at ``now`` (or a stretch of identical decode steps, up to the
        step that sees the next arrival at ``upcoming_s``, NaN if none is known); returns the
        requests finished at its end."""
        pool, times, knobs, prompt = self.pool, self.times, self.knobs, self.prompt
        now = self.now
        if self.arriving:
            self._admit(now)
            if self.arriving:  # one still unseen enters at the next step: no stretch past this one
                upcoming_s = now
        preempted_before = pool.preempted
        chosen, take = schedule(pool, knobs)
        waiting_now = len(pool.waiting) + len(pool.inbox)
        if not chosen.size:  # nothing fits until something finishes: should not happen with running work
            raise RuntimeError("the scheduler could not place any request")
        before, tokens = pool.computed[chosen], pool.tokens[chosen]
        after = before + take
        decoding = (tokens - before == 1) & (before >= prompt[chosen])  # one new token after its prompt
        decodes = int(np.count_nonzero(decoding))
        all_decode = decodes == chosen.size
        # The decodes' mean context (their cached tokens and the one they add; sums of integers, exact).
        if all_decode:
            samples, sampled_count = None, decodes  # every decode samples
            mean_context = (int(array_sum(before)) + decodes) / decodes
            chunks, prefixes = (), ()
        else:
            samples = after >= tokens
            sampled_count = int(np.count_nonzero(samples))
            mean_context = (int(array_sum(before[decoding])) + decodes) / decodes if decodes else 1.0
            chunks, prefixes = take[~decoding].tolist(), before[~decoding].tolist()
        take_total = int(array_sum(take))
        graphed = all_decode or take_total <= knobs.prompt_graph_tokens  # else dispatched kernel by kernel
        step_s = times.step_s(
            float(take_total), float(sampled_count), float(decodes), mean_context, chunks, prefixes, graphed
        )
        steps, first_step_s, last_step_s = 1, step_s, step_s
        if all_decode and len(pool.running) == chosen.size and (not pool.waiting or self._held(preempted_before)):
            # The same decode step repeats until a request finishes or arrives (requests waiting stay
            # out of it: ``_held``): take them together.
            steps, step_s, last_step_s = _decode_stretch(
                pool,
                chosen,
                tokens,
                times,
                mean_context,
                step_s,
                float(upcoming_s) - now,
                knobs.block_size,
                # With arrivals held for the scheduler's intake, the stretch ends at the step that takes them in.
                knobs.recv_interval - pool.recv_count if pool.inbox else None,
                # Composed ahead, the step after the one an arrival comes in was composed without it.
                1 if knobs.schedules_ahead else 0,
            )
        pool.count_steps(knobs, steps, other=not all_decode)
        end = now + step_s
        self._stretched = steps > 1
        pool.computed[chosen] = after + (steps - 1)
        if samples is None or sampled_count == chosen.size:
            sampled, tokens = chosen, tokens + steps
        else:
            sampled, tokens = chosen[samples], tokens[samples] + steps
        last = self.last_token[sampled]
        if all_decode:  # decodes have had their first token, and a token before this step's
            gaps = last
        else:
            fresh = sampled[np.isnan(self.first[sampled])]
            self.first[fresh] = end  # a stretch only ever has decodes
            gaps = last[~np.isnan(last)]
        if gaps.size:
            self.itl_values.append(now + first_step_s - gaps)
            self.itl_weights.append(1.0)
            if steps > 1:
                self.itl_values.append(np.array([(step_s - first_step_s) / (steps - 1)]))  # the stretch's mean step
                self.itl_weights.append(float(gaps.size * (steps - 1)))
        self.now = end
        self.last_step = (now if steps == 1 else end - last_step_s, end)  # a single step's start exactly
        self.last_token[sampled] = end
        pool.tokens[sampled] = tokens  # a request's tokens are its prompt and what it has generated
        done = sampled[tokens >= pool.final[sampled]]
        if done.size:
            self.finish[done] = end
            release(pool, done)
        self.finishing = done
        self.steps += steps
        self.log["end"].append(end)
        self.log["tokens"].append(take_total * steps)
        self.log["running"].append(int(chosen.size))
        self.log["waiting"].append(waiting_now)
        self.log["kv"].append(1 - pool.free_blocks / self.kv_blocks)
        return done

    def _held(self, preempted_before: int) -> bool:
        """Whether the requests waiting stay out of a stretch of decode steps: the step just
        composed admitted none without preempting, and what held the first of them back (the queue
        is first come, first served) only tightens until a request finishes: the cache fills as the
        decodes grow, the running count and the token budget stay. Held-back prompts
        (``batch_wait_iters``) wait a count of steps instead, so they end a stretch as before."""
        return self.pool.preempted == preempted_before and not self.knobs.batch_waits

    def cuttable_step(self) -> None:
        """A step where the next arrival this replica receives is not known yet (a fleet behind a
        router that looks at the replicas): a stretch of decode steps runs on to its first finish,
        and the state before it is kept so ``cut`` can redo it when an arrival comes."""
        pool = self.pool
        held = np.asarray(pool.running, np.int64)
        state = (pool.computed, pool.blocks, pool.tokens, self.last_token, self.finish)
        undo = (self.now, list(pool.running), pool.free_blocks, held, [a[held].copy() for a in state])
        undo += (len(self.itl_values), self.steps, pool.recv_count, pool.wait_iters, self.last_step)
        self.step(np.nan)
        self._undo = undo if self._stretched else None

    def cut(self, t: float) -> bool:
        """Redo the stretch under way so that it ends at the step that sees an arrival at ``t``,
        as ``step(t)`` would have run it; False where no stretch is under way past ``t``."""
        if self._undo is None or self.now <= t:
            return False
        pool = self.pool
        now, running, free, held, saved, itl_count, steps, pool.recv_count, pool.wait_iters, self.last_step = self._undo
        for array, values in zip((pool.computed, pool.blocks, pool.tokens, self.last_token, self.finish), saved):
            array[held] = values
        self.now, pool.free_blocks, self.steps = now, free, steps
        pool.running[:] = running
        del self.itl_values[itl_count:], self.itl_weights[itl_count:]
        for column in self.log.values():
            column.pop()
        self._undo = None
        done = [self.step(t)]
        while self.now < t:  # the cache shortened the redone stretch: on to the step that sees t
            done.append(self.step(t))
        self.finishing = np.concatenate(done)
        return True

    def result(self, arrival: np.ndarray, index: np.ndarray | None = None) -> Run:
        """The run as this replica saw it, for the requests ``index`` (default: all)."""
        pick = slice(None) if index is None else index
        return Run(
            arrival_s=arrival[pick],
            first_token_s=self.first[pick],
            finish_s=self.finish[pick],
            prompt_tokens=self.prompt[pick],
            output_tokens=self.output[pick],
            preemptions=self.pool.preemptions[pick],
            rejected=self.rejected[pick],
            itl_s=np.concatenate(self.itl_values) if self.itl_values else np.zeros(0),
            itl_weight=np.repeat(self.itl_weights, [v.size for v in self.itl_values]).astype(float),
            steps=self.steps,
            step_end_s=np.asarray(self.log["end"]),
            step_tokens=np.asarray(self.log["tokens"]),
            step_running=np.asarray(self.log["running"]),
            step_waiting=np.asarray(self.log["waiting"]),
            step_kv_used=np.asarray(self.log["kv"]),
            kv_blocks=self.kv_blocks,
            roofs=self.times.roofs,
        )


def simulate(requests: Requests, times: StepTimes, kv_blocks: int, knobs: EngineKnobs) -> Run:
    """Run ``requests`` through one engine replica with ``kv_blocks`` blocks of KV cache."""
    n = requests.count
    prompt, output = requests.prompt_tokens.astype(np.int64), requests.output_tokens.astype(np.int64)
    replica = Replica(prompt, output, times, kv_blocks, knobs)
    rejected = replica.rejected
    closed = requests.concurrency is not None
    arrival = start_arrivals(requests)
    sent = 0  # requests handed to the server so far (in order)
    remaining = int(n - rejected.sum())

    def send_until(t: float) -> None:
        nonlocal sent
        while sent < n and arrival[sent] <= t:  # NaN (a closed loop's request not sent yet) compares False
            i = sent
            sent += 1
            if not rejected[i]:
                replica.receive(i, float(arrival[i]))
            elif closed:
                next_client_request(arrival, sent, t)

    for _ in range(MAX_STEPS):
        if remaining == 0:
            break
        send_until(replica.now)
        if not replica.busy:
            following = arrival[sent] if sent < n else np.nan
            if np.isnan(following):
                break
            replica.now = max(replica.now, float(following))
            continue
        # The next arrival the replica will take (one too large for its cache is turned away).
        upcoming, ahead = np.nan, sent
        while ahead < n and not math.isnan(arrival[ahead]):
            if not rejected[ahead]:
                upcoming = float(arrival[ahead])
                break
            ahead += 1
        done = replica.step(upcoming)
        remaining -= int(done.size)
        if closed:
            for _ in range(done.size):
                next_client_request(arrival, sent, replica.now)
    else:
        raise SimulationTooLong(f"the simulation did not finish within {MAX_STEPS:,} scheduling steps")
    return replica.result(arrival)


def _decode_stretch(
    pool, chosen, tokens, times, mean_context, first_s, until_arrival_s, block_size, most=None, after_arrival=0
):
    """How many identical decode steps run before a request finishes or a new one arrives (the
    step that sees the arrival and ``after_arrival`` more included), at most ``most``, their total
    time and the last one's; ``tokens`` are
    the decoding requests' tokens, all but the last in the cache. The step's cost grows with the
    context, linearly for the attention's cache read, so the steps' times are summed as an
    arithmetic series from the first step's time."""
    left = int((pool.final[chosen] - tokens).min())
    if most is not None:
        left = min(left, max(1, int(most)))
    if left <= 1:
        return 1, first_s, first_s
    d = float(chosen.size)
    at_first = times.decode_attention_s(d, mean_context)  # the first step's, as it was priced (kept)
    slope = times.decode_attention_s(d, mean_context + 1) - at_first
    if times.overhead_overlaps and first_s <= times.host_s(d):
        slope = 0.0  # the host's work sets these steps, not the growing cache read

    def elapsed(k: int) -> float:  # the first k steps' time
        return k * first_s + slope * k * (k - 1) / 2

    # Each request needs blocks for the tokens the stretch adds: halved until they fit, before the
    # arrival shortens it, so where a stretch ends does not depend on when an arrival is known.
    cached, held = tokens - 1, pool.blocks[chosen]

    def need_for(steps: int) -> np.ndarray:
        return np.maximum(-(-(cached + steps) // block_size) - held, 0)

    need = need_for(left)
    needed = int(array_sum(need))
    while left > 1 and needed > pool.free_blocks:
        left = max(1, left // 2)
        need = need_for(left)
        needed = int(array_sum(need))
    if math.isfinite(until_arrival_s):
        # The first step whose end reaches the arrival (a binary search over the steps' ends).
        k_arrival = bisect_left(range(1, left + 1), until_arrival_s, key=elapsed) + 1
        if until_arrival_s > 0:  # still to come (one already here is taken in at the next step)
            k_arrival += after_arrival
        if k_arrival < left:
            left = max(1, k_arrival)
            need = need_for(left)
            needed = int(array_sum(need))
    if needed:
        pool.blocks[chosen] += need
        pool.free_blocks -= needed
    return left, float(elapsed(left)), first_s + slope * (left - 1)
