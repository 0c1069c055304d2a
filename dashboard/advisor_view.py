"""What the Which-hardware page shows, worked out from the ranking: the page only lays it out."""

from __future__ import annotations

from collections import Counter

import streamlit as st

from dashboard.share import CELL_PAD_PX, CHAR_PX, md_escape
from roofline.engine import REGIME_LABELS
from roofline.format import fmt_seconds
from roofline.lazy import pandas as pd
from roofline.plots.style import bandwidth_text
from roofline.precision import maths_apart

# The ranking's key figure for each objective: (field of a ranking row, column heading).
RANKED_BY = {
    "latency": ("time_s", "time"),
    "throughput": ("tokens_per_s_per_device", "tokens/s per device"),
    "per-watt": ("tokens_per_s_per_watt", "tokens/s per device per W"),
}
VENDORS = ("NVIDIA ", "AMD ", "Google ", "AWS ", "Intel ")


def short_name(name: str, limit: int = 26) -> str:
    """A device name short enough for a chart axis on a phone (the hover has it in full): the
    vendor left out, then a word the name repeats in its brackets, then the brackets (an ellipsis
    says something was left out), then whole words from the end; never cut inside a word."""
    for vendor in VENDORS:
        name = name.removeprefix(vendor)
    if len(name) <= limit:
        return name
    base, bracket, rest = name.partition(" (")
    if bracket:
        first = base.split()[0] if base.split() else ""
        inner = ", ".join(" ".join(w for w in part.split() if w != first) for part in rest.rstrip(")").split(", "))
        deduped = f"{base} ({inner})"
        if len(deduped) <= limit:
            return deduped
        name = base
        if len(name) + 1 <= limit:
            return name + "…"
    words = name.split()
    kept = words[:1]
    for w in words[1:]:
        if len(" ".join(kept + [w])) + 1 > limit:
            break
        kept.append(w)
    return " ".join(kept)[: limit - 1] + "…"


def short_names(names: list[str], limit: int = 26) -> list[str]:
    """``short_name`` of each, unique: where two shorten alike (a chart would draw them as one bar),
    those keep their names whole."""
    short = [short_name(n, limit) for n in names]
    seen = Counter(short)
    return [s if seen[s] == 1 else short_name(n, 10**6) for s, n in zip(short, names)]


def ranked_figure(r: dict, key: str) -> float:
    """The figure a ranking row is ranked on: its expected time (or rate), or its ideal bound where the
    ranking compares ideal bounds (some devices on measured roofs, others on the datasheet)."""
    if r.get("ranked_on") != "ideal bound" or not r.get("ideal_time_s") or not r["time_s"]:
        return r[key]
    return r[key] * (r["ideal_time_s"] / r["time_s"] if key == "time_s" else r["time_s"] / r["ideal_time_s"])


def on_ideal_bound(ranking: list[dict]) -> bool:
    """Whether the ranking compares ideal bounds (some devices on measured roofs, others on the
    datasheet): the ranking marks every row alike."""
    return bool(ranking) and ranking[0].get("ranked_on") == "ideal bound"


def basis_caption(ranking: list[dict]) -> str:
    """What the ranking compares, and where the expected time rests on measured roofs."""
    measured = sorted({r["roofs"] for r in ranking if r["roofs"] != "datasheet"})
    where = {k: [r["name"] for r in ranking if r["roofs"] == k] for k in measured}
    parts = [f"{k} roofs on {', '.join(v)}" for k, v in where.items()]
    if on_ideal_bound(ranking):
        return (
            "Ranked on the ideal bound (datasheet roofs), the one basis every device has: "
            + "; ".join(parts)
            + ", the datasheet elsewhere, and measured kernels are slower than ideal ones, so mixing them would "
            "favour the devices never measured. The table gives each measured device's expected time beside its "
            "bound (n/a on the datasheet alone, where it would be the bound again)."
        )
    return "Ranked on the expected time" + (
        f" ({'; '.join(parts)})" if parts else " (datasheet roofs: the ideal bound)"
    )


def _fits(r: dict) -> str:
    if r["fits"]:
        return "yes"
    return f"at TP={r['smallest_tp']}" if r["smallest_tp"] else "no"


def ranking_table(ranking: list[dict], objective: str) -> tuple[pd.DataFrame, dict]:
    """The ranking as the page's table and its column config: the device (pinned, without the
    vendor, which its model line already says; a name past 26 characters ends in an ellipsis and
    is in full in the last column) and the figure the rank follows first, so a phone shows both
    without scrolling; the reasons, the longest text, after the figures. Where the ranking
    compares ideal bounds, that first figure is the ideal one and the expected ones follow. A
    "math" column says what each device computed in where they differ (fp8 weights on "auto")."""
    on_ideal = bool(ranking) and ranking[0].get("ranked_on") == "ideal bound"
    expected = "expected " if on_ideal else ""
    key_heading = {"latency": "time", "throughput": "tokens/s", "per-watt": "tokens/s/W"}[objective]
    apart = maths_apart(r.get("math") for r in ranking)  # a column where the devices compute apart
    rows = []
    for r, name in zip(ranking, short_names([r["name"] for r in ranking])):
        # Beside devices timed on measured kernels, one on the datasheet alone has no expected figure:
        # its time would be its ideal bound again, and would read as faster than the measured ones.
        unknown = on_ideal and r["roofs"] == "datasheet"
        figures = {
            # "≥": a device with no published compute peak has a lower bound, not a time.
            f"{expected}time": ("≥ " if r.get("time_is_lower_bound") else "") + fmt_seconds(r["time_s"])
            if r["time_s"] and not unknown
            else "n/a",
            "ideal bound": fmt_seconds(r["ideal_time_s"]) if r.get("ideal_time_s") else "n/a",
            "roofs": r["roofs"],
            **({"math": r.get("math") or ""} if apart else {}),
            f"{expected}tokens/s": None if unknown else r["tokens_per_s"],
            f"{expected}tokens/s/W": None if unknown else r["tokens_per_s_per_watt"],
        }
        if on_ideal and objective == "latency":
            first = {"ideal bound": figures.pop("ideal bound")}
        elif on_ideal:
            field = "tokens_per_s" if objective == "throughput" else "tokens_per_s_per_watt"
            first = {f"ideal {key_heading}": ranked_figure(r, field) if r[field] is not None else None}
        else:
            first = {key_heading: figures.pop(key_heading)}
        rows.append(
            {
                "device": name,
                **first,
                "#": r["rank"],
                **figures,
                "regime": (r.get("bound_label") or REGIME_LABELS[r["bound"]]).removesuffix("-bound")
                if r["bound"]
                else "n/a",
                "fits": _fits(r),
                "why not": r["why_not"] or "",
                "full name": r["name"],
            }
        )
    frame = pd.DataFrame(rows)
    widest = max((len(d) for d in frame["device"]), default=6)
    config = {
        "device": st.column_config.TextColumn(pinned=True, width=CHAR_PX * widest + CELL_PAD_PX),
        "#": st.column_config.NumberColumn(format="%d"),
        **{f"{p}tokens/s": st.column_config.NumberColumn(format="%,.1f") for p in ("", "expected ", "ideal ")},
        **{f"{p}tokens/s/W": st.column_config.NumberColumn(format="%.3f") for p in ("", "expected ", "ideal ")},
        "regime": st.column_config.TextColumn(help="what binds the step: compute, memory bandwidth, links, overhead"),
        "fits": st.column_config.TextColumn(help="does it fit at this TP degree; if not, the smallest TP that fits"),
    }
    unknown = (
        "on the device's engine-measured kernels; n/a on a device with none (datasheet roofs): its figure would be "
        "its ideal bound again, which reads faster than a measured one"
    )
    config["expected time"] = st.column_config.TextColumn(help=unknown)
    config["expected tokens/s"] = st.column_config.NumberColumn(format="%,.1f", help=unknown)
    config["expected tokens/s/W"] = st.column_config.NumberColumn(format="%.3f", help=unknown)
    return frame, config


def short_regime(bound: str) -> str:
    """A regime as a tile fits it, in the chart regions' words ("memory-bound" for memory-bandwidth-bound)."""
    return "memory-bound" if bound == "memory" else REGIME_LABELS[bound]


NUMBER_WORDS = {3: "three", 4: "four", 5: "five", 6: "six"}


def coinciding_roofs(ceilings: list, dtype: str) -> str:
    """A sentence naming the roofs that lie on each other on the top devices' chart (memory
    bandwidths, or the ``dtype`` peaks, within 3%: the chart draws those as stripes), or ''."""

    def together(value) -> list[list]:
        groups: list[list] = []
        for c in ceilings:
            for g in groups:
                if abs(value(c) - value(g[0])) <= 0.03 * value(g[0]):
                    g.append(c)
                    break
            else:
                groups.append([c])
        return [g for g in groups if len({c.name for c in g}) > 1]

    def names(g: list) -> str:
        # The caption names the devices in full just before: here short names, or "all three".
        if len(g) == len(ceilings) > 2:
            return f"all {NUMBER_WORDS.get(len(g), str(len(g)))}"
        n = [md_escape(x) for x in short_names([c.name for c in g])]
        return ", ".join(n[:-1]) + " and " + n[-1]

    parts = [
        f"the memory slopes of {names(g)} lie on each other ({bandwidth_text(g[0].memory_bandwidth_bytes_per_s)})"
        for g in together(lambda c: c.memory_bandwidth_bytes_per_s)
    ]
    if all(c.has_peak(dtype) for c in ceilings):  # a device with no published peak has no flat roof
        parts += [
            f"the {dtype} peaks of {names(g)} too ({g[0].peak(dtype) / 1e12:,.0f} TFLOP/s)"
            for g in together(lambda c: c.peak(dtype))
        ]
    return ("Within 3%, " + "; ".join(parts) + ": drawn as stripes, the first in rank order widest.") if parts else ""
