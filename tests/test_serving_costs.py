"""What the serving plans rank by: what a request costs, every device-hour over the output tokens."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.serving import Traffic, best_under_targets, serving_sweep
from roofline.settings import Settings

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
    all_in = [b.point["usd_per_million_output_all_in"] for b in best]
    assert all_in == sorted(all_in) and len(best) >= 3
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
