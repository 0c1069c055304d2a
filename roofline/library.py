"""The library API for notebooks and scripts: the same engine functions the command line and the
pages call, taking plain arguments and returning plain data (what ``--json`` prints).

    import roofline
    step = roofline.analyze("llama-3.1-8b", "h100-sxm", phase="decode", seq_len=4096, batch=32)
    plans = roofline.serve("llama-3.1-8b", ["h100-sxm", "h200-sxm"], ttft_ms=500, tpot_ms=30)
    prof = roofline.profile(model, inputs)        # torch is imported only here
    report = roofline.profile.summarize(prof, roofline.profile.roofs_for(prof))
"""

from __future__ import annotations

from collections.abc import Sequence

from roofline.defaults import DEFAULT_CUDA_GRAPHS
from roofline.hardware import get_hardware, load_hardware
from roofline.models import ModelConfig, get_model
from roofline.settings import Settings
from roofline.workload import Precision, Workload


def _model(model: str | ModelConfig) -> ModelConfig:
    return model if isinstance(model, ModelConfig) else get_model(model)


def analyze(
    model: str | ModelConfig,
    hardware: str = "h100-sxm",
    phase: str = "decode",
    seq_len: int = 1024,
    batch: int = 1,
    tp: int = 1,
    weight_dtype: str = "bf16",
    act_dtype: str = "auto",
    kv_dtype: str = "bf16",
    cuda_graphs: bool = DEFAULT_CUDA_GRAPHS,
    engine: str = "auto",
    moe_kernel: str = "auto",
    moe_routing: str = "auto",
) -> dict:
    """Every op of one prefill or decode step on one device: time, regime, the step's totals and
    memory (``python -m roofline analyze --json``, with the same defaults: decode replayed from a
    CUDA graph unless ``cuda_graphs=False``; ``engine`` as ``--engine``: the newest vLLM's measured
    kernels where the device has them, "ideal" for the datasheet alone; ``moe_kernel`` and
    ``moe_routing`` as ``--moe-kernel`` and ``--moe-routing``)."""
    from roofline.inference import analyze_step

    precision = Precision(weight_dtype=weight_dtype, act_dtype=act_dtype, kv_dtype=kv_dtype)
    w = Workload(_model(model), phase, batch, seq_len, 1, precision, tp, cuda_graphs=cuda_graphs)
    settings = Settings(engine=engine, moe_kernel=moe_kernel, moe_routing=moe_routing)
    return analyze_step(w, get_hardware(hardware), settings).to_json()


def serve(
    model: str | ModelConfig,
    hardware: Sequence[str] | None = None,
    prompt_len: int = 1024,
    output_len: int = 256,
    ttft_ms: float = 2000.0,
    tpot_ms: float = 50.0,
    tps: Sequence[int] = (1, 2, 4, 8),
    engine: str = "auto",
    moe_kernel: str = "auto",
    moe_routing: str = "auto",
) -> list[dict]:
    """Per device, the cheapest setup (TP, batch, dtypes) that meets the TTFT and TPOT targets
    (the "best" of ``python -m roofline serve --json``; the engine and MoE settings as ``analyze``'s)."""
    from roofline.serving import Traffic, best_under_targets, load_prices

    m = _model(model)
    devices = [get_hardware(h) for h in hardware] if hardware else list(load_hardware().values())
    prices = {k: v.usd_per_hour for k, v in load_prices().items()}
    usable = tuple(tp for tp in tps if _splits(m, tp))  # SmolLM2's 9 heads do not split 2 ways
    if not usable:
        raise ValueError(f"tps: none of {tuple(tps)} divides {m.id}'s attention heads")
    traffic = Traffic(prompt_len, output_len)
    settings = Settings(engine=engine, moe_kernel=moe_kernel, moe_routing=moe_routing)
    best = best_under_targets(m, devices, traffic, ttft_ms / 1e3, tpot_ms / 1e3, settings, prices, usable)
    return [b.to_json() for b in best]


def _splits(model: ModelConfig, tp: int) -> bool:
    from roofline.workload import validate_tp

    try:
        validate_tp(model, tp)
    except ValueError:
        return False
    return True
