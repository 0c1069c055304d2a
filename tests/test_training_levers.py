"""The Training page's Levers view: where its levers are evaluated."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_levers_are_for_the_first_picked_device_the_setup_does_not_fit():
    # Full training of an 8B model fits a B200 but not an H100 or H200: the headline is the B200's,
    # and the levers say what makes it fit on the H100 picked first, not "it fits on B200".
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "views/training_page.py"), default_timeout=60)
    at.query_params["model"] = "llama-3.1-8b"
    at.query_params["hw"] = ["h100-sxm", "h200-sxm", "b200"]
    at.query_params["view"] = "Levers"
    at.run()
    assert not at.exception and not at.error
    assert any("NVIDIA B200" in c.value and "headline" in c.value.lower() for c in at.caption)
    assert any(h.value.startswith("Levers on NVIDIA H100") for h in at.subheader)
    assert any("To fit on NVIDIA H100" in md.value for md in at.markdown)
    assert not any("as it is" in md.value for md in at.markdown)


def test_a_setup_no_micro_batch_fits_says_none_fits():
    # Full training of Llama 3.1 70B on one H100: its bf16 weights alone (141 GB) exceed the 80 GB,
    # so not one sequence fits, and the headline says so rather than "0".
    from streamlit.testing.v1 import AppTest

    from dashboard.training_view import fit_metrics

    at = AppTest.from_file(str(ROOT / "views/training_page.py"), default_timeout=60)
    at.query_params["model"] = "llama-3.1-70b"
    at.query_params["hw"] = ["h100-sxm"]
    at.run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Max micro-batch"] == "none fits"
    result = type("Result", (), {"capacity_bytes": 7.65e10, "fits": True, "largest_micro_batch": 1234})()
    peak, most = fit_metrics(result, 5e10, "backward pass", "H100", 2048)
    assert (peak.value, peak.delta, most.value) == ("50 GB", "fits", "1,234")
    assert most.help == "the largest that fits, at 2,048 tokens"
