"""Training and loading: memory by hand, against DeepSpeed's estimators and PyTorch's own saved
tensors, against real steps and loads on this CPU; the step on the roofline; CLI and page."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from roofline.hardware import get_hardware
from roofline.loading import load_peaks
from roofline.models import get_model
from roofline.training import (
    NF4_BITS,
    PHASES,
    TrainSetup,
    analyze_training,
    layer_saved_bytes,
    levers,
    lora_params,
    optimizer_bytes_moved,
    plan_to_fit,
    training_memory,
)
from roofline.training.activations import rebuilt_layer_bytes

ROOT = Path(__file__).resolve().parent.parent
H100 = get_hardware("h100-sxm")


def states(s: TrainSetup) -> float:
    """Model states per device: weights, master copy, gradients, optimizer state."""
    mem = training_memory(s)
    return mem.weights_bytes + mem.master_bytes + mem.grads_bytes + mem.optimizer_bytes


def test_mixed_precision_adamw_is_16_bytes_per_parameter():
    # ZeRO paper §3.1: 2 (16-bit weights) + 2 (16-bit gradients) + 12 (fp32 master 4, m 4, v 4).
    m = get_model("llama-2-7b")
    p = m.param_counts()["total"]  # 6,738,415,616
    assert states(TrainSetup(m, precision="mixed")) == 16 * p
    # fp32 everything: 4 + 4 + 8 = 16 as well, but no master copy.
    assert states(TrainSetup(m, precision="fp32")) == 16 * p
    # 8-bit AdamW: 2 + 2 + 4 + (2 + 2 x 4/256) per parameter (bitsandbytes >= 0.44, blocks of 256).
    # Its norms have 4,096 elements: not under min_8bit_size (4,096), so 8-bit too.
    expected = (2 + 2 + 4) * p + (2 + 8 / 256) * p
    assert states(TrainSetup(m, precision="mixed", optimizer="adamw-8bit")) == pytest.approx(expected)
    # SmolLM2's norms have 576: their states stay fp32 (8 B).
    small_model = get_model("smollm2-135m")
    q = small_model.param_counts()["total"]
    small = 576 * (30 * 2 + 1)
    expected = 8 * q + (2 + 8 / 256) * (q - small) + 8 * small
    assert states(TrainSetup(small_model, precision="mixed", optimizer="adamw-8bit")) == pytest.approx(expected)


def test_pure_bf16_is_8_bytes_per_parameter_by_hand():
    # bf16 weights (2) and gradients (2), AdamW's m and v allocated like the parameters in bf16
    # (2 + 2), and no fp32 master copy: 8 B per parameter, half of mixed precision's 16.
    m = get_model("llama-2-7b")
    p = m.param_counts()["total"]
    pure = TrainSetup(m, precision="pure-bf16")
    mem = training_memory(pure)
    assert (mem.weights_bytes, mem.grads_bytes, mem.master_bytes, mem.optimizer_bytes) == (2 * p, 2 * p, 0, 4 * p)
    assert mem.autocast_copies_bytes == 0  # no autocast: the weights are bf16 already
    assert states(replace(pure, optimizer="sgd-momentum")) == 6 * p  # one bf16 momentum
    # A for-each AdamW's temporary is a bf16 parameter-sized tensor too.
    unfused = training_memory(replace(pure, fused_optimizer=False)).by_phase["optimizer step"]["transient"]
    assert float(unfused) == 2 * p
    # Gradients appear in backward (zero_grad sets them to None), as in fp32 and amp.
    assert float(mem.by_phase["forward end"]["gradients"]) == 0
    # Activations as mixed precision's (bf16 throughout, fused norms).
    mixed = training_memory(TrainSetup(m, precision="mixed"))
    assert float(mem.activations_bytes) == float(mixed.activations_bytes)
    # The update reads the bf16 gradient, reads and writes the bf16 weight and both bf16 states:
    # 2 + 2 + 2 + 2 x 4 = 14 B per parameter (mixed: 2 + 4 + 4 + 2 x 8 + the 16-bit copy 2 = 28).
    assert optimizer_bytes_moved(pure) == 14 * p
    assert optimizer_bytes_moved(TrainSetup(m, precision="mixed")) == 28 * p
    with pytest.raises(ValueError, match="pure-bf16 keeps"):
        TrainSetup(m, precision="pure-bf16", compute_dtype="fp16")


def test_lora_adapter_count_by_hand():
    # Llama 3.1 8B, rank 16 on q (4096 -> 4096) and v (4096 -> 8 x 128 = 1024), 32 layers:
    # 16 x (4096 + 4096) + 16 x (4096 + 1024) = 131,072 + 81,920 = 212,992 per layer.
    m = get_model("llama-3.1-8b")
    assert lora_params(m, 16, ("q", "v")) == 212_992 * 32 == 6_815_744
    s = TrainSetup(m, method="lora", lora_rank=16, lora_targets=("q", "v"), precision="mixed")
    mem = training_memory(s)
    assert mem.params.trainable == 6_815_744
    # The frozen base stays in bf16: 2 x 8,030,261,248; adapters 2 B each plus an fp32 master.
    assert mem.weights_bytes == 2 * 8_030_261_248 + 2 * 6_815_744
    assert mem.optimizer_bytes == 8 * 6_815_744


def test_qlora_stores_the_linear_weights_in_nf4():
    m = get_model("llama-3.1-8b")
    assert NF4_BITS == pytest.approx(4 + 0.127, abs=1e-3)  # QLoRA §3: 8/64 + 32/(64 x 256) bits of constants
    counts = m.param_counts()
    norms = m.norm_params() * (m.num_layers * 2 + 1)
    linear = counts["total"] - counts["embedding"] - norms
    s = TrainSetup(m, method="qlora", lora_rank=16, lora_targets=("q", "v"), precision="mixed")
    base = linear * NF4_BITS / 8 + (counts["embedding"] + norms) * 2
    assert training_memory(s).weights_bytes == pytest.approx(base + 2 * 6_815_744)


def test_zero_3_over_8_devices_divides_the_model_states_by_8():
    m = get_model("llama-2-7b")
    p = m.param_counts()["total"]
    mem = training_memory(TrainSetup(m, precision="mixed", dp=8, zero=3))
    assert mem.master_bytes == 4 * p / 8 and mem.optimizer_bytes == 8 * p / 8 and mem.grads_bytes == 2 * p / 8
    layer = m.attention_params() + m.mlp_params()
    assert mem.weights_bytes == 2 * p / 8 + 2 * layer * 2  # plus one layer in use and one prefetched


@pytest.mark.parametrize("gpus", [1, 4, 8, 64])
def test_deepspeed_zero_estimators(gpus):
    """DeepSpeed's estimate_zero2_model_states_mem_needs and estimate_zero3_model_states_mem_needs
    (deepspeed/runtime/zero/stage_1_and_2.py and stage3.py), no offload, fp32 gradient partitions:
    ZeRO-2: 2P + int(18P / gpus); ZeRO-3: 4 x largest_layer_params + int(18P / gpus)."""
    m = get_model("llama-3.1-8b")
    p = m.param_counts()["total"]
    zero2 = states(TrainSetup(m, precision="mixed", fp32_grads=True, dp=gpus, zero=2))
    assert zero2 == pytest.approx(2 * p + int(18 * p / gpus), abs=1)
    largest_layer = m.attention_params() + m.mlp_params()
    zero3 = states(TrainSetup(m, precision="mixed", fp32_grads=True, dp=gpus, zero=3))
    assert zero3 == pytest.approx(4 * largest_layer + int(18 * p / gpus), abs=1)


def test_the_18_bytes_per_parameter_references():
    # EleutherAI's calculator (calc/calc_transformer_mem.py): 2 (model) + 4 (fp32 grads) + 12
    # (fp32 copy, m, v); Hugging Face "Model memory anatomy": 6 (fp32 + 16-bit weights) + 4 + 8.
    m = get_model("llama-2-7b")
    p = m.param_counts()["total"]
    assert states(TrainSetup(m, precision="mixed", fp32_grads=True)) == 18 * p
    amp = training_memory(TrainSetup(m, precision="amp"))
    head = 0 if not m.tied_embeddings else m.vocab_size * m.hidden_size
    linear = p - m.param_counts()["embedding"] - m.norm_params() * (m.num_layers * 2 + 1) + head
    assert amp.autocast_copies_bytes == 2 * linear  # the 16-bit copies of every matrix a linear uses
    assert states(TrainSetup(m, precision="amp")) + amp.autocast_copies_bytes == pytest.approx(18 * p, rel=0.03)


def test_activation_bytes_of_one_layer_by_hand():
    # SmolLM2 135M (h 576, 9 heads of 64, 3 KV heads, MLP 1536), fp32, PyTorch's decomposed
    # RMSNorm, FlashAttention-style SDPA, per token per layer:
    #   x and the residual 2 x 576, normalised x 2 x 576, the QKV input 576, q + k + v 576 + 192 + 192,
    #   attention output 576, the MLP input 576, gate, up, SiLU(gate) and product 4 x 1536
    #   = 11,136 elements x 4 B = 44,544 B, plus the log-sum-exp 9 heads x 4 B = 36 B.
    m = get_model("smollm2-135m")
    s = TrainSetup(m, seq_len=1, micro_batch=1, precision="fp32", fused_norms=False)
    assert sum(layer_saved_bytes(s).values()) == 44_544 + 36
    # A fused norm kernel (CUDA) keeps neither normalised x: 2 x 576 x 4 B less.
    assert sum(layer_saved_bytes(replace(s, fused_norms=True)).values()) == 44_544 + 36 - 2 * 576 * 4


def test_full_recomputation_rebuilds_the_last_layer_after_the_logits_gradients_are_freed():
    # SmolLM2 135M in fp32 with PyTorch's decomposed RMSNorm, 1,536 tokens, every layer
    # checkpointed. t = 1,536, h = 576, V = 49,152, 30 layers, P = 134,515,008; weights 4P and
    # AdamW 8P throughout; gradients appear in backward.
    m = get_model("smollm2-135m")
    p, t, h, v = 134_515_008, 1_536, 576, 49_152
    s = TrainSetup(m, seq_len=t, precision="fp32", recompute="full", fused_norms=False)
    mem = training_memory(s)
    total = {k: float(sum(terms.values())) for k, terms in mem.by_phase.items()}
    # Saved: each layer's input (30 t h x 4 B); the final norm's input and normalised x, and the
    # head's input (3 t h x 4 B).
    layers, final = 30 * t * h * 4, 3 * t * h * 4
    # Backward starts with the loss: the log-probabilities, their gradient and the logits'
    # gradient, 12 B per logit, beside every saved tensor. No layer is rebuilt yet.
    assert total["backward start"] == 12 * p + layers + final + 12 * t * v
    assert "transient" not in mem.by_phase["backward start"]
    # The head's backward frees those 12 t V B and the final norm's and head's saved tensors and
    # leaves the tied embedding's gradient (4 V h). Then the last layer is rebuilt: one layer
    # saves 44,580 B per token (see the test below), of which its input (4 h) is the checkpoint
    # already; the gradient flowing into it is t h x 4 B.
    rebuilt = 44_580 * t - 4 * h * t
    assert total["last layer's backward"] == 12 * p + layers + 4 * v * h + rebuilt + 4 * h * t
    assert mem.peak_at == "backward start" and float(mem.peak_bytes) == total["backward start"]
    # Without recomputation nothing is rebuilt at that moment: every layer's tensors are saved.
    plain = training_memory(replace(s, recompute="none")).by_phase["last layer's backward"]
    assert float(plain["transient"]) == 4 * h * t
    # A decomposed norm on a bf16 input keeps an fp32 upcast of it, not the checkpoint itself:
    # the whole layer is rebuilt.
    pure = replace(s, precision="pure-bf16")
    assert float(rebuilt_layer_bytes(pure)) == float(sum(layer_saved_bytes(pure).values()))


class SavedBytes:
    """Distinct storages autograd saves (parameters and tiny tensors aside)."""

    def __init__(self, params: set[int]):
        self.params, self.sizes = params, {}

    def pack(self, t):
        key = t.untyped_storage().data_ptr()
        if key not in self.params and t.untyped_storage().nbytes() > 4096:
            self.sizes[key] = t.untyped_storage().nbytes()
        return t


def test_layer_accounting_matches_what_pytorch_saves():
    """Every tensor one layer of the measured harness saves for backward, counted by autograd's
    saved-tensor hooks, against the formula."""
    torch = pytest.importorskip("torch")
    from roofline.measure.training import TrainModel

    m = get_model("smollm2-135m").model_copy(update={"num_layers": 1, "vocab_size": 64})
    for precision in ("fp32", "amp", "pure-bf16"):
        s = TrainSetup(m, seq_len=128, micro_batch=2, precision=precision, fused_norms=False)
        model = TrainModel(s)
        dtype = torch.bfloat16 if precision == "pure-bf16" else torch.float32
        x = torch.randn(2, 128, m.hidden_size, requires_grad=True, dtype=dtype)
        hd = m.head_dim
        cos = sin = torch.ones(128, hd, dtype=dtype)
        params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        saved = SavedBytes(params)
        with torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda t: t):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "amp"):
                model.layers[0](x, cos, sin)
        counted = sum(saved.sizes.values())
        if precision == "amp":  # autocast's 16-bit weight copies are saved too: counted apart
            linear = m.attention_params() + m.mlp_params()
            counted -= 2 * linear
        expected = sum(layer_saved_bytes(s).values())
        assert counted == pytest.approx(expected, rel=0.01), (precision, counted, expected)


def test_loading_peaks_by_hand():
    # Llama 3.1 70B, 70,553,706,496 parameters, bf16 checkpoint: W = 141.1 GB; naive builds fp32
    # (282.2 GB) and holds the file (141.1 GB): 423.3 GB of host RAM.
    m = get_model("llama-3.1-70b")
    p = m.param_counts()["total"]
    peaks = {pk.method: pk for pk in load_peaks(m, "bf16", "bf16")}
    assert peaks["naive"].host_bytes == 4 * p + 2 * p
    # Built in fp32, then cast: the fp32 model and the bf16 copy of its first tensor, the
    # embedding (128,256 x 8,192, the largest), then the bf16 model and the file (2P + 2P).
    assert peaks["fp32-cast"].host_bytes == max(4 * p + 2 * 128_256 * 8_192, 2 * p + 2 * p)
    assert peaks["fp32-cast"].device_bytes == 2 * p
    # Cast to fp32 is no cast: the same as naive.
    fp32 = {pk.method: pk for pk in load_peaks(m, "bf16", "fp32")}
    assert fp32["fp32-cast"].host_bytes == fp32["naive"].host_bytes == 4 * p + 2 * p
    assert peaks["meta"].host_bytes == 2 * p and peaks["mmap"].host_file_backed
    assert peaks["direct"].host_bytes == 2 * m.vocab_size * m.hidden_size  # the largest tensor
    # Eight processes on one host, naive: eight fp32 models and eight files; mmap: one page cache.
    eight = {pk.method: pk for pk in load_peaks(m, "bf16", "bf16", tp=8)}
    assert eight["naive"].host_bytes == 8 * 6 * p and eight["mmap"].host_bytes == 2 * p
    assert eight["meta"].device_bytes == 2 * p / 8


def test_the_step_on_the_roofline():
    m = get_model("llama-3.1-8b")
    r = analyze_training(TrainSetup(m, seq_len=2048, micro_batch=1, precision="mixed"), H100)
    phases = {op.phase for op in r.table.ops}
    assert {"forward", "backward", "optimizer"} <= phases
    fwd = sum(float(r.table.flops[i]) for i, op in enumerate(r.table.ops) if op.phase == "forward")
    bwd = sum(float(r.table.flops[i]) for i, op in enumerate(r.table.ops) if op.phase == "backward")
    assert 1.9 < bwd / fwd < 2.3  # backward ~2x forward (attention 2.5x)
    # 6 x parameters x tokens, roughly (attention and the logits add a little).
    assert fwd + bwd == pytest.approx(6 * m.param_counts()["total"] * 2048, rel=0.2)
    assert r.bound == "compute" and 0 < r.mfu <= 1
    opt = next(i for i, op in enumerate(r.table.ops) if op.phase == "optimizer")
    assert r.table.bounds[opt] == "memory"  # an optimizer update is memory-bound
    full = analyze_training(TrainSetup(m, seq_len=2048, micro_batch=1, precision="mixed", recompute="full"), H100)
    phases = full.to_json()["time_by_phase_s"]
    # Full recomputation runs every layer's forward again (not the embedding, head or loss).
    assert 0.7 < phases["recompute"] / phases["forward"] < 1.0
    assert full.step_time_s == pytest.approx(r.step_time_s + phases["recompute"])


def test_levers_make_a_setup_fit():
    m = get_model("llama-3.1-8b")
    s = TrainSetup(m, seq_len=4096, micro_batch=4, global_batch=64, precision="mixed")
    base = analyze_training(s, H100)
    assert not base.fits
    for lever in levers(s, H100):
        assert lever.peak_bytes < float(base.memory.peak_bytes) and lever.slowdown > 0
    names, planned = plan_to_fit(s, H100)
    assert planned.fits and names and not any("LoRA" in n for n in names)  # the same model, trained as asked


def test_gradient_accumulation_keeps_the_micro_batch_memory():
    m = get_model("llama-3.1-8b")
    one = training_memory(TrainSetup(m, seq_len=2048, micro_batch=2, precision="mixed"))
    many = training_memory(TrainSetup(m, seq_len=2048, micro_batch=2, global_batch=64, precision="mixed"))
    assert float(many.activations_bytes) == float(one.activations_bytes)
    assert math.isclose(float(many.peak_bytes), float(one.peak_bytes), rel_tol=0.01)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--micro-batch", "0"], "--micro-batch: expected a positive integer"),
        (["--zero", "4"], "invalid choice: 4"),
        (["--lora-targets", "q,x", "--method", "lora"], "lora target: 'x' is not allowed"),
        (["--seq-len", "200000"], "seq_len exceeds Llama 3.1 8B's maximum context of 131,072"),
        (["--optimizer", "lion"], "invalid choice: 'lion'"),
    ],
)
def test_train_cli_errors(args, message):
    proc = subprocess.run(
        [sys.executable, "-m", "roofline", "train", "--model", "llama-3.1-8b", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_train_and_load_cli_json():
    train = subprocess.run(
        [sys.executable, "-m", "roofline", "train", "--model", "llama-3.1-8b", "--seq-len", "4096", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    data = json.loads(train.stdout)
    assert {"memory", "fits", "largest_micro_batch", "levers", "plan_to_fit", "step_time_s", "mfu"} <= set(data)
    assert data["memory"]["peak_at"] in PHASES
    load = subprocess.run(
        [sys.executable, "-m", "roofline", "load", "--model", "llama-3.1-70b", "--tp", "8", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    methods = {r["method"]: r for r in json.loads(load.stdout)["methods"]}
    assert methods["naive"]["fits_device"] and methods["naive"]["host_peak_bytes"] > 3e12


def test_training_page():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "views/training_page.py"), default_timeout=60)
    at.query_params["model"] = "llama-3.1-8b"
    at.query_params["seq"] = "4096"
    at.query_params["mb"] = "2"
    at.run()
    assert not at.exception and not at.error
    keys = [c.key for c in at.get("plotly_chart")]
    assert keys == ["memory_by_batch", "memory_by_length"]  # the Memory view, open by default
    step = next(m.value for m in at.metric if m.label == "Step")
    at.query_params["view"] = "Levers"
    at.run()
    assert any("To fit on" in md.value for md in at.markdown)
    at.radio(key="recompute").set_value("full").run()
    assert not at.exception
    assert next(m.value for m in at.metric if m.label == "Step") != step  # recomputation costs time


def test_training_page_labels_ideal_bound_figures_as_ideal():
    """LoRA's step is all large matmuls, so its MFU at the datasheet bound is near 90%: a bound,
    not a prediction, and the page says so on every time and rate."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "views/training_page.py"), default_timeout=60)
    at.query_params["method"] = "lora"
    at.query_params["view"] = "Step on the roofline"
    at.run()
    assert not at.exception and not at.error
    labels = {m.label: m for m in at.metric}
    assert "Ideal MFU" in labels and "MFU" not in labels
    assert labels["Ideal MFU"].help.startswith("MFU at the ideal bound")
    assert any("M trained" in md.value for md in at.markdown)  # LoRA's adapters: millions, not "0.00682 B"
    assert labels["Step"].proto.delta == labels["Tokens/s"].proto.delta == "ideal bound"
    assert any("ideal bounds on datasheet roofs" in c.value for c in at.caption)
    assert any(md.value.startswith("Time by phase (ideal bound)") for md in at.markdown)


def test_training_memory_sweeps_lengths_that_read():
    from dashboard.training_view import fmt_params, sequence_lengths, token_label

    assert sequence_lengths(131072).tolist() == [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
    assert sequence_lengths(40960).tolist()[-2:] == [32768, 40960]
    assert len(sequence_lengths(10_485_760)) <= 10
    assert fmt_params(6.82e6) == "6.82 M" and fmt_params(8.03e9) == "8.03 B"
    assert [token_label(n) for n in (256, 2048, 40960, 131072, 1000)] == ["256", "2k", "40k", "128k", "1,000"]


def test_training_page_with_a_calibration_says_calibrated():
    from streamlit.testing.v1 import AppTest

    from roofline.measure.schema import load_results

    at = AppTest.from_file(str(ROOT / "views/training_page.py"), default_timeout=60)
    at.query_params["hw"] = ["h100-sxm"]  # the headline is the calibrated device's
    at.session_state["measure_results"] = load_results(ROOT / "examples" / "h100-sxm-quick-run.json")
    at.run()
    at.radio(key="measured_source").set_value("the Measure page's results").run()
    assert not at.exception and not at.error
    labels = {m.label: m for m in at.metric}
    assert "Calibrated MFU" in labels and "Ideal MFU" not in labels
    assert labels["Step"].proto.delta == "calibrated"
    assert any(c.value.startswith("Times and rates rest on calibrated roofs") for c in at.caption)
