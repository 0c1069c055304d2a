"""Step and request analysis of an LLM on one device type: what the command line and the pages show.

``analyze_step`` and ``analyze_request`` return typed results holding the evaluated op tables
and the memory footprint, so a page lays them out without evaluating anything again, and
``.to_json()`` is what ``--json`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from roofline.engine import OpTable, evaluate, regime_label
from roofline.engines import engine_profile, prompt_defaults, prompt_step
from roofline.format import fmt_seconds
from roofline.hardware import Hardware
from roofline.memory import Footprint, footprint
from roofline.ops import step_ops
from roofline.roofs import resolved_engine
from roofline.settings import DEFAULT_SETTINGS, Settings
from roofline.workload import Workload


def _bound(by_regime: dict[str, float]) -> str:
    return max(by_regime, key=by_regime.__getitem__)


def _mfu(flops: float, time_s: float, peak: float | None) -> float | None:
    """Model FLOPs utilisation; None where the device publishes no peak (nothing to divide by)."""
    return flops / time_s / peak if peak else None


def _rests_on(*tables: OpTable) -> dict[str, object]:
    """What the times rest on, for ``--json``: ideal (datasheet), engine-measured or calibrated
    roofs, the engine's host work; a device without a published compute peak gives times that are
    lower bounds from memory bandwidth, and says so."""
    lower = [t for t in tables if t.is_lower_bound]
    c = tables[0].ceilings
    return {
        "expected_rests_on": tables[0].expected_source,
        "roof_source": c.roof_source.label if c.roof_source is not None else None,
        "engine": getattr(c.roof_source, "engine", None),
        "engine_host_work": c.engine_step_note or None,
        "time_rests_on": (lower or list(tables))[0].rests_on(),
        "time_is_lower_bound": bool(lower),
        "compute_peaks_unpublished": list(dict.fromkeys(d for t in lower for d in t.unknown_peaks)),
    }


@dataclass(frozen=True)
class StepResult:
    """One prefill or decode step on one device: every op with its time and regime, the totals
    and the memory footprint. ``workload`` is the step as it runs on the device."""

    workload: Workload
    hardware: Hardware
    table: OpTable
    footprint: Footprint
    notes: tuple[str, ...] = ()

    @property
    def time_s(self) -> float:
        return self.table.total_time_s

    @property
    def time_by_regime_s(self) -> dict[str, float]:
        return {r: float(v) for r, v in self.table.time_by_regime_s().items()}

    @property
    def bound(self) -> str:
        return str(self.table.step_bound.reshape(-1)[0])

    def totals(self) -> dict[str, object]:
        t = self.table
        flops, moved = float(t.flops.sum()), float(t.bytes.sum())
        return {
            "flops": flops,
            "bytes": moved,
            "weight_bytes": float(t.weight_bytes.sum()),
            "activation_bytes": float(t.act_bytes.sum()),
            "kv_bytes": float(t.kv_bytes.sum()),
            "comm_bytes": float(t.comm_bytes.sum()),
            "intensity": flops / moved,
            "time_s": self.time_s,
            # The same step on the datasheet roofs alone, no engine work: the bound time_s is measured against.
            "ideal_time_s": float(np.sum(t.ideal_step_time_s)),
            "device_time_s": float(np.sum(t.device_time_s)),
            "host_time_s": float(np.sum(t.host_time_s)),
            "exposed_host_s": float(np.sum(t.exposed_host_s)),
            "bound": self.bound,
            "bound_label": regime_label(self.bound, t.is_lower_bound),
            "time_is_lower_bound": t.is_lower_bound,
            "time_by_regime_s": self.time_by_regime_s,
            "launches": int(sum(op.launches * op.count for op in t.ops)),
            "mfu": _mfu(flops, self.time_s, t.ceilings.peak_or_none(self.workload.precision.act_dtype)),
            "mbu": moved / self.time_s / t.ceilings.memory_bandwidth_bytes_per_s,
        }

    def to_json(self) -> dict[str, object]:
        return {
            **self.workload.describe(),
            "hardware": self.hardware.id,
            "roofs": self.table.ceilings.source,
            "launch_overhead_s": self.table.ceilings.launch_overhead_s,
            "link": self.table.ceilings.link_note,
            **_rests_on(self.table),
            "notes": list(self.notes),
            "ops": self.table.rows(),
            "total": self.totals(),
            "memory": self.footprint.to_json(),
        }


def analyze_step(w: Workload, hw: Hardware, settings: Settings = DEFAULT_SETTINGS) -> StepResult:
    """Every op of one prefill or decode step with its time and regime, and the memory footprint."""
    if w.phase not in ("prefill", "decode"):
        raise ValueError(f"phase: analyze_step takes prefill or decode, got {w.phase!r}")
    run, notes = w.on(hw)
    table = evaluate(step_ops(run), settings.ceilings(hw, run.tp, run.cuda_graphs))
    notes = tuple(notes) + _engine_notes(settings, hw) + _host_notes(table, settings, hw) + _kernel_notes(table)
    notes += _host_range_notes(run, settings, hw)
    if run.phase == "prefill":
        notes += _graph_notes(run, table, settings, hw)
    return StepResult(run, hw, table, footprint(run, hw, settings), notes)


def _engine_notes(settings: Settings, hw: Hardware) -> tuple[str, ...]:
    """Which roofs the chosen engine gives this device, where an engine was asked for."""
    if settings.engine == "ideal":
        return ()
    return (settings.roofs_note(hw),)


def _prompt_step_notes(run: Workload, settings: Settings, hw: Hardware) -> tuple[str, ...]:
    """Where a request's prompts are more than the engine runs in one step: its memory is of such a
    step (``memory.step_activation_bytes``) while the TTFT is timed as one pass; and a prompt past the
    budget of an engine that keeps prompts whole, which it refuses."""
    on_device = settings.for_device(hw)
    budget, b, s = on_device.max_batched_tokens, int(np.max(run.batch)), int(np.max(run.seq_len))
    if b * s <= budget:
        return ()
    engine = settings.engine if engine_profile(settings.engine) else "vllm"  # auto and ideal: vLLM's scheduler
    name = engine_profile(engine).name
    tokens = int(prompt_step(engine, budget, b, s)[0])  # as memory.step_activation_bytes counts the step
    if prompt_defaults(engine)[1]:
        step = f"at most {budget:,} tokens a step (its token budget)"
    elif s <= budget:
        step = f"{tokens // s:,} whole prompts a step ({tokens:,} tokens; its token budget is {budget:,})"
    else:
        return (
            f"{name} keeps a prompt whole by default and refuses one past its token budget ({budget:,} tokens): this "
            f"{s:,}-token prompt needs --max-batched-tokens {s} or more, or chunked prefill.",
        )
    return (
        f"The prefill of {b:,} × {s:,} tokens is timed as one pass; {name} runs {step}, so the activations counted "
        "in memory are one such step's.",
    )


def _host_notes(table: OpTable, settings: Settings, hw: Hardware, which: str = "This step") -> tuple[str, ...]:
    """Where the engine's host work as fitted sets a step (it overlaps the device's work and is
    longer than it on its own), and test runs of that engine measured a token faster than that
    work: the step may run faster than this (``roofline.known_error.faster_than_host``)."""
    c = table.ceilings
    if not (c.engine_overlap and c.engine_step_s) or not np.any(c.engine_step_s > table.device_time_s * 1.001):
        return ()
    profile = engine_profile(resolved_engine(settings.engine, hw.id))
    if profile is None:
        return ()
    from roofline.known_error import faster_than_host  # the report's reader: only where a step is host-set

    found = faster_than_host(profile.id, c.engine_step_s)
    if found is None or not found.under:
        return ()
    return (
        f"{which} is set by {profile.name}'s host work as fitted ({fmt_seconds(c.engine_step_s)} a step, on "
        f"{profile.host_fit.split}), but {found.under:,} of its {found.runs:,} test runs measured a TPOT under that "
        f"(the fastest {found.fastest_ms:.2f} ms): a step this small may take less (accuracy report of {found.report})",
    )


def _host_range_notes(w: Workload, settings: Settings, hw: Hardware) -> tuple[str, ...]:
    """Where the decode steps sample more sequences than the engine's host work was fitted at."""
    profile = engine_profile(resolved_engine(settings.engine, hw.id))
    if profile is None or w.phase == "prefill":
        return ()
    note = profile.host_fit.beyond(int(np.max(w.batch)), profile.host_per_seq_us, profile.name)
    return (note,) if note else ()


def _kernel_notes(table: OpTable, which: str = "") -> tuple[str, ...]:
    """The ops whose GEMM the kernel tables timed over 1.5x their time at twice its rows
    (``TablePredictor.slower_than_twice``), in one note per row count."""
    if not table.sources:  # the datasheet's roofs: nothing measured
        return ()
    from roofline.tables.predict import SLOWER_THAN_TWICE, TablePredictor

    found: dict[float, list[str]] = {}
    for op, source in zip(table.ops, table.sources):
        if (at := TablePredictor.slower_than_twice_found(source)) is not None:
            found.setdefault(at[0], []).append(f"{op.name} {at[1]:.2g}x")
    step = f"the {which} step's " if which else ""
    return tuple(
        f"At m = {m:g} the kernel tables timed {step}GEMMs over {SLOWER_THAN_TWICE:g}x their time at m = "
        f"{2 * m:g} (twice the rows, twice the work): {', '.join(ops)}. The engine runs them on a slower path "
        "there, so a larger batch costs no more"
        for m, ops in found.items()
    )


def _graph_notes(prefill: Workload, graphed: OpTable, settings: Settings, hw: Hardware) -> tuple[str, ...]:
    """Where a prefill is timed from a CUDA graph (``graphed``, its table) that the chosen engine
    would not replay for it (``EngineProfile.prompt_graph_limit``: its prompt steps past that many
    tokens run eagerly, as the serving simulation runs them) and the host's dispatch of its kernels
    would outlast them."""
    profile = engine_profile(resolved_engine(settings.engine, hw.id))
    if profile is None or not prefill.cuda_graphs:
        return ()
    limit = profile.prompt_graph_limit(settings.for_device(hw).max_num_seqs, settings.prompt_graph_tokens)
    tokens = int(np.max(np.asarray(prefill.batch) * np.asarray(prefill.seq_len)))
    if tokens <= limit:
        return ()
    graphed_s = float(np.max(graphed.step_time_s))
    eager_step = replace(prefill, cuda_graphs=False)
    eager_s = float(np.max(evaluate(step_ops(eager_step), settings.ceilings(hw, prefill.tp, False)).step_time_s))
    if eager_s <= graphed_s * 1.001:  # the kernels outlast their dispatch: the time stands either way
        return ()
    replays = f"replays prompt steps of up to {limit:,} tokens from one" if limit else "replays no prompt step from one"
    return (
        f"The prefill is timed as replayed from a CUDA graph ({fmt_seconds(graphed_s)}), but {profile.name} "
        f"{replays} by default: dispatched kernel by kernel, as `serve` simulates it, this {tokens:,}-token step "
        f"takes {fmt_seconds(eager_s)}, the host outlasting the kernels (CUDA graphs off, or `--eager`, times it so)",
    )


@dataclass(frozen=True)
class RequestResult:
    """A batch of requests: the prefill (TTFT), then ``output_len - 1`` decode steps (TPOT)."""

    workload: Workload
    hardware: Hardware
    prefill: StepResult
    decode: StepResult | None  # the decode step in the middle of the output, for plots
    decode_table: OpTable | None  # every (sampled) decode step
    decode_steps: np.ndarray  # how many steps each column of decode_table stands for
    footprint: Footprint
    notes: tuple[str, ...] = ()

    @property
    def ttft_s(self) -> float:
        return self.prefill.time_s

    @property
    def decode_time_s(self) -> float:
        if self.decode_table is None:
            return 0.0
        return float((self.decode_table.step_time_s * self.decode_steps).sum())

    @property
    def tpot_s(self) -> float | None:
        steps = float(self.decode_steps.sum())
        return self.decode_time_s / steps if steps else None

    @property
    def ideal_tpot_s(self) -> float | None:
        """TPOT on the datasheet roofs alone (the ideal bound)."""
        steps = float(self.decode_steps.sum())
        if self.decode_table is None or not steps:
            return None
        return float((self.decode_table.ideal_step_time_s * self.decode_steps).sum()) / steps

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + self.decode_time_s

    def _decode_total(self, name: str) -> float:
        return (
            float((getattr(self.decode_table, name).sum(axis=0) * self.decode_steps).sum())
            if self.decode_table
            else 0.0
        )

    @property
    def flops(self) -> float:
        """FLOPs per device over the whole request."""
        return float(self.prefill.table.flops.sum()) + self._decode_total("flops")

    @property
    def bytes(self) -> float:
        return float(self.prefill.table.bytes.sum()) + self._decode_total("bytes")

    @property
    def decode_bound(self) -> str | None:
        if self.decode_table is None:
            return None
        shares = {r: float((v * self.decode_steps).sum()) for r, v in self.decode_table.bound_shares_s().items()}
        return _bound(shares)

    def to_json(self) -> dict[str, object]:
        w, ceilings = self.workload, self.prefill.table.ceilings
        batch = float(np.max(w.batch))
        peak = ceilings.peak_or_none(w.precision.act_dtype)
        bandwidth = ceilings.memory_bandwidth_bytes_per_s
        decode_bytes = self._decode_total("bytes")
        tpot = self.tpot_s
        return {
            **w.describe(),
            "prompt_len": int(np.max(w.seq_len)),
            "hardware": self.hardware.id,
            "roofs": ceilings.source,
            **_rests_on(*(t for t in (self.prefill.table, self.decode_table) if t is not None)),
            "notes": list(self.notes),
            "ttft_s": self.ttft_s,
            "tpot_s": tpot,
            "ideal_ttft_s": float(np.sum(self.prefill.table.ideal_step_time_s)),
            "ideal_tpot_s": self.ideal_tpot_s,
            "e2e_s": self.e2e_s,
            "tokens_per_s": batch * w.attention_dp * w.output_len / self.e2e_s,  # every attention rank's
            "tokens_per_s_per_user": w.output_len / self.e2e_s,
            "decode_tokens_per_s_per_user": (1.0 / tpot) if tpot else None,
            "prefill_bound": self.prefill.bound,
            "decode_bound": self.decode_bound,
            "total_flops": self.flops,
            "total_bytes": self.bytes,
            # Per device: this device's FLOPs over this device's peak (TP does not enter twice).
            "mfu": _mfu(self.flops, self.e2e_s, peak),
            "mbu": self.bytes / self.e2e_s / bandwidth,
            "decode_mbu": (decode_bytes / self.decode_time_s / bandwidth) if self.decode_time_s else None,
            "decode_points": int(self.decode_steps.size),
            "memory": self.footprint.to_json(),
        }


def analyze_request(w: Workload, hw: Hardware, settings: Settings = DEFAULT_SETTINGS) -> RequestResult:
    """A request workload: TTFT is the prefill; TPOT the mean decode step as the context grows.

    The decode steps are one vectorised evaluation over the growing context (sampled at a
    bounded number of points for long outputs: ``Workload.decode_points``)."""
    if w.phase != "request":
        raise ValueError(f"phase: analyze_request takes a request workload, got {w.phase!r}")
    run, notes = w.on(hw)
    ceilings = settings.ceilings(hw, run.tp, run.cuda_graphs)
    prefill_w = run.step("prefill")
    prefill_table = evaluate(step_ops(prefill_w), ceilings)
    notes = [*notes, *_engine_notes(settings, hw), *_graph_notes(prefill_w, prefill_table, settings, hw)]
    notes += _prompt_step_notes(run, settings, hw)
    notes += _kernel_notes(prefill_table, "prefill")
    prefill = StepResult(prefill_w, hw, prefill_table, footprint(prefill_w, hw, settings, False), tuple(notes))
    contexts, steps = run.decode_points()
    decode_table, decode = None, None
    if contexts.size:
        decode_table = evaluate(step_ops(run.step("decode", contexts)), ceilings)
        notes += _host_notes(decode_table, settings, hw, "The decode step") + _kernel_notes(decode_table, "decode")
        notes += _host_range_notes(run, settings, hw)
        mid_w = run.step("decode", int(contexts[contexts.size // 2]))
        decode = StepResult(
            mid_w, hw, evaluate(step_ops(mid_w), ceilings), footprint(mid_w, hw, settings, False), tuple(notes)
        )
    return RequestResult(run, hw, prefill, decode, decode_table, steps, footprint(run, hw, settings), tuple(notes))
