"""Text of ``serve``'s simulations: one run, the capacity ranking and a measured file beside
its simulation (``roofline.cli.simulate`` computes them)."""

from __future__ import annotations

from roofline.format import fmt_seconds


def _per_s(value: float | None, decimals: int) -> str:
    """A rate to ``decimals`` places, or to two significant digits where that would show a rate above
    0 as 0 (a trickle of 10^-9 requests/s had read "0 output tokens/s")."""
    value = value or 0.0
    return f"{value:,.{decimals}f}" if value == 0 or value >= 10 ** (1 - decimals) else f"{value:.2g}"


def render_capacity(d: dict, model_name: str) -> str:
    from roofline.known_error import ON_EVERY_DEVICE  # numpy and the report's reader, not at --help

    p = d["targets"]["percentile"]
    lines = [
        f"{model_name}: the largest request rate with p{p} TTFT <= {fmt_seconds(d['targets']['ttft_s'])} and "
        f"TPOT <= {fmt_seconds(d['targets']['tpot_s'])}",
        f"  {'device':<22} {'TP':>3} {'req/s':>8} {'tok/s':>9} {'$/M out':>8}  {'published bias':<23}  binds",
    ]
    for row in d["ranking"]:
        usd = row["usd_per_million_output_tokens"]
        known = row.get("known_error") or {}
        lines.append(
            f"  {row['hardware']:<22} {row['tp']:>3} {row['max_rate_per_s']:>8.2f} {row['output_tokens_per_s']:>9,.0f} "
            f"{'—' if usd is None else f'{usd:.3f}':>8}  {known.get('short', ''):<23}  {row['binding']}"
            + (" (times are lower bounds: no published compute peak)" if "lower bounds" in row["roofs"] else "")
        )
    if target := d.get("target_rate_per_s"):
        for row in d["ranking"]:
            n = row.get("replicas_for_target")
            lines.append(
                f"  {row['hardware']} TP{row['tp']}: "
                + (f"{n} replicas ({row['devices_for_target']} devices) for {target:g} requests/s" if n else "no rate")
            )
    for key, why in d["not_run"].items():
        lines.append(f"  {key}: {why}")
    if d.get("ranking_basis"):
        lines.append(f"Ranking: {d['ranking_basis']}.")
    if d["ranking"]:
        lines.append(
            "tok/s: the rate x the output length of the requests admitted (a server within its targets carries all "
            "it admits); $/M out: all-in, every device-hour over the output tokens; published bias: how far the "
            "same kind of prediction was off (median of predicted / measured - 1) on the accuracy report's test runs "
            "of that engine on that device (for the ideal bound, every engine's), below 0 too fast: such a rate is "
            "overstated"
        )
        if any(not (row.get("known_error") or {}).get("on_device", True) for row in d["ranking"]):
            lines.append(ON_EVERY_DEVICE)
    lines.append(f"method: {d['method']}")
    return "\n".join(lines)


def _rate(load: dict) -> str:
    ramp = load.get("rate_ramp")
    if not ramp:
        return f"{load.get('rate_per_s')} requests/s"
    return f"a rate ramped {ramp['strategy']}ly from {ramp['start_per_s']:g} to {ramp['end_per_s']:g} requests/s"


def _clients(count: int, ramp_s: float) -> str:
    if count < 2:
        return f"{count} client"
    if not ramp_s:
        return f"{count} concurrent clients"
    spread = fmt_seconds(ramp_s) if ramp_s >= 1e-9 else f"{ramp_s:.3g} s"
    return f"{count} concurrent clients started one at a time over {spread}"


def render_text(d: dict, model_name: str, hw_name: str) -> str:
    load = d["load"]
    what = {
        "concurrency": _clients(load.get("concurrency") or 0, load.get("ramp_s") or 0.0),
        "poisson": f"Poisson arrivals at {_rate(load)}",
        "gamma": f"gamma arrivals at {_rate(load)} (burstiness {load.get('burstiness')})",
        "trace": f"the trace {load.get('file')}"
        + (
            f" ({load['skipped']:,} request{'s' if load['skipped'] > 1 else ''} without prompt or output tokens "
            "left out)"
            if load.get("skipped")
            else ""
        ),
    }[load["kind"]]
    fleet, dp = d["engine"].get("replicas", 1), d["engine"].get("attention_dp", 1)
    group = f"{d['tp']} x {hw_name}" + (f" as {dp} attention ranks" if dp > 1 else "")
    where = f"{fleet} replicas ({d['engine']['router']}) of {group}" if fleet > 1 else group
    lines = [
        f"{model_name} on {where}, {what}: {d['completed']:,} of {d['requests']:,} requests "
        f"in {d['duration_s']:.1f} s simulated ({d['engine']['what_the_times_rest_on']})",
        f"  throughput {_per_s(d['output_throughput_tokens_per_s'], 0)} output tokens/s, "
        f"{_per_s(d['request_throughput_per_s'], 2)} requests/s; goodput {_per_s(d.get('goodput_requests_per_s'), 2)} "
        f"requests/s ({d.get('met_targets', 0):.0%} met the targets)",
        "              mean       p50       p90       p99",
    ]
    for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL"), ("e2e_s", "end-to-end")):
        s = d[key]
        cells = " ".join(f"{fmt_seconds(s[k]) if s[k] is not None else '—':>9}" for k in ("mean", "p50", "p90", "p99"))
        lines.append(f"  {label:<10} {cells}")
    lines.append(
        f"  mean running {d['mean_running']:.1f}, mean waiting {d['mean_waiting']:.1f}, peak KV use "
        f"{d['peak_kv_used']:.0%} of {d['engine']['kv_tokens']:,} tokens"
        + (f" ({d['series']['of']})" if d["engine"].get("attention_dp", 1) > 1 else "")
        + f", {d['preemptions']:,} preemptions, {d['rejected']:,} rejected (larger than the cache)"
    )
    lines.append(
        f"  scheduler: {d['engine']['scheduler']}"
        + ("; each step composed while the one before runs" if d["engine"].get("schedules_ahead") else "")
    )
    from roofline.serving.simulation.api import chunking_words, graph_words

    graphs = graph_words(d["engine"])
    if graphs:
        lines.append(f"  CUDA graphs: {graphs}")
    if chunking := chunking_words(d["engine"]):
        lines.append(f"  {chunking}")
    if d.get("known_error"):
        lines.append(f"  {d['known_error']['words']}")
    if d.get("math_note"):
        lines.append(f"  {d['math_note']}")
    return "\n".join(lines)


def render_measured(d: dict, model_name: str, hw_name: str) -> str:
    lines = [
        f"{model_name} on {d['tp']} x {hw_name} predicted beside {d['file']} ({d['format']}); "
        "ratio = predicted / measured, nothing fitted"
    ]
    if d.get("model_check"):
        lines.append(f"  warning: {d['model_check']}")
    labels = {"ttft_s": "TTFT", "tpot_s": "TPOT", "itl_s": "ITL", "e2e_s": "end-to-end"}
    for point in d["points"]:
        m = point["measured"]
        where = " ".join(x for x in (m["model"], m["backend"] and f"({m['backend']})") if x)
        lines += [
            "",
            f"{point['point']}: {m['requests'] or '?'} requests, prompt {m['prompt_tokens_mean'] or 0:,.0f} / "
            f"output {m['output_tokens_mean'] or 0:,.0f} tokens on average{', measured on ' + where if where else ''}",
            "                    measured  predicted     ratio",
        ]
        for row in point["latency"]:
            if row["measured"] is None:
                continue
            cells = [fmt_seconds(v) if v is not None else "—" for v in (row["measured"], row["predicted"])]
            ratio = f"{row['ratio']:.2f}×" if row["ratio"] is not None else "—"
            lines.append(f"  {labels[row['metric']]:<10} {row['stat']:<5} {cells[0]:>9} {cells[1]:>10} {ratio:>9}")
        for row in point["throughput"]:
            unit = "requests/s" if row["metric"] == "request_throughput_per_s" else "tokens/s"
            if row["measured"] is not None:
                predicted = f"{row['predicted']:,.1f}" if row["predicted"] is not None else "—"
                ratio = f"{row['ratio']:.2f}×" if row["ratio"] is not None else "—"
                lines.append(f"  {unit:<16} {row['measured']:>9,.1f} {predicted:>10} {ratio:>9}")
        if m["missing"]:
            lines.append(f"  not in the file: {', '.join(m['missing'])}")
        for note in m["notes"]:
            lines.append(f"  note: {note}")
    return "\n".join(lines)
