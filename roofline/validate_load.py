"""TTFT and TPOT of the silicon sample's aggregated runs under their own load: each run is a
closed loop of ``batch_size`` clients (the sample's concurrency), simulated request by request
(``roofline.serving.simulation``), once on the datasheet roofs (the ideal bound) and once on the
run's engine's measured kernel tables on its device (``roofline.validate.run_tables``).

Each run's requests are drawn as its benchmark client drew them, where the row's source names the
client (``roofline.silicon_sample.benchmark_client``): InferenceX's runs draw every prompt and
output length uniformly in [0.8 x, 1 x] the nominal one, ten requests per client; the others send
fixed lengths, ten requests per client, all clients starting at once (at most ``MAX_REQUESTS``).
Where the source documents the script that ran a run, its KV-cache format and the scheduler
settings it gave the server (token budget, SGLang's intake interval, TensorRT-LLM's batch waiting:
``roofline.silicon_sample.documented_setup``) are simulated too; elsewhere the engine's defaults.
The simulated mean TTFT and mean TPOT are compared with the sample's figures. The rows, their
mapping to models, devices and precisions, and what is left out are those of
``roofline.validate``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from roofline import accuracy
from roofline.accuracy import BELOW_IDEAL_MARGIN, BELOW_IDEAL_WHY, BREAKDOWNS, RUN_FIELDS, below_ideal, breakdowns
from roofline.benchmark_clients import (
    INFERENCEX_CLIENT,
    RECORDED_CLIENT,
    WARMUP_PER_CLIENT,
    WARMUP_SOURCE,
    benchmark_client,
    client_warmup,
)
from roofline.defaults import CLIENT_STARTS, DEFAULT_LAUNCH_OVERHEAD_S
from roofline.engines import EngineProfile, engine_profile, in_host_fit_split
from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.sample_ranks import run_parallelism
from roofline.serving.simulation.api import knobs_from, kv_blocks
from roofline.serving.simulation.load import Lengths, Load, make_requests
from roofline.serving.simulation.metrics import per_request
from roofline.serving.simulation.run import simulate
from roofline.serving.simulation.steptime import step_times
from roofline.settings import Settings
from roofline.silicon_sample import DEVICE_IDS, MODEL_IDS, ScriptSetup, _number, documented_setup, run_tables
from roofline.validate import _errors, precision_for, run_settings, why_not_scored
from roofline.workload import Workload

LOAD_FIELDS = (
    *RUN_FIELDS,
    "requests",
    "measured_ttft_ms",
    "datasheet_ttft_ms",
    "tables_ttft_ms",
    "measured_tpot_ms",
    "client",
    "client_warmup",
    "clients_start",
    "range_ratio",
    "kv_dtype",
    "scheduler",
    "datasheet_tpot_ms",
    "tables_tpot_ms",
    "datasheet_preemptions",
    "tables_preemptions",
    "below_ideal_ttft",
    "below_ideal_tpot",
)
COLUMNS = ("datasheet", "tables")
MAX_REQUESTS = 2000


def simulate_row(
    row: dict[str, str],
    cache: dict,
    settings: Settings | None = None,
    tables: bool = True,
    profile: EngineProfile | None = None,
    kv_dtype: str | None = None,
    range_ratio: float | None = None,
    clients: str | None = None,
) -> dict[str, object]:
    """One run's mean TTFT and TPOT from a closed-loop simulation at its concurrency, on the
    datasheet roofs and (``tables``) on its engine's kernel tables with its host work per step
    (``profile`` replaces the engine's own: the fit of ``benchmarks.fit_engine_host``).
    Assumptions for every run, scored only when asked: ``kv_dtype`` for the KV cache
    of every run (default: the run's own, as its script set it where its source documents it, else
    bf16: ``roofline.silicon_sample.kv_dtype_for``); ``range_ratio`` in (0, 1] draws every prompt and output
    length of every run uniformly in [ratio x nominal, nominal], as ``--random-range-ratio`` does in
    vLLM's benchmark client and its forks, 1 for fixed lengths (default None: as the run's own
    client drew them, ``benchmark_client``); ``clients`` "out-of-step" starts every run's clients one
    every T / C, T a request's mean time as simulated with them together (the column's own), so
    their phases spread evenly over a request, "together" or None as the run's client started them."""
    settings = settings or Settings()
    model = get_model(MODEL_IDS[row["model_path"]])
    hw = get_hardware(DEVICE_IDS[row["system"]])
    # Under attention data parallelism one of its D ranks of tp_size GPUs, with the row's batch (one
    # rank's sequences) as its clients and every rank's tokens in the MLP (roofline.sample_ranks).
    tp, dp = run_parallelism(row)
    concurrency = int(_number(row, "batch_size"))
    isl, osl = int(row["isl"]), int(row["osl"])
    precision = precision_for(row, model)
    if kv_dtype is not None:  # an assumption the user asked to score every run under
        precision = replace(precision, kv_dtype=kv_dtype)
    run, _ = Workload(model, "decode", 1, 1, precision=precision, tp=tp, cuda_graphs=True, attention_dp=dp).on(hw)
    precision = run.precision
    # The run's engine (its scheduler, its default token budget on the device) and the settings its
    # script gave the server, where its source documents them, as one rank runs them (rank_settings).
    profile = profile or engine_profile(row["backend"])
    setup = documented_setup(row) or ScriptSetup()
    settings = run_settings(row, dp, concurrency, settings, setup)
    knobs = replace(
        knobs_from(settings, profile.chunked_prefill, hw),  # the engine's own: TensorRT-LLM's keeps prompts whole
        recv_interval=setup.recv_interval or 1,
        batch_wait_iters=setup.batch_wait_iters or 0,
        batch_wait_ratio=setup.batch_wait_ratio or 0.0,
        schedules_ahead=profile.overlaps(row.get("backend_version") or None),
    )
    if not knobs.chunked_prefill and isl > knobs.max_num_batched_tokens:  # no step could ever hold its prompt
        raise ValueError(
            f"{profile.name} keeps a prompt whole and the run's token budget ({knobs.max_num_batched_tokens:,}) is "
            f"below its prompt ({isl:,} tokens)"
        )
    # The KV budget depends on the settings too (the token budget sizes the activation workspace).
    kv_key = ("kv", model.id, hw.id, precision, tp, settings)
    if kv_key not in cache:
        cache[kv_key] = kv_blocks(model, hw, precision, tp, settings)
    blocks = cache[kv_key]
    if blocks < 1:
        raise ValueError(
            f"{model.name} leaves no KV cache on {tp} x {hw.name} at {settings.memory_utilization:g} of its memory "
            "(the run's is not recorded)"
        )
    client = benchmark_client(row)
    if range_ratio is None:
        range_ratio = client.range_ratio
    n = min(MAX_REQUESTS, client.prompts_per_client * concurrency)
    # Every client starts at once (C clients behind a semaphore, every request sent at once), or
    # with ``clients`` "out-of-step" one every (a request's time) / C, below.
    prompts, outputs = Lengths(isl), Lengths(osl)
    if range_ratio < 1.0:
        prompts = Lengths(max(1, int(isl * range_ratio)), isl)
        outputs = Lengths(max(1, int(osl * range_ratio)), osl)
    load = Load("concurrency", n, prompts, outputs, concurrency=concurrency)
    requests = make_requests(load)
    ideal = replace(settings, engine="ideal").ceilings(hw, tp, cuda_graphs=True)
    roofs = {"datasheet": ideal}
    source = run_tables(row, cache.setdefault("predictors", {}), settings.moe_routing) if tables else None
    if source is not None:
        # What the engine is expected to do: its measured kernels and its host work per step.
        roofs["tables"] = replace(
            ideal,
            roof_source=source,
            source="engine-measured",
            engine_step_s=profile.host_step_s,
            engine_per_seq_s=profile.host_per_seq_s,
            engine_overlap=profile.overlaps(row.get("backend_version") or None),
            engine_step_note=profile.host_note(row.get("backend_version") or None),
            engine_step_short=profile.host_short(row.get("backend_version") or None),
        )
    out = {
        "id": row["id"],
        "model": model.id,
        "device": hw.id,
        "engine": row["backend"],
        "tp": tp,
        **({"attention_dp": dp} if dp > 1 else {}),
        "isl": isl,
        "osl": osl,
        "concurrency": concurrency,
        "requests": n,
        "client": client.name,
        "client_warmup": client_warmup(row),
        "range_ratio": range_ratio,
        "kv_dtype": precision.kv_dtype,
        "scheduler": setup.words(),
        "measured_ttft_ms": _number(row, "silicon_ttft_ms"),
        "measured_tpot_ms": _number(row, "silicon_tpot_ms"),
        "host_fit_split": in_host_fit_split(row),
        "clients_start": clients or "together",
    }
    for column, ceilings in roofs.items():
        key = (column, model.id, hw.id, precision, tp, dp, settings.max_batched_tokens, settings.max_num_seqs)
        key += (
            (source, profile.host_step_us, profile.host_per_seq_us, roofs[column].engine_overlap)
            if column == "tables"
            else ()
        )
        if key not in cache:
            cache[key] = step_times(
                model, hw, precision, tp, settings, settings.max_batched_tokens, settings.max_num_seqs, ceilings
            )
        sim = simulate(requests, cache[key], blocks, knobs)
        r = per_request(sim)
        if clients == "out-of-step" and concurrency > 1:  # one client every (a request's time) / C
            ramp_s = float(np.nanmean(r["e2e_s"])) * (concurrency - 1) / concurrency
            sim = simulate(make_requests(replace(load, ramp_s=ramp_s)), cache[key], blocks, knobs)
            r = per_request(sim)
        out[f"{column}_ttft_ms"] = float(np.nanmean(r["ttft_s"])) * 1e3
        out[f"{column}_tpot_ms"] = float(np.nanmean(r["tpot_s"])) * 1e3 if osl > 1 else None
        out[f"{column}_preemptions"] = int(sim.preemptions.sum())
    for metric in ("ttft", "tpot"):
        ideal = out.get(f"datasheet_{metric}_ms")
        out[f"below_ideal_{metric}"] = ideal is not None and bool(below_ideal(out[f"measured_{metric}_ms"], ideal))
    return out


# The test set's InferenceX runs by the warm-up requests per client its client sent first.
WARMUP_GROUPS = {"warmed up": WARMUP_PER_CLIENT, "no warm-up": 0}


def score_load(
    rows: list[dict[str, str]],
    every: int = 1,
    kv_dtype: str | None = None,
    range_ratio: float | None = None,
    moe_routing: str = "auto",
    launch_overhead_s: float | None = None,
    clients: str | None = None,
) -> dict[str, object]:
    """Simulate every ``every``-th scoreable row; errors per model x device x engine and overall.
    ``kv_dtype`` and ``range_ratio``: ``simulate_row``'s assumptions, for every run (None: each
    run's own); ``moe_routing`` how every MoE layer's tokens are routed (``roofline.routing``);
    ``launch_overhead_s`` the host's cost of dispatching one tiny kernel in a step run without a
    CUDA graph (None: the measured default, ``Settings.launch_overhead_s``)."""
    if range_ratio is not None and not 0.0 < range_ratio <= 1.0:
        raise ValueError(f"range ratio: expected a number in (0, 1], got {range_ratio}")
    if clients is not None and clients not in CLIENT_STARTS:
        raise ValueError(f"clients: expected one of {', '.join(CLIENT_STARTS)}, got {clients!r}")
    cache: dict = {}
    results, skipped = [], {}
    scoreable, not_scored = [], {}
    for row in rows:
        if (why := why_not_scored(row)) is not None:
            not_scored[why] = not_scored.get(why, 0) + 1
        elif np.isfinite(_number(row, "silicon_ttft_ms")):
            scoreable.append(row)
    settings = Settings(moe_routing=moe_routing)  # a bad routing is refused here, not counted as a skipped run
    if launch_overhead_s is not None:
        settings = replace(settings, launch_overhead_s=launch_overhead_s)
    for row in scoreable[::every]:
        try:
            results.append(
                simulate_row(row, cache, settings, kv_dtype=kv_dtype, range_ratio=range_ratio, clients=clients)
            )
        except ValueError as exc:
            reason = str(exc).split(";")[0][:120]
            skipped[reason] = skipped.get(reason, 0) + 1
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault((r["model"], r["device"], r["engine"]), []).append(r)
    split = [r for r in results if r["host_fit_split"]]
    test = [r for r in results if not r["host_fit_split"]]

    def scores(rs: list[dict], within_ideal: bool = False) -> dict[str, object]:
        out: dict[str, object] = {"runs": len(rs)}
        kept = {m: [r for r in rs if not (within_ideal and r.get(f"below_ideal_{m}"))] for m in ("ttft", "tpot")}
        if within_ideal:
            out |= {f"{m}_runs": len(kept[m]) for m in kept}
        for column in COLUMNS:
            for metric in ("ttft", "tpot"):
                done = [r for r in kept[metric] if r.get(f"{column}_{metric}_ms") is not None]
                if done:
                    out[f"{column}_{metric}"] = _errors(
                        [r[f"{column}_{metric}_ms"] for r in done], [r[f"measured_{metric}_ms"] for r in done]
                    )
        return out

    return {
        "metric": "mean TTFT and mean TPOT of a closed loop at the run's concurrency (simulated)",
        "columns": {
            "datasheet": "every op on the datasheet roofs (the ideal bound)",
            "tables": "the run's engine's measured kernel tables on its device (the datasheet where they do not "
            "answer) and its host work per step",
        },
        "every": every,
        "kv_dtype": kv_dtype
        or "each run's own: as its benchmark script set it where the source documents it (InferenceX), else bf16",
        "range_ratio": range_ratio,
        "clients_start": clients or "as each run's client started them: together",
        "moe_routing": moe_routing,
        "launch_overhead_us": round(settings.launch_overhead_s * 1e6, 6),
        "clients": {
            c.name: {"range_ratio": c.range_ratio, "prompts_per_client": c.prompts_per_client, "source": c.source}
            for c in (INFERENCEX_CLIENT, RECORDED_CLIENT)
        }
        if range_ratio is None
        else None,
        "overall": scores(results) if results else {"runs": 0},
        # The engines' host work per step was fitted on these runs (roofline.engines): the rest is
        # the test set, scored apart.
        "host_fit_split": scores(split) if split else {"runs": 0},
        "test_set": scores(test) if test else {"runs": 0},
        # Runs measured below the ideal bound of their simulated setup: most likely the setup, not the
        # kernels, is what differs there. Counted, and the test set scored again without them (each
        # metric apart); the headline stays the whole test set.
        "below_ideal": {
            "why": BELOW_IDEAL_WHY,
            "margin": BELOW_IDEAL_MARGIN,
            **{
                metric: {
                    "runs": sum(bool(r.get(f"below_ideal_{metric}")) for r in results),
                    "test_set_runs": sum(bool(r.get(f"below_ideal_{metric}")) for r in test),
                }
                for metric in ("ttft", "tpot")
            },
        },
        "test_set_within_ideal": scores(test, within_ideal=True) if test else {"runs": 0},
        # The test set by the client that ran it: documented (InferenceX's) or guessed (as recorded).
        "test_set_by_client": {
            name: scores(runs)
            for name in (INFERENCEX_CLIENT.name, RECORDED_CLIENT.name)
            if (runs := [r for r in test if r["client"] == name])
        },
        # InferenceX's test runs by whether its client warmed the server up before measuring: the
        # simulation has no one-time costs, so it predicts both alike.
        "test_set_by_warmup": {
            "source": WARMUP_SOURCE,
            **{
                name: scores(runs)
                for name, per_client in WARMUP_GROUPS.items()
                if (
                    runs := [
                        r
                        for r in test
                        if r["client"] == INFERENCEX_CLIENT.name and r.get("client_warmup") == per_client
                    ]
                )
            },
        },
        # The test set per engine and per device (roofline.accuracy.BREAKDOWNS).
        **breakdowns(test, scores),
        "groups": [{"model": m, "device": d, "engine": e, **scores(rs)} for (m, d, e), rs in sorted(groups.items())],
        "not_scored": not_scored,  # rows roofline does not score (roofline.validate.why_not_scored), by reason
        "skipped": skipped,
        "results": results,
    }


def render_load(report: dict[str, object]) -> str:
    o = report["overall"]
    lines = [f"{report['metric']}: {o['runs']:,} runs (every {report['every']}-th scoreable run)"]
    ratio = report.get("range_ratio", 1.0)
    if ratio is None:
        drawn = [
            f"{name}: " + ("fixed" if c["range_ratio"] >= 1.0 else f"uniform in [{c['range_ratio']:g}×, 1×]")
            for name, c in report["clients"].items()
        ]
        lengths = f"lengths as each run's client drew them ({'; '.join(drawn)})"
    else:
        lengths = "fixed lengths" if ratio >= 1.0 else f"lengths uniform in [{ratio:g}×, 1×] the run's"
    lines.append(
        f"KV cache: {report.get('kv_dtype', 'bf16')}; {lengths}; clients started "
        f"{report.get('clients_start', 'together')}; MoE routing: {report.get('moe_routing', 'auto')}; "
        f"host dispatch of an eager kernel: {report.get('launch_overhead_us', DEFAULT_LAUNCH_OVERHEAD_S * 1e6):g} µs "
        "a tiny op (steps with prompt tokens past the engine's CUDA-graph limit)"
    )
    lines.append("error = simulated / measured - 1, as median |error| / p90 |error| / bias (median error)")

    def cell(scores: dict, key: str) -> str:
        e = scores.get(key)
        p90 = accuracy.p90_shown(e["p90_abs_error"], scores.get("runs")) if e else ""
        return f"{e['median_abs_error']:>5.0%}/{p90:>4}/{e['bias']:>+5.0%}" if e else f"{'—':>17}"

    head = "".join(f"{c + ' ' + m.upper():>18}" for m in ("ttft", "tpot") for c in COLUMNS)
    lines.append(f"  {'':<44}{head}")
    split = (f"host-work fit split ({report['host_fit_split']['runs']})", report["host_fit_split"])
    test = (f"test set: every other run ({report['test_set']['runs']})", report["test_set"])

    def row(name: str, scores: dict) -> None:
        cells = "".join(f" {cell(scores, f'{c}_{m}')}" for m in ("ttft", "tpot") for c in COLUMNS)
        lines.append(f"  {name:<44}{cells}")

    for name, scores in [("all runs", o), split, test]:
        row(name, scores)
    below = report.get("below_ideal")
    if below and report["test_set"]["runs"]:
        within = report["test_set_within_ideal"]
        row(f"test set within bound ({within['ttft_runs']:,}/{within['tpot_runs']:,})", within)
        left = f"TTFT {below['ttft']['test_set_runs']:,} and TPOT {below['tpot']['test_set_runs']:,} test runs"
        lines.append(f"    left out: {left} {below['why']}")
    for name, scores in report.get("test_set_by_client", {}).items():
        who = "InferenceX's client" if name == INFERENCEX_CLIENT.name else "no client recorded"
        row(f"test set, {who} ({scores['runs']:,})", scores)
    for name in WARMUP_GROUPS:
        if scores := report.get("test_set_by_warmup", {}).get(name):
            row(f"test set, InferenceX, {name} ({scores['runs']:,})", scores)
    for field in BREAKDOWNS:
        for name, scores in report.get(f"test_set_by_{field}", {}).items():
            row(f"test set, {name} ({scores['runs']:,})", scores)
    for g in report["groups"]:
        row(f"{g['model']} {g['device']} {g['engine']} ({g['runs']})", g)
    for reason, count in report.get("not_scored", {}).items():
        lines.append(f"  not scored, {count}: {reason}")
    for reason, count in report["skipped"].items():
        lines.append(f"  not simulated, {count}: {reason}")
    return "\n".join(lines)
