"""One scheduling decision of a continuous-batching engine: vLLM V1's policy, and what SGLang
and TensorRT-LLM do differently.

Every request has ``tokens`` (its prompt and the outputs sampled so far) of which ``computed``
are in the KV cache; a step gives it ``tokens - computed`` new tokens (a prompt chunk, or the one
token of a decode), capped by the step's token budget. A request that reaches
``computed == tokens`` samples one token.

- ``vllm`` (V1's scheduler): running requests are served first, in the order they were admitted;
  then waiting requests are admitted first come, first served while the budget lasts, fewer than
  ``max_num_seqs`` run, and their blocks fit. Prompt chunks and decodes share a step. When the
  cache cannot hold a running request's new tokens, the request admitted last is preempted: its
  blocks are freed and it waits at the head of the queue to be recomputed (prompt and outputs so
  far); a step that preempted admits no waiting request.
- ``trtllm`` (in-flight batching, the ``GUARANTEED_NO_EVICT`` capacity scheduler, its default):
  prompts and decodes share a step as in vLLM, but a request is admitted only when the blocks of
  its whole prompt and output fit, so nothing is ever preempted.
- ``sglang`` (its scheduler without ``--enable-mixed-chunk``, the default): prefill first. While a
  request waits (or a chunked prompt is unfinished) and one can be admitted, the step is a
  prefill batch of up to ``max_num_batched_tokens`` prompt tokens (SGLang's
  ``chunked_prefill_size``) and no decode; otherwise every running request decodes. A decode that
  runs out of cache retracts the request admitted last, as vLLM preempts.

Two settings that hold new requests back, each off by default as in its engine:
- ``recv_interval`` (SGLang's ``--scheduler-recv-interval``): the scheduler takes in arrived
  requests only when its counter reaches the interval; a decode step adds 1 to the counter and any
  other step 1,000 (SGLang's ``SchedulerRecvSkipper`` weights), so after a prefill new requests
  come in at once and during decoding every ``recv_interval`` steps. An idle server takes them in
  at once (its loop spins with nothing to run).
- ``batch_wait_iters`` and ``batch_wait_ratio`` (TensorRT-LLM's ``batch_wait_timeout_iters`` and
  ``batch_wait_max_tokens_ratio``): a step that would run prompts beside decodes runs the decodes
  alone while fewer than ``batch_wait_iters`` steps have waited so and the step's tokens (the
  prompts' whole lengths plus one per decode) stay under ``batch_wait_ratio`` x the token budget.

When a request reaches the scheduler (``roofline.serving.simulation.run``): a busy server composes
each step at the end of the one before, from the requests that reached it before then; a request
sent as another ends (a closed loop's next) reaches it a moment later, so it misses the step
composed at that instant. With ``schedules_ahead`` (vLLM's async scheduling, on by default since
0.14; SGLang's and TensorRT-LLM's overlap schedulers) a step is composed while the one before it
runs, from the requests that arrived before that one began: a request that arrives during a step
joins the step after next, unless the engine had nothing to compose ahead (its running requests all
ending), and then the step composed as the one before ends. A server with nothing to run takes a
request in as it arrives.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from roofline.defaults import RECV_OTHER_WEIGHT  # what a step other than a decode adds to SGLang's intake counter

POLICIES = ("vllm", "sglang", "trtllm")
RELEASE_BY_REMOVAL = 8  # finished requests taken out of the running list one by one, below a scan of it
array_sum = np.add.reduce  # an array's sum without ndarray.sum's Python wrapper (called several times a step)


@dataclass(frozen=True)
class EngineKnobs:
    """The scheduler's settings, named as vLLM names them; ``policy`` is whose scheduler runs."""

    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    block_size: int = 16
    chunked_prefill: bool = True
    long_prefill_token_threshold: int = 0  # 0: a prompt chunk may take the whole budget
    policy: str = "vllm"
    recv_interval: int = 1  # SGLang: decode steps between two intakes of arrived requests
    batch_wait_iters: int = 0  # TensorRT-LLM: steps prompts may be held for more tokens ...
    batch_wait_ratio: float = 0.0  # ... until a step's tokens reach this share of the budget
    schedules_ahead: bool = False  # each step is composed while the one before it runs (async / overlap scheduling)
    # The most new tokens of a step with prompt tokens replayed from a CUDA graph; a larger one is
    # dispatched from the host kernel by kernel (StepTimes.eager_dispatch_s). Decode-only steps replay.
    prompt_graph_tokens: int = 512

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        for name in ("max_num_batched_tokens", "max_num_seqs", "block_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1 << 24:
                raise ValueError(f"{name} must be an integer in [1, 16777216], got {value!r}")
        for name, low, high in (
            ("long_prefill_token_threshold", 0, 1 << 24),
            ("recv_interval", 1, RECV_OTHER_WEIGHT),
            ("batch_wait_iters", 0, 1 << 20),
            ("prompt_graph_tokens", 0, 1 << 24),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
        if not isinstance(self.schedules_ahead, bool):
            raise ValueError(f"schedules_ahead must be true or false, got {self.schedules_ahead!r}")
        r = self.batch_wait_ratio
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 <= r <= 1.0:
            raise ValueError(f"batch_wait_ratio must be a number in [0, 1], got {r!r}")
        if self.recv_interval > 1 and self.policy != "sglang":
            raise ValueError(
                f"recv_interval is SGLang's --scheduler-recv-interval: it needs SGLang's scheduler (engine sglang), "
                f"not {self.policy}'s (vLLM's is the one of engines vllm, auto and ideal)"
            )
        if (self.batch_wait_iters or self.batch_wait_ratio) and self.policy != "trtllm":
            raise ValueError(
                "batch_wait_iters and batch_wait_ratio are TensorRT-LLM's batch waiting: they need its scheduler "
                f"(engine trtllm), not {self.policy}'s (vLLM's is the one of engines vllm, auto and ideal)"
            )

    @property
    def batch_waits(self) -> bool:
        return self.batch_wait_iters > 0 or self.batch_wait_ratio > 0


@dataclass
class Pool:
    """The state the scheduler works on; arrays are indexed by request."""

    tokens: np.ndarray
    computed: np.ndarray
    blocks: np.ndarray  # KV blocks each request holds
    free_blocks: int
    running: list[int]
    waiting: deque[int]
    preemptions: np.ndarray
    final: np.ndarray | None = None  # prompt + output of each request (what a no-evict admission reserves)
    inbox: deque[int] | None = None  # arrived, not yet taken in (``recv_interval``)
    recv_count: int = 0  # the intake counter
    wait_iters: int = 0  # steps prompts have been held so far (``batch_wait_iters``)
    preempted: int = 0  # preemptions so far, all requests together

    def take_in(self, knobs: EngineKnobs) -> None:
        """Move arrived requests into the queue where the intake counter allows (module notes)."""
        idle = not self.running and not self.waiting
        if knobs.recv_interval <= 1 or self.recv_count >= knobs.recv_interval or idle:
            self.recv_count = 0
            if self.inbox:
                self.waiting.extend(self.inbox)
                self.inbox.clear()

    def count_steps(self, knobs: EngineKnobs, decode_steps: int, other: bool) -> None:
        """Advance the intake counter past a step (``other``) or a stretch of decode steps,
        taking in nothing on the way: the counter as it stands before the next intake check."""
        t = knobs.recv_interval
        if other:
            self.recv_count += RECV_OTHER_WEIGHT
        elif decode_steps:
            self.recv_count = (self.recv_count + decode_steps - 1) % t + 1 if t > 1 else 0


def _blocks_for(tokens: np.ndarray | int, block_size: int) -> np.ndarray:
    return -(-np.asarray(tokens) // block_size)


def schedule(pool: Pool, knobs: EngineKnobs) -> tuple[np.ndarray, np.ndarray]:
    """Choose this step's requests and their new tokens (arrays in admission order), taking
    and freeing KV blocks and preempting as needed; updates ``pool`` in place."""
    pool.take_in(knobs)
    if knobs.policy == "sglang":
        return _prefill_first(pool, knobs)
    return _mixed(pool, knobs)


def _admit(pool: Pool, knobs: EngineKnobs, budget: int, cap: int, chosen: list[int], taken: list[int]) -> int:
    """Admit waiting requests first come, first served while the budget, ``max_num_seqs`` and the
    cache allow (a no-evict policy reserves the whole prompt and output); returns the budget left."""
    reserve = knobs.policy == "trtllm" and pool.final is not None
    while budget > 0 and pool.waiting and len(pool.running) < knobs.max_num_seqs:
        i = pool.waiting[0]
        want = int(pool.tokens[i] - pool.computed[i])
        if not knobs.chunked_prefill and want > budget:
            break
        take = min(want, budget, cap)
        upto = int(pool.final[i]) if reserve else int(pool.computed[i] + take)
        need = int(_blocks_for(upto, knobs.block_size)) - int(pool.blocks[i])
        if need > pool.free_blocks:
            break
        pool.waiting.popleft()
        pool.running.append(i)
        pool.blocks[i] += need
        pool.free_blocks -= need
        budget -= take
        chosen.append(i)
        taken.append(take)
    return budget


def _prefill_first(pool: Pool, knobs: EngineKnobs) -> tuple[np.ndarray, np.ndarray]:
    """SGLang: a prefill batch (unfinished prompt chunks, then new requests) whenever one can run,
    else one decode step of every running request."""
    budget = knobs.max_num_batched_tokens
    run = np.asarray(pool.running, np.int64)
    left = pool.tokens[run] - pool.computed[run] if run.size else np.zeros(0, np.int64)
    prefilling = run[left > 1] if run.size else run
    chosen: list[int] = []
    taken: list[int] = []
    for i in prefilling.tolist():  # an unfinished prompt goes on first (SGLang's chunked request)
        if budget <= 0:
            break
        take = int(min(pool.tokens[i] - pool.computed[i], budget))
        need = max(int(_blocks_for(pool.computed[i] + take, knobs.block_size)) - int(pool.blocks[i]), 0)
        if need > pool.free_blocks:
            break
        pool.blocks[i] += need
        pool.free_blocks -= need
        budget -= take
        chosen.append(i)
        taken.append(take)
    _admit(pool, knobs, budget, budget, chosen, taken)
    if chosen:
        return np.asarray(chosen, np.int64), np.asarray(taken, np.int64)
    # A decode step: every running request's one token, retracting the last admitted where the
    # cache is short.
    run = np.asarray([i for i in pool.running if pool.tokens[i] - pool.computed[i] >= 1], np.int64)
    take = pool.tokens[run] - pool.computed[run]
    need = np.maximum(_blocks_for(pool.computed[run] + take, knobs.block_size) - pool.blocks[run], 0)
    while need.sum() > pool.free_blocks and run.size:
        victim = pool.running.pop()
        _preempt(pool, victim)
        keep = run != victim
        run, take, need = run[keep], take[keep], need[keep]
    pool.blocks[run] += need
    pool.free_blocks -= int(need.sum())
    return run, take


def _mixed(pool: Pool, knobs: EngineKnobs) -> tuple[np.ndarray, np.ndarray]:
    """vLLM V1 and TensorRT-LLM: running requests first, then admissions, in one step."""
    budget = knobs.max_num_batched_tokens
    cap = knobs.long_prefill_token_threshold or budget
    preempted = False
    run = np.asarray(pool.running, np.int64)
    take = run  # no running request: nothing taken (an empty array)
    if run.size:
        computed = pool.computed[run]
        take = np.minimum(pool.tokens[run] - computed, cap)  # every running request has a token to compute
        take_sum = int(array_sum(take))
        if take_sum > budget:  # the budget runs out: requests further down get what is left, or nothing
            before = np.cumsum(take) - take
            take = np.minimum(np.maximum(budget - before, 0), take)
            served = take > 0
            run, take, computed = run[served], take[served], computed[served]
            take_sum = int(array_sum(take))
        bs = knobs.block_size
        need = np.maximum(-(-(computed + take) // bs) - pool.blocks[run], 0)
        needed = int(array_sum(need))
        while needed > pool.free_blocks and run.size:
            victim = pool.running.pop()  # the request admitted last
            _preempt(pool, victim)
            preempted = True
            keep = run != victim
            run, take, need = run[keep], take[keep], need[keep]
            needed, take_sum = int(array_sum(need)), int(array_sum(take))
        if needed:
            pool.blocks[run] += need
            pool.free_blocks -= needed
        budget -= take_sum
        if preempted or not pool.waiting or budget <= 0:  # nobody is admitted: the arrays are the step
            return _batch_wait(pool, knobs, run, take, run.size)
    # A step that had to preempt admits nobody (returned above): the cache is short already (vLLM
    # V1 does the same). The admitted join the running requests' arrays.
    admitted: list[int] = []
    admitted_take: list[int] = []
    _admit(pool, knobs, budget, cap, admitted, admitted_take)
    if admitted:
        run = np.concatenate((run, np.asarray(admitted, np.int64)))
        take = np.concatenate((take, np.asarray(admitted_take, np.int64)))
    return _batch_wait(pool, knobs, run, take, run.size - len(admitted))


def _batch_wait(pool: Pool, knobs: EngineKnobs, chosen: np.ndarray, taken: np.ndarray, running_before: int):
    """TensorRT-LLM's batch waiting (module notes): the step's prompts are held back, new ones
    returned to the head of the queue with their blocks, while the wait lasts (off: the step as chosen)."""
    if not knobs.batch_waits:
        return chosen, taken
    new = np.arange(chosen.size) >= running_before
    prompt = new | (pool.tokens[chosen] - pool.computed[chosen] > 1)
    if not prompt.any() or prompt.all():
        return chosen, taken
    tokens = int(pool.tokens[chosen[prompt]].sum()) + int((~prompt).sum())
    if pool.wait_iters >= knobs.batch_wait_iters or tokens >= knobs.batch_wait_ratio * knobs.max_num_batched_tokens:
        pool.wait_iters = 0
        return chosen, taken
    pool.wait_iters += 1
    for i in reversed(chosen[new].tolist()):  # admitted this step: back to the head, in order
        pool.running.remove(i)
        pool.free_blocks += int(pool.blocks[i])
        pool.blocks[i] = 0
        pool.waiting.appendleft(i)
    return chosen[~prompt], taken[~prompt]


def _preempt(pool: Pool, i: int) -> None:
    pool.free_blocks += int(pool.blocks[i])
    pool.blocks[i] = 0
    pool.computed[i] = 0
    pool.preemptions[i] += 1
    pool.preempted += 1
    pool.waiting.appendleft(i)


def release(pool: Pool, done: np.ndarray) -> None:
    """Finished requests leave the batch and give their blocks back."""
    if not done.size:
        return
    pool.free_blocks += int(array_sum(pool.blocks[done]))
    pool.blocks[done] = 0
    if done.size <= RELEASE_BY_REMOVAL:  # a few: each found and removed in the list, in C
        for i in done.tolist():
            pool.running.remove(i)
        return
    gone = set(done.tolist())
    pool.running[:] = [i for i in pool.running if i not in gone]
