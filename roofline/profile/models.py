"""A model from its shapes with random weights, and the step to profile: a forward pass, or a
full training step (forward, loss, backward, AdamW). Built with ``transformers`` from a Hugging
Face config where it is installed and asked for; the project's own Llama-shaped model
(``roofline.measure.training``) otherwise. Torch is imported here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from roofline.format import count_of
from roofline.models import ModelConfig


@dataclass
class Step:
    run: Callable[[], object]
    module: nn.Module
    label: str


def _rotary(m: ModelConfig, seq: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    pos = torch.arange(seq, device=device, dtype=torch.float32)
    dim = m.head_dim
    freqs = pos[:, None] / (10000.0 ** (torch.arange(0, dim, 2, device=device) / dim))[None, :]
    angles = torch.cat([freqs, freqs], dim=-1)
    return angles.cos(), angles.sin()


def project_step(
    m: ModelConfig, batch: int, seq: int, train: bool, layers: int | None = None, device: str = "cpu"
) -> Step:
    """The project's model of ``m`` (its first ``layers`` layers) in fp32: forward (the loss over
    every token, no gradients) or a training step with AdamW."""
    from roofline.measure.training import TrainModel, _optimizer
    from roofline.training import TrainSetup

    if layers is not None:
        m = m.model_copy(update={"num_layers": max(1, min(layers, m.num_layers))})
    setup = TrainSetup(model=m, seq_len=seq, micro_batch=batch, precision="fp32", fused_optimizer=False)
    dev = torch.device(device)
    torch.manual_seed(0)
    with dev:
        model = TrainModel(setup)
    ids = torch.randint(0, m.vocab_size, (batch, seq), device=dev)
    cos, sin = _rotary(m, seq, dev)
    what = "training step" if train else "forward"
    label = f"{m.id}, {count_of(m.num_layers, 'layer')}, batch {batch} × {seq} tokens, fp32, {what}"
    if not train:

        def forward():
            with torch.no_grad():
                return model(ids, cos, sin)

        return Step(forward, model, label)
    optimizer = _optimizer(setup, list(model.parameters()), dev)

    def train_step():
        loss = model(ids, cos, sin)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return Step(train_step, model, label)


def transformers_step(
    config: dict, batch: int, seq: int, train: bool, layers: int | None = None, device: str = "cpu"
) -> Step:
    """The Hugging Face model of ``config`` with random weights, through ``transformers``."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = dict(config)
    if layers is not None:
        config["num_hidden_layers"] = max(1, min(layers, int(config.get("num_hidden_layers", layers))))
    kind = config.pop("model_type")
    hf_config = AutoConfig.for_model(kind, **{k: v for k, v in config.items() if k != "architectures"})
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(hf_config).to(device=device, dtype=torch.float32)
    ids = torch.randint(0, hf_config.vocab_size, (batch, seq), device=device)
    label = f"{kind} (transformers), {count_of(hf_config.num_hidden_layers, 'layer')}, batch {batch} × {seq} tokens"
    if not train:
        model.eval()

        def forward():
            with torch.no_grad():
                return model(input_ids=ids).logits

        return Step(forward, model, label + ", forward")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)

    def train_step():
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return Step(train_step, model, label + ", training step")
