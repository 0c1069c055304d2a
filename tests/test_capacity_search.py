"""The capacity search's probes: the saturation loop, then the server's full throughput; the trickle
only where the targets fail there, and the bisection only where the trickle meets them (latency
does not fall as the rate rises, so targets met at full throughput are met below it)."""

from __future__ import annotations

import math

import pytest

from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.serving.simulation import capacity
from roofline.serving.simulation.load import Lengths
from roofline.serving.simulation.metrics import Targets

MS = 1e-3
LLAMA, H100 = get_model("llama-3.1-8b"), get_hardware("h100-sxm")


@pytest.fixture
def runs(monkeypatch):
    """The loads each simulation of the search ran: ('concurrency', clients) or ('poisson', rate)."""
    seen: list[tuple[str, float]] = []
    real = capacity.make_requests

    def counted(load):
        seen.append((load.kind, load.concurrency if load.kind == "concurrency" else load.rate_per_s))
        return real(load)

    monkeypatch.setattr(capacity, "make_requests", counted)
    return seen


def _search(tpot_ms: float):
    return capacity.max_rate(
        LLAMA, H100, Lengths(512), Lengths(128), Targets(ttft_s=1.0, tpot_s=tpot_ms * MS), requests=200
    )


def test_targets_met_at_full_throughput_run_no_trickle(runs):
    c = _search(1000.0)
    assert [kind for kind, _ in runs] == ["concurrency", "poisson"]
    assert runs[1][1] == c.saturation_per_s == c.rate_per_s
    assert c.binding.startswith("saturation")


def test_targets_missed_even_at_a_trickle(runs):
    # One sequence's decode step on an H100 takes about 4.6 ms: no rate meets a 3 ms TPOT.
    c = _search(3.0)
    assert [kind for kind, _ in runs] == ["concurrency", "poisson", "poisson"]
    assert runs[1][1] == c.saturation_per_s and runs[2][1] == pytest.approx(c.saturation_per_s / 1000)
    assert c.rate_per_s == 0.0 and "at a trickle" in c.binding


def test_a_bisection_between_the_trickle_and_full_throughput(runs):
    c = _search(8.0)
    rates = [rate for _, rate in runs[1:]]
    assert len(rates) == 2 + capacity.PROBES
    saturation = c.saturation_per_s
    assert rates[:2] == [saturation, pytest.approx(saturation / 1000)]
    lo, hi = saturation / 1000, saturation
    for rate in rates[2:]:  # each probe halves the bracket in log space
        assert rate == pytest.approx(math.sqrt(lo * hi))
        if rate <= c.rate_per_s:
            lo = rate
        else:
            hi = rate
    assert c.rate_per_s == pytest.approx(lo) and 0 < c.rate_per_s < saturation
    assert c.binding == "TPOT"
