"""The cheapest-setup search takes the user's own precision beside its defaults, says what it
searched, and the levers under its table run at the setup it chose."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.serving import Traffic, best_under_targets, extra_precision, searched_sentence
from roofline.workload import Precision

INT4 = Precision("int4", "bf16", "bf16")


def test_the_users_precision_is_searched_beside_the_defaults():
    m, a100 = get_model("llama-3.1-8b"), get_hardware("a100-sxm-80gb")  # no fp8 on an A100
    traffic = Traffic(1024, 256)
    # One GPU, TPOT 4 ms: fp8 weights (8 GB, weight-only on an A100) take 3.9 ms at 2.04 TB/s before
    # anything else is read; int4's ~4.5 GB take 2.2 ms.
    plain = best_under_targets(m, [a100], traffic, 2.0, 0.004, tps=(1,))
    assert not plain[0].meets and plain[0].binding.startswith("TPOT")
    both = best_under_targets(m, [a100], traffic, 2.0, 0.004, tps=(1,), also=INT4)
    assert both[0].meets and both[0].weight_dtype == "int4" and both[0].precision.weight_dtype == "int4"
    # Searching one more precision never makes the best setup worse (unpriced: the most tokens/s
    # per device).
    h100 = get_hardware("h100-sxm")
    loose = best_under_targets(m, [h100], traffic, 2.0, 0.05, tps=(1,))
    wider = best_under_targets(m, [h100], traffic, 2.0, 0.05, tps=(1,), also=INT4)
    assert wider[0].point["tokens_per_s_per_device"] >= loose[0].point["tokens_per_s_per_device"]


def test_the_default_precision_adds_nothing_and_the_sentence_says_what_was_searched():
    assert extra_precision(Precision()) is None
    assert extra_precision(Precision(fp8_scaling="block")) is None
    assert extra_precision(INT4) == INT4
    m = get_model("qwen3-30b-a3b")
    text = searched_sentence(m, (1, 2), "auto", True, INT4)
    assert text.startswith("Searched: TP 1, 2; bf16 or fp8 weights")
    assert "block-scaled" in text  # Qwen's own FP8 checkpoint
    assert "and the precision set here (weights int4, math bf16, KV bf16)" in text
    assert "prompts in the decodes' steps, a long one split over steps" in text
    assert "set here" not in searched_sentence(m, (1,), "per-tensor", False)


def test_serve_levers_run_at_the_chosen_setup():
    out = subprocess.run(
        [sys.executable, "-m", "roofline", "serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm"]
        + ["--weight-dtype", "int4", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    assert data["precision"]["weights"] == "int4"  # the frontier's precision, as asked
    assert "and the precision set here (weights int4" in data["searched"]
    best = data["best"][0]
    one_pool = data["levers"]["disaggregation"]["one pool (chunked prefill)"]
    # The lever's colocated pool is the table's row: same precision, batch and TP.
    assert one_pool["tpot_s"] == pytest.approx(best["tpot_s"], rel=1e-6)
    assert one_pool["tokens_per_s_per_device"] == pytest.approx(best["tokens_per_s_per_device"], rel=1e-6)


def test_the_plan_runs_no_batch_past_the_engines_sequence_cap():
    from roofline.settings import Settings

    # Short requests on a B300: the most tokens/s per device come at batches past vLLM's default cap
    # there (1,024 sequences, a GPU of 70 GiB or more); the plan keeps to it, and to a cap the user sets.
    m, b300 = get_model("llama-3.1-8b"), get_hardware("b300")
    traffic = Traffic(128, 128)
    plain = best_under_targets(m, [b300], traffic, 2.0, 0.2, tps=(1,))
    assert plain[0].meets and plain[0].point["batch"] <= 1024
    wide = best_under_targets(m, [b300], traffic, 2.0, 0.2, Settings(max_num_seqs=4096), tps=(1,))
    assert wide[0].point["batch"] > 1024
    capped = best_under_targets(m, [b300], traffic, 2.0, 0.2, Settings(max_num_seqs=100), tps=(1,))
    assert capped[0].point["batch"] <= 100


def test_the_frontier_stops_at_the_engines_sequence_cap():
    from roofline.serving import serving_sweep
    from roofline.settings import Settings

    # An A100 80GB and an L4 (vLLM's cap 256 on both: under 70 GiB, or an A100) at 128/128 tokens:
    # memory holds larger batches, which the frontier and the plan leave out; a cap set higher lets them in.
    m, devices = get_model("llama-3.1-8b"), [get_hardware("a100-sxm-80gb"), get_hardware("l4")]
    pts = serving_sweep(m, devices, Traffic(128, 128), Precision("fp8", "bf16", "fp8"))
    assert list(pts.seq_cap) == [256, 256]
    assert pts.fits[0, pts.batch > 256].any() and not pts.runs[:, pts.batch > 256].any()
    assert not (pts.frontier() & (pts.batch[None, :] > 256)).any()
    row = pts.row(0, int(np.argmax(pts.batch > 256)))
    assert row["fits"] and not row["within_sequence_cap"]
    wide = serving_sweep(
        m, devices, Traffic(128, 128), Precision("fp8", "bf16", "fp8"), settings=Settings(max_num_seqs=4096)
    )
    assert (wide.frontier() & (wide.batch[None, :] > 256)).any()
