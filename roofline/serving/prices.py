"""Prices: one device-hour's on-demand price per device, shipped as editable defaults, and the
command line's ``DEVICE=USD`` override."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from roofline.datafiles import DataError, DataRecord, format_validation_error, read_data_file
from roofline.hardware import Source

SHIPPED_PRICES = Path(__file__).resolve().parent.parent.parent / "prices_db" / "prices.toml"


class Price(DataRecord):
    """An editable default: one device-hour's on-demand price, where it was read and when."""

    device: str
    usd_per_hour: float
    provider: str
    source: Source
    as_of: str

    def model_post_init(self, __context) -> None:
        if not 1e-6 <= self.usd_per_hour <= 1e6:
            raise ValueError(f"usd_per_hour must be in [1e-06, 1e+06], got {self.usd_per_hour!r}")


def load_prices(path: Path = SHIPPED_PRICES) -> dict[str, Price]:
    data = read_data_file(path)
    try:
        prices = [Price.model_validate(entry) for entry in data.get("price", [])]
    except (ValueError, TypeError) as exc:
        if hasattr(exc, "errors"):
            raise DataError(format_validation_error(path, exc)) from None
        raise DataError(f"{path}: {exc}") from None
    return {p.device: p for p in prices}


def parse_price(text: str) -> tuple[str, float]:
    """``ID=USD`` from the command line."""
    device, _, value = text.partition("=")
    try:
        usd = float(value)
    except ValueError:
        raise ValueError(f"--price: expected DEVICE=USD_PER_HOUR, got {text[:60]!r}") from None
    if not device or not np.isfinite(usd) or not 0 < usd <= 1e6:
        raise ValueError(f"--price: expected DEVICE=USD_PER_HOUR with a price in (0, 1e6], got {text[:60]!r}")
    return device, usd
