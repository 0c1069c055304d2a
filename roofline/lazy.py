"""Modules imported on first use.

pandas takes about a quarter of a second to import on two cores, and a dashboard page imports it
only to build the tables under its chart: bound through ``LazyModule``, a page's first run reaches
its chart (and sends it) before pandas is imported.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class LazyModule:
    """Stands for a module; the first attribute read imports it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _module(self) -> ModuleType:
        return importlib.import_module(self._name)  # after the first call, a dictionary lookup

    def __getattr__(self, attr: str):
        return getattr(self._module(), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


pandas = LazyModule("pandas")
