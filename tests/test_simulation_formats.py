"""The simulation runs a precision as the device runs it, as the steady-state frontier does: a
format the device's kernels do not take is refused, and bf16 runs as fp16 where the device has
no bf16 math."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.serving.simulation.steptime import step_times
from roofline.settings import Settings
from roofline.workload import Precision

LLAMA = get_model("llama-3.1-8b")


def test_a_format_the_device_does_not_take_is_refused():
    # The A100 takes fp8 weights (FP8 Marlin, weight-only) but has no fp8 math.
    a100 = get_hardware("a100-sxm-80gb")
    with pytest.raises(ValueError, match=r"^a100-sxm-80gb has no kernels for fp8 math"):
        step_times(LLAMA, a100, Precision("fp8", "fp8", "bf16"), 1, Settings(), 2048, 64)
    weight_only = step_times(LLAMA, a100, Precision("fp8", "bf16", "fp8"), 1, Settings(), 2048, 64)
    assert "lower bounds" not in weight_only.roofs


def test_bf16_runs_as_fp16_on_a_device_without_bf16_math():
    v100 = get_hardware("v100-sxm2-32gb")
    bf16 = step_times(LLAMA, v100, Precision(), 1, Settings(), 2048, 64)
    fp16 = step_times(LLAMA, v100, Precision("fp16", "fp16", "fp16"), 1, Settings(), 2048, 64)
    # Timed on the fp16 peak, not left a lower bound for want of a bf16 one.
    assert "lower bounds" not in bf16.roofs
    np.testing.assert_allclose(bf16.rows.seconds, fp16.rows.seconds)
    # 2,048 rows through Llama 3.1 8B's layers: per layer QKV 4096 x 6144, output 4096 x 4096 and the
    # MLP 3 x 4096 x 14336 weights, 218.1 M in all; x 32 layers x 2 FLOPs x 2,048 rows = 28.6 TFLOP,
    # at least 229 ms at the 125 TFLOPS fp16 peak (the 16 GB of weights alone, the lower bound left
    # without a peak, take 18 ms at 0.9 TB/s).
    linear = 32 * (4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336)
    assert linear == 218_103_808 * 32
    assert bf16.rows.at(2048) >= 2 * linear * 2048 / 125e12
