"""Decode stretches while requests wait: where the step just composed admitted no waiting request
and preempted none, every next step admits none either until a request finishes (the cache only
fills as the decodes grow, the running count and the token budget stay), so the decode steps up to
that finish are taken together as they are where nothing waits. The schedule is the one single
steps give; only the steps' times are summed as the stretch sums them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.serving.simulation import run as run_module
from roofline.serving.simulation.api import knobs_from
from roofline.serving.simulation.load import Lengths, Load, Requests, make_requests
from roofline.serving.simulation.run import simulate
from roofline.serving.simulation.steptime import step_times
from roofline.settings import Settings
from roofline.workload import Precision

LLAMA, H100 = get_model("llama-3.1-8b"), get_hardware("h100-sxm")


def _setup(policy: str, **knobs):
    settings = Settings()
    k = replace(knobs_from(settings, True, H100), policy=policy, **knobs)
    times = step_times(LLAMA, H100, Precision(), 1, settings, k.max_num_batched_tokens, k.max_num_seqs)
    return times, k


def _single_steps(pool, chosen, tokens, times, mean_context, first_s, *args):
    """No stretch: each decode step its own decision (the reference)."""
    return 1, first_s, first_s


def _spy(seen: list):
    """The stretch as it runs, noting for each whether requests waited and how many steps it took."""
    real = run_module._decode_stretch

    def stretch(pool, *args):
        waiting = bool(pool.waiting)
        answer = real(pool, *args)
        seen.append((waiting, answer[0]))
        return answer

    return stretch


@pytest.mark.parametrize("policy", ["vllm", "sglang", "trtllm"])
def test_a_request_held_out_by_the_cache_does_not_split_the_decodes_before_it(policy):
    """Worked by hand: blocks of 16, a cache of 10. A (prompt 64, output 48) is admitted and takes
    4 blocks (TensorRT-LLM's no-evict admission reserves its whole 112 tokens, 7). B (prompt 112)
    needs 7 (8 reserved): it waits. Step 1 runs A's prompt and samples its first token. A's 47
    other tokens need at most 7 blocks in all, which fit, and B stays out while A holds them: one
    stretch of 47 decode steps, one row. A finishes, B runs its prompt, then its 3 decodes."""
    times, knobs = _setup(policy)
    requests = Requests(np.array([0.0, 0.0]), np.array([64, 112]), np.array([48, 4]))
    run = simulate(requests, times, 10, knobs)
    assert run.steps == 1 + 47 + 1 + 3
    assert run.step_tokens.tolist() == [64, 47, 112, 3]
    assert run.step_running.tolist() == [1, 1, 1, 1]
    assert run.step_waiting.tolist() == [1, 1, 0, 0]
    assert run.finish_s[0] == run.step_end_s[1] and run.first_token_s[1] == run.step_end_s[2]


@pytest.mark.parametrize(
    ("policy", "knobs"),
    [
        ("vllm", {}),
        ("vllm", {"schedules_ahead": True}),
        ("sglang", {}),
        ("sglang", {"recv_interval": 4}),
        ("trtllm", {}),
        ("trtllm", {"batch_wait_iters": 3, "batch_wait_ratio": 0.5}),
    ],
)
@pytest.mark.parametrize(
    ("load", "blocks"),
    [
        (Load("concurrency", 120, Lengths(64, 400), Lengths(16, 300), concurrency=24, seed=1), 300),
        (Load("poisson", 150, Lengths(64, 400), Lengths(16, 300), rate_per_s=30.0, seed=2), 250),
    ],
)
def test_a_short_cache_runs_the_schedule_single_steps_run(load, blocks, policy, knobs, monkeypatch):
    times, k = _setup(policy, **knobs)
    requests = make_requests(load)
    seen: list[tuple[bool, int]] = []
    monkeypatch.setattr(run_module, "_decode_stretch", _spy(seen))
    stretched = simulate(requests, times, blocks, k)
    monkeypatch.setattr(run_module, "_decode_stretch", _single_steps)
    single = simulate(requests, times, blocks, k)
    assert stretched.steps == single.steps
    for name in ("preemptions", "rejected"):
        assert np.array_equal(getattr(stretched, name), getattr(single, name)), name
    # A stretch sums its steps' times as an arithmetic series from the first step's cache read,
    # where the table interpolates it in log space: seconds differ in the sixth digit.
    for name in ("first_token_s", "finish_s"):
        np.testing.assert_allclose(getattr(stretched, name), getattr(single, name), rtol=1e-4, err_msg=name)
    assert single.step_end_s.size == single.steps
    assert stretched.step_end_s.size < single.steps  # stretches ran
    waited = [steps for waiting, steps in seen if waiting and steps > 1]
    if k.batch_waits:  # held-back prompts wait a count of steps: no stretch runs past them
        assert not waited
    else:
        assert waited  # some stretches ran with requests waiting
