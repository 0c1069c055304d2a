"""Shared helpers for the AppTest page tests."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

TIMEOUT = 60
ROOT = Path(__file__).resolve().parent.parent


def figure(at: AppTest, index: int = 0) -> dict:
    return json.loads(at.get("plotly_chart")[index].proto.spec)


def chart_titles(at: AppTest) -> list[str]:
    """The titles shown above the charts (bold lines: a Plotly title would not wrap on a phone)."""
    return [
        m.value.strip("*").replace("\\", "") for m in at.markdown if m.value.startswith("**") and m.value.endswith("**")
    ]


def decode(values) -> np.ndarray:
    """Plotly sends numpy arrays as base64 typed arrays; plain lists stay lists."""
    if isinstance(values, dict) and "bdata" in values:
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"])
    return np.asarray(values)


def trace_names(at: AppTest, index: int = 0) -> list[str]:
    return [t.get("name", "") for t in figure(at, index)["data"]]


def page(path: str, **params) -> AppTest:
    at = AppTest.from_file(str(ROOT / path), default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()
