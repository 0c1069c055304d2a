"""All-reduce bandwidth over message sizes with torch.distributed (NCCL on GPUs, gloo on CPUs).

Run with torchrun, one process per device:
    torchrun --nproc-per-node 8 -m roofline.measure.collectives --out allreduce.json
Rank 0 writes a results file in the measurement format; the LLM page and ``Settings`` take its
link bandwidth and latency as the communication ceiling.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

from roofline.measure.local_device import device_info
from roofline.measure.schema import CollectivePoint, Collectives, Results, save_results
from roofline.measure.timing import time_device


def default_sizes(device_type: str) -> list[int]:
    """Message sizes in bytes: 4 KiB .. 1 GiB on GPUs, 4 KiB .. 16 MiB on CPUs."""
    top = 30 if device_type == "cuda" else 24
    return [2**p for p in range(12, top + 1, 2)]


def measure_all_reduce(sizes: list[int], device: torch.device, repeats: int) -> list[CollectivePoint]:
    world = dist.get_world_size()
    points = []
    for size in sizes:
        buffers = [torch.randn(size // 4, device=device) for _ in range(2)]
        timing = time_device(lambda b: dist.all_reduce(b), buffers, device, calls=2, repeats=repeats, graph=False)
        # Every rank must agree on the time: take the slowest rank's median.
        t = torch.tensor([timing.median_s], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        seconds = float(t.item())
        bus = 2 * (world - 1) / world * size / seconds / 1e9
        points.append(CollectivePoint(message_bytes=float(size), time_s=seconds, bus_bandwidth_gbps=bus))
    return points


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="torchrun ... -m roofline.measure.collectives", description=__doc__)
    parser.add_argument("--out", default="allreduce.json", help="results file written by rank 0")
    parser.add_argument("--backend", choices=("nccl", "gloo"), default=None)
    parser.add_argument("--max-bytes", type=int, default=None, help="largest message (default 1 GiB GPU, 16 MiB CPU)")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    if "RANK" not in os.environ:
        print(
            "error: run this under torchrun, e.g. torchrun --nproc-per-node 2 -m roofline.measure.collectives",
            file=sys.stderr,
        )
        return 2
    use_cuda = torch.cuda.is_available() and args.backend != "gloo"
    backend = args.backend or ("nccl" if use_cuda else "gloo")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(backend=backend)
    try:
        sizes = default_sizes(device.type)
        if args.max_bytes:
            sizes = [s for s in sizes if s <= args.max_bytes] or [args.max_bytes]
        points = measure_all_reduce(sizes, device, args.repeats)
        if dist.get_rank() == 0:
            results = Results(
                mode="collectives",
                device=device_info(device),
                collectives=Collectives(backend=backend, world_size=dist.get_world_size(), points=points),
            )
            save_results(results, args.out)
            best = max(p.bus_bandwidth_gbps for p in points)
            print(
                f"all-reduce over {dist.get_world_size()} ranks ({backend}): bus bandwidth up to {best:.2f} GB/s, "
                f"latency {points[0].time_s * 1e6:.1f} µs at {int(points[0].message_bytes)} B; wrote {args.out}"
            )
            print(np.round([p.bus_bandwidth_gbps for p in points], 3).tolist())
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
