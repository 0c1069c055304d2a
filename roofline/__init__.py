"""roofline: why an LLM is slow, and which hardware would fix it.

The library API (``roofline.analyze``, ``roofline.serve``, ``roofline.profile``) is loaded on
first use, so ``import roofline`` stays light (no torch, no plotting)."""

from __future__ import annotations

import importlib

__version__ = "0.1.0"
__all__ = ["analyze", "profile", "serve"]


def __getattr__(name: str):
    if name in ("analyze", "serve"):
        return getattr(importlib.import_module("roofline.library"), name)
    if name == "profile":  # the package, callable: roofline.profile(model, inputs)
        return importlib.import_module("roofline.profile")
    raise AttributeError(f"module 'roofline' has no attribute {name!r}")
