"""The Serving page's tables, built from the engine's results."""

from __future__ import annotations

import streamlit as st

from dashboard.basis import basis_short, rests_on_sentence
from dashboard.share import md_escape
from dashboard.state import settle_choice
from roofline.ceilings import REGIME_LABELS
from roofline.defaults import CHUNKED_SETTINGS
from roofline.engines import engine_profile, prompt_defaults, prompt_modes, prompt_words, vllm_default_words
from roofline.format import dumps_strict, fmt_bytes, fmt_seconds
from roofline.known_error import ON_EVERY_DEVICE, for_settings
from roofline.lazy import pandas as pd

# The Chunked prefill choice as the URL holds it (``chunked``): the engine's default, on or off.
CHUNKED_CHOICES = tuple(CHUNKED_SETTINGS)
# The checkbox it replaced wrote true and false: older links open as they did.
CHUNKED_BEFORE = {"true": "on", "false": "off"}


def chunked_picker(engine: str) -> bool | None:
    """The sidebar's Chunked prefill: None for the engine's own default, else on or off for both
    the frontier (prompt tokens in the decodes' steps) and the simulation (a prompt past the
    budget over several steps). Its caption says what the default is for ``engine``. The page
    translates an older link's value first (``CHUNKED_BEFORE``), before its URL checks."""
    choice = st.selectbox(
        "Chunked prefill",
        CHUNKED_CHOICES,
        key="chunked",
        bind="query-params",
        help="The frontier: on, a share of the steps carries a new prompt (or a budget's chunk of one) beside the "
        "decode batch; off, the prompts waiting run in prefill steps of their own that every decode waits out. "
        "Under load (simulated): on, a prompt longer than the token budget runs over several steps; off, each "
        "prompt whole (one longer than the budget cannot run); how a step mixes prompts and decodes there is "
        "the engine's scheduler's. Auto: as the engine runs prompts by default: vLLM on; SGLang splits prompts "
        "but runs them in steps of their own (unless --enable-mixed-chunk); TensorRT-LLM batches prompts with "
        "the decodes but keeps each whole (unless enable_chunked_prefill), so it refuses a prompt past its budget.",
    )
    if choice == "auto":
        whose = (engine_profile(engine) or engine_profile("vllm")).name
        st.caption(f"Auto: {prompt_words(*prompt_defaults(engine))} ({whose}'s default).")
    return CHUNKED_SETTINGS[choice]


def targets_frame(best: list, roofs: dict[str, str]):
    """The cheapest setup per device that meets the targets, one row per device, cheapest first:
    ranked by every device-hour over the output tokens (the cost of a request), which the prefill
    and decode shares beside it split between input and output tokens."""
    return pd.DataFrame(
        [
            {
                "device": b.hardware,
                # What the times rest on beside the device: measured devices are ranked first (basis.py),
                # so a cheaper device on the datasheet below a measured one reads as the grouping it is.
                "rests on": basis_short(roofs[b.hardware]) if b.hardware in roofs else "",
                "$ per M output (all-in)": b.point["usd_per_million_output_all_in"] if b.meets else None,
                "meets": b.meets,
                "what binds": REGIME_LABELS.get(b.binding, f"{b.binding}-bound") if b.meets else b.binding,
                # The targets' own figures next, in view at 1440 px (they had been cut off at the right).
                "TTFT": fmt_seconds(b.point["ttft_s"]) if b.meets else "",
                "TPOT": fmt_seconds(b.point["tpot_s"]) if b.meets else "",
                "tok/s per device": round(b.point["tokens_per_s_per_device"]) if b.meets else None,
                "TP": b.point["tp"] if b.meets else None,
                "batch": b.point["batch"] if b.meets else None,
                "weights / math / KV": f"{b.weights} / {b.act_dtype} / {b.kv_dtype}" if b.meets else "",
                "$ per M input (prefill share)": b.point["usd_per_million_input"] if b.meets else None,
                "$ per M output (decode share)": b.point["usd_per_million_output"] if b.meets else None,
                "tokens per joule": b.point["tokens_per_joule"] if b.meets else None,
            }
            for b in best
        ]
    )


def targets_columns() -> dict:
    """How ``targets_frame``'s columns read on the page: the device pinned, the costs in dollars."""
    import streamlit as st

    money = st.column_config.NumberColumn
    return {
        # Pinned, so a phone scrolling to the precision or the cost splits still sees which device.
        "device": st.column_config.TextColumn(pinned=True),
        "TTFT": st.column_config.TextColumn(
            help="a prompt's first token in the steady state, with no queue (Under load adds the queue): the "
            "steps that carry the prompt where prompts ride the decodes' steps (one, where it fits the token "
            "budget beside the batch), else its prefill step"
        ),
        "TPOT": st.column_config.TextColumn(
            help="the mean step a decoding sequence waits for, the steps that carry prompts included"
        ),
        # A short heading (the CSV keeps the long name): the long one's width had cut the precision column.
        "$ per M output (all-in)": money(
            "$/M output",
            format="$%.3f",
            help="$ per million output tokens, all-in: every device-hour over the output tokens (the cost of a "
            "request), what the rows are ranked by",
        ),
        "$ per M input (prefill share)": money(
            format="$%.3f", help="the device-hours spent on prompts over the input tokens"
        ),
        "$ per M output (decode share)": money(
            format="$%.3f", help="the device-hours spent decoding over the output tokens"
        ),
        "tokens per joule": money(format="%.2f"),
    }


def disaggregation_frame(disagg: dict):
    """Colocated against disaggregated prefill and decode pools, one row per setup."""
    return pd.DataFrame(
        [
            {
                "setup": name,
                "TTFT": fmt_seconds(v["ttft_s"]),
                "TPOT": fmt_seconds(v["tpot_s"]),
                "tok/s per device": round(v["tokens_per_s_per_device"]),
                # One pool moves no KV between devices: a dash, not a blank that reads as missing.
                "KV per prompt": fmt_bytes(v["kv_bytes_per_prompt"]) if "kv_bytes_per_prompt" in v else "—",
                "KV transfer": fmt_seconds(v["kv_transfer_s"]) if "kv_transfer_s" in v else "—",
            }
            for name, v in disagg.items()
        ]
    )


def steady_bias_sentence(settings, devices: list) -> str:
    """How far the steady state's TPOT was off on the accuracy report's test runs, per device."""
    known = [(hw, for_settings(settings, hw, "steady")) for hw in devices]
    cells = [md_escape(f"{hw.name} {k.short()}") for hw, k in known if k.scores]  # markdown: the * shown as is
    if not cells:
        return ""
    star = f" ({md_escape(ON_EVERY_DEVICE)})" if any(k.scores and not k.on_device for _, k in known) else ""
    return (
        "Published bias of this steady-state TPOT (the median of predicted / measured − 1 on the accuracy report's "
        f"test runs of the engine on the device; below 0 too fast): {'; '.join(cells)}{star}."
    )


def frontier_notes(roofs: dict[str, str], settings, devices: list) -> list[str]:
    """The Frontier's caption as three short paragraphs: how to read the chart, what its times rest
    on and how far off they have been, and which batches it leaves out."""
    read = (
        "Each line is one device as the decode batch grows (left to right); a marker's shape is the step's regime "
        "(circle memory-bandwidth-bound, diamond compute-bound, square communication, triangle overhead). Points "
        "above the dotted line meet the TPOT target; hollow grey points miss the TTFT target."
    )
    if "engine-measured" in roofs.values():
        read += (
            " Lines on engine-measured kernels keep the timings' own steps: where the engine picks another GEMM "
            "kernel or tile at one batch, or a timing's noise, a larger batch can take a few percent less, or "
            "more, than its neighbour."
        )
    return [
        read,
        f"{rests_on_sentence(roofs.values())} {steady_bias_sentence(settings, devices)}".strip(),
        "Left out: batches that do not fit in memory, or pass the engine's sequence cap on the device "
        f"(max_num_seqs; unset, vLLM's default: {vllm_default_words('max_num_seqs')}; with whole prompts in the "
        "decodes' steps, the token budget less a prompt).",
    ]


def point_step(run, batch: int, traffic, chunked: bool | None, settings, hw, tp: int):
    """The step the One point view draws, as the frontier times it: with chunked prefill the step
    that carries a prompt (or a budget's chunk of one: ``roofline.serving.prompt_chunks``), its
    kernels dispatched from the host past the engine's CUDA-graph limit; without, a decode step
    (the prompts run in prefill steps of their own). Returns (its op table, its title)."""
    from roofline.engine import evaluate
    from roofline.serving import eager_ceilings, graph_limit, mixed_step_ops, prompt_chunks

    roofs = settings.ceilings(hw, tp, True)
    if not prompt_modes(chunked, settings.engine)[0]:
        table = evaluate(mixed_step_ops(run, batch, 0.0, traffic.prompt_len), roofs)
        return table, f"A decode step: {batch} sequences (the prompts run in prefill steps of their own)"
    budget = settings.for_device(hw).max_batched_tokens
    chunk, share = (float(x) for x in prompt_chunks(batch, traffic.prompt_len, traffic.output_len, budget))
    dispatched = batch + chunk > graph_limit(settings, hw)
    table = evaluate(
        mixed_step_ops(run, batch, chunk, traffic.prompt_len), eager_ceilings(roofs, settings) if dispatched else roofs
    )
    title = (
        f"A step carrying a prompt ({share:.0%} of the steps): {batch} decoding sequences + {chunk:,.0f} prompt tokens"
        + (", every kernel dispatched from the host (past the engine's CUDA graphs)" if dispatched else "")
    )
    return table, title


def serving_downloads(points, plan, prices: dict[str, float]) -> None:
    """The frontier as CSV and the whole plan as JSON (``plan()``: the cheapest setups), each built
    when its button is clicked."""

    def frontier_frame():
        return pd.DataFrame([points.row(d, j) for d in range(len(points.devices)) for j in range(len(points.batch))])

    st.download_button(
        "Download the frontier (CSV)",
        data=lambda: frontier_frame().to_csv(index=False),
        file_name="roofline_serving.csv",
        mime="text/csv",
        on_click="ignore",
    )
    st.download_button(
        "Download the plan (JSON)",
        data=lambda: dumps_strict(
            {
                "frontier": frontier_frame().to_dict("records"),
                "best": [b.to_json() for b in plan()],
                "prices_usd_per_hour": prices,
            }
        ),
        file_name="roofline_serving.json",
        mime="application/json",
        on_click="ignore",
    )


def unfit_warning(points, devices: dict, model_name: str, tp: int) -> str | None:
    """The devices on which no decode batch fits in memory at this TP (their frontier lines are
    empty), in words, or None; ``fits_nowhere`` in the words when it is every device that runs."""
    runnable = [hid for hid in points.devices if hid not in points.why_not]
    empty = [hid for hid in runnable if not points.runs[points.devices.index(hid)].any()]
    if not empty:
        return None
    names = ", ".join(md_escape(devices[hid].name) for hid in empty)
    where = "any chosen device" if len(empty) == len(runnable) else names
    return (
        f"{md_escape(model_name)} does not fit in memory on {where} at TP={tp}, at any batch"
        + (
            ""
            if len(empty) == len(runnable)
            else ": its line is left out"
            if len(empty) == 1
            else ": their lines are left out"
        )
        + (
            ". A higher TP, or smaller weights (fp8, int4), would make room."
            if tp < 8
            else ". Smaller weights (fp8, int4) would make room, or more devices than one node's eight."
        )
    )


def point_picker(points, devices: dict, model_name: str, tp: int) -> tuple[str, int, list[int]] | None:
    """The device and decode batch that the One point and Techniques tabs open, both in the URL
    (``pick_hw``, and ``pick_batch_<device>``: each device its own), with the batches that fit there;
    None, with the reason shown, where there is no point to open. A link's device that is not among
    the page's runnable ones, or its batch that does not fit, is named in a warning and the default
    taken; a choice of an earlier run that a changed input took away (a device removed, a batch that
    no longer fits) falls back to the default without one."""
    c1, c2 = st.columns(2)
    runnable = [hid for hid in points.devices if hid not in points.why_not]
    if not runnable:
        st.info("No chosen device can run this setup; the warnings above say why.")
        return None
    settle_choice("pick_hw", runnable)
    pick_device = c1.selectbox("Device", runnable, key="pick_hw", bind="query-params")
    d = points.devices.index(pick_device)
    fitting = [int(b) for b, f in zip(points.batch, points.runs[d]) if f]
    if not fitting:
        st.warning(
            f"{md_escape(model_name)} does not fit on {md_escape(devices[pick_device].name)} at TP={tp} at any batch."
        )
        return None
    # One batch per device in the link (pick_batch_<device>), each with its own default: one slider
    # for every device kept a batch across devices that the link never received.
    key = f"pick_batch_{pick_device}"
    settle_choice(key, fitting)
    pick_batch = c2.select_slider(
        "Decode batch", fitting, value=fitting[len(fitting) // 2], key=key, bind="query-params"
    )
    return pick_device, pick_batch, fitting
