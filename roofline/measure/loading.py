"""Loading a real checkpoint, each method in a fresh process: its peak resident memory beside
the prediction of ``roofline.loading``.

A checkpoint of the model's shapes (random weights, in the checkpoint dtype) is written once with
``torch.save`` and with safetensors (whole, and in two shards); then each method loads it in a
child process started with glibc's mmap threshold fixed at 64 KiB (freed tensors go back to the
system at once) and reports its peak resident memory (``VmHWM``) less its resident memory before
the load, after every weight has been read once (a model that was never read has not loaded).
``torch.load`` always runs with ``weights_only=True``.

Run as ``python -m roofline.measure.loading`` (the parent does this).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

from roofline.dtypes import bytes_per_element
from roofline.loading import load_peaks
from roofline.measure.child import run_child
from roofline.measure.room import check_disk, check_ram
from roofline.measure.training import TrainModel, _rss_bytes
from roofline.models import ModelConfig
from roofline.training import TrainSetup

TORCH = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
MEASURED = ("naive", "fp32-cast", "dtype-first", "meta", "mmap", "sharded")


def _build(m: ModelConfig, dtype: torch.dtype, device: str = "cpu") -> torch.nn.Module:
    """The model built in ``dtype`` directly (as ``torch_dtype=`` does), on ``device``."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            return TrainModel(TrainSetup(m, seq_len=1, precision="fp32"))
    finally:
        torch.set_default_dtype(default)


def write_checkpoints(m: ModelConfig, dtype: str, folder: Path) -> dict[str, list[str]]:
    """The same weights as a .pt file, a .safetensors file and two .safetensors shards."""
    from safetensors.torch import save_file

    torch.manual_seed(0)
    model = _build(m, TORCH[dtype])
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    torch.save(state, folder / "model.pt")
    save_file(state, str(folder / "model.safetensors"))
    keys = list(state)
    half = len(keys) // 2
    save_file({k: state[k] for k in keys[:half]}, str(folder / "shard-1.safetensors"))
    save_file({k: state[k] for k in keys[half:]}, str(folder / "shard-2.safetensors"))
    return {
        "pt": [str(folder / "model.pt")],
        "safetensors": [str(folder / "model.safetensors")],
        "shards": [str(folder / "shard-1.safetensors"), str(folder / "shard-2.safetensors")],
    }


def _touch(model: torch.nn.Module) -> None:
    """Read every weight once, as a first forward would."""
    with torch.no_grad():
        for p in model.parameters():
            p.sum()  # in the tensor's own dtype: no full-size upcast copy


def run_method(method: str, m: ModelConfig, load_dtype: str, files: dict[str, list[str]]) -> float:
    """Peak resident bytes of one load, in this process (the parent runs each in its own)."""
    dtype = TORCH[load_dtype]
    _warm_up(method, m, load_dtype)
    base = _rss_bytes("VmRSS")
    model = _load(method, m, dtype, files)
    _touch(model)
    return _rss_bytes("VmHWM") - base


def _warm_up(method: str, m: ModelConfig, load_dtype: str) -> None:
    """The same method on a one-layer, small-vocabulary copy of the model: the library code the
    load runs is paged in before the baseline is read (it is the runtime's, not the weights')."""
    small = m.model_copy(update={"num_layers": 1, "vocab_size": 64})
    with tempfile.TemporaryDirectory(prefix="roofline-warm-") as tmp:
        files = write_checkpoints(small, load_dtype, Path(tmp))
        _touch(_load(method, small, TORCH[load_dtype], files))


def _load(method: str, m: ModelConfig, dtype: torch.dtype, files: dict[str, list[str]]) -> torch.nn.Module:
    from safetensors.torch import load_file

    if method == "naive":
        model = _build(m, torch.float32)
        model.load_state_dict(torch.load(files["pt"][0], weights_only=True))
    elif method == "fp32-cast":
        model = _build(m, torch.float32).to(dtype)
        model.load_state_dict(torch.load(files["pt"][0], weights_only=True))
    elif method == "dtype-first":
        model = _build(m, dtype)
        model.load_state_dict(torch.load(files["pt"][0], weights_only=True))
    elif method == "meta":
        model = _build(m, dtype, "meta")
        model.load_state_dict(torch.load(files["pt"][0], weights_only=True), assign=True)
    elif method == "mmap":
        model = _build(m, dtype, "meta")
        model.load_state_dict(torch.load(files["pt"][0], weights_only=True, mmap=True), assign=True)
    elif method == "sharded":
        model = _build(m, dtype, "meta")
        for shard in files["shards"]:
            model.load_state_dict(load_file(shard), assign=True, strict=False)
    else:
        raise ValueError(f"method: {method!r} is not measured; measured: {', '.join(MEASURED)}")
    return model


def check_room(m: ModelConfig, checkpoint_dtype: str, predicted: dict) -> None:
    """Refuse a model this host cannot load each way, or whose three copies of the checkpoint
    (.pt, .safetensors, two shards) its temporary folder cannot hold, before building it."""
    checkpoint = m.param_counts()["total"] * bytes_per_element(checkpoint_dtype)
    # Writing holds the model once (its state dict shares the tensors); the worst load holds more.
    worst = max(p.host_bytes for name, p in predicted.items() if name in MEASURED)
    check_ram(max(worst, checkpoint), f"load --measure of {m.id}")
    check_disk(3 * checkpoint, tempfile.gettempdir(), f"load --measure of {m.id}")


def measure(m: ModelConfig, checkpoint_dtype: str = "bf16", timeout_s: float = 600) -> list[dict]:
    """Each measured method's peak beside its prediction (the model loaded on this host)."""
    predicted = {p.method: p for p in load_peaks(m, checkpoint_dtype, checkpoint_dtype, 2, device_is_host=True)}
    check_room(m, checkpoint_dtype, predicted)
    out = []
    with tempfile.TemporaryDirectory(prefix="roofline-load-") as tmp:
        files = write_checkpoints(m, checkpoint_dtype, Path(tmp))
        for method in MEASURED:
            args = {"method": method, "model": m.model_dump(mode="json"), "dtype": checkpoint_dtype, "files": files}
            stdout = run_child("roofline.measure.loading", [json.dumps(args)], f"loading ({method})", timeout_s)
            peak = float(json.loads(stdout)["peak_bytes"])
            out.append(
                {
                    "method": method,
                    "description": predicted[method].description,
                    "measured_peak_bytes": peak,
                    "predicted_peak_bytes": predicted[method].host_bytes,
                }
            )
    return out


def main() -> None:
    args = json.loads(sys.argv[1])
    model = ModelConfig.model_validate(args["model"])
    torch.set_num_threads(1)
    print(json.dumps({"peak_bytes": run_method(args["method"], model, args["dtype"], args["files"])}))


if __name__ == "__main__":
    main()
