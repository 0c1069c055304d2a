"""Training memory and the training step: what fits, what binds, which lever fixes it.

- ``setup``: one training configuration and the parameters it trains
- ``activations``: what forward saves for backward, tensor by tensor, and the logits at the loss
- ``memory``: memory per device over the step, term by term, and its peak
- ``step``: the step's ops on the roofline (forward, backward, recomputation, optimizer,
  gradient communication, an offloaded optimizer)
- ``analysis``: memory, fit and step time of one setup on one device
- ``levers``: memory levers alone and combined until the setup fits
"""

from roofline.training.activations import activation_bytes, layer_saved_bytes, logits_bytes
from roofline.training.analysis import TrainResult, analyze_training, largest_micro_batch
from roofline.training.levers import TrainLever, levers, plan_to_fit
from roofline.training.memory import PHASES, TrainMemory, training_memory
from roofline.training.setup import (
    LORA_TARGETS,
    METHODS,
    NF4_BITS,
    OPTIMIZERS,
    RECOMPUTE,
    TRAIN_PRECISIONS,
    ZERO_STAGES,
    Params,
    TrainSetup,
    default_lora_targets,
    linear_shapes,
    lora_params,
    lora_target_choices,
    params,
)
from roofline.training.step import offload_time_s, optimizer_bytes_moved, training_ops

__all__ = [
    "LORA_TARGETS",
    "METHODS",
    "NF4_BITS",
    "OPTIMIZERS",
    "PHASES",
    "RECOMPUTE",
    "TRAIN_PRECISIONS",
    "ZERO_STAGES",
    "Params",
    "TrainLever",
    "TrainMemory",
    "TrainResult",
    "TrainSetup",
    "activation_bytes",
    "analyze_training",
    "default_lora_targets",
    "largest_micro_batch",
    "layer_saved_bytes",
    "levers",
    "linear_shapes",
    "logits_bytes",
    "lora_params",
    "lora_target_choices",
    "offload_time_s",
    "optimizer_bytes_moved",
    "params",
    "plan_to_fit",
    "training_memory",
    "training_ops",
]
