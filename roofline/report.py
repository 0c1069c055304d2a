"""An offline HTML report of a page: its figures and tables, plotly.js inline, no network needed."""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

Section = tuple[str, go.Figure | pd.DataFrame | str]

STYLE = """
body { font-family: Inter, Helvetica, Arial, sans-serif; margin: 2rem auto; max-width: 1200px; color: #222; }
h1 { margin-bottom: 0.2rem; } .meta { color: #666; font-size: 0.9rem; margin-bottom: 1.5rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0 1.5rem; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: right; } th { background: #f5f5f5; }
td:first-child, th:first-child { text-align: left; }
"""


def html_report(title: str, sections: Sequence[Section], url: str | None = None) -> str:
    """One self-contained HTML file; the first figure carries plotly.js, the rest reuse it."""
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
    ]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    link = f" · <a href='{html.escape(url)}'>{html.escape(url)}</a>" if url else ""
    parts.append(f"<div class='meta'>roofline report, {stamp}{link}</div>")
    plotly_included = False
    for heading, content in sections:
        if heading:
            parts.append(f"<h2>{html.escape(heading)}</h2>")
        if isinstance(content, go.Figure):
            parts.append(content.to_html(full_html=False, include_plotlyjs="inline" if not plotly_included else False))
            plotly_included = True
        elif isinstance(content, pd.DataFrame):
            parts.append(content.to_html(index=False, na_rep="unknown", escape=True))
        else:
            parts.append(f"<p>{html.escape(str(content))}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)
