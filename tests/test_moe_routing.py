"""How a MoE layer's tokens spread over its experts: the converter keeps every routing the database
timed, ``auto`` reads the model's own (a power law of exponent 1.01 with shared experts, 1.2
without, as the database prices them), a named routing is read where it was timed and balanced
where it was not, labelled so; a file converted before routings were kept reads as balanced."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import roofline.tables.store as store
from roofline.roofs import engine_note, kernel_tables
from roofline.routing import model_routing, one_token_outliers, resolved_routing, routing_words
from roofline.settings import Settings
from tests.table_fixtures import GEMM_1024, clear_caches, install_converted, write_engine

# ms = 0.010 + slope x tokens, per routing: the hand-worked times below.
SLOPES = {"balanced": 0.001, "power_law_1.01": 0.0012, "power_law_1.2": 0.0015}


def _rows(hidden: int, distributions, scale: dict | None = None) -> list[dict]:
    scale = scale or {}
    return [
        {
            "kernel_source": "moe_torch_flow_cutlass",
            "moe_dtype": "fp8_block",
            "num_tokens": t,
            "hidden_size": hidden,
            "inter_size": 512,
            "topk": 2,
            "num_experts": 8,
            "moe_tp_size": 1,
            "moe_ep_size": 1,
            "distribution": d,
            "latency": (0.010 + SLOPES[d] * t) * scale.get(d, 1.0),
        }
        for d in distributions
        for t in (1, 16, 256)
    ]


@pytest.fixture
def tables(tmp_path, monkeypatch):
    """One engine on one device: a 1,024-wide expert shape timed at every routing, a 2,048-wide one
    timed balanced only, a 3,072-wide one timed at the power laws only, and a 4,096-wide one whose
    α 1.01 rows read 3x the others (at one token too, where every routing does the same work)."""
    moe = _rows(1024, SLOPES) + _rows(2048, ["balanced"]) + _rows(3072, ["power_law_1.01", "power_law_1.2"])
    moe += _rows(4096, SLOPES, {"power_law_1.01": 3.0})
    files = {("gemm", "gemm_perf.parquet"): GEMM_1024, ("moe", "moe_perf.parquet"): moe}
    write_engine(tmp_path / "pkg", "b200_sxm", "trtllm", files)
    yield install_converted(tmp_path, monkeypatch)
    clear_caches()


def _experts(shared: int, hidden: int = 1024, tokens: float = 16.0):
    """A fused MoE op as roofline.ops.mlp writes it, at the fixture's expert shape."""
    meta = {"tp": 1, "hidden": hidden, "expert_inter": 512, "topk": 2, "experts": 8, "expert_dtype": "fp8_block"}
    return SimpleNamespace(meta={**meta, "shared_experts": shared, "moe_tokens": np.atleast_1d(tokens)})


def test_the_converter_keeps_every_routing(tables):
    manifest = json.loads((tables / "manifest.json").read_text())
    assert manifest["files"][0]["rows"]["moe"] == 3 * (
        3 + 1 + 2 + 3
    )  # three token counts of each routing of each shape
    moe = kernel_tables("trtllm", "b200").predictor.tables["moe"]
    assert sorted(set(moe["distribution"].tolist())) == ["balanced", "power_law_1.01", "power_law_1.2"]


def test_auto_reads_the_models_own_routing(tables):
    trt = kernel_tables("trtllm", "b200")
    # With a shared expert (DeepSeek-V3, Kimi K2, Llama 4): α 1.01, 0.010 + 0.0012 x 16 = 0.0292 ms.
    shared = trt._moe(_experts(shared=1))
    assert shared.seconds[0] == pytest.approx(29.2e-6, rel=1e-3)
    assert (
        "power-law routing (α 1.01, the database's estimate for DeepSeek-V3/R1, read for MoE models with shared "
        "experts)" in shared.label
    )
    # Without (Qwen3 MoE, Mixtral, gpt-oss): α 1.2, 0.010 + 0.0015 x 16 = 0.034 ms.
    plain = trt._moe(_experts(shared=0))
    assert plain.seconds[0] == pytest.approx(34e-6, rel=1e-3) and "α 1.2" in plain.label


def test_a_named_routing_is_read_whatever_the_model(tables):
    trt = kernel_tables("trtllm", "b200")
    balanced = replace(trt, moe_routing="balanced")._moe(_experts(shared=1))  # 0.010 + 0.001 x 16
    assert balanced.seconds[0] == pytest.approx(26e-6, rel=1e-3)
    assert "balanced routing (every expert an equal share, a perfectly even spread)" in balanced.label
    skewed = replace(trt, moe_routing="power-law-1.2")._moe(_experts(shared=1))
    assert skewed.seconds[0] == pytest.approx(34e-6, rel=1e-3)
    assert "shared experts" not in skewed.label  # named, not the model's own
    # A sweep of token counts reads each point at the same routing: 1 and 256 tokens at α 1.2.
    sweep = replace(trt, moe_routing="power-law-1.2")._moe(_experts(shared=0, tokens=np.array([1.0, 256.0])))
    assert sweep.seconds == pytest.approx([11.5e-6, 394e-6], rel=1e-3)


def test_a_shape_timed_balanced_only_is_read_balanced_and_says_so(tables):
    answer = kernel_tables("trtllm", "b200")._moe(_experts(shared=1, hidden=2048))
    assert answer.seconds[0] == pytest.approx(26e-6, rel=1e-3)
    assert "balanced routing: this file timed no power-law routing (α 1.01) of this shape" in answer.label


def test_a_shape_timed_at_the_power_laws_only_reads_one_when_balanced_is_asked(tables):
    trt = replace(kernel_tables("trtllm", "b200"), moe_routing="balanced")
    answer = trt._moe(_experts(shared=0, hidden=3072))  # the other skew first: α 1.01, 0.010 + 0.0012 x 16
    assert answer.seconds[0] == pytest.approx(29.2e-6, rel=1e-3)
    assert "power-law routing (α 1.01): this file timed no balanced routing of this shape" in answer.label


def test_a_routing_whose_one_token_time_disagrees_with_the_others_is_not_read(tables):
    """At one token every routing does the same work: the 4,096-wide shape's α 1.01 rows read 3x the
    others there (0.0336 ms against 0.0110 and 0.0115), so a model with shared experts reads α 1.2."""
    answer = kernel_tables("trtllm", "b200")._moe(_experts(shared=1, hidden=4096))
    assert answer.seconds[0] == pytest.approx(34e-6, rel=1e-3)  # α 1.2: 0.010 + 0.0015 x 16
    assert "this file's power-law routing (α 1.01) timing of this shape is 3x the other routings' at one token" in (
        answer.label
    )
    named = replace(kernel_tables("trtllm", "b200"), moe_routing="power-law-1.01")._moe(_experts(1, 4096))
    assert named.seconds[0] == pytest.approx(34e-6, rel=1e-3)  # named too: its rows measured something else


def test_one_token_outliers_by_hand():
    # 3.3 against 1.0 and 1.1 (which agree): off by 3.3 / sqrt(1.1) = 3.15x; the two others stay.
    assert one_token_outliers({"balanced": 1.0, "power-law-1.01": 3.3, "power-law-1.2": 1.1}) == {
        "power-law-1.01": pytest.approx(3.3 / 1.1**0.5)
    }
    assert one_token_outliers({"balanced": 1.0, "power-law-1.01": 1.4, "power-law-1.2": 1.1}) == {}  # within 1.5x
    assert one_token_outliers({"balanced": 1.0, "power-law-1.01": 2.0, "power-law-1.2": 4.0}) == {}  # no two agree
    assert one_token_outliers({"balanced": 1.0, "power-law-1.2": 9.0}) == {}  # two cannot outvote each other


def test_a_file_converted_before_routings_were_kept_reads_as_balanced(tables, tmp_path):
    path = next(tables.glob("b200/trtllm-*.npz"))
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    keep = arrays["moe/distribution"] == "balanced"  # what the converter kept before
    old = {k: (v[keep] if k.startswith("moe/") else v) for k, v in arrays.items() if k != "moe/distribution"}
    np.savez_compressed(path, **old)
    store.load_tables.cache_clear()
    kernel_tables.cache_clear()
    answer = kernel_tables("trtllm", "b200")._moe(_experts(shared=1))
    assert answer.seconds[0] == pytest.approx(26e-6, rel=1e-3)
    assert "this file timed no power-law routing (α 1.01)" in answer.label


def test_the_setting_reaches_the_tables_and_the_note(tables):
    from roofline.hardware import get_hardware

    hw = get_hardware("b200")
    assert Settings(engine="trtllm", moe_routing="balanced").ceilings(hw).roof_source.moe_routing == "balanced"
    source = Settings(engine="trtllm").ceilings(hw).roof_source
    assert source.moe_routing is None and source.short_label == "TensorRT-LLM 9.9.9 kernels"
    named = Settings(engine="trtllm", moe_routing="power-law-1.2").ceilings(hw).roof_source
    assert named.short_label == "TensorRT-LLM 9.9.9 kernels, power-law routing (α 1.2)"
    assert named.scaled(2.0, 1.0).moe_routing == "power-law-1.2"  # what-ifs keep it
    note = engine_note("trtllm", "b200", "NVIDIA B200", moe_routing="balanced")
    assert note.endswith(
        "; MoE routing set to balanced routing (every expert an equal share, a perfectly even spread) (each MoE op "
        "says which it was read at)"
    )
    assert "routing" not in engine_note("ideal", "b200", "NVIDIA B200", moe_routing="balanced")


def test_the_words_and_the_rule():
    assert model_routing(1) == "power-law-1.01" and model_routing(0) == "power-law-1.2"
    assert resolved_routing(None, 2) == resolved_routing("auto", 2) == "power-law-1.01"
    assert resolved_routing("balanced", 1) == "balanced"
    assert routing_words("power-law-1.2") == "power-law routing (α 1.2, the database's estimate for Qwen3-235B)"
    with pytest.raises(ValueError, match="moe_routing must be one of auto, balanced, power-law-1.01, power-law-1.2"):
        Settings(moe_routing="zipf")
    with pytest.raises(ValueError, match="moe_routing must be one of"):
        resolved_routing("uniform", 0)


def test_the_predictor_takes_a_routing_by_name(tables):
    p = kernel_tables("trtllm", "b200").predictor
    assert p.moe(16, 1024, 512, 2, 8, 1, 1, "fp8_block").time_s == pytest.approx(26e-6, rel=1e-3)
    assert p.moe(16, 1024, 512, 2, 8, 1, 1, "fp8_block", routing="power-law-1.01").time_s == pytest.approx(
        29.2e-6, rel=1e-3
    )
    with pytest.raises(ValueError, match="routing must be one of balanced, power-law-1.01, power-law-1.2"):
        p.moe(16, 1024, 512, 2, 8, routing="auto")  # the predictor has no model to decide with


shipped = pytest.mark.skipif(not (store.SHIPPED_DIR / "manifest.json").exists(), reason="no shipped kernel_db")


@shipped
def test_cli_takes_the_routing_and_each_moe_op_says_it(capsys):
    from roofline.cli import main

    common = ["analyze", "--model", "deepseek-r1", "--hardware", "b200", "--tp", "8", "--engine", "sglang"]
    common += ["--weight-dtype", "fp8", "--act-dtype", "fp8", "--phase", "prefill", "--seq-len", "1024", "--json"]
    times, labels = {}, {}
    for routing in ("auto", "balanced", "power-law-1.01", "power-law-1.2"):
        assert main([*common, "--moe-routing", routing]) == 0
        out = json.loads(capsys.readouterr().out)
        op = next(o for o in out["ops"] if o["name"] == "MoE experts gate+up")
        times[routing], labels[routing] = op["time_s"], op["rests_on"]
    assert times["auto"] == times["power-law-1.01"]  # DeepSeek-R1 has a shared expert
    assert "α 1.01" in labels["auto"] and "balanced routing" in labels["balanced"]
    # SGLang 0.5.14 timed DeepSeek-R1's experts (TP 8, block FP8) at 1,024 tokens 1.20x slower at α 1.01 than balanced.
    assert times["power-law-1.01"] / times["balanced"] == pytest.approx(1.20, abs=0.02)
    with pytest.raises(SystemExit) as bad:
        main([*common, "--moe-routing", "zipf"])
    assert bad.value.code == 2
    assert "invalid choice: 'zipf'" in capsys.readouterr().err


@shipped
def test_validate_scores_the_runs_at_a_routing_when_asked(capsys):
    """The published score reads each model's own routing; --moe-routing rescores the MoE runs
    under another, and leaves the dense ones as they were."""
    from roofline.cli import main
    from roofline.validate import load_silicon_sample, score_rows, why_not_scored

    rows = [r for r in load_silicon_sample() if why_not_scored(r) is None]
    moe = next(r for r in rows if r["model_path"].endswith("DeepSeek-R1") and r["backend"] == "sglang")
    dense = next(r for r in rows if r["model_path"].endswith("8B-Instruct"))
    (own, plain), _ = score_rows([moe, dense])
    (balanced, plain_balanced), _ = score_rows([moe, dense], moe_routing="balanced")
    assert own["tables_tpot_ms"] != balanced["tables_tpot_ms"]
    assert plain["tables_tpot_ms"] == plain_balanced["tables_tpot_ms"]
    for args in (["--memory"], ["--report", "r.json"], ["--explain", "x"], ["--no-tables"]):
        assert main(["validate", *args, "--moe-routing", "balanced"]) != 0
        assert "--moe-routing: only with the steady score or --load" in capsys.readouterr().err


def test_the_validate_report_says_which_routing_it_scored(tmp_path, capsys):
    import csv
    import gzip

    from roofline.cli import main
    from tests.test_validate import FIELDS, _row

    path = tmp_path / "sample.csv.gz"
    with gzip.open(path, "wt", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows([_row(id="a", batch_size=8, silicon_tpot_ms=8.0)])
    assert main(["validate", "--sample", str(path), "--moe-routing", "power-law-1.2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["moe_routing"] == "power-law-1.2"
    assert main(["validate", "--sample", str(path)]) == 0
    assert "MoE routing: auto" in capsys.readouterr().out


def test_a_skewed_layer_is_bounded_by_its_top_k_experts_weights():
    """Uniform routing loads 8 experts here; a skewed one may load as few as the top-2 every token
    picks, so the weights' bytes count a quarter: gate+up (80 weight + 20 activation bytes, memory
    term 10) is bounded at 10 x (80/4 + 20) / 100 = 4, the down projection (40 + 10, term 5) at 2,
    the activation (no weights) and a dense op as before."""
    from roofline.routing import skewed_bounds

    def op(moe, weights, acts, **meta):
        return SimpleNamespace(meta={"moe": moe, **meta}, weight_bytes=weights, act_bytes=acts)

    ops = [
        op(None, 50.0, 50.0),
        op("fused", 80.0, 20.0, experts_loaded=8.0, topk=2),
        op("inside", 0.0, 30.0),
        op("inside", 40.0, 10.0),
    ]
    ideal = np.zeros((4, 4))
    ideal[0] = [1.0, 1.0, 0.2, 0.5]  # compute
    ideal[1] = [6.0, 10.0, 0.3, 5.0]  # memory
    bounds = np.fmax(ideal[0], ideal[1])
    assert skewed_bounds(ops, ideal, bounds) == pytest.approx([6.0, 4.0, 0.3, 2.0])


@shipped
def test_a_skewed_decode_step_may_read_below_the_uniform_bound(capsys):
    """Llama 4 Maverick (128 experts, top-1) decoding 256 sequences at TP 8 on an H200 with SGLang:
    uniform routing loads nearly every expert, a power law fewer. The experts at α 1.2 read the
    table's time, under the uniform bound of the layer, and above its top-1 floor."""
    from roofline.cli import main

    args = ["analyze", "--model", "llama-4-maverick", "--hardware", "h200-sxm", "--tp", "8", "--engine", "sglang"]
    args += ["--weight-dtype", "fp8", "--act-dtype", "fp8", "--phase", "decode", "--batch", "256", "--seq-len", "2048"]
    ops = {}
    for routing in ("balanced", "power-law-1.2", "ideal"):
        extra = ["--engine", "ideal"] if routing == "ideal" else ["--moe-routing", routing]
        assert main([*args, *extra, "--json"]) == 0
        ops[routing] = {o["name"]: o for o in json.loads(capsys.readouterr().out)["ops"]}
    layer = [n for n in ops["ideal"] if n.startswith("MoE experts")]
    uniform_bound = sum(ops["ideal"][n]["time_s"] for n in layer)  # the fused layer on the datasheet
    skewed = ops["power-law-1.2"]["MoE experts gate+up"]
    assert skewed["time_s"] < uniform_bound < ops["balanced"]["MoE experts gate+up"]["time_s"]
    assert "held at the datasheet bound" not in skewed["rests_on"]


@shipped
def test_the_library_takes_the_routing_as_the_command_line_does(capsys):
    import roofline
    from roofline.cli import main

    kw = {"phase": "prefill", "seq_len": 1024, "tp": 8, "weight_dtype": "fp8", "act_dtype": "fp8", "engine": "sglang"}
    step = roofline.analyze("deepseek-r1", "b200", moe_routing="balanced", **kw)
    args = ["analyze", "--model", "deepseek-r1", "--hardware", "b200", "--phase", "prefill", "--seq-len", "1024"]
    args += ["--tp", "8", "--weight-dtype", "fp8", "--act-dtype", "fp8", "--engine", "sglang", "--json"]
    assert main([*args, "--moe-routing", "balanced"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == step["total"]
    assert roofline.analyze("deepseek-r1", "b200", **kw)["total"] != step["total"]  # auto reads α 1.01
    with pytest.raises(ValueError, match="moe_routing must be one of"):
        roofline.analyze("deepseek-r1", "b200", moe_routing="uniform")
