"""The Serving page's prices: one input per picked device, each bound to the URL (price_<device id>)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import streamlit as st

from dashboard.share import md_escape

PRICE_PARAM = "price_"


def price_inputs(selected: Sequence[str], devices: Mapping, shipped: Mapping) -> dict[str, float]:
    """USD per device-hour of each picked device: the price the user set, else the shipped list
    price. A device with no price, or a price of 0, is left out (it gets no cost)."""
    prices: dict[str, float] = {}
    with st.sidebar.expander("Prices (USD per device-hour)"):
        st.caption(
            "Defaults are public on-demand list prices, each with its source and date (below). They move often "
            "and differ 2-3× between providers: set your own (the link keeps each price you set). A device without "
            "a price, or with a price of 0, gets no cost."
        )
        for hid in selected:
            value = st.number_input(
                f"{md_escape(devices[hid].name)} ({hid})",
                min_value=0.0,
                max_value=1e6,
                value=shipped[hid].usd_per_hour if hid in shipped else None,
                step=0.1,
                format="%.3f",
                key=f"{PRICE_PARAM}{hid}",
                bind="query-params",
                help=None if hid in shipped else "No public list price: set one to cost this device.",
            )
            if value is not None and value > 0:
                prices[hid] = float(value)
        for hid in selected:
            if hid in shipped:
                pr = shipped[hid]
                st.caption(f"{hid}: {pr.provider}; [{pr.source.name}]({pr.source.url}); as of {pr.as_of}")
    return prices
