"""When a request reaches the scheduler, worked by hand: a busy server composes each step from the
requests that had arrived when it was composed (at the end of the step before, or, scheduling
ahead, at its start), an idle server takes a request in as it arrives."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.engines import engine_profile
from roofline.hardware import get_hardware
from roofline.serving.simulation.api import knobs_from
from roofline.serving.simulation.load import Requests
from roofline.serving.simulation.metrics import per_request
from roofline.serving.simulation.run import simulate
from roofline.serving.simulation.scheduler import EngineKnobs
from roofline.settings import Settings
from tests.test_simulation import MS, flat_times


@pytest.mark.parametrize("ahead, first_b_ms", [(False, 4.0), (True, 5.0)])
def test_a_request_arriving_during_a_step_joins_the_next_step_composed_after_it(ahead, first_b_ms):
    """Steps of 1 ms. A (prompt 4, 10 outputs) arrives at 0 on an idle server: its prompt runs at
    once, [0, 1] ms, then it decodes. B (prompt 4, 2 outputs) arrives at 2.5 ms, during the step
    [2, 3].
    Composed at the end of the step before, the step [3, 4] is composed at 3 ms, B is there: B's
    first token at 4 ms.
    Composed ahead, the step [3, 4] was composed at 2 ms, as [2, 3] began, before B: it holds A's
    decode alone; [4, 5], composed at 3 ms, takes B in: B's first token at 5 ms.
    C (prompt 4, 1 output) arrives at 20 ms, after both have ended: an idle server runs it at once
    either way, its first token at 21 ms."""
    requests = Requests(np.array([0.0, 2.5 * MS, 20 * MS]), np.array([4, 4, 4]), np.array([10, 2, 1]))
    knobs = EngineKnobs(max_num_batched_tokens=8, block_size=4, schedules_ahead=ahead)
    run = simulate(requests, flat_times(), kv_blocks=100, knobs=knobs)
    assert run.first_token_s == pytest.approx([1 * MS, first_b_ms * MS, 21 * MS])
    assert run.finish_s[1] == pytest.approx((first_b_ms + 1) * MS)  # B's 2nd token: the step after its first
    assert run.finish_s[0] == pytest.approx(10 * MS)  # A decodes on, one token a step, whatever B does


@pytest.mark.parametrize("ahead, ttft_ms", [(False, 2.0), (True, 3.0)])
def test_a_closed_loops_next_request_misses_the_step_composed_as_it_is_sent(ahead, ttft_ms):
    """Two clients, steps of 1 ms, prompts of 4 tokens. Both first requests run their prompts
    together, [0, 1] ms; request 0 (2 outputs) ends at 2 ms, request 1 (5 outputs) decodes on to
    5 ms. Client 0 sends request 2 as request 0 ends, at 2 ms: it reaches the server a moment
    after the step [2, 3] was composed, so that step is request 1's decode alone.
    Composed at the end of the step before, [3, 4] takes request 2 in: its first token at 4 ms,
    2 ms after it was sent.
    Composed ahead, [3, 4] was composed at 2 ms as well; [4, 5] takes it in: 3 ms."""
    requests = Requests(np.array([0.0, 0.0, np.nan]), np.array([4, 4, 4]), np.array([2, 5, 1]), concurrency=2)
    knobs = EngineKnobs(max_num_batched_tokens=8, block_size=4, schedules_ahead=ahead)
    run = simulate(requests, flat_times(), kv_blocks=100, knobs=knobs)
    assert run.arrival_s[2] == pytest.approx(2 * MS)
    assert per_request(run)["ttft_s"] == pytest.approx([1 * MS, 1 * MS, ttft_ms * MS])


def test_the_engines_that_overlap_their_host_work_schedule_ahead():
    """The same engine versions whose host work hides under the device's compose each step ahead
    (vLLM's async scheduling since 0.14, SGLang's and TensorRT-LLM's overlap schedulers); the
    ideal engine and vLLM before 0.14 compose a step at the end of the one before."""
    h100 = get_hardware("h100-sxm")
    for engine in ("vllm", "sglang", "trtllm"):
        assert knobs_from(Settings(engine=engine), hw=h100).schedules_ahead
        assert engine_profile(engine).overlaps(None)
    assert not knobs_from(Settings(engine="ideal"), hw=h100).schedules_ahead
    assert not knobs_from(Settings(engine="vllm", engine_version="0.12.0"), hw=h100).schedules_ahead
    with pytest.raises(ValueError, match="schedules_ahead must be true or false"):
        EngineKnobs(schedules_ahead="yes")


@pytest.mark.parametrize("ahead, ttfts_ms", [(False, [2.0, 2.0]), (True, [2.0, 3.0])])
def test_a_request_waiting_at_a_steps_end_starts_there_and_one_sent_then_waits(ahead, ttfts_ms):
    """Two clients, steps of 1 ms, prompts of 4 tokens. Requests 0 (2 outputs) and 1 (3 outputs)
    prefill together, [0, 1] ms; request 0 ends at 2 ms, and its client sends request 2 then;
    request 1 ends at 3 ms, and its client sends request 3 then.
    At 3 ms request 2 waits (it arrived during [2, 3]) and nothing else runs: the step [3, 4] is
    its prompt alone, also where the engine schedules ahead (it had nothing to compose ahead when
    [2, 3] began, request 1's last token in sight); request 3, a moment late, is not in it.
    Composed at the end of the step before, [4, 5] takes request 3 in: TTFT 2 ms for both.
    Composed ahead, [4, 5] was composed at 3 ms as [3, 4] began; [5, 6] takes request 3: 3 ms."""
    requests = Requests(np.array([0.0, 0.0, np.nan, np.nan]), np.full(4, 4), np.array([2, 3, 2, 1]), concurrency=2)
    knobs = EngineKnobs(max_num_batched_tokens=8, block_size=4, schedules_ahead=ahead)
    run = simulate(requests, flat_times(), kv_blocks=100, knobs=knobs)
    assert run.arrival_s[2:] == pytest.approx([2 * MS, 3 * MS])
    assert per_request(run)["ttft_s"][2:] == pytest.approx(np.array(ttfts_ms) * MS)


def test_without_chunked_prefill_a_prompt_longer_than_the_budget_is_refused_up_front():
    """The scheduler could never place it (a step holds a whole prompt or none): said before any
    step runs, naming the setting, rather than failing inside the run."""
    from roofline.models import get_model
    from roofline.serving.simulation.api import simulate_serving
    from roofline.serving.simulation.load import Lengths, Load, make_requests

    requests = make_requests(Load("poisson", 5, Lengths(1024), Lengths(16), rate_per_s=1.0))
    model, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    with pytest.raises(ValueError, match=r"max_batched_tokens: 1,000 is below the longest prompt \(1,024 tokens\)"):
        simulate_serving(model, hw, requests, settings=Settings(max_batched_tokens=1000), chunked_prefill=False)
    chunked = simulate_serving(model, hw, requests, settings=Settings(max_batched_tokens=1000))
    assert np.all(np.isfinite(per_request(chunked.run)["ttft_s"]))  # chunked, the same prompts run
