"""What the LLM inference page shows, worked out from the engine's results: the page only reads
widgets, calls these and lays out what they return."""

from __future__ import annotations

import numpy as np

from dashboard.share import md_escape
from roofline.engine import REGIME_LABELS, evaluate
from roofline.format import fmt_bytes, fmt_seconds, ranks_of
from roofline.lazy import pandas as pd
from roofline.memory import beyond_links, footprint
from roofline.ops import step_ops
from roofline.plots import DEVICE_COLORS, PointSeries, step_series
from roofline.settings import Settings
from roofline.workload import Workload

DEVICE_COLUMNS = [
    "device",
    "fits",  # beside the name: a device the workload does not fit has times it cannot reach
    "TTFT",
    "TPOT",
    "ideal TTFT",
    "ideal TPOT",
    "roofs",
    "end to end",
    "tokens/s",
    "prefill",
    "decode",
    "notes",
]


def fit_to_context(model, prompt: int, output: int, phase: str = "request") -> tuple[int, int, str | None]:
    """A prompt and output the model's context holds, as ``roofline.workload.Workload`` counts it:
    a request's prompt and output (its last token is the context's), a prefill's prompt, a decode
    step's context and the token it adds. Where they do not fit: a request's prompt cut to the
    context with one output token, or its output cut to what the context leaves; a prefill's prompt
    or a decode step's context cut to the most that fits. Returns them and the warning that says so
    (None: as asked)."""
    name, most = md_escape(model.name), model.max_context
    if phase != "request":
        limit = most - 1 if phase == "decode" else most
        if prompt <= limit:
            return prompt, output, None
        what = "Context" if phase == "decode" else "Prompt"
        after = " with the token a decode step adds" if phase == "decode" else ""
        cut = f"{what} {prompt:,}{after} exceeds {name}'s maximum context of {most:,}; showing {limit:,}."
        return limit, output, cut
    if prompt + output - 1 <= most:
        return prompt, output, None
    asked = f"Prompt {prompt:,} + output {output:,} exceed {name}'s maximum context of {most:,}; "
    if prompt > most:
        return most, 1, asked + f"showing a prompt of {most:,} tokens and an output of 1 token."
    output = max(1, most - prompt + 1)
    return prompt, output, asked + f"showing an output of {output:,} token{'s' if output > 1 else ''}."


def device_rows(selected: list[str], names: dict[str, str], analyses: dict, why_not: dict[str, str]) -> pd.DataFrame:
    """One row per chosen device: its request times and regimes, or why it cannot run the workload."""
    rows = []
    for hid in selected:
        if hid in why_not:
            rows.append({"device": names[hid], "notes": f"cannot run it: {why_not[hid]}"})
            continue
        r = analyses[hid].to_json()
        rows.append(
            {
                "device": names[hid],
                "TTFT": fmt_seconds(r["ttft_s"]),
                "TPOT": fmt_seconds(r["tpot_s"]) if r["tpot_s"] else "n/a",
                "ideal TTFT": fmt_seconds(r["ideal_ttft_s"]),
                "ideal TPOT": fmt_seconds(r["ideal_tpot_s"]) if r["ideal_tpot_s"] else "n/a",
                "roofs": r["expected_rests_on"],
                "end to end": fmt_seconds(r["e2e_s"]),
                "tokens/s": r["tokens_per_s"],
                "prefill": REGIME_LABELS[r["prefill_bound"]],
                "decode": REGIME_LABELS[r["decode_bound"]] if r["decode_bound"] else "n/a",
                "fits": r["memory"]["fits"],
                "notes": "; ".join(n for n in r["notes"] if "roofs" not in n),
            }
        )
    return pd.DataFrame(rows, columns=DEVICE_COLUMNS)


def op_frames(tables: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every op of every phase: the raw rows (FLOPs, bytes, s: the CSV) and the table as shown
    (GFLOP, MB, µs, share of its step)."""
    frame = pd.DataFrame([{**r, "phase": phase} for phase, t in tables.items() for r in t.rows()])
    step_time_s = frame.groupby("phase")["time_s"].transform("sum")
    shown = pd.DataFrame(
        {
            # The times first, the expected beside the ideal bound, then the work that sets them.
            "phase": frame["phase"],
            "op": frame["name"],
            "count": frame["count"],
            "time (µs)": frame["time_s"] * 1e6,
            "ideal (µs)": frame["ideal_time_s"] * 1e6,
            # How close the expected time comes to the op's ideal bound: 100% is on its roof. None (—)
            # where the op rests on the datasheet: its expected time is its ideal bound, not a reading.
            "% of its roof": (frame["ideal_time_s"] / frame["time_s"]).where(
                (frame["time_s"] > 0) & ~frame["rests_on"].str.startswith("datasheet")
            )
            * 100,
            "% of step": frame["time_s"] / step_time_s * 100,
            "regime": frame["bound"].map(REGIME_LABELS),
            "FLOP/B": frame["intensity"],  # where the op sits on the roofline, in view beside its regime
            "GFLOP": frame["flops"] / 1e9,
            "MB moved": frame["bytes"] / 1e6,
            "weights MB": frame["weight_bytes"] / 1e6,
            "activations MB": frame["activation_bytes"] / 1e6,
            "KV MB": frame["kv_bytes"] / 1e6,
            "rests on": frame["rests_on"],
        }
    )
    return frame, shown


ROOF_SHARE_HELP = (
    "The op's ideal bound over its expected time: 100% is on its roof. — where the op rests on the datasheet "
    "(no measured kernel answers it, or the ideal engine): its expected time is then its ideal bound, not a reading."
)

# printf formats of the op table's number columns.
OP_FORMATS = {
    **{col: "%,.2f" for col in ("GFLOP", "MB moved", "weights MB", "activations MB", "KV MB", "FLOP/B")},
    "time (µs)": "%,.1f",
    "ideal (µs)": "%,.1f",
    "% of its roof": "%.0f%%",
    "% of step": "%.1f%%",
}


def decode_sweeps(run: Workload, hw, settings: Settings, ceilings, mid_context: int, batches, contexts) -> list:
    """Decode over batch 1→1024 and over the context: each step's ops evaluated, and its footprint.
    Pure in its arguments, so it can be cached on them."""
    steps = (run.step("decode", mid_context, batches), run.step("decode", contexts))
    return [(evaluate(step_ops(w), ceilings), footprint(w, hw, settings, with_smallest_tp=False)) for w in steps]


def _fit_notes(fp) -> tuple[list[list[str]], list[bool]]:
    kv = np.broadcast_to(fp.kv_cache_bytes, np.shape(fp.total_bytes))
    fits = [bool(f) for f in np.broadcast_to(fp.fits, np.shape(fp.total_bytes))]
    return [
        [f"KV cache {fmt_bytes(k)}; " + ("fits" if f else "does NOT fit in memory")] for k, f in zip(kv, fits)
    ], fits


def decode_trajectories(
    sweeps: list, run: Workload, ceilings, mid_context: int, batch: int, batches, contexts
) -> list[PointSeries]:
    """The two decode sweeps as trajectories on the roofline: batch growing, context growing."""
    (b_table, b_fp), (c_table, c_fp) = sweeps
    out = []
    for name, table, fp, labels, color, symbol in (
        (
            f"decode, batch 1→1024 at {mid_context:,} cached",
            b_table,
            b_fp,
            [f"batch {b}" for b in batches],
            DEVICE_COLORS[1],
            "circle",
        ),
        (
            f"decode, context {contexts[0]:,}→{contexts[-1]:,} at batch {batch:,}",
            c_table,
            c_fp,
            [f"context {c}" for c in contexts],
            DEVICE_COLORS[2],
            "square",
        ),
    ):
        notes, fits = _fit_notes(fp)
        out.append(
            step_series(
                name,
                table.flops.sum(0),
                table.bytes.sum(0),
                table.step_time_s,
                table.step_bound,
                labels,
                ceilings,
                run.precision.act_dtype,
                color,
                symbol=symbol,
                extra=notes,
                fits=fits,
            )
        )
    return out


def steps_summary(prefill, decode, batch: int, prompt: int, mid_context: int, device_name: str) -> str:
    """The line under the headline: each step's regime and time, and what decode reads."""
    text = (
        f"**Prefill** ({batch} × {prompt:,} tokens) on {device_name} is **{REGIME_LABELS[prefill.bound]}**, "
        f"{fmt_seconds(prefill.time_s)}."
    )
    if decode:
        totals = decode.totals()
        text += (
            f" **Decode** (batch {batch}, {mid_context:,} tokens cached, the middle of the output) is "
            f"**{REGIME_LABELS[decode.bound]}**, {fmt_seconds(decode.time_s)} per step: it reads "
            f"{fmt_bytes(totals['weight_bytes'])} of weights and {fmt_bytes(totals['kv_bytes'])} of KV cache."
        )
    return text


def does_not_fit(model_name: str, tp: int, hw, mem: dict) -> str:
    """Why a workload does not fit, term by term per device, and the TP degree at which it would."""
    smallest = mem["smallest_tp"]
    return (
        f"{md_escape(model_name)} does not fit on {tp} × {md_escape(hw.name)}: "
        f"weights {fmt_bytes(mem['weights_bytes'])} + KV "
        f"{fmt_bytes(mem['kv_cache_bytes'])} + activations {fmt_bytes(mem['activation_bytes'])} + reserved "
        f"{fmt_bytes(mem['non_torch_bytes'] + mem['cuda_graph_bytes'])} per device, "
        f"{fmt_bytes(mem['capacity_bytes'])} usable."
        + (
            f" It fits at TP={smallest}{beyond_links(hw, smallest)}."
            if smallest
            else " No TP degree up to 64 is enough."
        )
    )


def ranks_note(ranks: int, tp: int, batch: int) -> str:
    """What the page's figures are under attention data parallelism: one rank's batch, the group's tokens/s."""
    return (
        f"{ranks_of(tp, ranks)}: the batch of {batch:,} is "
        f"one rank's sequences and the group runs {batch * ranks:,}. Attention and its cache are the rank's; the "
        "MLP and experts see every rank's tokens. Tokens/s counts every rank's."
    )


def llm_step_caption(model_name: str, w: Workload, device_name: str, time_s: float) -> str:
    """The Roofline page's line under an LLM step: which step, at which setup, and what its time is."""
    ranks = f", {ranks_of(w.tp, w.attention_dp)}" if w.attention_dp > 1 else ""
    return (
        f"{md_escape(model_name)} {w.phase} (batch {int(w.batch):,}{' a rank' if ranks else ''}, "
        f"{int(w.seq_len):,} tokens; {w.kernel_precision.label}; TP {w.tp}{ranks}) on {md_escape(device_name)}: "
        f"{fmt_seconds(time_s)} of device time per step, its kernels back to back; marker area is each op's share "
        "of it. The LLM inference page adds the host's work per step and has the full analysis."
    )
