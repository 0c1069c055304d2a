"""The share panel every page ends with: a copyable link to this exact view and an offline report."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlencode

import streamlit as st

from roofline.report import Section, html_report


def current_link() -> str:
    """The page's address with every URL parameter, as a browser would share it."""
    base = (st.context.url or "").split("?")[0]
    params = [(k, v) for k in st.query_params for v in st.query_params.get_all(k)]
    return base + ("?" + urlencode(params) if params else "")


def share_panel(title: str, sections: Sequence[Section]) -> None:
    st.divider()
    st.subheader("Share")
    link = current_link()
    st.caption("The link reproduces this view: every input is in it (copy with the icon at the right).")
    st.code(link or "(the address bar of this page)", language=None)
    st.download_button(
        "Download an offline HTML report",
        data=lambda: html_report(title, sections, link or None),
        file_name=f"roofline_{title.lower().replace(' ', '_')}.html",
        mime="text/html",
        on_click="ignore",
        help="Figures and tables with plotly.js inline: opens with no network.",
    )


class Report:
    """Collects what a page shows, so its share panel can export exactly that."""

    def __init__(self) -> None:
        self.sections: list[Section] = []

    def chart(self, fig, heading: str = "", **kwargs) -> None:
        st.plotly_chart(fig, **kwargs)
        self.sections.append((heading, fig))

    def table(self, frame, heading: str = "", **kwargs) -> None:
        st.dataframe(frame, **kwargs)
        self.sections.append((heading, frame))
