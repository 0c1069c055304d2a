"""The roofline model explained on the page, with the GEMM the user chose as the worked example."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from dashboard.share import show_chart
from roofline.api import matmul_result
from roofline.dtypes import bytes_per_element
from roofline.engine import REGIME_LABELS, Ceilings
from roofline.format import fmt_bytes, fmt_flops, fmt_seconds
from roofline.plots import PointSeries, point_hover, roofline_figure
from roofline.plots.style import flops_unit
from roofline.report import plain_number


def _point(r: dict, label: str, symbol: str) -> PointSeries:
    hover = point_hover(label, r["flops"], r["bytes"], r["ideal_time_s"], r["bound"], r["attainable_tflops"] * 1e12)
    return PointSeries(
        label,
        np.array([r["intensity"]]),
        np.array([r["ideal_bound_tflops"] * 1e12]),
        [r["bound"]],
        [hover],
        sizes=16.0,
        symbol=symbol,
        outline_color="#222222",
    )


def _mark(fig: go.Figure, x: float, y_tflops: float, letter: str, yshift: int) -> None:
    # A one-letter mark beside a part of the roof; the caption under the chart names it. Letters,
    # not sentences, so nothing runs off the plot on a phone. Log axes take log10 coordinates.
    fig.add_annotation(
        x=math.log10(x),
        y=math.log10(y_tflops),
        text=f"<b>{letter}</b>",
        showarrow=False,
        yshift=yshift,
        font=dict(size=13, color="#222222"),
        bgcolor="rgba(255,255,255,0.9)",
        bordercolor="#222222",
        borderwidth=1,
        borderpad=2,
    )


def teaching_figure(c: Ceilings, r: dict, small: dict) -> go.Figure:
    """One device's roof with its parts marked A (slanted roof), B (ridge) and C (flat roof), the
    user's GEMM and the same weights at M=1."""
    dtype = r["dtype"]
    peak, bw, ridge = c.peak(dtype), c.memory_bandwidth_bytes_per_s, c.ridge_intensity(dtype)
    fig = roofline_figure(
        [(c, dtype)],
        [
            _point(r, f"your GEMM, M={r['m']}", "star"),
            _point(small, "the same weights at M=1", "circle"),
        ],
        title=f"The parts of a roofline: {c.name}, {dtype} (ideal bound)",
        height=460,
    )
    x_lo, x_hi = (10**v for v in fig.layout.xaxis.range)
    scale, _ = flops_unit([(c, dtype)])
    x_slope = (x_lo * ridge) ** 0.5  # halfway up the slanted roof, on log axes
    _mark(fig, x_slope, bw * x_slope / scale, "A", 18)
    _mark(fig, ridge, peak / scale, "B", -20)
    _mark(fig, (ridge * x_hi) ** 0.5, peak / scale, "C", 18)
    return fig


def teach_the_roofline(r: dict, c: Ceilings) -> None:
    """A short, visual explanation of the chart, computed from the user's GEMM on the first device."""
    m, n, k, dtype = r["m"], r["n"], r["k"], r["dtype"]
    b_in, b_out = bytes_per_element(dtype), bytes_per_element(r["out_dtype"])
    peak, bw = c.peak(dtype), c.memory_bandwidth_bytes_per_s
    ridge = peak / bw
    small = matmul_result(c, 1, n, k, dtype)
    side = "left" if r["intensity"] < ridge else "right"
    roof_regime = "memory-bound" if side == "left" else "compute-bound"
    if r["bound"] == "overhead":
        verdict = (
            f": the roofs would make it {roof_regime}, but it is small enough that the kernel floor "
            "decides, so it is **overhead-bound** (step 5)"
        )
        floor_note = "this GEMM is one of them."
    else:
        verdict = f", so it is **{REGIME_LABELS[r['bound']]}**"
        floor_note = "this GEMM is large enough that the floor does not hold it under."
    # The other loss: the kernel itself. The chart above places the GEMM at its expected time, which
    # rests on measured kernels where the page has them (engine tables or a calibration); against
    # the ideal bound (the roofs and the floor), what is left is the kernel's own.
    share = r["ideal_time_s"] / r["time_s"] if r["time_s"] else 1.0
    if share < 0.995:
        where = "its roof" if r["bound"] != "overhead" else "its ideal bound (the floor's)"
        kernel_note = (
            f"The other is the kernel itself: real kernels reach a fraction of the ideal. On the chart above this "
            f"GEMM sits at **{share:.0%} of {where}**: {fmt_seconds(r['time_s'])} on {r['rests_on']}, against "
            f"the ideal {fmt_seconds(r['ideal_time_s'])}."
        )
    else:
        kernel_note = (
            "The other is the kernel itself: real kernels reach a fraction of the ideal, which datasheet roofs do "
            "not know (an engine's measured kernels or the Measure page's calibration do), so on the chart above "
            "this GEMM sits where the ideal bound puts it."
        )
    # Built only while open (its state is the `lesson` URL parameter): closed, the page draws one chart.
    lesson = st.expander(
        "How to read a roofline (worked on this GEMM)", icon=":material/school:", key="lesson", bind="query-params"
    )
    if lesson.open is False:
        return
    with lesson:
        st.markdown(
            f"""
**1. Arithmetic intensity** is the work done per byte moved: FLOPs ÷ bytes. A GEMM of
M×K by K×N does 2·M·N·K = 2·{m:,}·{n:,}·{k:,} = **{fmt_flops(r["flops"])}**, and at the least reads A and
B once and writes C once: (M·K + K·N)·{b_in:g} B + M·N·{b_out:g} B = **{fmt_bytes(r["bytes"])}**. Its
intensity is {fmt_flops(r["flops"])} ÷ {fmt_bytes(r["bytes"])} = **{r["intensity"]:,.1f} FLOP/B** (the x axis).

**2. Two roofs.** {c.name} can do at most **{peak / 1e12:,.1f} TFLOP/s** of {dtype} math (the flat roof),
and memory feeds it {bw / 1e12:.3g} TB/s, so at intensity I it can do at most {bw / 1e12:.3g} TB/s × I
(the slanted roof). A kernel attains at most the lower of the two: min({peak / 1e12:,.1f},
{bw / 1e12:.3g} × {r["intensity"]:,.1f}) = **{r["attainable_tflops"]:,.1f} TFLOP/s** here.

**3. The ridge** is where the roofs meet: peak ÷ bandwidth = {peak / 1e12:,.1f} TFLOP/s ÷
{bw / 1e12:.3g} TB/s = **{ridge:,.0f} FLOP/B**. Left of it a kernel waits on memory (memory-bound), right
of it on math (compute-bound). This GEMM sits {side} of the ridge ({r["intensity"]:,.1f}
{"<" if r["intensity"] < ridge else "≥"} {ridge:,.0f}){verdict}.

**4. Log-log axes.** Each decade (0.1, 1, 10, 100 …) is ten times the last, so equal distances are
equal ratios, and the slanted roof is a straight line of slope 1: twice the intensity, twice the
performance, until the ridge.

**5. Below the roof** means time is lost to something the two roofs do not count. One is the
kernel floor, the least time any kernel takes ({fmt_seconds(r["overhead_s"])}), which keeps tiny GEMMs
far under the roof (overhead-bound); {floor_note} {kernel_note} The chart below draws the ideal bound
(the roofs and the floor only), so its points sit on their roofs unless the floor holds them under.

**What moves a point.** The same weights used for one token (M=1, the round marker) have intensity
{plain_number(small["intensity"])} FLOP/B, far left: that is decode at batch 1, **{REGIME_LABELS[small["bound"]]}**.
Batching (larger M) moves a point right; fewer bytes per weight (quantization) moves it right too;
faster memory raises the slanted roof, more FLOP/s the flat one. The M sweep on the chart above traces
the whole path.
"""
        )
        show_chart(teaching_figure(c, r, small), width="stretch", theme=None, key="teach_chart")
        st.caption(
            f"**A** the slanted roof, {bw / 1e12:.3g} TB/s × intensity · **B** the ridge, {ridge:,.0f} FLOP/B · "
            f"**C** the flat roof, {peak / 1e12:,.1f} TFLOP/s · ★ your GEMM at {plain_number(r['intensity'])} FLOP/B · "
            f"● the same weights at M=1, {plain_number(small['intensity'])} FLOP/B (colour: the regime)"
        )
