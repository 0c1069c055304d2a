"""Turn a kernel-sweeps file measured on a GPU into a results file the dashboard opens.

    python scripts/import_kernel_sweeps.py SWEEPS.json OUT.json

The input holds per-kernel device times (CUDA-graph replay of n calls / n) of Llama 3.1 8B's
linear layers over M, decode and prefill SDPA, and elementwise kernels, plus the host's dispatch
cost per eager op. The output is a ``roofline.measure`` results file with those sweeps as
kernel points and the calibration fitted on them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from roofline.calibration import KernelPoint, elementwise_flops, fit_calibration
from roofline.measure.devices import match_hardware_id
from roofline.measure.schema import DeviceInfo, Results, save_results

ELEMENTWISE = {"rms_norm": "norm", "residual_add": "residual", "silu_mul": "activation"}


def points(data: dict) -> list[KernelPoint]:
    out = []
    for r in data["linear"]:
        out.append(
            KernelPoint(
                op_class="linear",
                name=r["op"],
                shape={"m": r["m"], "n": r["n"], "k": r["k"]},
                flops=r["flops"],
                bytes=r["bytes"],
                time_s=r["time_s"],
            )
        )
    for r in data["decode_attention"]:
        qo = 2 * r["batch"] * r["q_heads"] * r["head_dim"] * 2  # the query read and the output written, bf16
        out.append(
            KernelPoint(
                op_class="attention_decode",
                name="decode attention",
                shape={"batch": r["batch"], "context": r["context"]},
                flops=r["flops"],
                bytes=r["kv_bytes"] + qo,
                parallel=r["batch"] * r["kv_heads"],
                time_s=r["time_s"],
            )
        )
    for r in data["prefill_attention"]:
        moved = r["batch"] * r["seq"] * (2 * r["q_heads"] + 2 * r["kv_heads"]) * r["head_dim"] * 2
        out.append(
            KernelPoint(
                op_class="attention_prefill",
                name="prefill attention",
                shape={"batch": r["batch"], "seq": r["seq"]},
                flops=r["flops"],
                bytes=moved,
                parallel=r["batch"] * r["q_heads"] * float(np.ceil(r["seq"] / 128)),
                time_s=r["time_s"],
            )
        )
    for r in data["elementwise"]:
        out.append(
            KernelPoint(
                op_class=ELEMENTWISE[r["op"]],
                name=r["op"],
                shape={"tokens": r["tokens"]},
                flops=elementwise_flops(ELEMENTWISE[r["op"]], r["tokens"] * r.get("hidden", r.get("intermediate", 0))),
                bytes=r["bytes"],
                time_s=r["time_s"],
            )
        )
    return out


def main(source: str, target: str) -> None:
    data = json.loads(Path(source).read_text())
    hardware = match_hardware_id(data["device"])
    sweeps = points(data)
    dispatch = data.get("dispatch", {})
    source_note = f"{data['device']}, torch {data['torch']}: {data['timing']}"
    results = Results(
        mode="sweeps",
        device=DeviceInfo(
            name=data["device"],
            kind="cuda",
            torch_version=data["torch"],
            date="not recorded",
            matched_hardware_id=hardware,
        ),
        notes=[
            f"Kernel sweeps measured on {data['device']} (torch {data['torch']}): {data['timing']}. Llama 3.1 8B's "
            "linear layers (F.linear, bf16) over M, decode SDPA with enable_gqa over batch x context, causal prefill "
            "SDPA, and RMSNorm / residual add / SiLU x up over tokens.",
            "Host dispatch of one eager op on that host: "
            + ", ".join(f"{k.removesuffix('_host_s')} {v * 1e6:.1f} µs" for k, v in dispatch.items()),
            "No whole model step and no ceilings were measured in this run; the calibration is fitted on the sweeps.",
        ],
        sweeps=sweeps,
        calibration=fit_calibration(sweeps, data["device"], source_note, hardware),
    )
    save_results(results, target)


if __name__ == "__main__":
    main(*sys.argv[1:3])
