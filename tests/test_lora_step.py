"""The LoRA training step: frozen base weights have no weight gradient, and the adapters' own
work (x A then B, forward and backward) is timed; by hand and against torch's FlopCounterMode."""

from __future__ import annotations

import pytest

from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.training import TrainSetup
from roofline.training.setup import lora_matrices_per_token
from roofline.training.step import training_ops

TOKENS = 2048


def _flops(s: TrainSetup, phase: str, name: str) -> float:
    return sum(op.flops * op.count for op in training_ops(s) if op.phase == phase and name in op.name)


def test_frozen_matrices_only_pass_the_gradient_of_their_input():
    m = get_model("llama-3.1-8b")
    full = TrainSetup(m, seq_len=TOKENS, micro_batch=1)
    lora_q = TrainSetup(m, seq_len=TOKENS, micro_batch=1, method="lora", lora_targets=("q",))
    every = TrainSetup(
        m, seq_len=TOKENS, micro_batch=1, method="lora", lora_targets=("q", "k", "v", "o", "gate", "up", "down")
    )
    for name in ("QKV projection", "MLP gate+up projection", "MLP down projection"):
        forward = _flops(full, "forward", name)
        assert _flops(full, "backward", name) == pytest.approx(2 * forward)  # input and weight
        assert _flops(lora_q, "backward", name) == pytest.approx(forward)  # input only
        assert _flops(every, "backward", name) == pytest.approx(forward)  # adapted, still frozen


def test_adapter_flops_by_hand():
    m = get_model("llama-3.1-8b")  # q: 4,096 -> 32 heads x 128 = 4,096; v: 4,096 -> 8 x 128 = 1,024
    s = TrainSetup(m, seq_len=TOKENS, micro_batch=1, method="lora", lora_rank=16, lora_targets=("q", "v"))
    forward = 2 * TOKENS * 16 * ((4096 + 4096) + (4096 + 1024)) * 32
    assert forward == 27_917_287_424
    assert _flops(s, "forward", "LoRA adapter") == pytest.approx(forward)
    assert _flops(s, "backward", "LoRA adapter") == pytest.approx(2 * forward)
    # More targets, more adapter work; never any base weight gradient.
    wide = TrainSetup(m, seq_len=TOKENS, micro_batch=1, method="lora", lora_rank=16, lora_targets=("q", "k", "v", "o"))
    assert _flops(wide, "forward", "LoRA adapter") > forward


def test_a_routed_expert_adapter_works_for_the_tokens_sent_to_it():
    m = get_model("qwen3-30b-a3b")  # 128 experts, 8 a token, experts 2,048 x 768
    ((kind, n_in, n_out, instances, share),) = lora_matrices_per_token(m, ("down",))
    assert (kind, n_in, n_out) == ("down@experts", 768, 2048)
    assert instances == 48 * 128 and share == 8 / 128  # 48 layers of 128 experts, each a 1/16 share
    s = TrainSetup(m, seq_len=TOKENS, micro_batch=1, method="lora", lora_rank=16, lora_targets=("down",))
    (op,) = [op for op in training_ops(s) if op.name == "forward: LoRA adapter on down (experts), r=16"]
    assert op.count == 6144 and op.launches == 2 and op.meta["m"] == TOKENS / 16  # one occurrence a matrix
    assert op.flops * op.count == pytest.approx(2 * TOKENS * 16 * (768 + 2048) * 48 * 8)


def test_full_recomputation_runs_the_adapters_forward_again():
    m = get_model("llama-3.1-8b")
    s = TrainSetup(m, seq_len=TOKENS, micro_batch=1, method="lora", lora_targets=("q",), recompute="full")
    assert _flops(s, "recompute", "LoRA adapter") == pytest.approx(_flops(s, "forward", "LoRA adapter"))
    backward = [op for op in training_ops(s) if op.phase == "backward" and "LoRA adapter" in op.name]
    assert backward and all(op.launches == 4 for op in backward)  # dX through B and A, then dA and dB


def test_lora_step_is_faster_than_full_and_slower_with_more_targets():
    from roofline.training import analyze_training

    m, h100 = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    full = analyze_training(TrainSetup(m, seq_len=TOKENS, micro_batch=1), h100).step_time_s
    q = analyze_training(TrainSetup(m, seq_len=TOKENS, micro_batch=1, method="lora", lora_targets=("q",)), h100)
    every = analyze_training(
        TrainSetup(
            m, seq_len=TOKENS, micro_batch=1, method="lora", lora_targets=("q", "k", "v", "o", "gate", "up", "down")
        ),
        h100,
    )
    assert q.step_time_s < every.step_time_s < full


def test_adapter_flops_against_flopcountermode():
    """A real LoRA layer's forward and backward counted by torch, against the training step's ops
    for a one-layer model of the same shape (its q projection adapted)."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from tests.test_flop_counter import NH, H, tiny_model

    tokens, hidden, r = 64, H, 8
    m = tiny_model(moe=False)  # one layer, hidden 256, 8 heads: q is 256 x 256
    assert NH * m.head_dim == hidden
    s = TrainSetup(m, seq_len=tokens, micro_batch=1, method="lora", lora_rank=r, lora_targets=("q",))
    base = torch.nn.Linear(hidden, hidden, bias=False)
    base.weight.requires_grad_(False)  # frozen, as LoRA keeps it
    a = torch.nn.Parameter(torch.randn(hidden, r))
    b = torch.nn.Parameter(torch.randn(r, hidden))
    x = torch.randn(tokens, hidden, requires_grad=True)  # a gradient flows on to earlier layers
    with FlopCounterMode(display=False) as forward_counter:
        y = base(x) + (x @ a) @ b
    with FlopCounterMode(display=False) as backward_counter:
        y.sum().backward()
    base_forward = 2 * tokens * hidden * hidden
    adapter_forward = forward_counter.get_total_flops() - base_forward
    assert _flops(s, "forward", "LoRA adapter") == pytest.approx(adapter_forward)
    # Backward: the frozen matrix passes the input's gradient only; the adapter twice its forward.
    assert _flops(s, "backward", "LoRA adapter") == pytest.approx(backward_counter.get_total_flops() - base_forward)
