"""The share panel every page ends with: a copyable link to this exact view and an offline report."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from urllib.parse import urlencode

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from roofline.lazy import pandas as pd
from roofline.plots.style import label_log_ticks
from roofline.report import Chart, Metric, Section, Table, html_report, strip_tags

PIN_FROM_COLUMNS = 3  # a table with more columns than this pins its first one ...
PIN_MAX_PX = 170  # ... where that column is no wider than this: a phone keeps room for the rest


def current_link() -> str:
    """The page's address with every URL parameter, as a browser would share it."""
    base = (st.context.url or "").split("?")[0]
    params = [(k, v) for k in st.query_params for v in st.query_params.get_all(k)]
    return base + ("?" + urlencode(params) if params else "")


def share_panel(title: str, sections: Sequence[Section], note: str = "") -> None:
    st.divider()
    st.subheader("Share")
    link = current_link()
    st.caption(note or "The link reproduces this view: every input is in it.")
    # A popover mounts its content when opened: the code block's highlighter (1.5 MB of script) then
    # loads on the first click, not with every page's first chart.
    with st.popover("Link and offline report", icon=":material/share:"):
        st.caption("Copy the link with the icon at the right of it.")
        st.code(link or "(the address bar of this page)", language=None)
        st.download_button(
            "Download an offline HTML report",
            data=lambda: html_report(title, sections, link or None),
            file_name=f"roofline_{title.lower().replace(' ', '_').replace('?', '')}.html",
            mime="text/html",
            on_click="ignore",
            help="What the page shows (its headline and the open view): numbers, text, figures and tables, "
            "with plotly.js inline; opens with no network.",
        )


def _formats(column_config: dict | None) -> dict[str, str]:
    """The printf number format of each column a page configured with ``NumberColumn(format=...)``."""
    out = {}
    for col, cfg in (column_config or {}).items():
        fmt = (cfg.get("type_config") or {}).get("format") if isinstance(cfg, dict) else None
        if isinstance(fmt, str):
            out[col] = fmt
    return out


def chart_title(fig: go.Figure) -> str:
    """Take a figure's title out of Plotly, to show above the chart as text that wraps: a Plotly
    title is one line, and on a phone it runs off the chart."""
    title = strip_tags(fig.layout.title.text or "")
    if title:
        top = fig.layout.margin.t
        fig.update_layout(title_text=None, margin_t=max(20, (top if top is not None else 50) - 30))
    return title


def show_chart(fig: go.Figure, **kwargs) -> str:
    """A chart with its title above it as wrapping text; returns the title."""
    title = chart_title(label_log_ticks(fig))
    if title:
        st.markdown(f"**{md_escape(title)}**")
    st.plotly_chart(fig, **kwargs)
    return title


# Pixels per character of a table's values (generous: a clipped number reads as another number), of
# its headers (13 px type, 6.4 px a character as drawn at 1440 px), and the cell padding: a column
# is as wide as its widest value or its header.
CHAR_PX, HEADER_CHAR_PX, CELL_PAD_PX = 8, 6.5, 26


def _rendered(value: float, fmt: str) -> str | None:
    """``value`` as ``NumberColumn(format=fmt)`` shows it, near enough to size a column (None: a
    format this does not know; the browser sizes that column)."""
    if fmt == "localized":  # thousands separators, up to three decimals
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3f}"
    if fmt == "percent":  # a share, in whole percent (the step the pages set)
        return f"{value:,.0%}"
    match = re.fullmatch(r"([^%]*)%(\+?)(,?)(?:\.(\d+))?([fd])(.*)", fmt)
    if not match:
        return None
    prefix, sign, comma, decimals, kind, suffix = match.groups()
    number = f"{value:{sign}{comma}.{int(decimals or 0) if kind == 'f' else 0}f}"
    return prefix + number + suffix.replace("%%", "%")


def column_widths(frame: pd.DataFrame, formats: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, int]:
    """Each number column's width in pixels, from its widest value as shown and its header (the
    column's name, or the label ``labels`` gives it in place of the name). The browser sizes a
    table's columns once, when it first draws the table, and keeps those widths across reruns: a
    number that grew a digit after a widget changed lost its leading digits with no ellipsis
    ("92,581.21" for 492,581.21). A width set from the data follows the data."""
    out = {}
    labels = labels or {}
    for col, fmt in formats.items():
        if col not in frame.columns:  # a page may configure a column it shows only sometimes
            continue
        values = pd.to_numeric(frame[col], errors="coerce").astype(float)
        finite = values[np.isfinite(values)]
        texts = [_rendered(v, fmt) for v in finite]
        if None in texts:
            continue
        widest = max(map(len, texts), default=1)
        header = labels.get(col) or str(col)
        out[col] = math.ceil(max(CHAR_PX * widest, HEADER_CHAR_PX * len(header))) + CELL_PAD_PX
    return out


def _narrow_first(frame: pd.DataFrame) -> bool:
    """Whether the frame's first column, as text, fits in ``PIN_MAX_PX``."""
    col = frame.columns[0]
    widest = max([len(str(v)) for v in frame[col]] + [len(str(col))])
    return CHAR_PX * widest + CELL_PAD_PX <= PIN_MAX_PX


def md_escape(text: object) -> str:
    """Text shown through st.markdown as written, on one line: no emphasis, links, images,
    headings, LaTeX, HTML, emoji or colour directives (``:red[…]``) from its characters. Every
    name a user supplies (a device, a model, a file, a results file's device) goes through it."""
    return re.sub(r"([\\`*_{}\[\]()$<>#|~!:+=^&])", r"\\\1", " ".join(str(text).split()))


def _is_change(delta: str | None) -> bool:
    """A delta that is a signed or plain number ("+12%", "-3 ms", "1.93×"): a change, with an arrow."""
    return bool(delta) and delta.lstrip("+-−")[:1].isdigit()


COMMAND_LINE_CHARS = 28  # a shown command's line before its next flag moves to a line of its own


class Report:
    """Collects what a page shows (headings, headline numbers, text, charts, tables) as it shows
    it, so its share panel exports exactly that."""

    def __init__(self) -> None:
        self.sections: list[Section] = []

    def subheader(self, text: str) -> None:
        st.subheader(text)
        self.sections.append((text, None))

    def markdown(self, text: str) -> None:
        st.markdown(text)
        self.sections.append(("", text))

    def caption(self, text: str) -> None:
        st.caption(text)
        self.sections.append(("", text))

    def command(self, text: str) -> None:
        """A command to copy, in a code block of short lines, each flag with its value kept whole
        (inline in a caption, or wrapped by the browser, it broke inside its flags on a phone)."""
        lines: list[str] = []
        for token in text.split(" "):
            if lines and not (token.startswith("--") and len(lines[-1]) + len(token) > COMMAND_LINE_CHARS):
                lines[-1] += f" {token}"
            else:
                lines.append(token)
        st.code(" \\\n    ".join(lines), language="bash")
        self.sections.append(("", f"`{text}`"))

    def metrics(self, *metrics: Metric) -> None:
        """One row of metric tiles, the page's headline numbers."""
        for col, m in zip(st.columns(len(metrics)), metrics):
            col.metric(
                m.label,
                m.value,
                m.delta or None,
                delta_color=m.delta_color,
                # A delta that is a word ("fits", "before: memory"), not a change, gets no arrow.
                delta_arrow="auto" if m.delta_color != "off" and _is_change(m.delta) else "off",
                help=m.help or None,
            )
        self.sections.append(("", list(metrics)))

    def chart(self, fig: go.Figure, heading: str = "", **kwargs) -> None:
        title = show_chart(fig, **kwargs)
        self.sections.append((heading, Chart(fig, title)))  # the report shows the title above the chart too

    def table(self, frame, heading: str = "", **kwargs) -> None:
        """The frame as the page's table (numbers localized, widths fitted, a narrow first column
        pinned where there are more than ``PIN_FROM_COLUMNS``), and as a section of the page's report."""
        # Numbers with thousands separators unless the page set a format (years stay as they are).
        config = dict(kwargs.pop("column_config", None) or {})
        for col in frame.columns:
            if col not in config and "year" not in str(col) and pd.api.types.is_numeric_dtype(frame[col]):
                if not pd.api.types.is_bool_dtype(frame[col]):
                    config[col] = st.column_config.NumberColumn(format="localized")
        labels = {c: cfg.get("label") for c, cfg in config.items() if isinstance(cfg, dict) and cfg.get("label")}
        for col, px in column_widths(frame, _formats(config), labels).items():
            config[col] = {**config[col], "width": px}
        pinned = any(isinstance(c, dict) and c.get("pinned") for c in config.values())
        first = frame.columns[0] if len(frame.columns) else None
        if (
            len(frame.columns) > PIN_FROM_COLUMNS
            and kwargs.get("hide_index")
            and not pinned  # the page pinned the column that names its rows itself
            and isinstance(config.get(first, {}), dict)
            and _narrow_first(frame)
        ):
            # Each table's first column names its rows (device, context, class): kept in view while a
            # phone scrolls the rest sideways.
            config[first] = {**config.get(first, {}), "pinned": True}
        kwargs["column_config"] = config
        st.dataframe(frame, **kwargs)
        self.sections.append((heading, Table(frame, _formats(kwargs.get("column_config")))))
