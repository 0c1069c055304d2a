"""A simulated run is sized before it starts, and one that cannot finish says so in one line: a
load of 200,000 requests of 65,064 tokens at 1,000/s had run for an hour to a RuntimeError."""

from __future__ import annotations

import pytest

from roofline.cli import main
from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.serving.simulation import run as run_module
from roofline.serving.simulation.api import MAX_WORK_TOKENS, simulate_serving
from roofline.serving.simulation.load import Lengths, Load, make_requests


def test_a_run_of_more_tokens_than_a_run_takes_is_refused_before_it_starts(capsys):
    # 200,000 x (64 + 65,000) = 13,012,800,000 tokens, past 10^9.
    argv = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--rate", "1000"]
    assert main([*argv, "--prompt-len", "64", "--output-len", "65000", "--requests", "200000"]) == 2
    err = capsys.readouterr().err
    assert "200,000 requests of 65,064 tokens on average" in err and "13,012,800,000 tokens" in err
    assert f"({MAX_WORK_TOKENS:,})" in err and "Traceback" not in err


def test_a_run_past_the_step_limit_is_an_input_error_not_a_traceback(monkeypatch, capsys):
    monkeypatch.setattr(run_module, "MAX_STEPS", 5)
    requests = make_requests(Load("poisson", 50, Lengths(128), Lengths(64), rate_per_s=5.0))
    with pytest.raises(ValueError, match="did not finish within 5 scheduling steps: a server this far past"):
        simulate_serving(get_model("llama-3.1-8b"), get_hardware("h100-sxm"), requests)
    argv = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--rate", "5", "--requests", "50"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the simulation did not finish within 5 scheduling steps") and "Traceback" not in err


def test_a_trickle_prints_its_rates_above_zero():
    """At 10^-9 requests/s the report had printed "throughput 0 output tokens/s, 0.00 requests/s"."""
    from roofline.cli.render_load import _per_s

    assert _per_s(8.04e-07, 0) == "8e-07" and _per_s(3.1e-09, 2) == "3.1e-09"
    assert _per_s(1008.4, 0) == "1,008" and _per_s(3.94, 2) == "3.94" and _per_s(0.1, 2) == "0.10"
    assert _per_s(None, 2) == "0.00" and _per_s(0.0, 0) == "0"
