"""Time a 64 x 64 (batch x context) decode sweep of an 80-layer model, and a request analysis.

Run from the repository root: python -m benchmarks.decode_sweep
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from roofline.engine import Ceilings, evaluate
from roofline.hardware import get_hardware
from roofline.inference import analyze_request
from roofline.llm import StepConfig, step_ops
from roofline.models import get_model


def timed(fn, repeats: int = 20) -> tuple[float, float]:
    fn()  # warm-up
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), min(samples)


def main() -> None:
    model = get_model("llama-3.1-70b")  # 80 layers
    hw = get_hardware("h100-sxm")
    ceilings = Ceilings.from_hardware(hw)
    batches = np.round(np.geomspace(1, 1024, 64)).astype(int)[:, None]
    contexts = np.round(np.geomspace(128, 131_000, 64)).astype(int)[None, :]

    def sweep():
        return evaluate(step_ops(StepConfig(model, "decode", batches, contexts, tp=1)), ceilings).step_time_s

    median, best = timed(sweep)
    print(
        f"decode sweep 64 x 64 (batch x context), {model.name} ({model.num_layers} layers): "
        f"median {median * 1e3:.1f} ms, best {best * 1e3:.1f} ms, grid {sweep().shape}"
    )

    def request():
        return analyze_request(model, hw, batch=32, prompt_len=2048, output_len=1024, tp=4)

    median, best = timed(request, repeats=10)
    print(
        f"request analysis (prefill + 1023 decode steps), {model.name} TP=4: "
        f"median {median * 1e3:.1f} ms, best {best * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
