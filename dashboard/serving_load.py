"""The Serving page's section "Under load (simulated)": a request-level simulation of the page's
model on its first device, with arrivals at a rate or from a fixed number of clients.

What it shows: latency against request rate (a sweep of Poisson rates up to twice the
saturation throughput, the knee marked), the TTFT and TPOT of every request of one run, the
server over that run (any of its steps opens on the roofline page), and the capacity ranking
of the page's devices. Every input is in the URL; every simulation is cached on its inputs.
"""

from __future__ import annotations

from urllib.parse import urlencode

import numpy as np
import streamlit as st

from dashboard.cache import cached
from dashboard.precision_pickers import setup_params
from dashboard.serving_arrivals import MAX_PAGE_REQUESTS, Trace, clients_words, trace_upload
from dashboard.serving_capacity import render_capacity
from dashboard.serving_holds import held_back
from dashboard.serving_measured import measured_gaps, measured_upload
from dashboard.share import Report, md_escape
from dashboard.state import float_in, int_in, one_of, warn_bad_params
from roofline.format import fmt_seconds, ranks_of
from roofline.hardware import Hardware
from roofline.known_error import for_settings
from roofline.models import ModelConfig
from roofline.plots.serving_load import TPOT_COLOR, TTFT_COLOR, distribution_figure, latency_rate_figure, series_figure
from roofline.plots.serving_points import add_measured_points, add_run_points
from roofline.report import Metric
from roofline.serving import Traffic, serving_sweep
from roofline.serving.simulation.api import chunking_words, graph_words, most_in_flight, rank_settings
from roofline.serving.simulation.load import Lengths, Load
from roofline.serving.simulation.metrics import PERCENTILES, Targets
from roofline.serving.simulation.sweep import SWEEP_RATES, SWEEP_REQUESTS, latency_sweep, load_run
from roofline.settings import Settings
from roofline.workload import Precision

LOAD_KINDS = ("rate", "concurrency", "trace")
MAX_RAMP_S = 3600.0


def _seconds(value: float | None) -> str:
    return "—" if value is None else fmt_seconds(value)


def _steady(model, hw, traffic, precision, tp, settings, chunked, batch: np.ndarray) -> dict[str, np.ndarray] | None:
    """The page's steady-state TTFT and TPOT at these batches (log-log between its batches)."""
    points = cached(serving_sweep, model, [hw], traffic, precision, tp, settings, {}, chunked=chunked)
    if hw.id in points.why_not:
        return None
    x = np.log(np.maximum(np.asarray(batch, float), 1.0))
    grid = np.log(points.batch.astype(float))
    return {m: np.exp(np.interp(x, grid, np.log(getattr(points, m)[0]))) for m in ("ttft_s", "tpot_s")}


def render_load_section(
    model: ModelConfig,
    devices: list[Hardware],
    traffic: Traffic,
    precision: Precision,
    tp: int,
    settings: Settings,
    ttft_target_s: float | None,
    tpot_target_s: float | None,
    prices: dict[str, float] | None = None,
    chunked: bool | None = None,
    report: Report | None = None,
) -> None:
    """The section, at the end of the Serving page: its inputs, charts and the capacity table."""
    report = report or Report()
    targets = Targets(ttft_s=ttft_target_s, tpot_s=tpot_target_s)
    report.subheader("Under load (simulated)")
    if not devices:
        return
    hw = devices[0]
    st.caption(
        f"Requests arrive at {hw.name} (the first device picked, TP={tp}) one by one (prompts of "
        f"{traffic.prompt_len:,} and outputs of {traffic.output_len:,} tokens, or a trace's own), scheduled as "
        f"the page's engine schedules them (vLLM V1's continuous batching with chunked prefill and preemption, "
        f"SGLang's prefill-first batches, or TensorRT-LLM's no-evict in-flight batching; vLLM's where the "
        f"roofs are ideal; SGLang's intake interval and TensorRT-LLM's batch waiting below, off as in the "
        f"engines), each step timed on the roofline. Unlike the Frontier view's steady state, requests queue: "
        f"latency grows with the rate and turns up sharply at saturation. Times rest on the page's roofs and "
        f"the engine's host work per step, and a step the engine runs without a CUDA graph on the host's "
        f"dispatch of every kernel."
    )
    warn_bad_params(
        {
            "load_kind": one_of(LOAD_KINDS),
            "load_rate": float_in(0.01, 1e4),
            "load_conc": int_in(1, 4096),
            "load_n": int_in(10, MAX_PAGE_REQUESTS),
            "load_seed": int_in(0, 2**31 - 1),
            "load_pct": one_of([str(p) for p in PERCENTILES]),
            "load_at": int_in(0, 100),
            "load_ramp": float_in(0.0, MAX_RAMP_S),
        }
    )
    c1, c2, c3, c4, c5 = st.columns([1.2, 1, 1, 1, 1])
    kind = c1.radio(
        "Load",
        LOAD_KINDS,
        horizontal=True,
        key="load_kind",
        bind="query-params",
        help="rate: Poisson arrivals (vllm bench serve --request-rate); concurrency: that many clients, each "
        "sending its next request when its last one ends (--max-concurrency); trace: the arrivals and lengths of a "
        "file you upload (JSONL, or Azure's or BurstGPT's CSV), as serve --trace reads them.",
    )
    amount = None
    if kind == "rate":
        amount = c2.number_input(
            "Requests/s", 0.01, 1e4, 10.0, 1.0, key="load_rate", bind="query-params", format="%.2f"
        )
    elif kind == "concurrency":
        amount = c2.number_input("Concurrent clients", 1, 4096, 64, key="load_conc", bind="query-params")
    n = c3.number_input(
        "Requests",
        10,
        MAX_PAGE_REQUESTS,
        500,
        100,
        key="load_n",
        bind="query-params",
        help="How many requests the run sends; a trace's first this many lines.",
    )
    seed = c4.number_input("Seed", 0, 2**31 - 1, 0, key="load_seed", bind="query-params")
    ramp_s = 0.0
    if kind == "concurrency":
        ramp_s = c5.number_input(
            "Clients start over (s)",
            0.0,
            MAX_RAMP_S,
            0.0,
            1.0,
            key="load_ramp",
            bind="query-params",
            format="%.1f",
            help="0: every client sends its first request at once, as vllm bench serve, GuideLLM and aiperf do by "
            "default. Above 0: they start one at a time over this many seconds, as aiperf's "
            "--concurrency-ramp-duration starts them.",
        )
    prompt, output = Lengths(traffic.prompt_len), Lengths(traffic.output_len)
    if kind == "rate":
        load = Load("poisson", int(n), prompt, output, rate_per_s=float(amount), seed=int(seed))
    elif kind == "concurrency":
        load = Load(
            "concurrency", int(n), prompt, output, concurrency=int(amount), seed=int(seed), ramp_s=float(ramp_s)
        )
    else:
        load = trace_upload(int(n))
    settings = held_back(settings, hw)
    measured = measured_upload()
    if load is not None:
        _one_device(report, model, hw, traffic, precision, tp, settings, chunked, load, int(seed), targets, measured)
    render_capacity(
        report, model, devices, prompt, output, targets, precision, tp, settings, prices or {}, int(seed), chunked
    )


def _one_device(
    report, model, hw, traffic, precision, tp, settings, chunked, load: Load | Trace, seed: int, targets, measured=()
) -> None:
    """The sweep over rates, the chosen run's distributions and its time series."""
    trace = isinstance(load, Trace)
    count = load.requests.count if trace else load.requests
    try:
        if tp > 1 and hw.group_link(tp)[0] is None:
            raise ValueError(f"TP={tp}: {hw.group_link(tp)[1]}")
        with st.spinner(f"Simulating {count:,} requests on {hw.name}, then {SWEEP_RATES} rates…"):
            sent = load.requests if trace else load
            run = cached(load_run, model, hw, traffic, precision, tp, settings, chunked, sent, targets)
            sweep = cached(latency_sweep, model, hw, traffic, precision, tp, settings, chunked, seed)
    except ValueError as exc:
        st.info(f"No simulation of {model.name} on {tp} x {hw.name} (the first device picked): {exc}")
        return
    poisson = not trace and load.kind == "poisson"
    amount = None if trace else load.rate_per_s if poisson else load.concurrency
    if settings.attention_dp > 1:
        st.caption(
            f"{ranks_of(tp, settings.attention_dp)}: each "
            "runs its own scheduler and KV cache on the requests handed to it in turn, its steps carrying every "
            "rank's tokens in the MLP and experts (the ranks taken as alike). The running, waiting and KV series "
            "are the busiest rank's; the steady-state line is one rank's batch."
        )
    roofs = run["roofs"]
    done = f"{run['completed']:,} of {run['requests']:,} requests in {run['duration_s']:.1f} s simulated"
    ttft, tpot = run["ttft_s"], run["tpot_s"]
    report.metrics(
        Metric("TTFT p50", _seconds(ttft["p50"]), f"p99 {_seconds(ttft['p99'])}", done, "off"),
        Metric("TPOT p50", _seconds(tpot["p50"]), f"p99 {_seconds(tpot['p99'])}", done, "off"),
        Metric(
            "Output tokens/s",
            f"{run['output_throughput_tokens_per_s'] or 0:,.0f}",
            help=f"{done}: every output token over the run's duration, first arrival to last finish, as vllm "
            "bench serve counts it (the last requests' drain included, so a finite run reads below the rate x the "
            "output length a server sustaining that rate puts out; the capacity table gives the sustained figure)",
        ),
        Metric(
            "Met the targets",
            f"{run.get('met_targets', 0):.0%}",
            help=f"TTFT ≤ {fmt_seconds(targets.ttft_s)} and TPOT ≤ {fmt_seconds(targets.tpot_s)}, per request",
        ),
        Metric("Peak KV use", f"{run['peak_kv_used']:.0%}", help=f"of {run['engine']['kv_tokens']:,} tokens"),
    )
    known = for_settings(settings, hw)
    said = md_escape(known.words())  # a custom device's name among them
    if known.scores:  # a link to the very runs scored
        runs = {"metric": "TTFT, simulated under load", "engines": known.engine, "devices": known.device}
        said += f". The [Accuracy page](/accuracy?{urlencode({k: v for k, v in runs.items() if v})}) shows them"
    report.caption(f"How far off to expect it: {said}.")
    graphs = graph_words(run["engine"])
    if graphs:
        report.caption(f"CUDA graphs: {graphs}.")
    if chunking := chunking_words(run["engine"]):
        report.caption(f"{chunking}.")
    if (clients := clients_words(load, run)) is not None:
        report.caption(clients)

    # ---- latency against rate --------------------------------------------------------------------
    steady = _steady(model, hw, traffic, precision, tp, settings, chunked, sweep["mean_running"])
    # A trace's run is not placed on the sweep: its lengths are the file's, not the page's.
    run_rate = None if trace else float(amount) if poisson else run["request_throughput_per_s"]
    rate_fig = latency_rate_figure(
        sweep["rate_per_s"],
        sweep["percentiles"],
        sweep["saturation_per_s"],
        {"ttft_s": targets.ttft_s, "tpot_s": targets.tpot_s},
        steady,
        sweep["mean_running"],
        run_rate,
        title=f"Latency against request rate: {model.name} on {tp} x {hw.name} ({roofs})",
    )
    if run_rate and not poisson:  # the closed loop's own latencies, at the rate it achieved
        add_run_points(rate_fig, run_rate, run, "this run (closed loop)")
    if measured:
        add_measured_points(rate_fig, [r.to_json() for r in measured])
    report.chart(rate_fig, width="stretch", theme=None, key="load_rate_chart")
    if measured:
        gaps = measured_gaps(list(measured), model, hw, precision, tp, settings, chunked)
        report.table(
            gaps,
            "Measured beside simulated, each point at its own load",
            hide_index=True,
            width="stretch",
            column_config={
                "measured (ms)": st.column_config.NumberColumn(format="%,.2f"),
                "simulated (ms)": st.column_config.NumberColumn(format="%,.2f"),
                "simulated / measured": st.column_config.NumberColumn(format="%.2f×"),
            },
        )
    report.caption(
        f"Each rate of the sweep is its own run of {SWEEP_REQUESTS} Poisson arrivals (seed {seed}; the Requests "
        "input sizes the one run below); lines are p50, bands p90 to p99. "
        f"The knee is the saturation rate, {sweep['saturation_per_s']:.3g} requests/s: what the server completes "
        f"with {most_in_flight(settings, hw)} requests always in flight. Below it the batch grows with the rate "
        "and TPOT with the batch; past it (shaded) the queue grows and TTFT takes off (a finite run sees only the "
        "start of that, so its points there read lower than a server held at that rate gives). "
        "Dotted: the Frontier view's steady-state model at each run's mean running batch, a bound with no queueing "
        "(on engine-measured kernels it keeps the timings' own steps, so a larger batch can read a few percent less)."
        + (
            " The trace's run is not placed on it: its lengths are the file's, the sweep's the page's."
            if trace
            else ""
            if poisson
            else " The closed-loop run is placed at the rate it achieved (squares: p50 filled, p90 and p99 open); its "
            "requests come as its clients' last ones end, not as Poisson arrivals, so its latencies need not lie on "
            "the Poisson curves."
        )
    )

    # ---- distributions ---------------------------------------------------------------------------
    mean_batch = float(run["mean_running"])
    # The steady state at the page's lengths; not for a trace, whose lengths are the file's.
    at_batch = None if trace else _steady(model, hw, traffic, precision, tp, settings, chunked, np.array([mean_batch]))
    if trace:
        shown = f"the trace {load.name}"
    elif poisson:
        shown = f"{amount:g} requests/s (Poisson)"
    else:
        shown = f"{int(amount)} clients (closed loop{f', started over {load.ramp_s:g} s' if load.ramp_s else ''})"
    d1, d2 = st.columns(2)
    for column, metric, label, color, target in (
        (d1, "ttft_s", "TTFT", TTFT_COLOR, targets.ttft_s),
        (d2, "tpot_s", "TPOT", TPOT_COLOR, targets.tpot_s),
    ):
        with column:
            report.chart(
                distribution_figure(
                    run["per_request"][metric],
                    label,
                    color,
                    target,
                    None if at_batch is None else float(at_batch[metric][0]),
                    f"steady state, batch {mean_batch:.0f}",
                    title=f"{label} of each request at {shown}; {roofs}",
                ),
                width="stretch",
                theme=None,
                key=f"load_{label.lower()}_chart",
            )
    report.caption(
        f"{done}. The share of requests at or below each latency; TTFT counts the time queued"
        + (
            ", and the step this engine had already composed when the request arrived (it composes each step "
            "while the one before runs, so a request arriving during a step starts in the step after next)"
            if run["engine"].get("schedules_ahead")
            else ""
        )
        + (
            f". Dotted: the steady-state figure at the run's mean running batch ({mean_batch:.1f}), what the "
            "Frontier view predicts for a server that never queues."
            if at_batch is not None
            else "."
        )
    )

    # ---- the run over time -----------------------------------------------------------------------
    series = run["series"]
    time_s = np.asarray(series["time_s"], float)
    at_pct = st.slider(
        "Open the step at (% of the run)",
        0,
        100,
        50,
        key="load_at",
        bind="query-params",
        help="The requests decoding at this moment of the run open on the roofline page as one decode step.",
    )
    moment = run["moments"]
    pick = min(int(at_pct), len(moment["time_s"]) - 1)  # one moment for each % of the run
    at_s = float(moment["time_s"][pick])
    running = np.asarray(series["running"], float)
    cap = rank_settings(settings, hw).max_num_seqs  # the series is one rank's under attention DP
    busy = time_s.size and running.max() > cap / 2
    report.chart(
        series_figure(
            time_s,
            running,
            series["waiting"],
            series["kv_used"],
            cap if busy else None,
            at_s if time_s.size else None,
            title=f"The server over the run at {shown}: {done} ({roofs})",
        ),
        width="stretch",
        theme=None,
        key="load_series_chart",
    )
    if time_s.size:
        ranks = int(run["engine"]["replicas"]) * settings.attention_dp
        then = (
            f"At {at_s:.2f} s (the dashed line): the step under way runs {moment['running'][pick]} requests with "
            f"{moment['waiting'][pick]} waiting" + (f" on {series['of']}" if ranks > 1 else "")
        )
        decoding, context = int(moment["decoding"][pick]), moment["context"][pick]
        if decoding and context is not None and np.isfinite(context):
            # A rank's share of the requests decoding then, at their mean context.
            batch, context = max(1, int(decoding / ranks + 0.5)), max(1, int(round(context)))
            moe = {"moe_kernel": settings.moe_kernel, "moe_routing": settings.moe_routing}
            ran = precision.resolved(model).on(hw, need_peak=False)[0]  # as the device runs it (fp16 with no bf16)
            step = {"llm": model.id, "llm_phase": "decode", "llm_batch": batch, "llm_seq": context}
            # The roofs drawn, and the page's GEMM in the step's math.
            step |= {"dtypes": list(dict.fromkeys([ran.act_storage, ran.act_dtype])), "gemm_dtype": ran.act_dtype}
            link = "/roofline?" + urlencode(
                {"hw": hw.id, **step, **setup_params(ran, tp, settings.engine, moe, settings.attention_dp)},
                doseq=True,
            )
            report.markdown(
                f"{then}; {decoding} requests between their first and last token"
                + (f" in all, {decoding / ranks:.1f} a rank" if ranks > 1 else "")
                + f", about {context:,} tokens cached each. [Open this step on the roofline]({link}): a decode step "
                f"of {batch} sequences"
                + (" a rank" if settings.attention_dp > 1 else "")
                + f" at that context, on the run's setup ({ran.label}; TP {tp}"
                + (f", {ranks_of(tp, settings.attention_dp)}" if settings.attention_dp > 1 else "")
                + ") and roofs."
            )
        else:
            report.markdown(
                f"{then}; no request is decoding: no decode step to open. Move the slider to a busy moment."
            )
