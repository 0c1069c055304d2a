"""Kernels per op of a measured step: counted under each op's profiler range, kept in the results
file beside the launches the model counts, and the ops that ran as chains named."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from roofline.measure.chains import kernel_chain_line
from roofline.measure.schema import StepMeasurement, StepOp, Timing


def _evt(kernels: int, *children):
    return SimpleNamespace(kernels=[object()] * kernels, cpu_children=list(children))


def test_kernels_under_a_range_count_its_children_all_the_way_down():
    pytest.importorskip("torch")
    from roofline.measure.step import _kernels_under

    # rotary embedding: neg, cat, mul, mul, add on q and on k, each op a child of the range.
    rotary = _evt(0, *[_evt(1) for _ in range(10)])
    assert _kernels_under(rotary) == 10
    # A linear whose aten::linear calls aten::mm, which launches a GEMM and a split-K reduction.
    assert _kernels_under(_evt(0, _evt(0, _evt(2)))) == 2
    assert _kernels_under(SimpleNamespace()) == 0  # an event without kernels or children


def _step(ops: list[StepOp]) -> StepMeasurement:
    timing = Timing(median_s=0.02, p10_s=0.02, p90_s=0.02, repeats=3, method="host-clock")
    return StepMeasurement(
        model="llama-3.1-8b",
        phase="prefill",
        batch=1,
        seq_len=2048,
        dtype="bf16",
        layers_measured=32,
        layers_total=32,
        eager=timing,
        kernel_time_s=0.02,
        kernels=869,
        attributed_s=0.02,
        ops=ops,
    )


def _op(name: str, op_class: str, time_s: float, kernels: float, launches: int) -> StepOp:
    return StepOp(
        name=name,
        count=32,
        op_class=op_class,
        flops=1.0,
        bytes=1.0,
        time_s=time_s,
        kernels=kernels,
        modelled_launches=launches,
    )


def test_an_op_measured_as_a_chain_is_named_with_its_counts_and_share():
    rotary = _op("rotary embedding", "elementwise", 0.006, 320, 32)
    linear = _op("QKV projection", "linear", 0.014, 64, 32)  # a GEMM and its split-K reduction: 2x, named too
    norm = _op("input norm", "norm", 0.0, 32, 32)
    line = kernel_chain_line(_step([rotary, linear, norm]))
    assert line.startswith(
        "Ran as more kernels than the model counts: QKV projection 64 kernels where the model counts 32 "
        "(70% of the ops' time); rotary embedding 320 kernels where the model counts 32 (30% of the ops' time)."
    )
    assert "input norm" not in line
    # A file without per-op kernel counts (a CPU run, or one from before they were kept) says nothing.
    assert kernel_chain_line(_step([norm.model_copy(update={"kernels": None})])) == ""
    # 1.5x is the threshold: 48 kernels where 32 are counted is not named.
    assert kernel_chain_line(_step([linear.model_copy(update={"kernels": 48})])) == ""


def test_the_shipped_h200_run_counts_each_ops_kernels():
    """The H200 quick run kept each op's kernels: the decode step's add up to the step's 837, and
    rotary embedding ran as ten kernels a layer (neg, cat, two multiplies and an add, on Q and on K)
    where the model counts the engine's one."""
    from pathlib import Path

    from roofline.measure.schema import load_results

    results = load_results(Path(__file__).resolve().parents[1] / "examples" / "h200-sxm-quick-run.json")
    decode = next(s for s in results.steps if s.phase == "decode")
    assert sum(op.kernels for op in decode.ops) == pytest.approx(decode.kernels, abs=1)
    rotary = next(op for op in decode.ops if op.name == "rotary embedding")
    assert (rotary.kernels, rotary.modelled_launches) == (320, 32)
    assert "rotary embedding 320 kernels where the model counts 32" in kernel_chain_line(decode)


@pytest.mark.parametrize("bad", [-1, 1e300, "many"])
def test_a_results_file_with_a_bad_kernel_count_is_refused_naming_the_field(bad):
    import json
    from pathlib import Path

    from roofline.measure.schema import ResultsError, parse_results

    data = json.loads((Path(__file__).resolve().parents[1] / "examples" / "h200-sxm-quick-run.json").read_text())
    data["steps"][0]["ops"][3]["kernels"] = bad
    with pytest.raises(ResultsError, match=r"field 'steps.0.ops.3.kernels'"):
        parse_results(json.dumps(data), "upload")
