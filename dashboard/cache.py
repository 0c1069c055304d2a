"""Results cached across reruns and sessions, so a widget change recomputes only what it changed.

The engine's functions are pure: the same workload record, device and settings give the same
result. ``cached(fn, *args)`` keys a call by the function's name and a digest of its pickled
arguments (the records themselves, so a custom model or device is keyed by its content, not its
name), and keeps the result in Streamlit's data cache, shared by every session of the server.
Each hit hands out a fresh copy, so a page that changes a result cannot change another's.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable
from typing import TypeVar

import streamlit as st

T = TypeVar("T")

# Enough for the recent choices of a few dozen people. The largest entries are request analyses of
# about 400 kB (every op of a prefill and a decode step), so the cache stays near 100 MB at most.
MAX_ENTRIES = 256


@st.cache_data(max_entries=MAX_ENTRIES, show_spinner=False)
def _call(name: str, digest: str, _fn: Callable, _args: tuple, _kwargs: dict):
    # `_fn`, `_args` and `_kwargs` are not hashed by Streamlit (leading underscore): `name` and
    # `digest` are the key.
    return _fn(*_args, **_kwargs)


def fingerprint(*args, **kwargs) -> str:
    return hashlib.blake2b(pickle.dumps((args, sorted(kwargs.items())), protocol=5), digest_size=20).hexdigest()


def cached(fn: Callable[..., T], *args, **kwargs) -> T:
    """``fn(*args, **kwargs)``, from the cache when the same call was made before.

    ``fn`` must be pure in its arguments: whatever it reads from outside them (a page's globals)
    is not in the key. Functions defined in page scripts all live in ``__main__``, so the key
    names the file too."""
    where = getattr(getattr(fn, "__code__", None), "co_filename", "")
    return _call(f"{fn.__module__}.{fn.__qualname__}@{where}", fingerprint(*args, **kwargs), fn, args, kwargs)


def per_device(fn: Callable[..., T], first, hws, *rest) -> tuple[dict[str, T], dict[str, str]]:
    """``fn(first, hw, *rest)`` for each device, cached: the results by device id, and for each
    device that cannot run it (a ValueError: no peak for the dtype, say) the reason, so a page
    can show the rest and give that device its own row instead of stopping."""
    results: dict[str, T] = {}
    why_not: dict[str, str] = {}
    for hw in hws:
        try:
            results[hw.id] = cached(fn, first, hw, *rest)
        except ValueError as exc:
            why_not[hw.id] = str(exc)
    return results, why_not
