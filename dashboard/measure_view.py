"""What the Measure page shows of a results file, as rows and figures: the device line, the
ceilings against the datasheet, the calibration, the kernel sweeps and each model step's ops.
No widgets here: the page lays these out."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import plotly.graph_objects as go

from dashboard.basis import basis_label, basis_short
from dashboard.measure_ops import ROOFS, step_roofs_name
from dashboard.share import md_escape
from roofline.calibration import CLASSES, sweep_class
from roofline.dtypes import peak_unit
from roofline.engine import Ceilings
from roofline.format import fmt_seconds
from roofline.hardware import Hardware
from roofline.measure.readings import fastest_point_s, fitted_above_roof, latency_label
from roofline.measure.schema import MeasuredCeilings, Results, StepMeasurement, StepOp
from roofline.plots import DEVICE_COLORS, PointSeries, point_hover, style_figure

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
# The shipped results files a visitor can open in one click: key -> (button label, file).
EXAMPLES = {
    "example_quick": (
        "H100 SXM quick run: ceilings, calibration, model steps",
        EXAMPLES_DIR / "h100-sxm-quick-run.json",
    ),
    "example_quick_h200": (
        "H200 SXM quick run: ceilings, calibration, model steps",
        EXAMPLES_DIR / "h200-sxm-quick-run.json",
    ),
    "example": (
        "H100 SXM kernel sweeps and their calibration",
        EXAMPLES_DIR / "h100-sxm-kernel-sweeps.json",
    ),
}
# Op classes in colours and shapes of their own: none of the regimes' blue, red, green and purple
# (on every other chart those mean memory-, compute-, communication- and overhead-bound), nor the
# first roofs' black, orange and green; linear layers as circles, attention as diamonds,
# elementwise ops as squares.
CLASS_COLORS = dict(
    zip(
        CLASSES,
        ["#8C564B", "#E7298A", "#393B79", "#17BECF", "#CC79A7", "#BCBD22", "#7F7F7F", "#A6761D"],
        strict=True,
    )
)
CLASS_SYMBOLS = {"linear": "circle", "attention": "diamond"}
NOT_RECORDED = "not recorded"  # the date an imported file carries (DeviceInfo.date)


def device_caption(results: Results, hw: Hardware | None) -> str:
    """One line on where and how the results were measured; what the file does not record is
    named in plain words, with the reason."""
    info = results.device
    # A results file is the user's: what it says is shown as text, never as Markdown.
    parts = [info.kind.upper(), f"torch {md_escape(info.torch_version)}"]
    parts += [f"CUDA {md_escape(info.cuda_version)}"] if info.cuda_version else []
    parts += [f"driver {md_escape(info.driver)}"] if info.driver else []
    imported = info.date == NOT_RECORDED
    parts += [] if imported else [f"measured {_when(info.date)}"]
    parts.append(f"{results.mode} run")
    parts.append(
        f"datasheet: {md_escape(hw.name)}" if hw else "no datasheet device matches, so only measured roofs are drawn"
    )
    line = " · ".join(parts) + "."
    missing = ["the date it was measured"] if imported else []
    if info.kind == "cuda":  # a CPU run has no driver or CUDA version to record
        missing += [
            name for name, value in (("the driver", info.driver), ("the CUDA version", info.cuda_version)) if not value
        ]
    if missing:
        why = (
            "the file was converted from measurements taken outside this suite, which did not keep them"
            if imported
            else "the run could not read them on that machine"
        )
        line += f" The file does not record {_and(missing)}: {why}."
    return line


def _when(date: str) -> str:
    """2026-11-22 23:15 UTC from an ISO 8601 time; anything else as it is."""
    try:
        moment = datetime.fromisoformat(date)
    except ValueError:
        return date
    if moment.tzinfo is None:
        return moment.strftime("%Y-%m-%d %H:%M")
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _share(value: float, sheet: float | None) -> str:
    return f"{value / sheet:.0%}" if sheet else "n/a"


def percent(share: float) -> str:
    return f"{share:.0%}" if share >= 0.01 else "<1%"


def ceiling_rows(c: MeasuredCeilings, datasheet: Ceilings | None) -> list[dict[str, str]]:
    """Each measured ceiling beside the datasheet's figure and the share of it reached."""
    sheet_bw = datasheet.memory_bandwidth_bytes_per_s if datasheet else None
    unpublished = {"datasheet": "none published", "% of datasheet": ""}
    rows = [
        {
            "ceiling": name,
            "measured": f"{tbps * 1e3:,.1f} GB/s",
            "datasheet": f"{sheet_bw / 1e9:,.0f} GB/s" if sheet_bw else "none published",
            "% of datasheet": _share(tbps * 1e12, sheet_bw),
        }
        for name, tbps in (
            ("memory bandwidth, copy (read + write)", c.memory_bandwidth_tbps),
            ("memory bandwidth, read-only", c.read_bandwidth_tbps),
        )
        if tbps is not None  # a file may not have measured a read-only pass
    ]
    if c.cache_bandwidth_tbps:
        rows.append(
            {
                "ceiling": "cache bandwidth (a working set that fits in L2)",
                "measured": f"{c.cache_bandwidth_tbps * 1e3:,.1f} GB/s",
                **unpublished,
            }
        )
    for dtype, value in c.peak_tflops.items():
        sheet = datasheet.peak_flops_per_s.get(dtype) if datasheet else None
        rows.append(
            {
                "ceiling": f"peak {dtype} ({c.peak_layouts.get(dtype, 'GEMM')})",
                "measured": f"{value:,.2f} {peak_unit(dtype)}",
                "datasheet": f"{sheet / 1e12:,.1f} {peak_unit(dtype)}" if sheet else "none published",
                "% of datasheet": _share(value * 1e12, sheet),
            }
        )
    for kind, seconds in c.host_dispatch_s.items():
        rows.append({"ceiling": f"host dispatch, one eager {kind} op", "measured": fmt_seconds(seconds), **unpublished})
    if c.eager_host_per_launch_s is not None:
        rows.append(
            {
                "ceiling": "host work per launch of an eager model step (the probe below)",
                "measured": fmt_seconds(c.eager_host_per_launch_s),
                **unpublished,
            }
        )
    if c.graph_launch_overhead_s is not None:
        rows.append(
            {
                "ceiling": "one tiny kernel replayed from a CUDA graph",
                "measured": fmt_seconds(c.graph_launch_overhead_s),
                **unpublished,
            }
        )
    return rows


def calibration_rows(results: Results, datasheet: Ceilings | None) -> list[dict[str, object]]:
    """Each op class's fitted roofs, against the datasheet's, with the fit's errors."""
    sheet_bw = datasheet.memory_bandwidth_bytes_per_s if datasheet else None
    sheet_peak = datasheet.peak_flops_per_s.get("bf16") if datasheet else None
    fastest = fastest_point_s(results)
    slopes = fitted_above_roof(results)  # a fit's slope past the measured roof: not a rate reached

    def of_sheet(f) -> str:
        if not (f.bandwidth_bytes_per_s and sheet_bw):
            return ""
        share = percent(f.bandwidth_bytes_per_s / sheet_bw)
        return f"{share} (a slope: see below)" if f.op_class in slopes else share

    return [
        {
            "class": f.op_class,
            "latency": latency_label(f.latency_s, fastest.get(f.op_class)),
            "bandwidth GB/s": float(f"{f.bandwidth_bytes_per_s / 1e9:.4g}") if f.bandwidth_bytes_per_s else None,
            "% of datasheet bandwidth": of_sheet(f),
            "TFLOP/s": float(f"{f.flops_per_s / 1e12:.4g}") if f.flops_per_s else None,
            "% of datasheet bf16": percent(f.flops_per_s / sheet_peak) if f.flops_per_s and sheet_peak else "",
            "occupancy half (parallelism)": round(f.parallel_half, 2) if f.parallel_half else None,
            "sweep points": f.points,
            "median error": f"{f.median_abs_error:.1%}",
            "worst error": f"{f.max_abs_error:.1%}",
        }
        for f in results.calibration.fits.values()
    ]


def measured_dtype(measured: Ceilings, wanted: str) -> str | None:
    """The dtype whose measured peak the roofs are drawn at: the one the kernels ran in where it
    was measured (the ceilings list fp32 first, and a bf16 kernel under the fp32 roof reads
    as far above its ceiling)."""
    peaks = measured.peak_flops_per_s
    return wanted if wanted in peaks else next(iter(peaks), None)


def sweep_roofs(
    results: Results, datasheet: Ceilings | None, measured: Ceilings | None
) -> tuple[list[tuple[Ceilings, str]], list[str]]:
    """The roofs the kernel sweeps are drawn against (datasheet, measured, in-cache) and their names."""
    roofs: list[tuple[Ceilings, str]] = []
    names = []
    if datasheet and "bf16" in datasheet.peak_flops_per_s:
        roofs.append((datasheet, "bf16"))
        names.append("datasheet")
    wanted = results.steps[0].dtype if results.steps else "bf16"
    dtype = measured_dtype(measured, wanted) if measured is not None else None
    if dtype:
        roofs.append((measured, dtype))
        names.append("measured")
        if results.ceilings.cache_bandwidth_tbps:
            l2 = replace(
                measured,
                name=f"{measured.name} · in cache (L2)",
                source="measured",
                memory_bandwidth_bytes_per_s=results.ceilings.cache_bandwidth_tbps * 1e12,
            )
            roofs.append((l2, dtype))
            names.append("in-cache")
    return roofs, names


def sweep_series(results: Results) -> list[PointSeries]:
    """The kernel sweeps as points, one series per op class (linear layers by the rows they see)."""

    series = []
    for op_class, color in CLASS_COLORS.items():
        pts = [p for p in results.sweeps if sweep_class(p) == op_class]
        if not pts:
            continue
        hover = [
            f"<b>{p.name}</b> {p.shape}<br>{fmt_seconds(p.time_s)} measured<br>{p.flops / p.time_s / 1e12:,.2f} "
            f"TFLOP/s · {p.bytes / p.time_s / 1e9:,.1f} GB/s<br>intensity {p.flops / p.bytes:,.2f} FLOP/B"
            for p in pts
        ]
        series.append(
            PointSeries(
                op_class.replace("_", " "),
                np.array([max(p.flops, 1.0) / p.bytes for p in pts]),
                np.array([max(p.flops, 1.0) / p.time_s for p in pts]),
                ["memory"] * len(pts),
                hover,
                sizes=9.0,
                outline_color="#FFFFFF",
                color=color,
                symbol=CLASS_SYMBOLS.get(op_class.split("_")[0], "square"),
            )
        )
    return series


def step_bars_figure(step: StepMeasurement, revision: str) -> go.Figure:
    """A step's measured wall time beside its kernel time (the gap is the host: the overhead
    regime) and its predictions; the CUDA-graph column only where the step was captured. The kernel
    time is profiled in the eager run; a graph replays the same kernels, so it stands in both
    columns (an empty slot in the graph's had read as a bar missing)."""
    columns = ["eager", "CUDA graph"] if step.graph else ["eager"]
    compare = {
        "measured": [step.eager.median_s, step.graph.median_s if step.graph else None],
        "measured kernel time": [step.kernel_time_s, step.kernel_time_s],
        **{
            f"predicted · {basis_label(roofs)}": [step.predicted_s.get(roofs), step.predicted_s.get(f"{roofs}, graph")]
            for roofs in ROOFS
            if roofs in step.predicted_s
        },
    }
    fig = go.Figure()
    for j, (name, values) in enumerate(compare.items()):
        fig.add_trace(
            go.Bar(
                x=columns,
                y=[v * 1e3 if v else None for v in values[: len(columns)]],
                name=name,
                marker_color=DEVICE_COLORS[j % len(DEVICE_COLORS)],
                hovertemplate=f"{name}<br>%{{x}}: %{{y:,.3f}} ms"
                + ("<br>(profiled in the eager run: a graph replays the same kernels)" if "kernel" in name else "")
                + "<extra></extra>",
            )
        )
    fig.update_yaxes(title="ms per step", gridcolor="#E5E5E5")
    title = (
        "Eager vs CUDA graph, measured and predicted"
        if step.graph
        else f"Eager step, measured and predicted ({step.graph_note or 'no CUDA graph'})"
    )
    style_figure(fig, 340, revision, title, barmode="group")
    return fig


def _measured_op_hover(op: StepOp, roofs: Ceilings, dtype: str, predicted_on: str) -> str:
    """A measured op's hover: its place against the measured roofs and its prediction."""
    intensity = max(op.flops, 1.0) / op.bytes
    roof = float(roofs.attainable_flops_per_s(intensity, dtype))
    return point_hover(
        f"{op.name} (measured)",
        max(op.flops, 1.0),
        op.bytes,
        op.time_s,
        "compute" if intensity >= roofs.ridge_intensity(dtype) else "memory",
        roof,
        [
            f"{max(op.flops, 1.0) / op.time_s / roof:.0%} of the measured roof",
            f"predicted ({predicted_on}) {fmt_seconds(op.predicted_s.get(predicted_on, 0.0))}",
        ],
    )


def step_series(step: StepMeasurement, measured: Ceilings, dtype: str) -> list[PointSeries]:
    """The step's ops as measured (filled) and as predicted (open), at the same intensity."""
    roofs_name = step_roofs_name(step)
    points = [op for op in step.ops if op.time_s > 0 and op.bytes > 0]
    intensity = np.array([max(o.flops, 1.0) / o.bytes for o in points])
    return [
        PointSeries(
            "measured ops",
            intensity,
            np.array([max(o.flops, 1.0) / o.time_s for o in points]),
            ["memory"] * len(points),
            [_measured_op_hover(op, measured, dtype, roofs_name) for op in points],
            sizes=12.0,
            color="#222222",
        ),
        PointSeries(
            f"predicted ({basis_short(roofs_name)})",
            intensity,
            np.array([max(o.flops, 1.0) / o.predicted_s.get(roofs_name, o.time_s) for o in points]),
            ["compute"] * len(points),
            [
                f"<b>{o.name}</b> predicted ({roofs_name})<br>{fmt_seconds(o.predicted_s.get(roofs_name, 0.0))}"
                for o in points
            ],
            sizes=11.0,
            symbol="circle-open",
            color="#D62728",
        ),
    ]
