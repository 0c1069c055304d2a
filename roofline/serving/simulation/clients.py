"""A closed loop's clients: when each sends its first request (together, or one at a time over a
ramp) and, when one of its requests ends, its next, within the load's one budget of requests."""

from __future__ import annotations

import math
from bisect import bisect_left

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
    # The requests with no arrival yet are the array's tail (each call gives the first of them one),
    # so the first is found by bisection, not by a scan of every request a finish.
    j = bisect_left(range(sent, arrival.size), True, key=lambda k: math.isnan(arrival[k])) + sent
    if j >= arrival.size:
        j = arrival.size - 1  # the request of the client that would start last
        if j < sent or not arrival[j] > t:
            return  # every request is sent or due: the budget is spent
    i = sent + int(np.searchsorted(arrival[sent:j], t, side="right"))  # the starts still to come are sorted
    arrival[i + 1 : j + 1] = arrival[i:j].copy()
    arrival[i] = t
