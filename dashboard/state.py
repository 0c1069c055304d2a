"""URL state for the pages.

Widgets are bound to the URL with ``bind="query-params"`` (the widget key is the parameter
name). Streamlit silently drops a value the widget cannot take; this module checks the raw
parameters first, before any widget reads them, so the user sees a warning that names the
parameter, the bad value and what is allowed, and the widget falls back to its default.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import streamlit as st

from dashboard.share import md_escape
from roofline.plots.style import MAX_COMPARED

# A validator takes the raw values of one parameter and returns a problem, or None if fine.
Validator = Callable[[list[str]], str | None]


def _shown(raw: str) -> str:
    """A raw value as a message shows it: a 5,000-digit number is not repeated in full."""
    return raw if len(raw) <= 40 else f"{raw[:20]}…({len(raw):,} characters)"


def int_in(lo: int, hi: int) -> Validator:
    def check(values: list[str]) -> str | None:
        raw = values[-1]
        try:
            value = float(raw)
        except ValueError:
            return f"{_shown(raw)!r} is not a number (allowed: integers {lo}..{hi}); using the default"
        if math.isnan(value):
            return f"{_shown(raw)!r} is not a number (allowed: integers {lo}..{hi}); using the default"
        if math.isfinite(value) and not value.is_integer():
            return f"{_shown(raw)!r} is not a whole number (allowed: integers {lo}..{hi}); using the default"
        if not lo <= value <= hi:
            return f"{_shown(raw)!r} is out of range (allowed: integers {lo}..{hi}); using the default"
        return None

    return check


def float_in(lo: float, hi: float) -> Validator:
    def check(values: list[str]) -> str | None:
        raw = values[-1]
        try:
            value = float(raw)
        except ValueError:
            return f"{_shown(raw)!r} is not a number (allowed: {lo:g}..{hi:g}); using the default"
        if math.isnan(value):
            return f"{_shown(raw)!r} is not a number (allowed: {lo:g}..{hi:g}); using the default"
        if not lo <= value <= hi:
            return f"{_shown(raw)!r} is out of range (allowed: {lo:g}..{hi:g}); using the default"
        return None

    return check


def _listed(options: Sequence[str]) -> str:
    """The allowed values in words; each quoted where one holds a comma (accuracy's metrics)."""
    return ", ".join(f"'{o}'" for o in options) if any("," in o for o in options) else ", ".join(options)


def one_of(options: Sequence[str]) -> Validator:
    def check(values: list[str]) -> str | None:
        if values[-1] not in options:
            return f"{_shown(values[-1])!r} is not allowed (allowed: {_listed(options)}); using the default"
        return None

    return check


def some_of(options: Sequence[str], at_most: int | None = None) -> Validator:
    def keep(values: list[str]) -> list[str]:
        return list(dict.fromkeys(v for v in values if v in options))[:at_most]

    def check(values: list[str]) -> str | None:
        problems = []
        if "" in values and "" not in options:
            problems.append("an empty value ignored")
        unknown = [v for v in dict.fromkeys(values) if v not in options and v != ""]
        if unknown:
            shown = ", ".join(repr(_shown(v)) for v in unknown[:5]) + (" …" if len(unknown) > 5 else "")
            problems.append(f"unknown {shown} ignored (allowed: {_listed(options)})")
        known = list(dict.fromkeys(v for v in values if v in options))
        if at_most is not None and len(known) > at_most:
            problems.append(f"{len(known)} chosen, at most {at_most} compared at once; the first {at_most} kept")
        return "; ".join(problems) or None

    check.keep = keep  # type: ignore[attr-defined]
    return check


def boolean(values: list[str]) -> str | None:
    if values[-1].lower() not in ("true", "false"):
        return f"{_shown(values[-1])!r} is not allowed (allowed: true, false); using the default"
    return None


def replace_param(key: str, values: list[str]) -> None:
    """Set (or with no values, drop) a URL parameter, both in the URL and in the copy of the
    page-load URL that bound widgets seed themselves from: Streamlit reads that copy, so a value
    left there would still reach (and, for inf in an integer input, crash) the widget."""
    if values:
        st.query_params[key] = values
    elif key in st.query_params:
        del st.query_params[key]
    try:
        from streamlit.runtime.state.session_state_proxy import get_session_state

        with get_session_state().query_params() as qp:
            initial = getattr(qp, "_initial_query_params", None)
            if isinstance(initial, dict) and key in initial:
                if values:
                    initial[key] = list(values)
                else:
                    del initial[key]
    except (ImportError, AttributeError, RuntimeError):  # another Streamlit: the URL edit above stands
        pass


def _bound(key: str) -> bool:
    """Whether a widget of an earlier run of this session owns the parameter (it writes the URL
    itself, and Streamlit refuses direct edits of it)."""
    try:
        from streamlit.runtime.state.session_state_proxy import get_session_state

        with get_session_state().query_params() as qp:
            return bool(qp.is_bound(key))
    except (ImportError, AttributeError, RuntimeError):
        return False


def translate_param(key: str, old_to_new: Mapping[str, str]) -> None:
    """Rewrite a URL parameter's older value to the one its widget now takes, so older links open
    as they did (before the widget runs, and only where no widget of this session owns it yet)."""
    values = st.query_params.get_all(key)
    if values and not _bound(key) and values[-1].lower() in old_to_new:
        replace_param(key, [old_to_new[values[-1].lower()]])


def warn_bad_params(validators: Mapping[str, Validator]) -> list[str]:
    """Check the page's URL parameters before its widgets exist; warn about each bad one and
    drop it from the URL, so its widget starts at the default.

    Returns the warnings shown (tests read them). Must run before the widgets are created:
    once a bound widget has run, it has already read the raw value.
    """
    problems = []
    for key, validate in validators.items():
        values = st.query_params.get_all(key)
        if not values:
            continue
        keep = getattr(validate, "keep", None)
        if keep is None and len(values) > 1:  # one value expected: the last one given counts
            values = values[-1:]
            replace_param(key, values)
        if _bound(key):
            # The URL echoes the widget of an earlier run; its options may have changed since
            # (a custom model replaced or removed). The widget's own value decides: a valid one
            # rewrites the URL when the widget runs, an invalid one is reset to the default.
            state = st.session_state.get(key)
            current = [str(v) for v in state] if isinstance(state, list | tuple) else [str(state)]
            if state is not None and validate(current):
                problems.append((key, validate(current)))
                if keep:
                    st.session_state[key] = keep(current)
                else:
                    del st.session_state[key]
            continue
        problem = validate(values)
        if problem:
            problems.append((key, problem))
            replace_param(key, keep(values) if keep else [])
    messages = [f"URL parameter `{key}`: {problem}." for key, problem in problems]
    for key, problem in problems:  # the value came from the URL: shown as text, never as Markdown
        st.warning(f"URL parameter `{key}`: {md_escape(problem)}.", icon=":material/warning:")
    return messages


def settle_choice(key: str, options: Sequence[object]) -> None:
    """Before a bound one-value widget whose options hang on other inputs: a value from the page's
    link that is not among ``options`` is named in a warning and dropped (``warn_bad_params``); one
    this session's earlier run chose, that the inputs changed since have taken away, is dropped
    without a word, so the widget starts at its default."""
    if _bound(key):
        if key in st.session_state and st.session_state[key] not in options:
            del st.session_state[key]
        return
    warn_bad_params({key: one_of([str(o) for o in options])})


def devices_param(device_ids: Sequence[str]) -> Validator:
    """The URL check of a device picker: known ids, at most MAX_COMPARED of them."""
    return some_of(device_ids, MAX_COMPARED)


def device_picker(
    device_ids: Sequence[str], default: Sequence[str], help: str | None = None, label: str = "Devices", key: str = "hw"
) -> list[str]:
    """The devices a page compares, bound to the URL: at most MAX_COMPARED, one colour each."""
    return st.multiselect(
        label, device_ids, default=list(default), max_selections=MAX_COMPARED, key=key, bind="query-params", help=help
    )


ENGINE_HELP = (
    "Whose measured kernels the times are read from. auto: the newest vLLM where the device has its kernel "
    "tables (measured inside the engine, a public database), the datasheet elsewhere. vllm, sglang, trtllm: "
    "that engine's kernels and its host work per step. ideal: the datasheet alone, the ideal bound."
)


def engine_picker(key: str = "engine") -> str:
    """The engine whose kernels and host work a page's times rest on (``roofline.roofs``), bound to
    the URL; its check belongs in the page's ``warn_bad_params`` as ``engine_param``."""
    from roofline.roofs import ENGINES

    return st.selectbox("Engine", ENGINES, key=key, bind="query-params", help=ENGINE_HELP)


MOE_KERNEL_HELP = (
    "Which kernels run a MoE model's routed experts, as the server's MoE backend names them (TensorRT-LLM's "
    "moe_config.backend TRTLLM: trtllm-gen; SGLang's --moe-runner-backend; vLLM's --moe-backend). auto: the "
    "fastest the engine's tables timed. A kernel the engine did not time is read from another engine's tables "
    "on the device, and the op says so. Ignored for dense models and on the datasheet."
)


MOE_ROUTING_HELP = (
    "How a MoE layer's tokens spread over its experts in the kernel tables read. balanced: every expert an "
    "equal share, a perfectly even spread no real router reaches (the fastest for a prompt; in a small decode "
    "batch it reads the most experts); power-law-1.01 and power-law-1.2: the database's estimates for "
    "DeepSeek-V3/R1 and Qwen3-235B serving real prompts (the busiest expert sets a fused MoE kernel's pace). "
    "auto: the model's own as the database prices it (1.01 with shared experts, 1.2 without). Ignored for "
    "dense models and on the datasheet, which routes each token to its experts uniformly at random."
)


def moe_pickers() -> dict[str, str]:
    """The MoE kernel family the engine runs (``roofline.roofs.MOE_KERNELS``) and how tokens are
    routed (``roofline.routing.MOE_ROUTINGS``), bound to the URL, as ``Settings`` fields; their checks
    belong in the page's ``warn_bad_params`` (``moe_params``)."""
    from roofline.roofs import MOE_KERNELS
    from roofline.routing import MOE_ROUTINGS

    return {
        "moe_kernel": st.selectbox(
            "MoE kernels", MOE_KERNELS, key="moekernel", bind="query-params", help=MOE_KERNEL_HELP
        ),
        "moe_routing": st.selectbox(
            "MoE routing", MOE_ROUTINGS, key="moerouting", bind="query-params", help=MOE_ROUTING_HELP
        ),
    }


def moe_params() -> dict[str, Validator]:
    from roofline.roofs import MOE_KERNELS
    from roofline.routing import MOE_ROUTINGS

    return {"moekernel": one_of(MOE_KERNELS), "moerouting": one_of(MOE_ROUTINGS)}


def engine_param() -> Validator:
    from roofline.roofs import ENGINES

    return one_of(ENGINES)


def engine_notes(
    engine: str,
    devices: Mapping,
    device_ids: Sequence[str],
    moe_kernel: str = "auto",
    moe_routing: str = "auto",
    calibration=None,
) -> str:
    """One caption line per device: which roofs the engine gives it (the user's ``calibration``
    standing in for its tables on the device it measured)."""
    from roofline.roofs import engine_note

    measured = calibration.hardware_id if calibration is not None else None
    return "  \n".join(
        md_escape(engine_note(engine, h, devices[h].name, None, moe_kernel, moe_routing, h == measured))
        for h in device_ids
    )


MAX_ATTENTION_DP = 64
ATTENTION_DP_HELP = (
    "Attention data parallelism (SGLang's --dp with --enable-dp-attention, TensorRT-LLM's enable_attention_dp; "
    "vLLM's --data-parallel-size with expert parallelism, whose dense layers stay on each rank, comes close for "
    "MoE models): "
    "the TP group's devices form this many ranks, each running attention, the embedding and the LM head on its "
    "own sequences at TP / ranks and holding only their KV cache; the MLP and experts run over every rank's "
    "tokens at the whole TP. It must divide the TP degree; 1: off."
)


def attention_dp_picker(container=None, key: str = "adp", help: str = ATTENTION_DP_HELP) -> int:
    """Attention data parallel ranks in the TP group (``roofline.workload.Workload.attention_dp``),
    bound to the URL; its check belongs in the page's ``warn_bad_params`` as ``attention_dp_param``."""
    where = container or st
    ranks = where.number_input(
        "Attention data parallel ranks", 1, MAX_ATTENTION_DP, 1, key=key, bind="query-params", help=help
    )
    return int(ranks)


def attention_dp_param() -> Validator:
    return int_in(1, MAX_ATTENTION_DP)
