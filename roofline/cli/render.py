"""Text rendering of each command's data (the same dict ``--json`` prints): hardware, models,
matmul, analyze, request, kv and advise here; measure, train, load and serve in ``render_plans``,
re-exported here."""

from __future__ import annotations

from roofline.cli.render_plans import load, measure, serve, train  # noqa: F401 (callers use render.<name>)
from roofline.defaults import FUSED_MOE_PREFIX
from roofline.dtypes import peak_unit
from roofline.format import fmt_amount, fmt_bytes, fmt_flops, fmt_rate, fmt_seconds, ranks_of, table


def num(value: object) -> str:
    return "unknown" if value is None else f"{value:g}"


def hardware_list(data: list[dict]) -> str:
    rows = [
        [
            d["id"],
            d["name"],
            num(d["peak_tflops"].get("bf16")),
            num(d["peak_tflops"].get("fp8")),
            num(d["memory_bandwidth_tbps"]),
            num(d["memory_gb"]),
        ]
        for d in data
    ]
    return table(["id", "name", "bf16 TFLOPS", "fp8 TFLOPS", "TB/s", "GB"], rows)


def hardware_show(d: dict) -> str:
    link = d["interconnect"]
    lines = [
        f"{d['name']} ({d['id']}), {d['vendor']}, {d['launch_year']}",
        f"memory: {num(d['memory_gb'])} GB {d['memory_type'] or ''} at {d['memory_bandwidth_tbps']:g} TB/s; "
        f"capacity used: {d['memory_source']}",
        f"last-level cache: {num(d['l2_cache_mb'])} MB; compute units: {num(d['compute_units'])}",
        f"TDP: {num(d['tdp_w'])} W",
        "interconnect: "
        + (
            f"{link['kind']}, {link['bandwidth_gb_per_s']:g} GB/s "
            f"({'both directions' if link['bidirectional'] else 'per direction'}), {link['topology']}"
            if link
            else "unknown"
        ),
        "dense peaks (ridge point):",
    ]
    for dtype, peak in d["peak_tflops"].items():
        ridge = d["ridge_intensity"].get(dtype)
        ridge_text = f"  (ridge {ridge:.0f} FLOP/B)" if ridge else ""
        lines.append(f"  {dtype:>11}: {peak:>9g} {peak_unit(dtype)}{ridge_text}")
    if not d["peak_tflops"]:
        lines.append("  none published: times on this device are lower bounds from memory bandwidth")
    if d["formats"]:
        f = d["formats"]
        kinds = "; ".join(f"{k} {', '.join(f[k])}" for k in ("weights", "kv", "math"))
        lines.append(f"formats: {kinds}")
        lines.append(f"  ({f['basis']})")
    if d["notes"]:
        lines.append(f"notes: {d['notes']}")
    lines.append("sources:")
    lines.extend(f"  - {s['name']}: {s['url']}" for s in d["sources"])
    return "\n".join(lines)


def _rate(tflops: float, dtype: str) -> str:
    """A rate given in the dtype's peak unit (TFLOPS or TOPS), at the prefix that suits its size."""
    return fmt_rate(tflops * 1e12, peak_unit(dtype)[1:])


def matmul(d: dict) -> str:
    return "\n".join(
        [
            f"GEMM M={d['m']} N={d['n']} K={d['k']} {d['dtype']} on {d['hardware_name']} ({d['ceilings']} roofs)",
            f"  FLOPs:      {fmt_flops(d['flops'])}",
            f"  bytes:      {fmt_bytes(d['bytes'])}",
            f"  intensity:  {d['intensity']:.1f} FLOP/B (ridge {d['ridge_intensity']:.1f})",
            f"  time:       {expected_beside_ideal(d['time_s'], d['ideal_time_s'], d['ceilings'])}",
            f"  ideal:      compute {fmt_seconds(d['compute_s'])}, memory {fmt_seconds(d['memory_s'])}, "
            f"kernel floor {fmt_seconds(d['overhead_s'])}",
            *([f"  rests on:   {d['rests_on']}"] if d["rests_on"] != "datasheet roofs" else []),
            f"  bound:      {d['bound_label']}",
            f"  attainable: {d['attainable_tflops']:.1f} {peak_unit(d['dtype'])} of {d['peak_tflops']:g} peak "
            "(the roofline at this intensity)",
            f"  predicted:  {_rate(d['expected_tflops'], d['dtype'])} expected, "
            f"{_rate(d['ideal_bound_tflops'], d['dtype'])} at the ideal bound (its FLOPs over its time, kernel floor "
            "included)",
        ]
    )


def model_list(data: list[dict]) -> str:
    rows = [
        [
            d["id"],
            d["name"],
            d["attention"],
            f"{d['params']['total'] / 1e9:.2f}B",
            f"{d['params']['active_per_token'] / 1e9:.2f}B",
            d["num_layers"],
            d["max_context"],
            fmt_bytes(d["kv_bytes_per_token"]["bf16"]),
        ]
        for d in data
    ]
    return table(["id", "name", "attention", "params", "active", "layers", "max ctx", "KV/token (bf16)"], rows)


def _field(value) -> str:
    """A model field as text: a section (MoE, MLA) as its set fields, not a Python dict with Nones."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {_field(v)}" for k, v in value.items() if v is not None)
    return str(value)


def model_show(d: dict) -> str:
    skip = {"params", "kv_bytes_per_token", "sources"}
    lines = [f"{k}: {_field(v)}" for k, v in d.items() if k not in skip and v is not None]
    lines.append("params: " + ", ".join(f"{k} {v / 1e9:.3f}B" for k, v in d["params"].items()))
    lines.append("KV bytes per token: " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in d["kv_bytes_per_token"].items()))
    lines.extend(f"source: {s['name']}" + (f": {s['url']}" if s.get("url") else "") for s in d["sources"])
    return "\n".join(lines)


def memory_line(mem: dict) -> str:
    return (
        f"memory per device: weights {fmt_bytes(mem['weights_bytes'])}, KV {fmt_bytes(mem['kv_cache_bytes'])}, "
        f"activations {fmt_bytes(mem['activation_bytes'])}, reserved "
        f"{fmt_bytes(mem['non_torch_bytes'] + mem['cuda_graph_bytes'])} of {fmt_bytes(mem['capacity_bytes'])} usable: "
        + (
            "fits"
            if mem["fits"]
            else "DOES NOT FIT" + (f" (smallest TP that fits: {mem['smallest_tp']})" if mem["smallest_tp"] else "")
        )
    )


def precision_text(p: dict) -> str:
    """A workload's precision (``Precision.to_json``) in the one wording of ``Precision.label``."""
    from roofline.workload import Precision

    return Precision(
        p["weight_dtype"],
        p["act_dtype"],
        p["kv_dtype"],
        expert_weight_dtype=p.get("expert_weight_dtype"),
        fp8_scaling=p.get("fp8_scaling") or "auto",
    ).label


def pct(x: float | None) -> str:
    """A utilisation in percent; "n/a" where no peak is published to divide by."""
    return "n/a" if x is None else f"{x * 100:.1f}%"


def expected_beside_ideal(time_s: float, ideal_s: float | None, roofs: str) -> str:
    """The expected time and, where it rests on more than the datasheet, the ideal bound beside it
    with the gap between them."""
    same = bool(ideal_s) and abs(time_s / ideal_s - 1) < 0.005
    if ideal_s is None or not ideal_s or (roofs == "datasheet" and same):
        return f"{fmt_seconds(time_s)} (ideal bound, datasheet roofs)"
    if roofs == "datasheet":  # a serving engine's host work on the datasheet's roofs: no longer ideal
        roofs = "datasheet roofs and the engine's host work"
    if same:  # the host sets both
        return f"{fmt_seconds(time_s)} expected ({roofs}), the ideal bound too"
    return f"{fmt_seconds(time_s)} expected ({roofs}); ideal bound {fmt_seconds(ideal_s)}, {time_s / ideal_s:.2f}× it"


def rests_on_lines(d: dict) -> list[str]:
    lines = []
    if d.get("roof_source"):
        lines.append(f"roofs: {d['roof_source']} where it covers an op, the datasheet elsewhere")
    if d.get("engine_host_work"):
        lines.append(f"plus {d['engine_host_work']}")
    return lines


def lower_bound_line(d: dict) -> list[str]:
    return [f"times are LOWER BOUNDS: {d['time_rests_on']}"] if d.get("time_is_lower_bound") else []


def analyze(d: dict, hardware_name: str, model_name: str) -> str:
    rows = [
        [
            r["name"],
            r["count"],
            fmt_flops(r["flops"]),
            fmt_bytes(r["bytes"]),
            "inf" if r["intensity"] is None else f"{r['intensity']:.1f}",
            *(
                ("in the fused MoE layer", "—")  # timed with the layer it runs in (rests_on says so)
                if str(r.get("rests_on", "")).startswith(FUSED_MOE_PREFIX)
                else (("≥ " if not r["bound_certain"] else "") + fmt_seconds(r["time_s"]), r["bound"])
            ),
        ]
        for r in d["ops"]
    ]
    t = d["total"]
    head = (
        f"{model_name} {d['phase']} batch={d['batch']} seq_len={d['seq_len']} tp={d['tp']}{ranks_text(d)} "
        f"on {hardware_name} "
        f"({precision_text(d['precision'])}; {d['roofs']} roofs; {'CUDA graphs' if d['cuda_graphs'] else 'eager'})"
    )
    at_least = "≥ " if t["time_is_lower_bound"] else ""
    foot = [
        f"step: {at_least}{expected_beside_ideal(t['time_s'], t['ideal_time_s'], d['roofs'])}",
        f"  {t['bound_label']}; {fmt_flops(t['flops'])}, {fmt_bytes(t['bytes'])} ({t['intensity']:.1f} FLOP/B); "
        f"MFU {pct(t['mfu'])}, MBU {pct(t['mbu'])}",
        *rests_on_lines(d),
        *lower_bound_line(d),
        f"device {fmt_seconds(t['device_time_s'])}, host dispatch {fmt_seconds(t['host_time_s'])}"
        + (f": the device waits {fmt_seconds(t['exposed_host_s'])} for the host" if t["exposed_host_s"] else ""),
        memory_line(d["memory"]),
        *[f"note: {n}" for n in d["notes"]],
    ]
    return "\n".join([head, table(["op", "count", "FLOPs", "bytes", "FLOP/B", "time", "bound"], rows), *foot])


def ranks_text(d: dict) -> str:
    """Attention data parallelism in a result's header ("" without it)."""
    dp = d.get("attention_dp", 1)
    if dp <= 1:
        return ""
    return f" ({ranks_of(d['tp'], dp)}, each with the batch; the MLP over all)"


def request(d: dict, hardware_name: str, model_name: str) -> str:
    return "\n".join(
        [
            f"{model_name} on {hardware_name} x{d['tp']}{ranks_text(d)}: batch {d['batch']}, prompt {d['prompt_len']}, "
            f"output {d['output_len']} ({precision_text(d['precision'])}; {d['roofs']} roofs; "
            f"{'CUDA graphs' if d['cuda_graphs'] else 'eager'})",
            f"  TTFT: {expected_beside_ideal(d['ttft_s'], d['ideal_ttft_s'], d['roofs'])} "
            f"(prefill {d['prefill_bound']}-bound)",
            "  TPOT: "
            + (
                expected_beside_ideal(d["tpot_s"], d["ideal_tpot_s"], d["roofs"])
                + f" (decode {d['decode_bound']}-bound)"
                if d["tpot_s"]
                else "n/a (one output token)"
            ),
            f"  end to end: {fmt_seconds(d['e2e_s'])}",
            f"  output tokens/s: {fmt_amount(d['tokens_per_s'])} over the batch, "
            f"{fmt_amount(d['tokens_per_s_per_user'])} per user",
            f"  MFU: {pct(d['mfu'])}, MBU: {pct(d['mbu'])}",
            *[f"  {line}" for line in rests_on_lines(d) + lower_bound_line(d)],
            "  " + memory_line(d["memory"]),
            *[f"  note: {n}" for n in d["notes"]],
        ]
    )


def kv(d: dict, hardware_name: str, model_name: str) -> str:
    lines = [
        f"{model_name} on {hardware_name} x{d['tp']}, KV {d['kv_dtype']}, weights {d['weight_dtype']}, "
        f"{d['memory_utilization']:g} of memory, blocks of {d['block_size']}",
        *(
            [f"  {ranks_of(d['tp'], d['attention_dp'])}: every figure is one rank's"]
            if d.get("attention_dp", 1) > 1
            else []
        ),
        f"  KV per token: {fmt_bytes(d['kv_bytes_per_token'])} "
        f"({fmt_bytes(d['kv_bytes_per_token_per_layer'])} per layer per device)",
        f"  usable {fmt_bytes(d['capacity_bytes'])} - weights {fmt_bytes(d['weights_bytes'])} - "
        f"workspace {fmt_bytes(d['workspace_bytes'])} - non-torch {fmt_bytes(d['non_torch_bytes'])}"
        + (f" - CUDA graphs {fmt_bytes(d['cuda_graph_bytes'])}" if d["cuda_graph_bytes"] else "")
        + f" = KV budget {fmt_bytes(d['kv_budget_bytes'])} ({d['kv_budget_tokens']:,} tokens)",
    ]
    if "message" in d:
        lines.append(f"  does not fit: {d['message']}")
        return "\n".join(lines)
    crossover = d["kv_crossover_context"]
    lines += [
        f"  at {d['context']:,} tokens: {fmt_bytes(d['kv_bytes_per_sequence'])} per sequence "
        f"({fmt_bytes(d['paging_waste_bytes'])} paging waste); max batch {d['max_batch']:,}",
        f"  at batch {d['batch']:,}: max context {d['max_context']:,}"
        + (" (not one token of cache fits for every sequence)" if not d["max_context"] else ""),
        f"  decode reads more KV than weights from {crossover:,} token{'s' if crossover != 1 else ''} of context "
        f"at batch {d['batch']:,}"
        if crossover
        else f"  at batch {d['batch']:,} the KV cache never outweighs the weights",
        "  context -> max batch: " + ", ".join(f"{p['context']}: {p['max_batch']}" for p in d["curve"][::4]),
        *[f"  note: {n}" for n in d["notes"]],
    ]
    return "\n".join(lines)


def advise(d: dict, model_name: str) -> str:
    # A math column where the devices compute apart (fp8 weights on "auto": W8A8 or weight-only).
    from roofline.precision import maths_apart

    apart = maths_apart(r.get("math") for r in d["ranking"])
    rows = [
        [
            r["rank"] or "-",
            r["hardware"],
            ("≥ " if r["time_is_lower_bound"] else "") + fmt_seconds(r["time_s"]) if r["time_s"] else "n/a",
            fmt_seconds(r["ideal_time_s"]) if r.get("ideal_time_s") else "n/a",
            r["roofs"],
            *([r.get("math") or "-"] if apart else []),
            (f"{r['tokens_per_s']:,.0f}" if r["tokens_per_s"] >= 10 else f"{r['tokens_per_s']:.3g}")
            if r["tokens_per_s"]
            else "n/a",
            r["bound"] or "-",
            "yes" if r["fits"] else f"no: {r['why_not']}",
        ]
        for r in d["ranking"]
    ]
    heads = ["#", "hardware", "time", "ideal bound", "roofs", *(["math"] if apart else []), "tokens/s", "bound", "fits"]
    lines = [
        f"{model_name} {d['phase']}, batch {d['batch']}, seq {d['seq_len']}, TP={d['tp']}{ranks_text(d)}, "
        f"{precision_text(d['precision'])}; ranked by {d['objective']}",
        table(heads, rows),
        "",
    ]
    measured = {
        k: [r["hardware"] for r in d["ranking"] if r.get("roofs") == k] for k in ("calibrated", "engine-measured")
    }
    for kind, devices in measured.items():
        if devices:
            lines.append(f"{kind.capitalize()} roofs on {', '.join(devices)}; datasheet roofs elsewhere.")
    if d.get("engine_note"):
        lines.append(f"Engine: {d['engine_note']}.")
    if d["ranking"] and d["ranking"][0].get("ranked_on") == "ideal bound":
        lines.append(
            "Ranked on the ideal bound, the one basis every device has: measured roofs on some devices and the "
            "datasheet on others would favour the ones never measured."
        )
    if not d["fits_anywhere"]:
        lines.append("It fits on no device at this TP degree; the 'fits' column gives the TP that would.")
    lines += d["diagnosis"]["summary"]
    lines.append(
        "speed-up from 2× of each resource alone: " + ", ".join(f"{k} {v:.2f}×" for k, v in d["sensitivity"].items())
    )
    return "\n".join(lines)
