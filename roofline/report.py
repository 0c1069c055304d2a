"""An offline HTML report of a page: its headline numbers, headings, text, figures and tables as
the page shows them, plotly.js inline, no network needed."""

from __future__ import annotations

import datetime as dt
import html
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

import numpy as np
import plotly.graph_objects as go

from roofline.lazy import pandas as pd

if TYPE_CHECKING:
    from pandas import DataFrame


@dataclass(frozen=True)
class Metric:
    """One headline number as a page's metric tile shows it."""

    label: str
    value: str
    delta: str = ""  # the line under the value ("fits", "2.00× vs the datasheet")
    help: str = ""  # what the page shows on hover
    delta_color: str = "normal"  # as st.metric takes it: normal, inverse, off


@dataclass(frozen=True)
class Table:
    """A table with the number formats the page shows it in (printf style, as Streamlit's
    ``NumberColumn(format=...)``: ``%,.2f``, ``%.1f%%``)."""

    frame: pd.DataFrame
    formats: Mapping[str, str]


@dataclass(frozen=True)
class Chart:
    """A figure with the title the page shows above it (not inside it)."""

    figure: go.Figure
    title: str = ""


# A section's content; ``DataFrame`` names pandas' class without importing pandas (see roofline.lazy).
Content = Union[go.Figure, Chart, "DataFrame", Table, str, Sequence[Metric], None]  # noqa: UP007
Section = tuple[str, Content]

STYLE = """
body { font-family: Inter, Helvetica, Arial, sans-serif; margin: 2rem auto; max-width: 1200px; color: #222;
       padding: 0 1rem; }
h1 { margin-bottom: 0.2rem; } .meta { color: #666; font-size: 0.9rem; margin-bottom: 1.5rem; }
h2 { margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; }
.metrics { display: flex; flex-wrap: wrap; gap: 0.8rem; margin: 0.5rem 0 1rem; }
.metric { border: 1px solid #ddd; border-radius: 6px; padding: 0.5rem 0.8rem; min-width: 8rem; }
.metric .label { color: #555; font-size: 0.8rem; } .metric .value { font-size: 1.4rem; font-weight: 600; }
.metric .note { color: #666; font-size: 0.75rem; }
.table { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0 1.5rem; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: right; } th { background: #f5f5f5; }
td:first-child, th:first-child { text-align: left; }
code { background: #f3f3f3; padding: 0 3px; }
"""

_PRINTF = re.compile(r"%(\+?)(,?)(\.\d+)?([dfeg])")


def _python_format(printf: str) -> str | None:
    """``%,.2f`` → ``{:,.2f}``; ``%.1f%%`` → ``{:.1f}%``; ``%+,.0f%%`` (a sign always) →
    ``{:+,.0f}%``; Streamlit's ``percent`` preset (a share) → ``{:,.0%}``; None for a format it
    cannot read."""
    if printf == "percent":
        return "{:,.0%}"
    if not _PRINTF.search(printf):
        return None
    out = _PRINTF.sub(
        lambda m: (
            "{:" + m.group(1) + m.group(2) + (m.group(3) or "") + ("f" if m.group(4) == "d" else m.group(4)) + "}"
        ),
        printf,
    )
    return out.replace("%%", "%").replace("{:,f}", "{:,.0f}").replace("{:f}", "{:.0f}")


def plain_number(value: float) -> str:
    """A number as a table shows it: integers whole, others to four significant figures."""
    if not math.isfinite(value):
        return "—"
    if float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:,.4g}"


def _cell(value: object, fmt: str | None) -> str:
    if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)):
        return "—"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if pd.api.types.is_number(value):
        number = float(value)
        if fmt and math.isfinite(number):
            return fmt.format(number)
        return plain_number(number)
    return str(value)


def display_frame(frame: pd.DataFrame, formats: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Every cell as text the way the page shows it: yes/no for booleans, the column's number
    format where it has one, whole numbers without decimals and four significant figures otherwise."""
    formats = formats or {}
    out = {}
    for col in frame.columns:
        fmt = _python_format(formats[col]) if col in formats else None
        out[col] = [_cell(v, fmt) for v in frame[col].tolist()]
    return pd.DataFrame(out, columns=frame.columns)


def _inline(text: str) -> str:
    """The little Markdown pages use: **bold**, `code`, *italic*; everything else escaped."""
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    out = re.sub(r"`(.+?)`", r"<code>\1</code>", out)
    out = re.sub(r"\[([^\]]+)\]\(((?:https?://|/)[^)\s]+)\)", r"<a href='\2'>\1</a>", out)
    out = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", out)
    return re.sub(r"(?<![\w/])_(?!\s)(.+?)(?<!\s)_(?![\w])", r"<em>\1</em>", out)


def markdown_html(text: str) -> str:
    """Paragraphs and "- " bullet lists of a page's Markdown as HTML."""
    parts, items = [], []
    for line in str(text).splitlines() + [""]:
        stripped = line.strip()
        if stripped.startswith(("- ", "* ")):
            items.append(f"<li>{_inline(stripped[2:])}</li>")
            continue
        if items:
            parts.append("<ul>" + "".join(items) + "</ul>")
            items = []
        if stripped:
            parts.append(f"<p>{_inline(stripped)}</p>")
    return "\n".join(parts)


def _metrics_html(metrics: Sequence[Metric]) -> str:
    tiles = [
        "<div class='metric'>"
        f"<div class='label'>{html.escape(m.label)}</div><div class='value'>{html.escape(m.value)}</div>"
        + "".join(f"<div class='note'>{html.escape(n)}</div>" for n in (m.delta, m.help) if n)
        + "</div>"
        for m in metrics
    ]
    return "<div class='metrics'>" + "".join(tiles) + "</div>"


def html_report(title: str, sections: Sequence[Section], url: str | None = None) -> str:
    """One self-contained HTML file; the first figure carries plotly.js, the rest reuse it."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
    ]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    link = f" · <a href='{html.escape(url)}'>{html.escape(url)}</a>" if url else ""
    parts.append(f"<div class='meta'>roofline report, {stamp}{link}</div>")
    plotly_included = False
    for heading, content in sections:
        if heading:
            parts.append(f"<h2>{html.escape(heading)}</h2>")
        if content is None:
            continue
        if isinstance(content, go.Figure | Chart):
            chart = content if isinstance(content, Chart) else Chart(content, content.layout.title.text or "")
            if chart.title:  # the page shows a chart's title above it, and so does the report
                parts.append(f"<h3>{html.escape(strip_tags(chart.title))}</h3>")
            fig = go.Figure(chart.figure)
            fig.update_layout(title_text=None, autosize=True, width=None)
            parts.append(
                fig.to_html(
                    full_html=False,
                    include_plotlyjs="inline" if not plotly_included else False,
                    config={"responsive": True},
                )
            )
            plotly_included = True
        elif isinstance(content, Table | pd.DataFrame):
            frame, formats = (content.frame, content.formats) if isinstance(content, Table) else (content, {})
            shown = display_frame(frame, formats)
            parts.append("<div class='table'>" + shown.to_html(index=False, escape=True) + "</div>")
        elif isinstance(content, str):
            parts.append(markdown_html(content))
        else:
            parts.append(_metrics_html(list(content)))
    parts.append("</body></html>")
    return "\n".join(parts)


def strip_tags(text: str) -> str:
    """A Plotly title without its <b>, <br> and <sup> tags."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text or "")).strip()
