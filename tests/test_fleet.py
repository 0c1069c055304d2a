"""Replicas behind a router: round-robin and random splits worked out, a fleet's closed loop equal
to its replicas' own loops, Little's law over the fleet, the least-loaded router's choices worked
out and its conservation laws, and bad inputs named."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.serving.simulation.api import simulate_serving
from roofline.serving.simulation.fleet import split
from roofline.serving.simulation.load import Lengths, Load, Requests, make_requests
from roofline.serving.simulation.metrics import in_system_mean, per_request

LLAMA, H100 = get_model("llama-3.1-8b"), get_hardware("h100-sxm")


def test_round_robin_and_random_splits():
    open_loop = Requests(np.arange(7.0), np.full(7, 10), np.full(7, 5))
    assert [p.tolist() for p in split(open_loop, 3, "round-robin")] == [[0, 3, 6], [1, 4], [2, 5]]
    parts = split(open_loop, 3, "random", seed=1)
    assert sorted(np.concatenate(parts).tolist()) == list(range(7))
    assert [p.tolist() for p in parts] == [p.tolist() for p in split(open_loop, 3, "random", seed=1)]
    # A closed loop of 4 clients over 2 replicas: clients 0 and 2 to the first, 1 and 3 to the second;
    # client c sends requests c, c + 4, c + 8.
    closed = Requests(np.full(12, np.nan), np.full(12, 10), np.full(12, 5), concurrency=4)
    assert [p.tolist() for p in split(closed, 2, "round-robin")] == [[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9, 11]]


def test_a_fleets_closed_loop_is_its_replicas_own_loops():
    """Round-robin splits 8 clients into 4 replicas of 2: every request sees what it would see in
    one replica with 2 clients."""
    load = Load("concurrency", 64, Lengths(512), Lengths(32), concurrency=8)
    fleet = per_request(simulate_serving(LLAMA, H100, make_requests(load), replicas=4).run)
    alone = per_request(
        simulate_serving(
            LLAMA, H100, make_requests(Load("concurrency", 16, Lengths(512), Lengths(32), concurrency=2))
        ).run
    )
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        assert np.sort(fleet[key]) == pytest.approx(np.sort(np.tile(alone[key], 4)))


def test_littles_law_holds_over_the_fleet():
    load = Load("poisson", 3000, Lengths(256), Lengths(64), rate_per_s=60.0, seed=3)
    sim = simulate_serving(LLAMA, H100, make_requests(load), replicas=3)
    run = sim.run
    assert np.isfinite(run.finish_s).all()
    # L = lambda x W over the whole fleet: requests in the system on average, against the arrival
    # rate times the mean time in the system.
    start, end = float(run.arrival_s.min()), float(run.finish_s.max())
    rate = (run.arrival_s.size - 1) / (run.arrival_s.max() - run.arrival_s.min())
    e2e = float(np.mean(run.finish_s - run.arrival_s))
    assert in_system_mean(run, start, end) == pytest.approx(rate * e2e, rel=0.1)
    assert sim.replicas == 3 and run.steps > 0


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"replicas": 2, "router": "fewest"}, "router must be one of round-robin, random, least-loaded"),
        ({"replicas": 0, "router": "least-loaded"}, "replicas must be an integer"),
        ({"replicas": 0}, "replicas must be an integer"),
        ({"replicas": 9}, "9 replicas for 8 clients"),
        ({"replicas": 9, "router": "least-loaded"}, "9 replicas for 8 clients"),
    ],
)
def test_bad_fleets_are_named(kwargs, why):
    requests = make_requests(Load("concurrency", 16, Lengths(64), Lengths(8), concurrency=8))
    with pytest.raises(ValueError, match=why):
        simulate_serving(LLAMA, H100, requests, **kwargs)


@pytest.mark.parametrize(
    "load",
    [
        Load("poisson", 400, Lengths(256, 2048), Lengths(16, 512), rate_per_s=40.0, seed=5),
        Load("concurrency", 200, Lengths(512), Lengths(64, 256), concurrency=16, seed=2),
    ],
)
def test_one_least_loaded_replica_is_the_plain_simulation(load):
    requests = make_requests(load)
    plain = simulate_serving(LLAMA, H100, requests).run
    routed = simulate_serving(LLAMA, H100, requests, replicas=1, router="least-loaded").run
    for name in ("arrival_s", "first_token_s", "finish_s", "preemptions", "itl_s"):
        assert np.array_equal(getattr(plain, name), getattr(routed, name), equal_nan=True), name
    assert routed.steps == plain.steps


@pytest.mark.parametrize("policy", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize(
    ("requests", "blocks"),
    [
        # A short cache: decode stretches are halved to fit, and requests are preempted.
        (make_requests(Load("poisson", 150, Lengths(64, 400), Lengths(16, 300), rate_per_s=30.0, seed=2)), 400),
        (make_requests(Load("concurrency", 80, Lengths(64, 400), Lengths(16, 300), concurrency=12, seed=1)), 300),
        # The second request can never fit (1,010 tokens, 30 blocks of 16): it is turned away.
        (Requests(np.array([0.0, 0.5, 0.6]), np.array([100, 1000, 100]), np.array([300, 10, 300])), 30),
    ],
)
def test_one_least_loaded_replica_is_the_plain_loop_on_a_short_cache(requests, blocks, policy):
    from dataclasses import replace

    from roofline.serving.simulation.api import knobs_from
    from roofline.serving.simulation.fleet import least_loaded
    from roofline.serving.simulation.run import simulate
    from roofline.serving.simulation.steptime import step_times
    from roofline.settings import Settings
    from roofline.workload import Precision

    settings = Settings()
    knobs = replace(knobs_from(settings, True, H100), policy=policy)
    times = step_times(LLAMA, H100, Precision(), 1, settings, knobs.max_num_batched_tokens, knobs.max_num_seqs)
    plain = simulate(requests, times, blocks, knobs)
    (routed,), _ = least_loaded(requests, times, blocks, knobs, 1)
    for name in ("first_token_s", "finish_s", "preemptions", "rejected", "itl_s", "itl_weight", "step_end_s"):
        assert np.array_equal(getattr(plain, name), getattr(routed, name), equal_nan=True), name


def test_least_loaded_sends_a_request_to_the_idle_replica():
    """Two replicas. At 0 s a long request and a short one arrive: the first goes to replica 0, the
    second to replica 1 (0 < 1 outstanding). At 1 s the short one is long done and the long one
    still decodes: the third request goes to the idle replica 1, where round-robin (every 2nd)
    sends it to replica 0 behind the long one. On an empty replica its TTFT is the short one's."""
    requests = Requests(np.array([0.0, 0.0, 1.0]), np.array([1024, 1024, 1024]), np.array([4000, 2, 2]))
    routed = simulate_serving(LLAMA, H100, requests, replicas=2, router="least-loaded")
    run = routed.run
    ttft = run.first_token_s - run.arrival_s
    assert run.finish_s[1] < 1.0 < run.finish_s[0]
    assert ttft[2] == pytest.approx(ttft[1], rel=1e-12)
    # Round-robin puts it beside the long request: its prefill shares a step with that decode.
    rr = simulate_serving(LLAMA, H100, requests, replicas=2, router="round-robin").run
    assert rr.first_token_s[2] - rr.arrival_s[2] > ttft[2]
    assert routed.router == "least-loaded" and routed.replicas == 2


def test_least_loaded_closed_loop_keeps_its_clients_and_finishes_every_request():
    """C clients over 3 replicas: never more than C requests in the fleet, every request served
    once, each after it was sent; Little's law over the fleet."""
    clients = 12
    load = Load("concurrency", 300, Lengths(256, 1024), Lengths(16, 128), concurrency=clients, seed=4)
    run = simulate_serving(LLAMA, H100, make_requests(load), replicas=3, router="least-loaded").run
    assert np.isfinite(run.finish_s).all() and (run.first_token_s >= run.arrival_s).all()
    assert (run.finish_s >= run.first_token_s).all()
    events = np.concatenate([run.arrival_s, run.finish_s])
    change = np.concatenate([np.ones(run.arrival_s.size), -np.ones(run.finish_s.size)])
    order = np.lexsort((change, events))  # a finish before an arrival at the same instant
    assert np.cumsum(change[order]).max() == clients
    start, end = float(run.arrival_s.min()), float(run.finish_s.max())
    assert in_system_mean(run, start, end) == pytest.approx(clients, rel=0.05)


def test_least_loaded_open_loop_obeys_littles_law():
    load = Load("poisson", 3000, Lengths(256, 2048), Lengths(16, 512), rate_per_s=60.0, seed=3)
    requests = make_requests(load)
    run = simulate_serving(LLAMA, H100, requests, replicas=3, router="least-loaded").run
    assert np.isfinite(run.finish_s).all()
    start, end = float(run.arrival_s.min()), float(run.finish_s.max())
    rate = (run.arrival_s.size - 1) / (run.arrival_s.max() - run.arrival_s.min())
    e2e = float(np.mean(run.finish_s - run.arrival_s))
    assert in_system_mean(run, start, end) == pytest.approx(rate * e2e, rel=0.1)


def test_the_capacity_ranking_is_the_same_over_two_processes():
    from roofline.serving.simulation.capacity import rank_capacity
    from roofline.serving.simulation.metrics import Targets

    devices = [get_hardware(h) for h in ("h100-sxm", "a100-sxm-80gb", "l4")]
    args = (LLAMA, devices, Lengths(512), Lengths(64), Targets(ttft_s=1.0, tpot_s=0.05))
    one, why_one = rank_capacity(*args, requests=100)
    two, why_two = rank_capacity(*args, requests=100, workers=2)
    assert [c.to_json() for c in one] == [c.to_json() for c in two] and why_one == why_two


def test_the_capacity_ranking_reports_each_setup_as_it_finishes_and_its_answers_are_unchanged():
    """serve --capacity takes tens of seconds over every device: a terminal is told how far it is.
    Every setup is reported once, in order, in one process or several, and the ranking is the same."""
    from roofline.serving.simulation.capacity import rank_capacity
    from roofline.serving.simulation.metrics import Targets

    devices = [get_hardware(h) for h in ("h100-sxm", "a100-sxm-80gb", "t4")]
    args = (get_model("llama-3.1-8b"), devices, Lengths(512), Lengths(64), Targets(ttft_s=2.0, tpot_s=0.05))
    for workers in (1, 2):
        told: list[tuple[int, int]] = []
        found, why_not = rank_capacity(
            *args, requests=60, workers=workers, progress=lambda d, t, o=told: o.append((d, t))
        )
        assert told == [(1, 3), (2, 3), (3, 3)]
        assert len(found) + len(why_not) == 3 and "t4 TP=1" in why_not
        plain, _ = rank_capacity(*args, requests=60, workers=workers)
        assert [(c.hardware, c.rate_per_s) for c in found] == [(c.hardware, c.rate_per_s) for c in plain]
