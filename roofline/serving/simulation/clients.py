"""A closed loop's clients: when each sends its first request (together, or one at a time over a
ramp) and, when one of its requests ends, its next, within the load's one budget of requests."""

from __future__ import annotations

import numpy as np

from roofline.serving.simulation.load import Requests


def start_arrivals(requests: Requests) -> np.ndarray:
    """Each request's arrival; a closed loop's first ``concurrency`` requests are sent at their
    clients' starts (0, or along a ramp), the rest (NaN) when a client's request ends
    (``next_client_request``)."""
    arrival = requests.arrival_s.astype(float).copy()
    if requests.concurrency is not None:
        starting = min(requests.concurrency, requests.count)
        arrival[:starting] = np.nan_to_num(arrival[:starting], nan=0.0)
    return arrival


def next_client_request(arrival: np.ndarray, sent: int, t: float) -> None:
    """A closed-loop client whose request ended sends the next unsent one at ``t``. Requests are
    sent in index order, so where clients still to start (a ramp) hold later arrivals, this one
    takes its place before them and their starts move one request on (every request's lengths
    were drawn alike). The load's requests are one budget, as aiperf counts them: once none is
    left but the starts', the client takes the last start's request, and that client never starts."""
    pending = np.flatnonzero(np.isnan(arrival[sent:]))
    if pending.size:
        j = sent + int(pending[0])  # the first request with no arrival yet
    else:
        j = arrival.size - 1  # the request of the client that would start last
        if j < sent or not arrival[j] > t:
            return  # every request is sent or due: the budget is spent
    i = sent + int(np.searchsorted(arrival[sent:j], t, side="right"))  # the starts still to come are sorted
    arrival[i + 1 : j + 1] = arrival[i:j].copy()
    arrival[i] = t
