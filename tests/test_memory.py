"""One memory model: hand-worked footprints, and every entry point agreeing on "fits"."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from roofline.advisor import rank
from roofline.cli import main
from roofline.defaults import TP_CHOICES
from roofline.dtypes import weight_bytes_per_element
from roofline.hardware import get_hardware, load_hardware
from roofline.inference import analyze_request, analyze_step
from roofline.kvcache import analyze_kv
from roofline.memory import footprint, smallest_tp, weight_bytes_per_device
from roofline.models import get_model, load_models
from roofline.ops import step_ops
from roofline.settings import Settings
from roofline.workload import Precision, Workload, valid_tp

H100 = get_hardware("h100-sxm")
LLAMA8 = get_model("llama-3.1-8b")
DEVICES = list(load_hardware().values())
MODELS = list(load_models().values())


def test_weights_when_tp_exceeds_the_kv_heads():
    # Llama 3.1 405B (126 layers, hidden 16384, 128 heads, 8 KV heads of 128, MLP 53248, vocab
    # 128256) at TP=16: each device holds 1/16 of Q and O (2 x 16384 x 16384 / 16 = 33,554,432),
    # ONE whole KV head for K and V (16384 x 2 x 128 = 4,194,304, replicated: 8 heads, 16 devices),
    # and 1/16 of the MLP (3 x 16384 x 53248 / 16 = 163,577,856): 201,326,592 per layer,
    # x 126 = 25,367,150,592; embedding + LM head 2 x 128256 x 16384 / 16 = 262,668,288; norms
    # (2 x 126 + 1) x 16384 = 4,145,152. At 2 B each: 51,267,928,064 B.
    w = weight_bytes_per_device(get_model("llama-3.1-405b"), Precision(), 16)
    assert w == 2 * (126 * (33_554_432 + 4_194_304 + 163_577_856) + 262_668_288 + 4_145_152) == 51_267_928_064
    # Weights per device never grow with TP.
    for tp in (1, 2, 4, 8, 16, 32):
        assert weight_bytes_per_device(LLAMA8, Precision(), 2 * tp) < weight_bytes_per_device(LLAMA8, Precision(), tp)


def test_mfu_divides_by_the_peak_once():
    # MFU = this device's FLOPs / time / this device's peak. 8B prefill of 64 x 2048 tokens:
    # 1.9006e15 FLOPs on one H100 in 2.158 s = 0.890 of 989.4 TFLOP/s; at TP=2 each device does
    # half the FLOPs (9.504e14) in 1.284 s (all-reduces added): 0.748.
    mfu = {}
    for tp in (1, 2, 4):
        r = analyze_request(Workload(LLAMA8, "request", 64, 2048, 1, tp=tp), H100)
        data = r.to_json()
        assert data["mfu"] == pytest.approx(r.flops / r.e2e_s / 989.4e12)
        mfu[tp] = data["mfu"]
    assert mfu[1] == pytest.approx(0.890, abs=0.002)
    assert mfu[2] == pytest.approx(0.748, abs=0.002)
    assert mfu[1] > mfu[2] > mfu[4] > 0.5


def test_mla_decode_reads_every_heads_absorbed_projections():
    # DeepSeek-V3 decode: each of the 128 heads has its own W_UK (128 x 512) and W_UV (512 x 128);
    # at fp8 (1 B) that is 128 x 128 x 512 = 8,388,608 B each per layer, x 61 layers = 1.02 GB of
    # weight traffic per step for the two together.
    ops = {
        op.name: op
        for op in step_ops(
            Workload(
                get_model("deepseek-v3"), "decode", 1, 1000, precision=Precision(weight_dtype="fp8", act_dtype="fp8")
            )
        )
    }
    uk, uv = ops["MLA query absorb (W_UK)"], ops["MLA output absorb (W_UV)"]
    assert uk.weight_bytes == uv.weight_bytes == 128 * 128 * 512
    assert (uk.weight_bytes + uv.weight_bytes) * uk.count == 2 * 8_388_608 * 61
    # FLOPs: 2 x batch x heads x 128 x 512 each
    assert uk.flops == 2 * 1 * 128 * 128 * 512


@pytest.mark.parametrize(
    "fmt, bits",
    [
        ("bf16", 16),
        ("fp8", 8),
        ("int4", 4 + (16 + 4) / 128),  # fp16 scale + 4-bit zero per 128: 4.15625
        ("mxfp4", 4 + 8 / 32),  # one e8m0 scale per 32: 4.25
        ("nvfp4", 4 + 8 / 16),  # one e4m3 scale per 16: 4.5
    ],
)
def test_quantized_weights_carry_their_scales(fmt, bits):
    assert weight_bytes_per_element(fmt) == bits / 8
    # Llama 3.1 8B's linear layers are 6,979,321,856 of its 8,030,261,248 parameters; the
    # embedding, LM head and norms (1,050,939,392) stay bf16.
    linear = 8_030_261_248 - 2 * 128256 * 4096 - 65 * 4096
    expected = linear * bits / 8 + (8_030_261_248 - linear) * 2
    assert weight_bytes_per_device(LLAMA8, Precision(weight_dtype=fmt)) == pytest.approx(expected)


def test_nvfp4_mla_keeps_its_q_and_kv_projections_in_bf16(monkeypatch):
    # DeepSeek-R1's NVFP4 checkpoints leave MLA's q and kv projections unquantized, and the step runs
    # them in bf16 (roofline.ops.kernels.mla_qkv_precision); memory holds them so too. Per layer:
    # q_a 7168 x 1536 = 11,010,048, its norm 1,536, q_b 1536 x 128 x (128 + 64) = 37,748,736,
    # kv_a 7168 x (512 + 64) = 4,128,768, its norm 512, kv_b 512 x 128 x (128 + 128) = 16,777,216:
    # 69,666,816 parameters, 61 layers: 4,249,675,776 at 2 bytes instead of NVFP4's 0.5625.
    r1, p = get_model("deepseek-r1"), Precision(weight_dtype="nvfp4", act_dtype="fp8")
    held = weight_bytes_per_device(r1, p)
    monkeypatch.setattr("roofline.memory.mla_qkv_precision", lambda q: q)
    assert held - weight_bytes_per_device(r1, p) == pytest.approx(4_249_675_776 * (2 - 0.5625))
    # Over TP 8, q_b and kv_b are split and q_a, kv_a and the norms replicated on every device.
    split, replicated = 37_748_736 + 16_777_216, 11_010_048 + 1_536 + 4_128_768 + 512
    monkeypatch.undo()
    at_tp8 = weight_bytes_per_device(r1, p, tp=8)
    monkeypatch.setattr("roofline.memory.mla_qkv_precision", lambda q: q)
    assert at_tp8 - weight_bytes_per_device(r1, p, tp=8) == pytest.approx(61 * (split / 8 + replicated) * 1.4375)
    # An FP8 checkpoint keeps its projections in FP8: nothing moves.
    fp8 = Precision(weight_dtype="fp8", act_dtype="fp8")
    as_is = weight_bytes_per_device(r1, fp8)
    monkeypatch.undo()
    assert weight_bytes_per_device(r1, fp8) == as_is


def test_int4_group_size_is_a_setting():
    assert Precision(weight_dtype="int4", group_size=64).weight_bytes == (4 + 20 / 64) / 8
    assert weight_bytes_per_element("int4", 32) == (4 + 20 / 32) / 8


def test_capacity_is_what_the_runtime_exposes():
    # H100 SXM: CUDA reports 85,017,493,504 B (79.18 GiB), not 80 GiB.
    fp = footprint(Workload(LLAMA8, "decode", 1, 100), H100, Settings(memory_utilization=0.9))
    assert fp.exposed_bytes == 85_017_493_504 and fp.capacity_bytes == pytest.approx(85_017_493_504 * 0.9)
    # An L40S with ECC exposes 44.53 GiB of its 48 GB.
    assert get_hardware("l40s").memory_bytes / 2**30 == pytest.approx(44.53)
    # Hopper's and Blackwell's larger parts expose more than their nominal GB read as 10^9 B: the H200
    # 139.80 GiB (150.1 GB, measured: examples/h200-sxm-quick-run.json) of its "141 GB", the B300
    # 267.69 GiB of its 270 GB, a GB200 184.31 GiB of its 186 GB. Read as 10^9 B, an H200's usable
    # memory would be 8.2 GB short at 0.9 of it.
    for device, gib in (("h200-sxm", 139.80), ("b300", 267.69), ("gb200", 184.31)):
        assert get_hardware(device).memory_bytes / 2**30 == pytest.approx(gib, abs=0.005)
        assert f"({gib:.2f} GiB) as the runtime reports it" in get_hardware(device).memory_source
    h200 = footprint(Workload(LLAMA8, "decode", 1, 100), get_hardware("h200-sxm"), Settings(memory_utilization=0.9))
    assert h200.capacity_bytes / 1e9 == pytest.approx(135.1, abs=0.05)  # 0.9 x 150.11 GB, not 0.9 x 141 GB = 126.9
    # A device without a recorded figure falls back to the nominal GB (10^9 B) and says so.
    gh200 = get_hardware("gh200")
    assert gh200.memory_bytes == 144e9 and "not recorded" in gh200.memory_source


def test_footprint_terms_by_hand():
    # 8B decode, batch 8, 4095 cached (4096 after the step), blocks of 16, TP=1, eager:
    # weights 16,060,522,496; KV 8 x 4096 x 131,072 = 4,294,967,296; activations: the workspace
    # (vLLM's sampler over its 1,024 sequences on an H100, 2,101,346,304, see test_kvcache) beats
    # the step's own; non-torch 0.25 GiB; no CUDA graphs.
    fp = footprint(Workload(LLAMA8, "decode", 8, 4095), H100, Settings())
    assert fp.kv_cache_bytes == 4_294_967_296
    assert fp.activation_bytes == 2_101_346_304 and fp.cuda_graph_bytes == 0
    assert fp.total_bytes == 16_060_522_496 + 4_294_967_296 + 2_101_346_304 + 268_435_456
    graphs = footprint(Workload(LLAMA8, "decode", 8, 4095, cuda_graphs=True), H100, Settings())
    assert graphs.cuda_graph_bytes == pytest.approx(0.91 * 2**30)
    tp2 = footprint(Workload(LLAMA8, "decode", 8, 4095, tp=2), H100, Settings())
    assert tp2.non_torch_bytes == pytest.approx((0.25 + 1.82) * 2**30)  # NCCL buffers under TP


def test_fits_includes_the_step_activations():
    # 8B prefill of 16 x 8192 tokens with a naive kernel: the score matrices alone are
    # 2 (scores, probabilities) x 16 x 32 heads x 8192^2 x 2 B = 137 GB: it does not fit.
    w = Workload(LLAMA8, "prefill", 16, 8192, attention="naive")
    fp = footprint(w, H100, Settings())
    assert fp.step_activation_bytes > 2 * 16 * 32 * 8192**2 * 2
    assert not fp.fits
    row = next(r for r in rank(w, DEVICES) if r.hardware == "h100-sxm")
    assert not row.fits and row.memory_needed_bytes == pytest.approx(float(fp.total_bytes))


def _cli_json(*args: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*args, "--json"]) == 0
    return json.loads(out.getvalue())


def test_every_entry_point_agrees_on_fits_for_every_model_device_and_tp():
    """For every model x device x TP in the database, a decode workload at batch 8 and 4096 tokens:
    the footprint, the step analysis, the device ranking and (a sample of) the KV command and the
    command line give the same "fits" and the same smallest TP."""
    settings = Settings()
    checked = 0
    for model in MODELS:
        context = min(4096, model.max_context)
        for tp in TP_CHOICES:
            if not valid_tp(model, tp):
                continue
            w = Workload(model, "decode", 8, context - 1, tp=tp)
            ranked = {r.hardware: r for r in rank(w, DEVICES, settings=settings)}
            for hw in DEVICES:
                try:
                    run, _ = w.on(hw)
                except ValueError:
                    continue
                fp = footprint(run, hw, settings)
                row = ranked[hw.id]
                if row.time_s is not None:
                    assert row.fits == fp.fits and row.smallest_tp == fp.smallest_tp, (model.id, hw.id, tp)
                assert fp.smallest_tp == smallest_tp(run, hw, settings)
                if fp.smallest_tp is not None:
                    assert fp.smallest_tp <= tp or not fp.fits
                checked += 1
    assert checked > 1500
    # The step analysis, the KV command and the command line answer from the same record (a
    # sample: they are slower).
    for model_id, hw_id, tp in [
        ("llama-3.1-70b", "h100-sxm", 1),
        ("llama-3.1-70b", "h100-sxm", 2),
        ("mixtral-8x22b", "mi300x", 1),
        ("llama-3.1-405b", "h200-sxm", 8),
        ("deepseek-v3", "b200", 8),
        ("gemma-2-9b", "l4", 1),
    ]:
        model, hw = get_model(model_id), get_hardware(hw_id)
        w = Workload(model, "decode", 8, 4095, tp=tp)
        fp = footprint(w, hw, settings)
        step_fp = analyze_step(w.on(hw)[0], hw, settings).footprint
        assert step_fp.fits == fp.fits and step_fp.smallest_tp == fp.smallest_tp
        kv = analyze_kv(w, hw, 8, 4096, settings).to_json()
        cli = _cli_json(
            "analyze",
            "--model",
            model_id,
            "--hardware",
            hw_id,
            "--phase",
            "decode",
            "--batch",
            "8",
            "--seq-len",
            "4095",
            "--tp",
            str(tp),
        )
        kv_cli = _cli_json(
            "kv", "--model", model_id, "--hardware", hw_id, "--batch", "8", "--context", "4096", "--tp", str(tp)
        )
        for data in (kv, kv_cli):
            assert data["fits"] == fp.fits and data["smallest_tp"] == fp.smallest_tp, (model_id, hw_id, tp)
        assert cli["memory"]["fits"] == fp.fits and cli["memory"]["smallest_tp"] == fp.smallest_tp


def test_tp_group_bandwidth_follows_the_topology():
    def link(hw_id: str, tp: int) -> float | None:
        value, _ = get_hardware(hw_id).group_link(tp)
        return None if value is None else value / 1e9

    assert link("h100-sxm", 2) == link("h100-sxm", 8) == 450  # NVSwitch: 900 GB/s both ways, each GPU
    assert link("h100-pcie", 2) == 300  # the NVLink bridge joins a pair
    assert link("h100-pcie", 4) == 64  # beyond the pair: PCIe 5.0 x16
    assert link("mi300x", 2) == 64  # a mesh gives a pair one link: 128 GB/s both ways
    assert link("mi300x", 8) == 7 * 64  # all 7 peer links at once
    assert link("tpu-v4", 4) == 2 * 45  # a ring both ways along one torus axis: 2 links of 45 GB/s
    assert link("l40s", 2) == 32  # PCIe 4.0 x16, one direction
    assert link("h100-sxm", 16) is None  # no host link recorded beyond the 8-GPU switch
    # TPU v4 can now run TP > 1
    assert analyze_step(Workload(LLAMA8, "decode", 1, 100, tp=2), get_hardware("tpu-v4")).time_s > 0


def test_fp32_gemms_use_the_matrix_rate_and_elementwise_the_vector_rate():
    from roofline.settings import Settings as S

    mi250x = S().ceilings(get_hardware("mi250x"))
    assert mi250x.peak("fp32") == 95.7e12 and mi250x.peak("vector") == 47.9e12
    h100 = S().ceilings(H100)
    assert h100.peak("fp32") == h100.peak("vector") == 67e12


def test_long_outputs_are_evaluated_at_a_bounded_number_of_points():
    # 8B with 4,000 output tokens: 3,999 decode steps sampled at 256 contexts; the midpoint rule
    # stays within 0.01% of evaluating every step.
    w = Workload(LLAMA8, "request", 4, 1000, 4000)
    sampled = analyze_request(w, H100)
    exact = analyze_request(w, H100, Settings())
    contexts = np.arange(1000, 1000 + 3999)
    from roofline.engine import evaluate

    every = evaluate(step_ops(w.step("decode", contexts)), exact.prefill.table.ceilings).step_time_s.sum()
    assert sampled.decode_table.step_time_s.size == 256 and sampled.decode_steps.sum() == 3999
    assert sampled.decode_time_s == pytest.approx(every, rel=1e-4)
    # DeepSeek-V3 with 131,071 output tokens is answered at once, not step by step.
    big = Workload(get_model("deepseek-v3"), "request", 1, 1024, 131_071, tp=8)
    assert analyze_request(big, get_hardware("h200-sxm")).decode_steps.size == 256


def test_a_requests_prompts_take_at_most_the_engines_token_budget_a_step():
    """64 prompts of 4,096 tokens on an 8B and an H100 went through as one pass of 262,144 tokens
    (26.8 GB of activations: "DOES NOT FIT, smallest TP 2"); vLLM runs them 8,192 tokens a step."""
    from roofline.engines import prompt_step
    from roofline.memory import activation_peak_bytes, step_activation_bytes

    # Worked by hand, budget 8,192: vLLM splits prompts and fills the budget, a step that starts
    # inside a prompt touching one more (4,096: a token of one, a whole one, 4,095 of a third; 3,000:
    # ceil(8,191 / 3,000) + 1 = 4; 10,000: the end of one and the start of the next); TensorRT-LLM
    # keeps them whole, as many as fit (8,192 // 3,000 = 2: 6,000 tokens) and at least one.
    assert [tuple(map(float, prompt_step("vllm", 8192, 64, s))) for s in (4096, 3000, 10000)] == [
        (8192, 3),
        (8192, 4),
        (8192, 2),
    ]
    assert [tuple(map(float, prompt_step("trtllm", 8192, 64, s))) for s in (4096, 3000, 10000)] == [
        (8192, 2),
        (6000, 2),
        (10000, 1),
    ]
    assert tuple(map(float, prompt_step("vllm", 8192, 1, 512))) == (512, 1)  # a batch under the budget whole
    w = Workload(LLAMA8, "request", 64, 4096, 64)
    one_pass = step_activation_bytes(w)
    engine = step_activation_bytes(w, Settings().for_device(H100))
    assert one_pass == activation_peak_bytes(LLAMA8, w.precision, 1, 64 * 4096, 64, 4096, 4096)
    assert engine == activation_peak_bytes(LLAMA8, w.precision, 1, 8192, 3, 8192 / 3, 4096)
    fp = footprint(w, H100, Settings())
    assert fp.fits and fp.smallest_tp == 1 and fp.activation_bytes == fp.workspace_bytes == 2_101_346_304
    # One step asked for is the step given: analyze's prefill of 64 x 4,096 tokens is one pass.
    assert footprint(Workload(LLAMA8, "prefill", 64, 4096), H100, Settings()).step_activation_bytes == one_pass


def test_a_request_says_its_memory_is_one_engine_step_and_its_ttft_one_pass():
    from roofline.inference import analyze_request

    def notes(batch, prompt, engine):
        w = Workload(LLAMA8, "request", batch, prompt, 16)
        return [n for n in analyze_request(w, H100, Settings(engine=engine)).notes if "prompt" in n or "pass" in n]

    assert notes(64, 4096, "vllm") == [
        "The prefill of 64 × 4,096 tokens is timed as one pass; vLLM runs at most 8,192 tokens a step (its token "
        "budget), so the activations counted in memory are one such step's."
    ]
    assert "TensorRT-LLM runs 2 whole prompts a step (6,000 tokens" in notes(8, 3000, "trtllm")[0]
    # A prompt past the budget of an engine that keeps prompts whole: refused there, and said.
    assert notes(1, 32000, "trtllm") == [
        "TensorRT-LLM keeps a prompt whole by default and refuses one past its token budget (8,192 tokens): this "
        "32,000-token prompt needs --max-batched-tokens 32000 or more, or chunked prefill."
    ]
    assert notes(4, 1024, "vllm") == []  # within one step: nothing to say
