"""Serving rankings that mix devices on measured kernel roofs with devices on the datasheet alone
rank the measured ones first: an ideal bound, faster than any real kernel, would otherwise put the
devices never measured ahead (the Which hardware? page ranks such a mix on the ideal bound)."""

from __future__ import annotations

import json

from roofline.cli import main
from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.serving import Traffic, best_under_targets
from roofline.serving.basis import MIXED_BASIS_WORDS, measured_first
from roofline.serving.plan import plan_basis_mixed
from roofline.serving.simulation.capacity import Capacity, mixed_basis, rank_capacity, ranked
from roofline.serving.simulation.load import Lengths
from roofline.serving.simulation.metrics import Targets
from roofline.settings import Settings
from tests.page_helpers import page


def test_measured_first_keeps_each_groups_order_and_leaves_one_basis_alone():
    ideal = lambda name: name.startswith("d")  # noqa: E731
    assert measured_first(["d1", "m1", "d2", "m2"], ideal) == (["m1", "m2", "d1", "d2"], True)
    assert measured_first(["d2", "d1"], ideal) == (["d2", "d1"], False)  # all on the datasheet: as given
    assert measured_first(["m2", "m1"], ideal) == (["m2", "m1"], False)
    assert measured_first([], ideal) == ([], False)


def _capacity(hw: str, rate: float, usd: float | None, roofs: str) -> Capacity:
    return Capacity(hw, 1, rate, 2 * rate, 0.1, 0.01, 100 * rate, "TTFT", 90, usd, roofs)


def test_a_capacity_ranking_puts_measured_setups_first_and_those_meeting_nothing_last():
    cheap_ideal = _capacity("l40s", 8.0, 1.0, "datasheet roofs; no engine host work (ideal)")
    dear_measured = _capacity("h100-sxm", 20.0, 3.0, "engine-measured roofs (vLLM 0.24.0 kernels)")
    nothing = _capacity("a10", 0.0, 0.5, "engine-measured roofs (vLLM 0.24.0 kernels)")
    # Per million output tokens: 1.0 / 3600 / 800 x 1e6 = $0.35 on the L40S, 3.0 / 3600 / 2000 x 1e6 = $0.42.
    assert cheap_ideal.usd_per_million_output_tokens < dear_measured.usd_per_million_output_tokens
    assert ranked([nothing, cheap_ideal, dear_measured]) == [dear_measured, cheap_ideal, nothing]
    assert mixed_basis([cheap_ideal, dear_measured]) and not mixed_basis([cheap_ideal, nothing])


def test_the_cheapest_setups_and_the_capacity_rank_measured_devices_first():
    model, settings = get_model("llama-3.1-8b"), Settings(engine="auto")  # vLLM's tables where a device has them
    devices = [get_hardware("l40s"), get_hardware("h100-sxm")]
    best = best_under_targets(model, devices, Traffic(1024, 256), 2.0, 0.05, settings, {"l40s": 1.0, "h100-sxm": 3.0})
    assert [b.hardware for b in best] == ["h100-sxm", "l40s"]
    assert [b.roof_source for b in best] == ["engine-measured", "datasheet"] and plan_basis_mixed(best)
    assert not plan_basis_mixed(best[1:])  # the L40S alone: one basis
    found, _ = rank_capacity(
        model, devices, Lengths(512), Lengths(64), Targets(2.0, 0.05), settings=settings, requests=40
    )
    assert [c.hardware for c in found] == ["h100-sxm", "l40s"] and mixed_basis(found)


def test_the_serving_page_says_why_a_cheaper_device_on_the_datasheet_comes_last():
    at = page("views/serving_page.py", view="Cheapest setup", hw=["l40s", "h100-sxm"])
    table = at.dataframe[0].value
    assert table["device"].tolist() == ["h100-sxm", "l40s"]
    assert table["rests on"].tolist() == ["engine-measured", "ideal bound"]
    # The basis beside the device (the ranking groups by it, so a cheaper device below reads as a group, at
    # 390 px too), the cost the rows are ranked by, the targets' own figures and the throughput in view
    # (1440 px: the first eight columns).
    first = ["device", "rests on", "$ per M output (all-in)", "meets", "what binds", "TTFT", "TPOT", "tok/s per device"]
    assert list(table.columns[:8]) == first
    assert any(MIXED_BASIS_WORDS in c.value for c in at.caption)
    alone = page("views/serving_page.py", view="Cheapest setup", hw=["l40s", "mi300x"])
    assert not any(MIXED_BASIS_WORDS in c.value for c in alone.caption)  # one basis: nothing to say


def test_serve_says_why_its_plan_ranks_a_cheaper_datasheet_device_last(capsys):
    main(["serve", "--model", "llama-3.1-8b", "--hardware", "l40s", "--hardware", "h100-sxm", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert [b["hardware"] for b in data["best"]] == ["h100-sxm", "l40s"]
    assert [b["roof_source"] for b in data["best"]] == ["engine-measured", "datasheet"]
    assert data["ranking_basis"] == MIXED_BASIS_WORDS
