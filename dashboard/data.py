"""Cached data loads for the pages."""

from __future__ import annotations

import streamlit as st

from roofline.hardware import Hardware, load_hardware


@st.cache_resource(show_spinner=False)
def hardware_db() -> dict[str, Hardware]:
    """Every device (shipped plus $ROOFLINE_HARDWARE_DIR), validated once per process."""
    return load_hardware()


def hardware_label(hardware_id: str) -> str:
    hw = hardware_db().get(hardware_id)
    return hw.name if hw else hardware_id
