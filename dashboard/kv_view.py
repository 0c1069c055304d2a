"""What the KV page shows, worked out from the engine's results: the page only lays it out."""

from __future__ import annotations

from dashboard.share import md_escape
from roofline.format import count_of, fmt_bytes
from roofline.hardware import Hardware
from roofline.kvcache import KVResult, analyze_kv
from roofline.memory import max_context
from roofline.report import Metric
from roofline.settings import Settings
from roofline.workload import Workload


def headline_result(results: dict[str, KVResult]) -> KVResult:
    """The device the headline numbers describe: the first chosen one the model's weights fit on
    (a device that holds no sequence would read 0 B / 0 / 0), else the first chosen."""
    return next((r for r in results.values() if r.weights_fit), next(iter(results.values())))


def _short_of_maximum(alone: int, model) -> int | None:
    return None if alone >= model.max_context else max(alone, 1)


def no_fit_from(r: KVResult) -> int | None:
    """The context beyond which not even one sequence fits on ``r``'s device (None: one fits up
    to the model's maximum)."""
    alone = analyze_kv(r.workload, r.hardware, 1, r.context, r.settings).max_context if r.batch != 1 else r.max_context
    return _short_of_maximum(alone, r.workload.model)


def one_fits_up_to(w: Workload, hw: Hardware, settings: Settings) -> int | None:
    """``no_fit_from`` for a workload (a variant of the page's): the longest context at which one
    of its sequences fits on ``hw``, None where one fits up to the model's maximum."""
    return _short_of_maximum(max_context(w.on(hw, need_peak=False)[0], hw, settings, 1), w.model)


def memory_rows(results: dict[str, KVResult]) -> dict[str, dict[str, float]]:
    """Each device's memory at the operating point, every term at its true size, and its usable
    capacity (``capacity``, drawn as a mark: what stacks past it does not fit)."""
    rows = {}
    for r in results.values():
        f = r.footprint
        rows[r.hardware.name] = {
            "weights": f.weights_bytes,
            "KV cache": float(f.kv_cache_bytes),
            "activations": float(f.activation_bytes),
            "reserved": f.reserved_bytes,
            "free": float(f.free_bytes),
            "capacity": float(f.capacity_bytes),
        }
    return rows


def any_over_capacity(results: dict[str, KVResult]) -> bool:
    """Whether any device's memory at the operating point runs over its capacity (a red bar)."""
    return any(r.footprint.total_bytes > r.footprint.capacity_bytes for r in results.values())


def crossover_metric(r: KVResult) -> Metric:
    """The "KV overtakes weights" tile: the context where a decode step at ``r``'s batch reads more
    KV cache than weights, said against what ``r``'s device holds."""
    what = f"the context at which a decode step at batch {r.batch:,} reads more KV cache than weights"
    label = f"KV overtakes weights at batch {r.batch:,}"
    device = md_escape(r.hardware.name)
    if not r.weights_fit:
        why = f"none here: the weights alone do not fit on {device}, so no decode step runs"
        return Metric(label, "—", help=f"{what}; {why}")
    if r.crossover_context is None:
        return Metric(label, "never", help=f"{what}: never below the model's maximum context")
    value = count_of(r.crossover_context, "token")
    if r.max_context < 1:
        return Metric(label, value, help=f"{what}; a batch of {r.batch:,} fits on {device} at no context")
    if r.crossover_context > r.max_context:
        past = f"past the {r.max_context:,} tokens a batch of {r.batch:,} can hold on {device}"
        return Metric(label, value, help=f"{what}; {past}")
    return Metric(label, value, help=what)


def engine_caps(results: dict[str, KVResult], settings) -> dict[int, list[str]]:
    """Each sequence cap the engine runs on the chosen devices (vLLM's default there unless set)
    and the devices (by name, as the capacity curves are keyed) it applies to."""
    caps: dict[int, list[str]] = {}
    for r in results.values():
        caps.setdefault(settings.for_device(r.hardware).max_num_seqs, []).append(r.hardware.name)
    return caps


def holds_past_cap(results: dict[str, KVResult], settings) -> bool:
    """Whether the cache of some chosen device holds more sequences than its engine runs at once."""
    return any(
        r.curve_max_batch.max(initial=0) > settings.for_device(r.hardware).max_num_seqs for r in results.values()
    )


def reserved_words(results: dict[str, KVResult]) -> str:
    """What the memory bars' thin 'reserved' band holds, with its size on each device."""
    if not results:
        return ""
    sizes = {r.hardware.name: float(r.footprint.reserved_bytes) for r in results.values()}
    first = next(iter(results.values()))
    same = len({round(v / 1e7) for v in sizes.values()}) == 1
    size = (
        f"{fmt_bytes(next(iter(sizes.values())))} on {'each device' if len(sizes) > 1 else 'the device'}"
        if same
        else ", ".join(f"{fmt_bytes(v)} on {md_escape(n)}" for n, v in sizes.items())
    )
    held = "CUDA context, library workspaces" + (", communication buffers" if first.workload.tp > 1 else "")
    graphs = " and the CUDA graphs' memory" if first.footprint.cuda_graph_bytes else ""
    return f"Reserved ({size}) is non-torch memory ({held}){graphs}: the thin band after the activations."
