"""Cached data loads for the pages."""

from __future__ import annotations

import streamlit as st

from roofline.hardware import Hardware, load_hardware
from roofline.models import ModelConfig, load_models


@st.cache_resource(show_spinner=False)
def hardware_db() -> dict[str, Hardware]:
    """Every device (shipped plus $ROOFLINE_HARDWARE_DIR), validated once per process."""
    return load_hardware()


def hardware_label(hardware_id: str) -> str:
    hw = hardware_db().get(hardware_id)
    return hw.name if hw else hardware_id


@st.cache_resource(show_spinner=False)
def model_db() -> dict[str, ModelConfig]:
    """Every model (shipped plus $ROOFLINE_MODEL_DIR), validated once per process."""
    return load_models()
