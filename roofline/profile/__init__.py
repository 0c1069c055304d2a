"""Your own model on the roofline: profile a PyTorch callable here, or import a profiler trace
from any machine, and place its ops on a device's roofs.

    from roofline.profile import profile, import_trace_files, summarize, roofs_for
    prof = profile(model, inputs)                 # torch is imported only here
    report = summarize(prof, roofs_for(prof))     # plain data: regime split, top ops, advice

Torch is imported lazily: reading a trace and the analysis need only the core dependencies.
"""

from __future__ import annotations

import re
import sys
import types

from roofline.profile.analysis import op_rows, regime_split, summarize
from roofline.profile.record import Profile, ProfiledOp, RankSummary
from roofline.profile.trace import TraceError, import_trace_files, import_traces


def profile(target, *inputs, **options) -> Profile:
    """Profile ``target(*inputs)`` under ``torch.profiler``; see ``roofline.profile.capture.profile``."""
    from roofline.profile.capture import profile as run_profile

    return run_profile(target, *inputs, **options)


def _tokens(name: str) -> set[str]:
    return set(re.findall(r"[A-Z0-9]+", name.upper()))


def _model_tokens(tokens: set[str]) -> set[str]:
    """The tokens that name a part (H100, SXM4, MI300X, 4090), not its memory (80GB, HBM3)."""
    return {
        t
        for t in tokens
        if re.search(r"\d", t) and not re.fullmatch(r"\d{1,2}|\d+GB|HBM\d*E?", t)  # not "2 cores", "80GB"
    }


def match_hardware(device_name: str, names: dict[str, str]) -> str | None:
    """The database device a profiled GPU is (``torch.cuda.get_device_name``: "NVIDIA H100 80GB
    HBM3", "NVIDIA A100-SXM4-80GB"): one naming every part token of it, sharing the most words
    with it; the SXM form where the name says no other. None where no device fits."""
    wanted = _tokens(device_name)
    parts = _model_tokens(wanted)
    if not parts:
        return None
    fits = [(len(wanted & _tokens(n)), "sxm" in i, i) for i, n in names.items() if parts <= _model_tokens(_tokens(n))]
    return max(fits)[2] if fits else None


def _results_roofs(results, hardware: str | None):
    """A results file's roofs: its measured ceilings, else the datasheet of the device it was
    measured on; with its calibration (achievable roofs per op class, the engine's kernel tables)
    where it has one."""
    from dataclasses import replace

    from roofline.engine import Ceilings
    from roofline.hardware import get_hardware

    if results.ceilings is not None:
        roofs = results.ceilings_for_engine()
    else:
        device = hardware or results.device.matched_hardware_id
        if device is None:
            raise ValueError("this results file has neither measured ceilings nor a database device: name --hardware")
        roofs = Ceilings.from_hardware(get_hardware(device))
    if results.calibration is not None:
        roofs = replace(roofs, roof_source=results.calibration, source="calibrated")
    return roofs


def roofs_for(prof: Profile, hardware: str | None = None, results=None):
    """The roofs a profile is placed against: a results file's where given (measured, calibrated), else
    the datasheet of ``hardware`` (or of the database device named like the profiled GPU), else,
    for a CPU profile, this CPU's roofs measured now (needs torch)."""
    from roofline.engine import Ceilings
    from roofline.hardware import get_hardware, load_hardware

    if results is not None:
        return _results_roofs(results, hardware)
    if hardware is None and prof.activity == "cuda":
        hardware = match_hardware(prof.device.name, {hw.id: hw.name for hw in load_hardware().values()})
        if hardware is None:
            raise ValueError(f"no device in the database matches {prof.device.name!r}: name one with --hardware")
    if hardware is not None:
        return Ceilings.from_hardware(get_hardware(hardware))
    from roofline.profile.capture import measure_cpu_roofs

    return measure_cpu_roofs()


__all__ = [
    "Profile",
    "ProfiledOp",
    "RankSummary",
    "TraceError",
    "import_trace_files",
    "import_traces",
    "match_hardware",
    "op_rows",
    "profile",
    "regime_split",
    "roofs_for",
    "summarize",
]


class _CallableModule(types.ModuleType):
    """``roofline.profile(model, inputs)`` for a notebook, beside ``roofline.profile.summarize``."""

    def __call__(self, target, *inputs, **options) -> Profile:
        return profile(target, *inputs, **options)


sys.modules[__name__].__class__ = _CallableModule
