"""Fingerprints of the serving simulation's results, to check that a change meant to leave them
alone (a speed-up, a refactor) does: every scheduler (vLLM, SGLang with and without its intake
interval, TensorRT-LLM with and without batch waiting), open, closed and bursty loads, fleets of
three and four replicas behind each router, and runs that preempt on a small KV cache (an L4).
Each line is a hash of every array of one run; run it before and after the change and compare.

Run from the repository root: python -m benchmarks.simulation_fingerprint OUT.json
"""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np

from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.serving.simulation.api import simulate_serving
from roofline.serving.simulation.load import Lengths, Load, make_requests
from roofline.settings import Settings

ENGINES = (
    ("vllm", {}),
    ("sglang", {}),
    ("sglang", {"recv_interval": 10}),
    ("trtllm", {}),
    ("trtllm", {"batch_wait_iters": 20, "batch_wait_ratio": 0.9}),
)
LOADS = (
    Load("poisson", 800, Lengths(1024), Lengths(256), rate_per_s=30.0),
    Load("concurrency", 600, Lengths(200, 2000), Lengths(50, 300), concurrency=64),
    Load("gamma", 500, Lengths(8000), Lengths(1000), rate_per_s=3.0, burstiness=0.5),
)
FLEET_LOADS = (
    ("vllm", {}, Load("poisson", 1000, Lengths(1024), Lengths(256), rate_per_s=80.0), 4),
    ("sglang", {"recv_interval": 5}, Load("concurrency", 500, Lengths(1024), Lengths(256), concurrency=100), 3),
)
# A small cache that preempts: Llama 3.1 8B on one L4 with long prompts and outputs.
SHORT_OF_CACHE = (
    Load("concurrency", 300, Lengths(2000, 6000), Lengths(500, 3000), concurrency=64),
    Load("poisson", 300, Lengths(2000, 6000), Lengths(500, 3000), rate_per_s=2.0),
)


def fingerprint(run) -> str:
    digest = hashlib.sha1()
    for name in run.__dataclass_fields__:
        value = getattr(run, name)
        if isinstance(value, np.ndarray):
            digest.update(np.ascontiguousarray(value.astype(float)).tobytes())
        else:
            digest.update(repr(value).encode())
    return digest.hexdigest()[:16]


def fingerprints() -> dict[str, str]:
    model, h100, l4 = get_model("llama-3.1-8b"), get_hardware("h100-sxm"), get_hardware("l4")
    out = {}
    for engine, knobs in ENGINES:
        for load in LOADS:
            sim = simulate_serving(model, h100, make_requests(load), settings=Settings(engine=engine, **knobs))
            out[f"{engine} {knobs} {load.kind}"] = fingerprint(sim.run)
    for engine, knobs, load, replicas in FLEET_LOADS:
        for router in ("round-robin", "random", "least-loaded"):
            settings = Settings(engine=engine, **knobs)
            requests = make_requests(load)
            sim = simulate_serving(model, h100, requests, settings=settings, replicas=replicas, router=router)
            out[f"{engine} {knobs} {load.kind} x{replicas} {router}"] = fingerprint(sim.run)
    for engine in ("vllm", "sglang", "trtllm"):
        for load, replicas, router in zip(SHORT_OF_CACHE, (1, 2), ("round-robin", "least-loaded")):
            sim = simulate_serving(
                model, l4, make_requests(load), settings=Settings(engine=engine), replicas=replicas, router=router
            )
            key = f"{engine} l4 {load.kind} x{replicas} {router}"
            out[key] = f"{fingerprint(sim.run)} preemptions={int(sim.run.preemptions.sum())}"
    return out


def main() -> None:
    found = fingerprints()
    text = json.dumps(found, indent=1)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            fh.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
