"""Your own model on the roofline, from a notebook or a script: profile a small Llama-shaped
model here (a forward pass and a training step), then ask the engine about the same model on a
datacenter GPU.

    python examples/profile_model.py [--layers 2] [--seq 32]

Needs torch (``pip install 'roofline[measure]'``); runs on a CPU in a few seconds.
"""

from __future__ import annotations

import argparse

import torch

import roofline
from roofline.models import get_model
from roofline.profile.models import project_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--seq", type=int, default=16)
    args = parser.parse_args()

    # 1. Any nn.Module with its inputs.
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256))
    prof = roofline.profile(mlp, torch.randn(32, 256), steps=3)
    roofs = roofline.profile.roofs_for(prof)  # this CPU's roofs, measured now
    report = roofline.profile.summarize(prof, roofs, top=3)
    print(f"MLP: {report['wall_s'] * 1e3:.2f} ms per step, {report['step_bound']}-bound")
    for op in report["top_ops"]:
        print(f"  {op['name']:<16} {op['shapes']:<34} {op['time_s'] * 1e6:9.1f} µs  {op['bound']}")

    # 2. A full training step of a model built from the database's shapes (SmolLM2-135M, fewer layers).
    step = project_step(get_model("smollm2-135m"), batch=1, seq=args.seq, train=True, layers=args.layers)
    prof = roofline.profile(step.run, module=step.module, steps=1, label=step.label)
    report = roofline.profile.summarize(prof, roofs, top=5)
    print(f"\n{step.label}: {report['wall_s'] * 1e3:.1f} ms per step")
    print("  time by regime: " + ", ".join(f"{r} {s * 1e3:.1f} ms" for r, s in report["regime_split_s"].items()))
    for tip in report["what_would_move_it"]:
        print(f"  - {tip}")

    # 3. The engine's view of a datacenter GPU: one decode step, and the cheapest serving setup.
    decode = roofline.analyze("llama-3.1-8b", "h100-sxm", phase="decode", seq_len=4096, batch=32)
    print(
        f"\nLlama 3.1 8B decode on an H100, batch 32 at 4k: {decode['total']['time_s'] * 1e3:.2f} ms per step, "
        f"{decode['total']['bound_label']}"
    )
    (best,) = roofline.serve("llama-3.1-8b", ["h100-sxm"], ttft_ms=500, tpot_ms=30)
    print(f"serving under 500 ms TTFT / 30 ms TPOT: TP={best['tp']}, batch {best['batch']}, {best['bound']}-bound")


if __name__ == "__main__":
    main()
