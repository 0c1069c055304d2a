"""A precision pick the model does not use is said on the pages, as the command line refuses the
same flags (tests/test_flag_contradictions.py): an experts' format on a dense model and an FP8
scaling without fp8 weights had changed nothing without a word."""

from __future__ import annotations

import pytest

from tests.page_helpers import page

MOOT = (
    "Changes nothing here: MoE expert weight dtype (fp8): Llama 3.1 8B has no routed experts; FP8 weight scaling "
    "(block): no weights here are fp8."
)


def test_the_note_names_each_pick_that_changes_nothing():
    from dashboard.precision_pickers import moot_precision_note
    from roofline.models import get_model
    from roofline.workload import Precision

    dense, moe = get_model("llama-3.1-8b"), get_model("qwen3-30b-a3b")
    assert moot_precision_note(Precision(expert_weight_dtype="fp8", fp8_scaling="block"), dense) == MOOT
    assert moot_precision_note(Precision(fp8_scaling="per-tensor"), moe) == (
        "Changes nothing here: FP8 weight scaling (per-tensor): no weights here are fp8."
    )
    for used, model in (
        (Precision(expert_weight_dtype="fp8", fp8_scaling="block"), moe),  # the experts are fp8
        (Precision(weight_dtype="fp8", fp8_scaling="block"), dense),
        (Precision(), dense),
    ):
        assert moot_precision_note(used, model) == ""


@pytest.mark.parametrize("path", ["views/llm_page.py", "views/advisor_page.py", "views/serving_page.py"])
def test_each_page_with_the_pickers_says_so(path):
    at = page(path, model="llama-3.1-8b", ewdtype="fp8", fp8scale="block")
    assert not at.exception, [e.message for e in at.exception]
    assert MOOT in [c.value for c in at.caption]
    used = page(path, model="qwen3-30b-a3b", ewdtype="fp8", fp8scale="block")
    assert not used.exception and not [c for c in used.caption if c.value.startswith("Changes nothing here")]


def test_the_kv_page_says_so_of_the_experts_format():
    at = page("views/kv_page.py", model="llama-3.1-8b", ewdtype="int4")
    assert not at.exception, [e.message for e in at.exception]
    said = [c.value for c in at.caption if c.value.startswith("Changes nothing here")]
    assert said == ["Changes nothing here: MoE expert weight dtype (int4): Llama 3.1 8B has no routed experts."]


def test_the_fields_that_change_nothing_are_one_rule_for_the_command_line_and_the_pages():
    """``Precision.unused_fields`` is what the command line refuses, the pages caption and the
    Serving page's command leaves out."""
    from roofline.models import get_model
    from roofline.workload import Precision

    dense, moe = get_model("llama-3.1-8b"), get_model("qwen3-30b-a3b")
    picks = Precision(expert_weight_dtype="fp8", fp8_scaling="block", group_size=64)
    assert picks.unused_fields(dense) == ("expert_weight_dtype", "fp8_scaling", "group_size")
    assert picks.unused_fields(moe) == ("group_size",)  # the experts are fp8: their scaling applies
    assert picks.unused_fields() == ("group_size",)  # no model: the experts' format is taken as given
    assert Precision(expert_weight_dtype="int4", group_size=64).unused_fields(dense) == (
        "expert_weight_dtype",
        "group_size",
    )
    assert Precision(weight_dtype="int4", group_size=64).unused_fields(dense) == ()
