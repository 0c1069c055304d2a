"""The measurement suite: achievable ceilings, kernel sweeps at a model's shapes, a calibration
fitted on the sweeps, and whole model steps measured op by op (eager and from a CUDA graph),
each op beside its prediction on the datasheet, measured and calibrated roofs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from roofline.calibration import fit_calibration
from roofline.engine import Ceilings, evaluate
from roofline.hardware import get_hardware
from roofline.measure import kernels
from roofline.measure.host_probe import HostProbe
from roofline.measure.local_device import device_info, free_memory_bytes
from roofline.measure.model import TORCH_DTYPES, Model, build_model, bytes_to_build
from roofline.measure.schema import MeasuredCeilings, Results, StepMeasurement, StepOp, Timing
from roofline.measure.step import measure_step
from roofline.measure.timing import synchronize
from roofline.models import ModelConfig, get_model
from roofline.ops import PROJECTIONS, step_ops
from roofline.settings import Settings
from roofline.workload import Precision, Workload

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class Plan:
    """Sizes and repeats of one run; quick and full differ, and so do CPU and GPU."""

    copy_bytes: int
    gemm_size: int
    gemm_dtypes: tuple[str, ...]
    dtype: str  # the model's and the sweeps' dtype
    sweep_m: tuple[int, ...]
    decode_batches: tuple[int, ...]
    decode_contexts: tuple[int, ...]
    prefill_shapes: tuple[tuple[int, int], ...]
    elementwise_tokens: tuple[int, ...]
    steps: tuple[tuple[str, int, int], ...]  # (phase, batch, seq_len)
    repeats: int
    max_layers: int | None  # measure at most this many layers of a step, scaling to the rest
    max_weight_bytes: float | None = None  # leave larger weights out of the linear sweep


def make_plan(device: torch.device, quick: bool) -> Plan:
    if device.type == "cuda":
        dtypes = ["fp32", "tf32", "bf16", "fp16"]
        capability = torch.cuda.get_device_capability(device)
        if capability >= (8, 9):
            dtypes.append("fp8")
        if capability >= (8, 0):
            dtypes.append("int8")
        return Plan(
            copy_bytes=(256 if quick else 1024) * 2**20,
            gemm_size=4096 if quick else 8192,
            gemm_dtypes=tuple(dtypes),
            dtype="bf16",
            sweep_m=(1, 8, 64, 512, 4096) if quick else tuple(2**i for i in range(14)),
            decode_batches=(1, 16) if quick else (1, 4, 16, 64),
            decode_contexts=(2048, 8192) if quick else (512, 2048, 8192, 32768),
            prefill_shapes=((1, 2048),) if quick else ((1, 512), (1, 2048), (1, 8192), (8, 2048)),
            # Past the L2 cache at the largest, where a transfer outweighs the kernel's fixed cost.
            elementwise_tokens=(1, 64, 2048, 16384) if quick else (1, 8, 64, 512, 2048, 16384),
            steps=(("decode", 1, 2048), ("prefill", 1, 2048))
            if quick
            else (("decode", 1, 2048), ("decode", 64, 2048), ("prefill", 1, 2048)),
            repeats=10 if quick else 20,
            max_layers=None,
        )
    return Plan(
        copy_bytes=(64 if quick else 256) * 2**20,
        gemm_size=512 if quick else 1024,
        gemm_dtypes=("fp32",) if quick else ("fp32", "bf16"),
        dtype="fp32",
        sweep_m=(1, 2, 8, 32, 128) if quick else (1, 2, 4, 16, 64, 256),
        decode_batches=(1, 4) if quick else (1, 4, 16),
        decode_contexts=(128, 512) if quick else (256, 1024, 4096),
        prefill_shapes=((1, 64), (1, 256)) if quick else ((1, 128), (1, 512), (4, 512)),
        elementwise_tokens=(1, 16, 256) if quick else (1, 16, 256, 2048),
        steps=(("decode", 2, 256), ("prefill", 1, 128)) if quick else (("decode", 4, 1024), ("prefill", 1, 512)),
        repeats=5 if quick else 10,
        max_layers=2 if quick else 4,
        max_weight_bytes=(256 if quick else 1024) * 2**20,
    )


def layers_that_fit(m: ModelConfig, plan: Plan, device: torch.device, fraction: float = 0.5) -> int:
    """How many of the model's layers to build for its largest step: all that fit in ``fraction``
    of the free memory (and the plan's cap); a clear error when not even one does."""
    largest = max(batch * (seq + 1) for _, batch, seq in plan.steps)
    batch = max(b for _, b, _ in plan.steps)
    free = free_memory_bytes(device) * fraction
    cap = min(m.num_layers, plan.max_layers or m.num_layers)
    for layers in range(cap, 0, -1):
        if bytes_to_build(m, layers, batch, largest // batch + 1, plan.dtype) <= free:
            return layers
    need = bytes_to_build(m, 1, batch, largest // batch + 1, plan.dtype)
    raise ValueError(
        f"model: {m.id} does not fit this device even one layer at a time: its embeddings, one layer and "
        f"the cache need {need / 1e9:,.1f} GB of {free / 1e9:,.1f} GB allowed; measure a smaller model"
    )


def measure_ceilings(device: torch.device, plan: Plan, cache_bytes: float, progress: Progress) -> MeasuredCeilings:
    progress(0.02, "memory bandwidth: copy, read, and a read that fits in the cache")
    timings, cache_set = kernels.memory_roofs(device, plan.copy_bytes, cache_bytes, plan.repeats)
    peaks, layouts = {}, {}
    size = plan.gemm_size
    for i, dtype in enumerate(plan.gemm_dtypes):
        progress(0.1 + 0.2 * i / len(plan.gemm_dtypes), f"peak {dtype}: {size}³ GEMM ({kernels.LAYOUTS[dtype]})")
        try:
            timing = kernels.time_linear(size, size, size, dtype, device, plan.repeats, cache_bytes)
        except (RuntimeError, TypeError) as exc:  # a dtype this device or build cannot run
            progress(0.1, f"peak {dtype}: skipped ({str(exc)[:80]})")
            continue
        timings[f"gemm_{dtype}"] = timing
        peaks[dtype] = 2.0 * size**3 / timing.p10_s / 1e12  # a ceiling is the best sustained rate
        layouts[dtype] = kernels.LAYOUTS[dtype]
    progress(0.3, "host dispatch of one eager op of each kind")
    host = kernels.host_costs(device)
    graph_kernel = None
    if device.type == "cuda":
        tiny = torch.zeros(1, device=device)
        timing = kernels.time_device(lambda _: tiny.add_(1.0), [None], device, calls=200, repeats=plan.repeats)
        timings["graph_launch"] = timing
        graph_kernel = timing.median_s
    return MeasuredCeilings(
        # Ceilings from the fast tenth of the repeats (as STREAM reports its best run): what the
        # device sustains, not what a busy host let one run reach.
        memory_bandwidth_tbps=2 * plan.copy_bytes / timings["copy"].p10_s / 1e12,
        read_bandwidth_tbps=plan.copy_bytes / timings["read"].p10_s / 1e12,
        cache_bandwidth_tbps=cache_set / timings["cache"].p10_s / 1e12,
        peak_tflops=peaks,
        peak_layouts=layouts,
        launch_overhead_s=host["elementwise"],
        host_dispatch_s=host,
        graph_launch_overhead_s=graph_kernel,
        timings=timings,
    )


def _roofs(results: Results, device_kind: str, graphs: bool) -> dict[str, Ceilings]:
    """The roofs a step is predicted on: the datasheet (where the device is in the database),
    the measured ceilings, and those with the calibration."""
    roofs = {}
    info = results.device
    if info.matched_hardware_id:
        hw = get_hardware(info.matched_hardware_id)
        roofs["datasheet"] = Settings().ceilings(hw, cuda_graphs=graphs)
    if results.ceilings:
        measured = results.ceilings_for_engine(launch_from_graphs=graphs)
        if device_kind == "cpu":
            # A CPU runs each op where it is dispatched, synchronously: the kernels' clocked
            # times already hold the dispatch, and nothing overlaps. No separate host term.
            measured = replace(measured, launch_overhead_s=0.0, host_cost_s=None)
        elif not graphs and results.ceilings.eager_host_per_launch_s is not None:
            # The host's cost per launch of this model's eager step, from its host-bound probe.
            probe = results.ceilings.eager_host_per_launch_s
            measured = replace(measured, launch_overhead_s=probe, host_cost_s={"elementwise": probe})
        elif not graphs:
            measured = replace(measured, host_cost_s=results.ceilings.host_dispatch_s)
        else:
            measured = replace(measured, graph_replay_s=results.ceilings.launch_overhead_s)
        roofs["measured"] = measured
        if results.calibration is not None:
            roofs["calibrated"] = replace(measured, roof_source=results.calibration, source="calibrated")
    return roofs


def predict_step(results: Results, step: StepMeasurement, model: ModelConfig) -> StepMeasurement:
    """The step's ops and totals on each set of roofs, beside what was measured."""
    w = Workload(model, step.phase, step.batch, step.seq_len, precision=_precision(step.dtype))
    eager_roofs = _roofs(results, results.device.kind, graphs=False)
    graph_roofs = _roofs(results, results.device.kind, graphs=True)
    ops = step_ops(w)
    tables = {name: evaluate(ops, c) for name, c in eager_roofs.items()}
    predicted = {name: t.total_time_s for name, t in tables.items()}
    for name, c in graph_roofs.items():
        predicted[f"{name}, graph"] = evaluate(ops, c).total_time_s
    measured = {op.name: op for op in step.ops}
    rows = []
    for i, op in enumerate(ops):
        row = measured.get(op.name)
        if row is None:
            continue
        rows.append(
            row.model_copy(
                update={
                    "predicted_s": {n: float(t.time_s[i]) for n, t in tables.items()},
                    "modelled_launches": int(op.launches * op.count),
                }
            )
        )
    return step.model_copy(update={"ops": rows, "predicted_s": predicted})


def _precision(dtype: str) -> Precision:
    storage = "fp32" if dtype == "fp32" else dtype
    return Precision(weight_dtype=storage, act_dtype=storage, kv_dtype=storage)


def run_step(
    model: ModelConfig,
    plan: Plan,
    device: torch.device,
    phase: str,
    batch: int,
    seq: int,
    layers: int,
    built: Model | None = None,
) -> StepMeasurement:
    w = Workload(model, phase, batch, seq, precision=_precision(plan.dtype))
    ops = step_ops(w)
    names = {op.name for op in ops}
    run = measure_step(model, layers, phase, batch, seq, plan.dtype, device, plan.repeats, names, built)
    # Scale what the first ``layers`` layers took to the whole model; per-model ops once.
    scale = model.num_layers / layers
    layer_ops = {
        op.name for op in ops if op.count >= model.num_layers or op.group in ("attention", PROJECTIONS, "mlp", "moe")
    }
    once = sum(t for n, t in run.op_time_s.items() if n not in layer_ops)

    def scaled(seconds: float) -> float:
        return once + (seconds - once) * scale

    def per_step(name: str) -> float:
        """What one op's measured figure is multiplied by to cover the whole model."""
        return scale if name in layer_ops else 1.0

    step_ops_measured = [
        StepOp(
            name=op.name,
            count=op.count,
            op_class=op.op_class,
            flops=float(op.flops) * op.count,
            bytes=float(op.bytes) * op.count,
            time_s=run.op_time_s.get(op.name, 0.0) * per_step(op.name),
            kernels=None if run.op_kernels is None else run.op_kernels.get(op.name, 0.0) * per_step(op.name),
        )
        for op in ops
        if op.name in run.op_time_s
    ]

    def timing(t: Timing | None) -> Timing | None:
        if t is None:
            return None
        return t.model_copy(update={k: scaled(getattr(t, k)) for k in ("median_s", "p10_s", "p90_s")})

    return StepMeasurement(
        model=model.id,
        phase=phase,
        batch=batch,
        seq_len=seq,
        dtype=plan.dtype,
        layers_measured=layers,
        layers_total=model.num_layers,
        eager=timing(run.eager),
        graph=timing(run.graph),
        graph_note=run.graph_note,
        kernel_time_s=scaled(run.kernel_time_s),
        kernels=round(run.kernels * (scale if layers < model.num_layers else 1)),
        attributed_s=scaled(run.attributed_s),
        ops=step_ops_measured,
    )


def run_suite(
    device: str | None = None,
    quick: bool = True,
    model_id: str | ModelConfig | None = None,
    progress: Progress | None = None,
) -> Results:
    """Measure ceilings, kernel sweeps and whole model steps on the local device (CUDA if present),
    fit a calibration on the sweeps and predict the steps on every set of roofs."""
    progress = progress or (lambda fraction, message: None)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: cuda requested but torch sees no CUDA device; allowed here: cpu")
    dev = torch.device(device if device != "cuda" else "cuda:0")
    plan = make_plan(dev, quick)
    if isinstance(model_id, ModelConfig):
        model = model_id
    else:
        model = get_model(model_id or ("llama-3.1-8b" if dev.type == "cuda" else "llama-3.2-1b"))
    layers = layers_that_fit(model, plan, dev)  # before anything is allocated
    info = device_info(dev)
    cache_bytes = info.l2_cache_bytes or 32 * 2**20
    torch.manual_seed(0)
    method = "K calls captured in one CUDA graph, replay / K" if dev.type == "cuda" else "a synchronised clock"
    notes = [f"kernel times: {method}; inputs rotated past the last-level cache; medians of repeats"]
    ceilings = measure_ceilings(dev, plan, cache_bytes, progress)
    # The host's cost of an eager step, in rounds spread over the run (after the ceilings, after the
    # sweeps and after each step), since a host's speed drifts; built now, while memory is free.
    probe = HostProbe(model, dev, plan.dtype)
    probe.round(plan.repeats)
    cache_read = ceilings.cache_bandwidth_tbps
    if cache_read is not None and ceilings.read_bandwidth_tbps and cache_read <= ceilings.read_bandwidth_tbps:
        # A read that fits in the cache must beat one from memory; when it does not, the small set's
        # per-kernel latency, not the cache's bandwidth, set its time (on an H100 a 13 MB reduction
        # ran at 1.4 TB/s against 2.8 TB/s from HBM), so it is no cache roof and is not drawn as one.
        notes.append(
            f"in-cache read: {cache_read * 1e3:,.0f} GB/s, no faster than the "
            f"{ceilings.read_bandwidth_tbps * 1e3:,.0f} GB/s read from memory: the working set is too small for a "
            "reduction kernel to show the cache's bandwidth, so no cache roof is drawn"
        )
        ceilings = ceilings.model_copy(update={"cache_bandwidth_tbps": None})

    def part(start: float, span: float) -> Progress:
        return lambda f, message: progress(start + span * f, message)

    sweeps, skipped = kernels.sweep_linear(
        model, list(plan.sweep_m), plan.dtype, dev, plan.repeats, cache_bytes, part(0.35, 0.25), plan.max_weight_bytes
    )
    if skipped:
        notes.append(
            f"linear sweep: {', '.join(skipped)} left out (over the plan's {plan.max_weight_bytes / 2**20:,.0f} MiB "
            "per weight on this device); the calibration of those ops comes from the other linear layers at the same M"
        )
    if not model.mla:
        progress(0.6, "decode attention: batch x context")
        sweeps += kernels.sweep_decode_attention(
            model, list(plan.decode_batches), list(plan.decode_contexts), plan.dtype, dev, plan.repeats, cache_bytes
        )
        progress(0.65, "prefill attention")
        sweeps += kernels.sweep_prefill_attention(model, list(plan.prefill_shapes), plan.dtype, dev, plan.repeats)
    progress(0.7, "elementwise kernels: RMSNorm, residual add, SiLU x up")
    sweeps += kernels.sweep_elementwise(
        model, list(plan.elementwise_tokens), plan.dtype, dev, plan.repeats, cache_bytes
    )
    progress(0.73, f"the host's cost of an eager step of {model.name}: its layers with tiny matrices")
    probe.round(plan.repeats)
    runs = []
    progress(0.75, f"building {layers} of {model.num_layers} layers of {model.name} on {dev}")
    built = build_model(model, layers, dev, TORCH_DTYPES[plan.dtype])
    for i, (phase, batch, seq) in enumerate(plan.steps):
        progress(
            0.75 + 0.25 * i / len(plan.steps),
            f"{model.name} {phase} step, batch {batch}, {seq} tokens ({layers} of {model.num_layers} layers)",
        )
        runs.append(run_step(model, plan, dev, phase, batch, seq, layers, built))
        probe.round(plan.repeats)
    per_launch, probe_what = probe.result()
    ceilings = ceilings.model_copy(update={"eager_host_per_launch_s": per_launch, "eager_host_probe": probe_what})
    mode = "quick" if quick else "full"
    calibration = fit_calibration(
        sweeps,
        info.name,
        f"{info.name}, {info.date}, torch {info.torch_version}",
        info.matched_hardware_id,
        info.memory_bytes,
        max(ceilings.memory_bandwidth_tbps, ceilings.read_bandwidth_tbps or 0.0) * 1e12,
    ).model_copy(update={"host_per_launch_s": per_launch, "kernel_floor_s": ceilings.graph_launch_overhead_s})
    results = Results(mode=mode, device=info, notes=notes, ceilings=ceilings, sweeps=sweeps, calibration=calibration)
    steps = [predict_step(results, run, model) for run in runs]
    if layers < model.num_layers:
        why = "the plan's cap on a CPU" if layers == plan.max_layers else "what fits in half the free memory"
        notes.append(
            f"{model.id}: {layers} of {model.num_layers} layers measured ({why}); per-layer ops and the step "
            f"scaled by {model.num_layers / layers:g}"
        )
    del built
    synchronize(dev)
    progress(1.0, "done")
    return results.model_copy(update={"steps": steps, "notes": notes})


__all__ = ["Plan", "TORCH_DTYPES", "device_info", "make_plan", "run_suite"]
