"""The benchmark client that ran each run of the silicon sample, where its source names one.

Rows exported from InferenceX (``silicon_data_source`` a dated ``source_file=YYYY-MM-DD.csv`` or
a ``db-dump/``; all and only its 1,024/8,192-token grid) ran its client, vLLM's
``benchmark_serving.py`` with ``--random-range-ratio 0.8 --num-prompts CONC*10 --max-concurrency
CONC --request-rate inf --ignore-eos`` (its workflows set the ratio to 0.8 at every commit checked,
September 2025 to August 2026: the callers of ``.github/workflows/benchmark-tmpl.yml`` before
November 2025, its default since; the scripts under ``benchmarks/`` pass it on;
SemiAnalysisAI/InferenceX, Apache-2.0), and from 2026-01-22 two warm-up requests per client before
measuring (``client_warmup``). Every other source records no client: its runs are read as the row
says, fixed lengths and every client starting together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class BenchmarkClient:
    """How a run's benchmark client drew its requests: every prompt and output length uniform in
    [``range_ratio`` x, 1 x] the row's (1: fixed), ``prompts_per_client`` requests per concurrent
    client, all sent at once behind a semaphore of the run's concurrency."""

    name: str
    range_ratio: float
    prompts_per_client: int
    source: str


INFERENCEX_CLIENT = BenchmarkClient(
    "InferenceX (vLLM benchmark_serving.py)",
    0.8,
    10,
    "SemiAnalysisAI/InferenceX (Apache-2.0): its workflows' random-range-ratio 0.8 (benchmark-tmpl.yml's "
    "RANDOM_RANGE_RATIO); "
    "benchmarks/benchmark_lib.sh run_benchmark_serving --random-range-ratio, --num-prompts CONC*10, "
    "--max-concurrency CONC, --request-rate inf, --ignore-eos",
)
RECORDED_CLIENT = BenchmarkClient(
    "as recorded (fixed lengths)",
    1.0,
    10,
    "the sample's row: fixed isl and osl, batch_size clients starting together; the source records no client",
)
_MEASURED = re.compile(r"measured=([^;]+)")
_INFERENCEX_SOURCE = re.compile(r"^(source_file=20\d\d-\d\d-\d\d\.csv|db-dump/)")


def benchmark_client(row: dict[str, str]) -> BenchmarkClient:
    """The client that ran the row's benchmark, as its source documents it (module notes)."""
    return INFERENCEX_CLIENT if _INFERENCEX_SOURCE.match(row.get("silicon_data_source") or "") else RECORDED_CLIENT


def measured_stamp(row: dict[str, str]) -> str | None:
    """An InferenceX run's ``measured=`` field as its source records it (a time, or a day); None elsewhere."""
    found = _MEASURED.search(row.get("silicon_data_source") or "")
    return found[1].strip() if found and benchmark_client(row) is INFERENCEX_CLIENT else None


def measured_date(row: dict[str, str]) -> str | None:
    """The day (YYYY-MM-DD) an InferenceX run was measured, as its source records it; None elsewhere."""
    stamp = measured_stamp(row)
    return stamp[:10] if stamp and re.match(r"\d{4}-\d\d-\d\d", stamp) else None


# InferenceX's client has warmed the server up before measuring since commit d053ae24e (2026-01-21
# 17:53 UTC, "adding warmup (#480)"): benchmarks/benchmark_lib.sh's run_benchmark_serving passes
# --num-warmups 2*CONC, and utils/bench_serving/benchmark_serving.py sends that many copies of the
# first prompt behind the run's semaphore and waits for them all before its clock starts. Before it,
# the first CONC requests met a server that had served none, and their one-time costs (a kernel
# compiled or tuned for the first batch of its shape) counted in the means. The simulation has no
# such costs: it predicts both alike, and the accuracy report scores them apart.
WARMUP_CHANGED = "2026-01-21"  # the day of that commit: a run measured then may have had either
WARMUP_SINCE = "2026-01-22"  # the first whole day after it
WARMUP_PER_CLIENT = 2
WARMUP_SOURCE = (
    "SemiAnalysisAI/InferenceX (Apache-2.0) d053ae24e (2026-01-21): benchmarks/benchmark_lib.sh "
    "run_benchmark_serving --num-warmups 2*CONC; none before"
)


def client_warmup(row: dict[str, str]) -> int | None:
    """Warm-up requests per client the run's client sent before measuring: InferenceX's
    ``WARMUP_PER_CLIENT`` from ``WARMUP_SINCE``, 0 before ``WARMUP_CHANGED``; None on that day
    (either), without a measured date, or where no client is recorded."""
    date = measured_date(row)
    if date is None or date == WARMUP_CHANGED:
        return None
    return WARMUP_PER_CLIENT if date >= WARMUP_SINCE else 0
