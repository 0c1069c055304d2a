"""How the requests of the Serving page's "Under load" run arrive: a trace the user uploads
(``roofline.serving.simulation.traces``), and what a closed loop's start does to its clients (in
step, or spread out by a ramp)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from dashboard.cache import cached
from dashboard.share import md_escape
from roofline.format import fmt_seconds
from roofline.serving.simulation.load import Load, Requests
from roofline.serving.simulation.traces import MAX_TRACE_BYTES, parse_trace

MAX_PAGE_REQUESTS = 5_000  # the most requests a run of the page sends (a trace: its first lines)
TRACE_NOTE = "The link reproduces this view's inputs; the trace file is not in it: share the file beside the link."


def trace_upload(first: int) -> Trace | None:
    """The requests of an uploaded trace's first lines, or none; a bad file is one error line."""
    most_mb = min(MAX_TRACE_BYTES // 2**20, int(st.get_option("server.maxUploadSize")))  # the server's limit too
    upload = st.file_uploader(
        "Trace of requests",
        type=["jsonl", "json", "csv"],
        key="load_trace",
        max_upload_size=most_mb,
        help="JSONL, one request a line (arrival_s or timestamp, prompt_tokens or input_length, output_tokens or "
        "output_length: Mooncake's traces), or CSV with a header: Azure's LLM inference traces "
        "(TIMESTAMP,ContextTokens,GeneratedTokens) or BurstGPT's (Timestamp,…,Request tokens,Response tokens,…).",
    )
    if upload is None:
        st.info(
            "Upload a trace to simulate its requests as they arrived. The file cannot travel in the page's URL: "
            "share it beside the link."
        )
        return None
    try:
        # Cached on the file's bytes: a widget change does not read it again.
        requests = cached(parse_trace, upload.getvalue(), upload.name, MAX_PAGE_REQUESTS, first)
    except ValueError as exc:
        st.error(md_escape(str(exc)))  # it names the file and echoes its cells
        return None
    left = f"; {requests.skipped:,} without prompt or output tokens left out" if requests.skipped else ""
    count = f"{requests.count:,} request{'s' if requests.count > 1 else ''}"
    span = f" arriving over {requests.arrival_s[-1]:,.1f} s" if requests.count > 1 else ""
    st.caption(f"{md_escape(upload.name)}: {count}{span}, from its first {first:,} lines at most{left}.")
    return Trace(upload.name, requests)


@dataclass(frozen=True)
class Trace:
    """An uploaded trace: its file's name and the requests of its first lines."""

    name: str
    requests: Requests


def clients_words(load: Load | Trace, run: dict) -> str | None:
    """What a closed loop's start does to its clients: in step or spread out (None for a rate)."""
    if not isinstance(load, Load) or load.kind != "concurrency" or load.concurrency < 2:
        return None
    e2e = "—" if run["e2e_s"]["mean"] is None else fmt_seconds(run["e2e_s"]["mean"])
    if load.ramp_s:
        return (
            f"The {load.concurrency} clients start one at a time over {load.ramp_s:g} s, as aiperf's "
            f"--concurrency-ramp-duration starts them, so fewer are in flight until the last one starts (the "
            f"{load.requests:,} requests are one budget, as aiperf counts them: a client whose start comes after it "
            f"is spent never starts). A request takes {e2e} from arrival to its last token: a ramp about "
            "that long leaves the clients out of step, each prompt arriving on its own."
        )
    return (
        f"The {load.concurrency} clients start together and every request has the same lengths, so they stay in "
        "step: each round's prompts arrive at once and each waits for the others' prefill, as in the first round. "
        "A real benchmark's clients drift apart over a long run (a warm-up, requests that end at different times), "
        f"which lowers TTFT and raises TPOT (other prompts' prefills land between its tokens). To see the clients "
        f"out of step, start them over about one request's time ({e2e}): 'Clients start over'."
    )
