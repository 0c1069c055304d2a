"""Tabs whose content runs only when open: a page with several views draws one at a time.

A page that stacked four charts drew all four before its first one showed (a cold first chart
about half a second later on two cores) and recomputed all four on every widget change. With
these tabs only the open view is computed and sent; the open tab is a URL parameter, so a link
reproduces it, and the offline report holds what the page shows: the open view.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from dashboard.state import Validator, one_of

VIEW_PARAM = "view"


def view_param(labels: Sequence[str]) -> Validator:
    """The validator ``warn_bad_params`` runs on the tab parameter: one of the labels."""
    return one_of(list(labels))


def view_tabs(labels: Sequence[str]) -> list:
    """One tab per label, the first open by default; each returned container's ``open`` says
    whether its content should run (always True where Streamlit does not track the state)."""
    tabs = st.tabs(list(labels), key=VIEW_PARAM, bind="query-params")
    return list(tabs)


def is_open(tab) -> bool:
    return tab.open is not False


def open_view(label: str, unless: Sequence[str] = ()):
    """A widget callback that opens the tab ``label`` (unless one of ``unless`` is open): a widget
    that only changes one view brings that view up."""

    def callback() -> None:
        if st.session_state.get(VIEW_PARAM) not in unless:
            st.session_state[VIEW_PARAM] = label

    return callback
