"""Text rendering of the plan and measurement commands' data: measure, train, load and serve
(the same dict ``--json`` prints; ``roofline.cli.render`` re-exports them)."""

from __future__ import annotations

from roofline.dtypes import peak_unit
from roofline.format import fmt_bytes, fmt_seconds, table


def measure(results) -> str:
    """A results file as text: ceilings, the calibration, and each step against its predictions."""
    from roofline.measure.chains import kernel_chain_line
    from roofline.measure.readings import above_roof_line, fastest_point_s, latency_label, unresolved_note

    info, c = results.device, results.ceilings
    lines = [f"{info.name} ({info.kind}, torch {info.torch_version}, {info.date}; {results.mode} run)"]
    if c:
        lines += [
            f"  copy {c.memory_bandwidth_tbps * 1e3:,.1f} GB/s, read "
            + (f"{c.read_bandwidth_tbps * 1e3:,.1f} GB/s" if c.read_bandwidth_tbps else "not measured")
            + (f", in cache {c.cache_bandwidth_tbps * 1e3:,.1f} GB/s" if c.cache_bandwidth_tbps else ""),
            "  peaks: " + ", ".join(f"{d} {v:,.2f} {peak_unit(d)}" for d, v in c.peak_tflops.items()),
            "  host dispatch per eager op: "
            + ", ".join(f"{k} {fmt_seconds(v)}" for k, v in c.host_dispatch_s.items())
            + (
                f"; per kernel from a CUDA graph {fmt_seconds(c.graph_launch_overhead_s)}"
                if c.graph_launch_overhead_s
                else ""
            ),
        ]
        if above := above_roof_line(results):
            lines.append("  " + above)
        if c.eager_host_per_launch_s is not None:
            lines.append(
                f"  host per launch of an eager step {fmt_seconds(c.eager_host_per_launch_s)}"
                + (f": {c.eager_host_probe}" if c.eager_host_probe else "")
            )
    if results.calibration:
        fastest = fastest_point_s(results)
        rows = [
            [
                f.op_class,
                latency_label(f.latency_s, fastest.get(f.op_class)),
                f"{f.bandwidth_bytes_per_s / 1e9:,.1f}" if f.bandwidth_bytes_per_s else "-",
                f"{f.flops_per_s / 1e12:,.2f}" if f.flops_per_s else "-",
                f.points,
                f"{f.median_abs_error:.1%}",
            ]
            for f in results.calibration.fits.values()
        ]
        lines += [
            "calibration (fitted on the kernel sweeps):",
            table(["class", "latency", "GB/s", "TFLOP/s", "points", "median error"], rows),
        ]
        if note := unresolved_note(results):
            lines.append("  " + note)
    for step in results.steps:
        lines.append(
            f"{step.model} {step.phase} batch {step.batch}, {step.seq_len} tokens ({step.layers_measured} of "
            f"{step.layers_total} layers measured): eager {fmt_seconds(step.eager.median_s)}"
            + (f", CUDA graph {fmt_seconds(step.graph.median_s)}" if step.graph else f" ({step.graph_note})")
            + f"; kernels {fmt_seconds(step.kernel_time_s)}, {step.attribution:.0%} attributed to ops"
        )
        for roofs in sorted(k for k in step.predicted_s if not k.endswith(", graph")):
            error = step.op_error(roofs)
            graph_ratio = step.step_ratio(f"{roofs}, graph")
            lines.append(
                f"  predicted on {roofs} roofs: eager {fmt_seconds(step.predicted_s[roofs])} "
                f"({step.step_ratio(roofs):.2f}× measured)"
                + (f", graph {graph_ratio:.2f}× measured" if graph_ratio else "")
                + (f"; per-op median error {error:.0%}" if error is not None else "")
            )
        if chains := kernel_chain_line(step):
            lines.append(f"  {chains}")
    lines += [f"note: {n}" for n in results.notes]
    return "\n".join(lines)


def train(d: dict, model_name: str, hardware_name: str) -> str:
    mem = d["memory"]
    fits = "fits" if d["fits"] else "does NOT fit"
    lines = [
        f"{model_name} training on {hardware_name} ({d['dp']} device{'s' if d['dp'] > 1 else ''}"
        + (f", ZeRO-{d['zero']}" if d["zero"] else "")
        + f"): {d['method']}, {d['precision']} precision, {d['optimizer']}, recompute {d['recompute']}",
        f"  micro-batch {d['micro_batch']} x {d['seq_len']} tokens, {d['accumulation_steps']} accumulation step(s), "
        f"global batch {d['global_batch']}",
        f"  peak {fmt_bytes(mem['peak_bytes'])} per device at the {mem['peak_at']} of {fmt_bytes(d['capacity_bytes'])} "
        f"usable: {fits}; the largest micro-batch that fits: {d['largest_micro_batch'] or 'none (not even 1)'}",
        "  at the peak: " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in mem["at_peak"].items() if v > 0),
    ]
    if mem["host_bytes"]:
        lines.append(f"  on the host (offloaded): {fmt_bytes(mem['host_bytes'])}")
    lines.append(
        f"  step {fmt_seconds(d['step_time_s'])} ("
        + ", ".join(f"{k} {fmt_seconds(v)}" for k, v in d["time_by_phase_s"].items())
        + f"), {d['tokens_per_s']:,.0f} tokens/s, MFU {d['mfu'] * 100:.1f}% on {d['roofs']} roofs, {d['bound']}-bound"
    )
    rows = [
        [lv["name"], fmt_bytes(lv["peak_bytes"]), "yes" if lv["fits"] else "no", f"{lv['slowdown']:.2f}×"]
        for lv in d["levers"]
    ]
    lines += ["", table(["lever", "peak", "fits", "time per token (× now)"], rows)]
    plan = d["plan_to_fit"]
    if plan["levers"]:
        lines.append(
            f"to fit: {' + '.join(plan['levers'])} -> {fmt_bytes(plan['peak_bytes'])}, "
            + ("fits" if plan["fits"] else "still does not fit")
            + f", step {fmt_seconds(plan['step_time_s'])}"
        )
    if "measured" in d:
        m = d["measured"]
        lines.append(
            f"measured here ({m['device']}): peak {fmt_bytes(m['peak_bytes'])} against "
            f"{fmt_bytes(m['predicted_peak_bytes'])} predicted, step {fmt_seconds(m['time_s'])}"
        )
    lines += [f"note: {n}" for n in d["notes"]]
    return "\n".join(lines)


def load(d: dict, model_name: str, hardware_name: str) -> str:
    rows = [
        [
            r["method"],
            fmt_bytes(r["host_peak_bytes"]) + (" (file pages)" if r["host_file_backed"] else ""),
            fmt_bytes(r["device_peak_bytes"]),
            "yes" if r["fits_device"] else "no",
            "-" if r["fits_host"] is None else ("yes" if r["fits_host"] else "no"),
            r["description"],
        ]
        for r in d["methods"]
    ]
    lines = [
        f"Loading {model_name} ({d['checkpoint_dtype']} checkpoint in {d['shards']} file(s), loaded as "
        f"{d['load_dtype']}) onto {d['tp']} x {hardware_name} ({fmt_bytes(d['device_memory_bytes'])} each)",
        table(["method", "host RAM peak", "device peak", "fits device", "fits host", "how"], rows),
    ]
    for m in d.get("measured", []):
        lines.append(
            f"measured here, {m['method']}: {fmt_bytes(m['measured_peak_bytes'])} resident at the peak, "
            f"{fmt_bytes(m['predicted_peak_bytes'])} predicted"
        )
    return "\n".join(lines)


def serve(d: dict, model_name: str) -> str:
    from roofline.engines import prompt_words

    t = d["targets"]
    lines = [
        f"{model_name} serving {d['prompt_len']:,} -> {d['output_len']:,} tokens, targets TTFT "
        f"{fmt_seconds(t['ttft_s'])}, TPOT {fmt_seconds(t['tpot_s'])}"
        + f" ({prompt_words(d['mixed_steps'], d['chunked_prefill'])})",
    ]
    rows = []
    for b in d["best"]:
        if not b["meets_targets"]:
            rows.append([b["hardware"], "-", "-", "-", "-", "-", "-", f"no: {b['binding']}"])
            continue
        cost = b["usd_per_million_output_all_in"]
        rows.append(
            [
                b["hardware"],
                f"TP{b['tp']} x{b['batch']}",
                f"{b['weight_dtype']}{' (' + b['fp8_scaling'] + ')' if b.get('fp8_scaling') else ''}/{b['act_dtype']}"
                f"/{b['kv_dtype']}",
                fmt_seconds(b["ttft_s"]),
                fmt_seconds(b["tpot_s"]),
                f"{b['tokens_per_s_per_device']:,.0f}",
                f"${cost:,.3f}" if cost is not None else "no price",
                f"yes ({b['binding']}-bound)",
            ]
        )
    lines.append(
        table(
            [
                "hardware",
                "setup",
                "weights/math/KV",
                "TTFT",
                "TPOT",
                "tok/s/device",
                "$/M out (all-in)",
                "meets targets",
            ],
            rows,
        )
    )
    lines.append(d["searched"])
    if d["precision"].get("math_note"):
        lines.append(d["precision"]["math_note"])
    lines += list(d.get("skipped_tp", {}).values())
    notes = list(d.get("roofs", {}).values())
    lines += notes[:12] + ([f"... and {len(notes) - 12} more devices"] if len(notes) > 12 else [])
    if d.get("ranking_basis"):
        lines.append(
            "Devices on the datasheet's ideal roofs are flattered beside those with measured kernels: "
            f"{d['ranking_basis']}."
        )
    from roofline.known_error import ON_EVERY_DEVICE  # numpy and the report's reader, not at --help

    known = d.get("known_error", {})
    scored = [b["hardware"] for b in d["best"] if (known.get(b["hardware"]) or {}).get("tpot")]
    shown = [known[h] | {"id": h} for h in scored]
    if shown:
        cells = "; ".join(f"{k['id']} {k['short']}" for k in shown[:12])
        lines.append(
            "published bias of the steady-state TPOT (median of predicted / measured - 1 on the accuracy report's "
            f"test runs of the engine on the device; below 0 too fast): {cells}"
            + (f" ({ON_EVERY_DEVICE})" if any(not k["on_device"] for k in shown[:12]) else "")
        )
    lv = d["levers"]
    if "speculative_decoding" in lv:
        sd = lv["speculative_decoding"]
        pts = ", ".join(
            f"batch {p['batch']}: {p['speedup']:.2f}×" for p in sd["points"][:: max(1, len(sd["points"]) // 6)]
        )
        lines.append(f"speculative decoding (k={sd['k']}, acceptance {sd['acceptance_rate']:g}, {sd['draft']}): {pts}")
    if "disaggregation" in lv and "error" not in lv["disaggregation"]:
        for name, v in lv["disaggregation"].items():
            lines.append(
                f"{name}: TTFT {fmt_seconds(v['ttft_s'])}, TPOT {fmt_seconds(v['tpot_s'])}, "
                f"{v['tokens_per_s_per_device']:,.0f} tok/s/device"
                + (f", KV transfer {fmt_seconds(v['kv_transfer_s'])} per prompt" if "kv_transfer_s" in v else "")
            )
    return "\n".join(lines)
