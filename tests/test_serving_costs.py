"""What the serving plans rank by: what a request costs, every device-hour over the output tokens."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.serving import Traffic, best_under_targets, serving_sweep
from roofline.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
LLAMA = get_model("llama-3.1-8b")
H100 = get_hardware("h100-sxm")


def test_the_cheapest_setup_is_ranked_by_what_a_request_costs():
    # Not by the decode share alone: a device that prefills fast and decodes at a higher price per
    # decode-second can still serve a request for less: on vLLM's kernels B200 decodes at $0.106 per M
    # output tokens against H200's $0.079, but prefills so much faster that a request costs less.
    devices = [get_hardware(h) for h in ("h100-sxm", "h200-sxm", "b200", "l40s")]
    prices = {"h100-sxm": 6.155, "h200-sxm": 6.305, "b200": 8.60, "l40s": 2.25}
    plans = best_under_targets(LLAMA, devices, Traffic(1024, 256), 2.0, 0.05, Settings(engine="vllm"), prices=prices)
    best = [b for b in plans if b.meets]
    # The L40S has no vLLM tables: on the datasheet alone it comes after the measured devices, which
    # rank among themselves (tests/test_ranking_basis.py).
    assert best[-1].hardware == "l40s"
    all_in = [b.point["usd_per_million_output_all_in"] for b in best[:-1]]
    assert all_in == sorted(all_in) and len(best) >= 4
    for b in best:  # by hand: the device-hours over the output tokens of the chosen batch
        per_s = prices[b.hardware] * b.point["tp"] / 3600
        assert b.point["usd_per_million_output_all_in"] == pytest.approx(per_s / b.point["tokens_per_s"] * 1e6)


def test_cost_per_million_tokens_by_hand():
    pts = serving_sweep(LLAMA, [H100], Traffic(1024, 256), batches=np.array([64]), prices={"h100-sxm": 6.155})
    out_rate = pts.tokens_per_s[0, 0]
    share = pts.prefill_share[0, 0]
    per_s = 6.155 / 3600  # one device
    cost = pts.usd_per_million()
    assert cost["output"][0, 0] == pytest.approx(per_s * (1 - share) / out_rate * 1e6)
    assert cost["input"][0, 0] == pytest.approx(per_s * share / (out_rate * 4) * 1e6)  # 1,024 in per 256 out
    assert cost["all"][0, 0] == pytest.approx(per_s / (out_rate * 5) * 1e6)
    # All-in: every device-second over the output tokens; the two shares add up to it per request.
    assert cost["output_all_in"][0, 0] == pytest.approx(per_s / out_rate * 1e6)
    assert cost["output"][0, 0] + 4 * cost["input"][0, 0] == pytest.approx(cost["output_all_in"][0, 0])
    tp2 = serving_sweep(LLAMA, [H100], Traffic(1024, 256), tp=2, batches=np.array([64]), prices={"h100-sxm": 6.155})
    assert tp2.usd_per_million()["all"][0, 0] == pytest.approx(2 * per_s / (tp2.tokens_per_s[0, 0] * 5) * 1e6)


def _cheapest(at) -> dict[str, float]:
    table = next(d.value for d in at.dataframe if "$ per M output (all-in)" in d.value.columns)
    return dict(zip(table["device"], table["$ per M output (all-in)"], strict=True))


def test_a_price_set_on_the_serving_page_costs_its_device_and_the_link_keeps_it():
    from streamlit.testing.v1 import AppTest

    from roofline.serving import load_prices

    def page(**params):
        at = AppTest.from_file(str(ROOT / "views/serving_page.py"), default_timeout=60)
        at.query_params.update({"view": "Cheapest setup", "hw": ["h100-sxm", "l40s"], **params})
        return at.run()

    at = page()
    assert not at.exception
    shipped = load_prices()["h100-sxm"].usd_per_hour
    assert at.number_input(key="price_h100-sxm").value == pytest.approx(shipped)
    base = _cheapest(at)
    # Every device-hour is priced: twice the price, twice the cost.
    at.number_input(key="price_h100-sxm").set_value(2 * shipped).run()
    assert _cheapest(at)["h100-sxm"] == pytest.approx(2 * base["h100-sxm"], rel=1e-6)
    assert _cheapest(at)["l40s"] == pytest.approx(base["l40s"])
    # Opened from a link that carries it (the widget is bound to the URL), the page prices it the same.
    again = page(**{"price_h100-sxm": str(2 * shipped)})
    assert _cheapest(again)["h100-sxm"] == pytest.approx(2 * base["h100-sxm"], rel=1e-6)
    # A price of 0 means no cost; a bad one is named and the shipped price used.
    free = page(**{"price_h100-sxm": "0"})
    assert pd.isna(_cheapest(free)["h100-sxm"])
    bad = page(**{"price_h100-sxm": "cheap"})
    assert any("price_h100-sxm" in w.value and "not a number" in w.value for w in bad.warning)
    assert _cheapest(bad)["h100-sxm"] == pytest.approx(base["h100-sxm"])
