"""Loading a checkpoint: the peak host RAM and device memory of each way to do it.

A model that fits once loaded can still fail to load, because a naive load holds several copies
of the weights at once. With W the checkpoint's bytes, M the model's bytes in the dtype it is
loaded in (M = W when the dtypes match) and F its bytes when built in fp32 (PyTorch's default):

- naive (build the model in fp32, ``torch.load`` the file, ``load_state_dict``, ``.to(device)``):
  host F + W, device M;
- build in fp32, cast (``model.to(torch.bfloat16)``), then as naive: host the larger of F plus
  the largest tensor's cast and M + W, device M. ``Module.to`` converts one parameter at a time
  and swaps the new tensor in (``param.data = ...``), so each fp32 tensor is freed as soon as its
  16-bit copy exists: the cast peaks at its first (the embedding, the largest) tensor, and the
  checkpoint is read after it, into the cast model;
- build in the target dtype first (``torch_dtype=``), then as naive: host M + W, device M;
- meta-device init, ``load_state_dict(assign=True)`` (Hugging Face ``low_cpu_mem_usage``): host
  W plus the largest tensor's cast, device M;
- ``torch.load(mmap=True)`` or safetensors, assigned: host W as file-backed pages read on
  demand, device M;
- straight to the device (safetensors ``device=``), meta init: host the largest tensor, device M
  plus the largest tensor's cast;
- sharded, one shard at a time, meta init: host the largest shard, device M.

A ``torch.load`` of a ``.pt`` or ``.bin`` file always passes ``weights_only=True`` here: a
checkpoint is data, and unpickling arbitrary objects runs code.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.dtypes import bytes_per_element
from roofline.models import ModelConfig

METHODS: dict[str, str] = {
    "naive": "build the model in fp32, torch.load, load_state_dict, .to(device)",
    "fp32-cast": "build the model in fp32, cast it to the target dtype, torch.load, load_state_dict, .to(device)",
    "dtype-first": "build the model in the target dtype, torch.load, load_state_dict, .to(device)",
    "meta": "meta-device init, torch.load, load_state_dict(assign=True) (low_cpu_mem_usage)",
    "mmap": "meta-device init, torch.load(mmap=True) or safetensors, assign: pages read on demand",
    "direct": "meta-device init, safetensors straight to the device (one tensor at a time)",
    "sharded": "meta-device init, one shard at a time",
}
CHECKPOINT_DTYPES = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class LoadPeak:
    method: str
    description: str
    host_bytes: float
    device_bytes: float
    host_file_backed: bool  # the host peak is page cache the kernel can drop, not anonymous memory

    def to_json(self) -> dict[str, object]:
        return {
            "method": self.method,
            "description": self.description,
            "host_peak_bytes": self.host_bytes,
            "device_peak_bytes": self.device_bytes,
            "host_file_backed": self.host_file_backed,
        }


def largest_tensor_params(m: ModelConfig) -> int:
    """Parameters of the largest single tensor: the embedding (or LM head), or an MLP matrix."""
    candidates = [m.vocab_size * m.hidden_size, m.hidden_size * m.intermediate_size]
    if m.moe:
        candidates.append(m.hidden_size * m.moe.expert_intermediate_size)
    return max(candidates)


def load_peaks(
    m: ModelConfig,
    checkpoint_dtype: str = "bf16",
    load_dtype: str = "bf16",
    shards: int = 1,
    device_is_host: bool = False,
    tp: int = 1,
) -> list[LoadPeak]:
    """Host and device peaks of every loading method for ``m``. With ``device_is_host`` (a CPU
    run) the loaded model lives in host memory too, so the host peak includes it. With ``tp``
    devices on one host, each loaded by its own process: every device holds 1/tp of the model,
    and every process that reads the whole checkpoint holds its own copy in host memory (the
    trap of a naive multi-GPU load); memory-mapped files are one page cache, shared."""
    for name, value in (("checkpoint dtype", checkpoint_dtype), ("load dtype", load_dtype)):
        if value not in CHECKPOINT_DTYPES:
            raise ValueError(f"{name}: {value!r} is not allowed; allowed: {', '.join(CHECKPOINT_DTYPES)}")
    for name, value in (("shards", shards), ("tp", tp)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100_000:
            raise ValueError(f"{name} must be an integer in [1, 100000], got {value!r}")
    p = m.param_counts()["total"]
    w = p * bytes_per_element(checkpoint_dtype)
    loaded = p * bytes_per_element(load_dtype)
    fp32 = p * 4.0
    largest = largest_tensor_params(m)
    cast = largest * bytes_per_element(load_dtype) if checkpoint_dtype != load_dtype else 0.0
    shard = max(w / shards, largest * bytes_per_element(checkpoint_dtype))
    # Build in fp32 and cast: the cast holds the fp32 model and one tensor's copy; the checkpoint
    # is read into the cast model. A cast to fp32 is no cast: as naive.
    build_cast = fp32 + (largest * bytes_per_element(load_dtype) if load_dtype != "fp32" else 0.0)
    fp32_cast = max(build_cast, (loaded if load_dtype != "fp32" else fp32) + w)
    if device_is_host:
        # The state dict's tensors become the model's (assign) or are copied into it.
        model = loaded if checkpoint_dtype == load_dtype else loaded + cast
        peaks = {
            "naive": fp32 + w,
            "fp32-cast": fp32_cast,
            "dtype-first": loaded + w,
            "meta": model if checkpoint_dtype == load_dtype else w + loaded,
            "mmap": model if checkpoint_dtype == load_dtype else w + loaded,
            "direct": model if checkpoint_dtype == load_dtype else w + loaded,
            "sharded": model if checkpoint_dtype == load_dtype else w + loaded,
        }
        return [LoadPeak(k, METHODS[k], v, v, k in ("mmap", "direct")) for k, v in peaks.items()]
    device = loaded / tp
    return [
        LoadPeak("naive", METHODS["naive"], tp * (fp32 + w), device, False),
        LoadPeak("fp32-cast", METHODS["fp32-cast"], tp * fp32_cast, device, False),
        LoadPeak("dtype-first", METHODS["dtype-first"], tp * (loaded + w), device, False),
        LoadPeak("meta", METHODS["meta"], tp * (w + cast), device, False),
        LoadPeak("mmap", METHODS["mmap"], w + tp * cast, device, True),
        LoadPeak("direct", METHODS["direct"], tp * largest * bytes_per_element(checkpoint_dtype), device + cast, True),
        LoadPeak("sharded", METHODS["sharded"], tp * (shard + cast), device, False),
    ]
