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
