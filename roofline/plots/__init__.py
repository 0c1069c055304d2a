"""Plotly figures built from engine data, one module per figure family. No Streamlit here:
pages only display these."""

from roofline.plots.bars import grouped_bar_figure, memory_bar_figure, memory_compare_figure, time_breakdown_figure
from roofline.plots.capacity import capacity_figure, crossover_figure
from roofline.plots.roofline import PointSeries, op_table_series, point_hover, roofline_figure, step_series
from roofline.plots.style import DEVICE_COLORS, MEMORY_COLORS, REGIME_COLORS, style_figure
from roofline.plots.training import loading_figure, training_memory_figure

__all__ = [
    "DEVICE_COLORS",
    "MEMORY_COLORS",
    "REGIME_COLORS",
    "PointSeries",
    "capacity_figure",
    "crossover_figure",
    "grouped_bar_figure",
    "loading_figure",
    "memory_bar_figure",
    "memory_compare_figure",
    "op_table_series",
    "point_hover",
    "roofline_figure",
    "step_series",
    "style_figure",
    "time_breakdown_figure",
    "training_memory_figure",
]
