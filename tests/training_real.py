"""One real training step of SmolLM2 135M on this CPU against the predicted peak: the check the
two real-training test files share (each runs some of the cases, so two test workers split them)."""

from __future__ import annotations

import pytest

from roofline.models import get_model
from roofline.training import TrainSetup


def check_training_peak(changes: dict) -> None:
    """A real step of the setup that ``changes`` make (``layers``: keep that many of SmolLM2's
    layers) peaks within 10% of the prediction."""
    pytest.importorskip("torch")
    from roofline.measure.training import measure

    changes = dict(changes)
    smollm2 = get_model("smollm2-135m")
    model = smollm2.model_copy(update={"num_layers": changes.pop("layers")}) if "layers" in changes else smollm2
    s = TrainSetup(model, **{"micro_batch": 1, "precision": "fp32", **changes})
    r = measure(s, "cpu")
    assert r["time_s"] > 0 and r["trainable"] > 0
    assert abs(r["predicted_peak_bytes"] / r["peak_bytes"] - 1) < 0.10, r
