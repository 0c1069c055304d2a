"""The serving engines a prediction can name: their scheduler, their default token budget per
step, and the host work each does per step (scheduling, input preparation, sampling, output
processing), which no kernel table holds.

The scheduler policies are ``roofline.serving.simulation.scheduler``'s. The token budgets are the
engines' own defaults, each cited below. The host work per step is fitted end to end, since only a
whole serving run shows it: on a declared split of the silicon sample (``engine_db/engines.toml``
names it and the command that fits it), and the error on the rest of the sample is reported apart
(``python -m roofline validate --load``). An engine that runs its host work between steps adds it
to the step (vLLM before 0.14); one that overlaps it with the device's work (vLLM's async
scheduling, default since 0.14; SGLang's and TensorRT-LLM's overlap schedulers, on by default)
takes the longer of the two.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

import numpy as np
from pydantic import Field

from roofline.datafiles import DataRecord
from roofline.defaults import VLLM_LARGE_GPU_BYTES, VLLM_LARGE_GPU_DEFAULTS, VLLM_OTHER_GPU_DEFAULTS
from roofline.hardware import Hardware

ENGINE_DB = Path(__file__).resolve().parents[1] / "engine_db" / "engines.toml"
# The runs of the silicon sample the host work is fitted on: (model_path, system). Every other
# run is the test set.
HOST_FIT_SPLIT = ("Qwen/Qwen3-32B", "h100_sxm")


def in_host_fit_split(row: dict[str, str]) -> bool:
    return (row.get("model_path"), row.get("system")) == HOST_FIT_SPLIT


GIB = 2**30


def vllm_batch_defaults(hw: Hardware) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) as vLLM's OpenAI server sets them on ``hw`` when told
    neither (``roofline.defaults``): 8192 and 1024 on a device exposing 70 GiB or more that is not an
    A100, else 2048 and 256. vLLM's TPU and CPU backends set their own; the GPU rule is read for every
    device."""
    large = hw.memory_bytes >= VLLM_LARGE_GPU_BYTES and "a100" not in hw.id
    return VLLM_LARGE_GPU_DEFAULTS if large else VLLM_OTHER_GPU_DEFAULTS


def vllm_default_words(setting: str) -> str:
    """vLLM's rule for ``setting`` ("max_batched_tokens" or "max_num_seqs") in words, from the same
    figures ``vllm_batch_defaults`` reads: "1,024 on a GPU of 70 GiB or more other than an A100, else 256"."""
    i = ("max_batched_tokens", "max_num_seqs").index(setting)
    large, other = VLLM_LARGE_GPU_DEFAULTS[i], VLLM_OTHER_GPU_DEFAULTS[i]
    return f"{large:,} on a GPU of {VLLM_LARGE_GPU_BYTES // GIB} GiB or more other than an A100, else {other:,}"


class HostFit(DataRecord):
    """Where an engine's host work per step comes from."""

    split: str = Field(min_length=1)  # the runs it was fitted on
    runs: int = Field(ge=1)
    command: str = Field(min_length=1)
    split_median_abs_error: float = Field(ge=0)  # TPOT on the split, after the fit
    # The split's concurrencies (fewest, most): past them a per-sequence figure is extrapolated.
    sequences: tuple[int, int]

    def beyond(self, sequences: int, per_seq_us: float, engine: str) -> str:
        """A note where a step of ``sequences`` sequences reads ``engine``'s host work per sequence
        past the concurrencies it was fitted at ("" within them, or with no per-sequence part)."""
        if per_seq_us <= 0 or sequences <= self.sequences[1]:
            return ""
        return (
            f"{engine}'s host work per sequence ({per_seq_us:g} µs) was fitted at {self.sequences[0]:,} to "
            f"{self.sequences[1]:,} sequences ({self.split}); at {sequences:,} it is extrapolated"
        )


class EngineProfile(DataRecord):
    """One serving engine as the simulation and the step model run it."""

    id: str
    name: str
    scheduler: str  # roofline.serving.simulation.scheduler policy
    host_overlaps: bool  # the host's per-step work runs while the device works (in its current versions)
    host_overlaps_from: str | None = None  # the first version that does; older ones run it between steps
    host_overlap_source: str = Field(min_length=1)
    host_step_us: float = Field(ge=0, le=1e5)  # host work per step, microseconds ...
    host_per_seq_us: float = Field(ge=0, le=1e4)  # ... and per sequence the step samples
    host_fit: HostFit
    budget_source: str = Field(min_length=1)
    # Whether the engine by default splits a prompt that does not fit a step's token budget over
    # several steps (False: it waits until the whole prompt fits one).
    chunked_prefill: bool
    chunked_prefill_source: str = Field(min_length=1)
    # Whether by default a step that takes in prompt tokens also carries the running requests'
    # decodes (False: prompts run in prefill steps of their own, which the decodes wait out).
    mixed_steps: bool
    mixed_steps_source: str = Field(min_length=1)
    # The most new tokens of a step with prompt tokens replayed from a CUDA graph (0: none is).
    prompt_graph_tokens: int = Field(ge=0, le=1 << 24)
    prompt_graph_source: str = Field(min_length=1)

    def overlaps(self, version: str | None = None) -> bool:
        """Whether ``version`` (None: the current one) overlaps its host work with the device's."""
        if not self.host_overlaps:
            return False
        if version and self.host_overlaps_from:
            from roofline.tables.convert import _version_key

            return _version_key(version) >= _version_key(self.host_overlaps_from)
        return True

    @property
    def host_step_s(self) -> float:
        return self.host_step_us * 1e-6

    @property
    def host_per_seq_s(self) -> float:
        return self.host_per_seq_us * 1e-6

    def host_short(self, version: str | None = None) -> str:
        """A few words for a chart title: "vLLM host work 1.6 ms/step + 42 µs/seq, overlapped"."""
        how = "overlapped" if self.overlaps(version) else "between steps"
        return f"{self.name} host work {self.host_step_us / 1e3:.2g} ms/step + {self.host_per_seq_us:.3g} µs/seq, {how}"

    def host_note(self, version: str | None = None) -> str:
        how = "overlapped with the device's work" if self.overlaps(version) else "between steps, added to each"
        return (
            f"{self.name}'s host work, {self.host_step_us:,.0f} us per step and {self.host_per_seq_us:,.1f} us per "
            f"sequence, {how} (fitted on {self.host_fit.split}, {self.host_fit.runs} runs; the rest of the sample "
            "is the test set)"
        )

    def prompt_graph_limit(self, max_num_seqs: int, setting: int | None = None) -> int:
        """The most new tokens of a step holding prompt tokens that replays a CUDA graph, for a
        server capped at ``max_num_seqs`` sequences (vLLM captures up to twice that, at most 512);
        ``setting`` (``Settings.prompt_graph_tokens``), where given, in place of the default."""
        if setting is not None:
            return setting
        if self.id == "vllm":
            return min(self.prompt_graph_tokens, 2 * max_num_seqs)
        return self.prompt_graph_tokens

    def token_budget(self, hw: Hardware) -> int:
        """The engine's default tokens per step on ``hw`` (its ``budget_source``)."""
        memory_gib = hw.memory_bytes / GIB
        if self.id == "vllm":
            return vllm_batch_defaults(hw)[0]
        if self.id == "sglang":
            # SGLang's server_args: chunked_prefill_size 2048 under 35 GiB, 8192 under 160 GiB, else 16384.
            return 2048 if memory_gib < 35 else 8192 if memory_gib < 160 else 16384
        return 8192  # TensorRT-LLM: max_num_tokens 8192


STEP_GRID_US = np.arange(0.0, 20000.0 + 1, 100.0)  # host work per step searched, us
SEQ_GRID_US = np.arange(0.0, 200.0 + 0.1, 1.0)  # and per sampled sequence
TIE = 0.002  # a median |log error| within this of the best fits as well


def fit_host_work(
    device_tpot_s: np.ndarray, measured_tpot_s: np.ndarray, sequences: np.ndarray, overlaps: np.ndarray
) -> tuple[float, float]:
    """(seconds per step, seconds per sequence) of host work that best turn simulated TPOTs
    without host work into measured ones: a run's TPOT becomes its device TPOT plus a + b x C
    where its engine runs the work between steps, the longer of the two where it overlaps it (C:
    the sequences its decode steps sample). The median |log(predicted / measured)| is minimised
    over a grid; among fits within ``TIE`` of the best, the least host work is taken (an overlapped
    engine whose host work hides under the device's fits as well with any smaller figure).

    Only host work that every run allows is searched: each decode step takes at least the host's
    work (the longer of the two, or their sum), so a run's TPOT, a mean of such steps, bounds
    a + b x C from above. A figure past that would fit the median by making the host carry what
    the device's model misses, and would contradict the runs it was fitted on."""
    sim = np.asarray(device_tpot_s, float)[None, None, :]
    measured = np.asarray(measured_tpot_s, float)[None, None, :]
    c = np.asarray(sequences, float)[None, None, :]
    host = STEP_GRID_US[:, None, None] * 1e-6 + SEQ_GRID_US[None, :, None] * 1e-6 * c
    pred = np.where(np.asarray(overlaps, bool)[None, None, :], np.maximum(sim, host), sim + host)
    loss = np.median(np.abs(np.log(pred / measured)), axis=-1)
    loss = np.where(np.all(host <= measured, axis=-1), loss, np.inf)  # (0, 0) always qualifies
    near = loss <= loss.min() + TIE
    i, j = np.unravel_index(np.argmin(np.where(near, host.mean(axis=-1), np.inf)), loss.shape)
    return float(STEP_GRID_US[i]) * 1e-6, float(SEQ_GRID_US[j]) * 1e-6


@lru_cache(maxsize=4)
def load_engines(path: str = str(ENGINE_DB)) -> dict[str, EngineProfile]:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    return {key: EngineProfile(id=key, **value) for key, value in data["engines"].items()}


def prompt_defaults(engine: str) -> tuple[bool, bool]:
    """How ``engine`` runs prompts by default: (mixed, split). ``mixed``: a step carries prompt
    tokens beside the decodes (the steady frontier's chunked prefill; SGLang: prefill steps of their
    own); ``split``: a prompt longer than a step's budget runs over several steps (the simulation's
    chunked prefill; TensorRT-LLM: kept whole). vLLM's for the ideal engine and ``auto``."""
    profile = engine_profile(engine) or engine_profile("vllm")
    return profile.mixed_steps, profile.chunked_prefill


def prompt_step(engine: str, budget: int, batch, prompt) -> tuple[np.ndarray, np.ndarray]:
    """The largest step of ``batch`` prompts of ``prompt`` tokens as ``engine`` runs them by default
    under a token budget of ``budget``: (prompt tokens, sequences, at most). An engine that splits
    prompts fills the budget, a long prompt's chunk alone, and a step that starts inside one prompt
    touches ceil((tokens - 1) / prompt) + 1 of them; one that keeps them whole (TensorRT-LLM) takes
    as many whole prompts as the budget holds, and at least one (one longer than the budget it
    refuses: ``whole_prompt_refusal``)."""
    b, s = np.asarray(batch, float), np.asarray(prompt, float)
    if prompt_defaults(engine)[1]:
        tokens = np.minimum(b * s, budget)
        return tokens, np.minimum(b, np.ceil((tokens - 1) / s) + 1)
    tokens = np.minimum(b * s, np.maximum(np.floor(budget / s), 1.0) * s)
    return tokens, tokens / s


def prompt_modes(chunked: bool | None, engine: str) -> tuple[bool, bool]:
    """(mixed, split) for a chunked-prefill setting: on or off for both, None the engine's defaults."""
    return prompt_defaults(engine) if chunked is None else (bool(chunked), bool(chunked))


def prompt_words(mixed: bool, split: bool) -> str:
    """How prompts run, in words: in the decodes' steps or in prefill steps of their own, and a long
    one split over steps or each whole (``prompt_modes``' pair)."""
    where = "in the decodes' steps" if mixed else "in prefill steps of their own"
    return f"prompts {where}, " + ("a long one split over steps" if split else "each whole")


def chunked_words(chunked: bool | None, engine: str) -> str:
    """How a simulation runs prompts past the token budget, in words: "chunked prefill on" or "off",
    and "(the engine's default)" where the setting (None) left it to ``engine``."""
    on = prompt_modes(chunked, engine)[1]
    return f"chunked prefill {'on' if on else 'off'}" + (" (the engine's default)" if chunked is None else "")


def whole_prompt_refusal(chunked: bool | None, engine: str, budget: int, prompt: int, which: str = "the") -> str:
    """Why a prompt of ``prompt`` tokens (``which``: "the", or "the longest" of a load's) cannot run
    where prompts are kept whole (``chunked`` off, or None on an engine that keeps them whole) and a
    step holds ``budget`` tokens ("" where it can)."""
    if prompt <= budget or prompt_modes(chunked, engine)[1]:
        return ""
    whose = f" ({engine_profile(engine).name}'s default)" if chunked is None else ""
    return (
        f"max_batched_tokens: {budget:,} is below {which} prompt ({prompt:,} tokens); without chunked prefill{whose} "
        "a prompt must fit one step: raise it or chunk the prompts (--chunked-prefill on; the Serving page: "
        "Chunked prefill on)"
    )


def engine_profile(engine: str) -> EngineProfile | None:
    """The profile of a serving engine (vllm, sglang, trtllm); None for the ideal datasheet."""
    return load_engines().get(engine)
