"""The Serving page's capacity table (end of "Under load (simulated)"): the page's devices
ranked by the largest Poisson rate whose TTFT and TPOT at a percentile meet the targets
(``roofline.serving.simulation.capacity.rank_capacity``), one device per cached call so that
picking another device computes only that one."""

from __future__ import annotations

import streamlit as st

from dashboard.basis import basis_short
from dashboard.cache import cached
from roofline.engines import chunked_words
from roofline.format import fmt_seconds
from roofline.known_error import ON_EVERY_DEVICE, for_settings
from roofline.lazy import pandas as pd
from roofline.serving.basis import MIXED_BASIS_WORDS
from roofline.serving.simulation.capacity import mixed_basis, rank_capacity, ranked
from roofline.serving.simulation.metrics import PERCENTILES
from roofline.serving.simulation.sweep import SWEEP_REQUESTS


def capacity_command(
    model, devices, prompt, output, targets, precision, tp: int, settings, pct: int, seed: int, chunked: bool | None
) -> str:
    """The `serve --capacity` command that ranks these setups as the page does."""
    from roofline.cli.setting_flags import command_flags
    from roofline.models import load_models

    argv = ["python -m roofline serve", "--model", model.id if model.id in load_models() else "config.json"]
    for hw in devices:
        argv += ["--hardware", hw.id]
    argv += ["--prompt-len", str(prompt.low)] + (["--prompt-max", str(prompt.high)] if prompt.high else [])
    argv += ["--output-len", str(output.low)] + (["--output-max", str(output.high)] if output.high else [])
    for flag, value_s in (("--ttft-ms", targets.ttft_s), ("--tpot-ms", targets.tpot_s)):
        if value_s is not None:
            argv += [flag, f"{value_s * 1e3:g}"]
    flags, left = command_flags(settings, precision, model)
    argv += ["--tp", str(tp), *flags, "--capacity", "--requests", str(SWEEP_REQUESTS), "--percentile", str(pct)]
    argv += (["--seed", str(seed)] if seed else []) + {None: [], True: ["--chunked-prefill", "on"]}.get(
        chunked, ["--chunked-prefill", "off"]
    )
    return " ".join(argv) + (f" (and {', '.join(left)})" if left else "")


def render_capacity(
    report,
    model,
    devices,
    prompt,
    output,
    targets,
    precision,
    tp,
    settings,
    prices,
    seed: int,
    chunked: bool | None = None,
) -> None:
    """The page's devices ranked by the largest rate within the targets (``rank_capacity``)."""
    pct = st.columns([1, 3])[0].selectbox(
        "Targets met at percentile",
        PERCENTILES,
        index=PERCENTILES.index(90),
        key="load_pct",
        bind="query-params",
        help="The capacity is the largest Poisson rate whose TTFT and TPOT at this percentile meet the targets.",
    )
    # One device at a time, so picking another device computes only that one.
    found, why_not = [], {}
    with st.spinner(f"Searching each device's largest rate within the p{pct} targets…"):
        for hw in devices:
            setups, why = cached(
                rank_capacity,
                model,
                [hw],
                prompt,
                output,
                targets,
                precision,
                (tp,),
                settings,
                {hw.id: prices[hw.id]} if hw.id in prices else {},
                int(pct),
                SWEEP_REQUESTS,
                seed,
                chunked=chunked,
            )
            found += setups
            why_not |= why
    found = ranked(found)  # rank_capacity's order, over the devices ranked one at a time
    known = {hw.id: for_settings(settings, hw) for hw in devices}
    frame = pd.DataFrame(
        [
            {
                "device": c.hardware,
                "rests on": basis_short(c.roof_source),  # beside the device: the ranking groups by it (basis.py)
                "TP": c.tp,
                "max requests/s": c.rate_per_s,
                "$ per M output (all-in)": c.usd_per_million_output_tokens,  # what it is ranked by: in view
                "published bias": known[c.hardware].short(),
                "what stops a higher rate": "saturation" if c.binding.startswith("saturation") else c.binding,
                f"p{c.percentile} TTFT": fmt_seconds(c.ttft_s) if c.ttft_s is not None else "",
                f"p{c.percentile} TPOT": fmt_seconds(c.tpot_s) if c.tpot_s is not None else "",
                "output tokens/s": round(c.output_tokens_per_s),
                "saturation requests/s": c.saturation_per_s,
            }
            for c in found
        ]
    )
    heading = (
        f"Capacity: the largest rate with p{pct} TTFT ≤ {fmt_seconds(targets.ttft_s)} and TPOT ≤ "
        f"{fmt_seconds(targets.tpot_s)}"
    )
    report.markdown(f"**{heading}**")
    report.table(
        frame,
        "",
        hide_index=True,
        width="stretch",
        column_config={
            "max requests/s": st.column_config.NumberColumn(format="%.2f"),
            "published bias": st.column_config.TextColumn(
                # Under load: the Frontier's sentence gives the steady state's, another prediction's bias.
                "published bias (under load)",
                help="How far the same kind of prediction was off on the accuracy report's test runs of this engine "
                "on this device (the ideal bound: every engine's): the median of predicted / measured - 1, below 0 "
                f"too fast, so the rate is overstated. {ON_EVERY_DEVICE}",
            ),
            "saturation requests/s": st.column_config.NumberColumn(format="%.2f"),
            "output tokens/s": st.column_config.NumberColumn(
                format="localized",
                help="sustained: the rate x the mean output length of the requests admitted (a server that meets "
                "its targets carries all it admits; one that can never fit the KV cache is rejected)",
            ),
            "$ per M output (all-in)": st.column_config.NumberColumn(
                format="$%.3f",
                help="every device-hour at this rate over the output tokens it puts out (the Frontier and "
                "Cheapest setup price a steady decode batch instead, so their figures differ)",
            ),
        },
        placeholder="—",
    )
    for key, why in why_not.items():
        st.caption(f"{key}: {why}")
    command = capacity_command(
        model, devices, prompt, output, targets, precision, tp, settings, int(pct), seed, chunked
    )
    report.caption(
        f"Each device's largest Poisson rate within the p{pct} targets, by bisection over simulated runs of "
        f"{SWEEP_REQUESTS} requests (seed {seed}), {chunked_words(chunked, settings.engine)}; "
        "'saturation': the targets still hold at the server's full throughput. Cheapest per million output tokens "
        "first where priced. Each row's times rest on its device's roofs ('rests on': engine-measured kernels are "
        "slower than the ideal bound, so a device on the datasheet alone looks better than it will run"
        + (f"; here {MIXED_BASIS_WORDS}" if mixed_basis(found) else "")
        + ") and the engine's host work; "
        "'published bias' says by how much that kind of prediction missed public measured runs (below 0: too fast, "
        "so the rate is overstated). The command line runs the same search:"
    )
    report.command(command)
