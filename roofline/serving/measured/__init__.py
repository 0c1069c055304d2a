"""Measured serving benchmarks beside the simulation: the result files of the three serving
benchmarks read into one record per benchmark point, and each point simulated at the same load
with, per metric and percentile, the predicted value, the measured one and their ratio. Nothing
is fitted from a measurement.

Formats, each read from the package's own source (see each reader's module): ``vllm bench
serve --save-result`` (``vllm``), GuideLLM's report (``guidellm``) and aiperf's
``profile_export_aiperf.json`` (``aiperf``). ``record`` holds the one record and the checks
every reader shares, ``files`` finds the format of a file and reads its points, ``compare``
sets them beside the simulation.

Times are converted to seconds. A file is strict JSON (no NaN or Infinity), at most 16 MiB,
nested at most 32 deep; a wrong value is an error that names its field.
"""

from roofline.serving.measured.compare import compare, curve, requests_for, simulator
from roofline.serving.measured.files import parse_measured, read_measured
from roofline.serving.measured.record import (
    ARRIVALS,
    FORMATS,
    MAX_MEASURED_BYTES,
    MAX_POINTS,
    MAX_VALUE,
    METRICS,
    STATS,
    MeasuredError,
    MeasuredRun,
)

__all__ = [
    "ARRIVALS",
    "FORMATS",
    "MAX_MEASURED_BYTES",
    "MAX_POINTS",
    "MAX_VALUE",
    "METRICS",
    "STATS",
    "MeasuredError",
    "MeasuredRun",
    "compare",
    "curve",
    "parse_measured",
    "read_measured",
    "requests_for",
    "simulator",
]
