"""Which steps a simulated engine replays from a CUDA graph, worked by hand: a step with prompt
tokens past the engine's graph limit has the host dispatch every kernel, and takes the longer of
the device's work and the host's (its dispatch and the engine's own host work, on one thread)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from roofline.engine import evaluate
from roofline.engines import engine_profile
from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.ops import step_ops
from roofline.serving.simulation.api import graph_words, knobs_from
from roofline.serving.simulation.load import Requests
from roofline.serving.simulation.metrics import per_request
from roofline.serving.simulation.run import simulate
from roofline.serving.simulation.scheduler import EngineKnobs
from roofline.serving.simulation.steptime import step_times
from roofline.settings import Settings
from roofline.workload import Precision, Workload
from tests.test_simulation import MS, flat_times


def _times(device_ms: float, host_ms: float, dispatch_ms: float, overlaps: bool):
    return replace(
        flat_times(device_ms * MS),
        step_overhead_s=host_ms * MS,
        overhead_overlaps=overlaps,
        eager_dispatch_s=dispatch_ms * MS,
    )


@pytest.mark.parametrize(
    "device_ms, overlaps, graphed_ms, eager_ms",
    [
        # Overlapped host work: graphed max(1, 2) = 2; eager max(1, 2 + 5) = 7.
        (1.0, True, 2.0, 7.0),
        # A device step longer than the host's: 10 either way.
        (10.0, True, 10.0, 10.0),
        # Host work between steps: graphed 1 + 2 = 3; eager max(1, 5) + 2 = 7; a 10 ms device step, 12.
        (1.0, False, 3.0, 7.0),
        (10.0, False, 12.0, 12.0),
    ],
)
def test_an_eager_step_takes_the_longer_of_the_device_and_the_host(device_ms, overlaps, graphed_ms, eager_ms):
    """Device 1 or 10 ms a step, the engine's host work 2 ms, the dispatch of every kernel 5 ms."""
    times = _times(device_ms, 2.0, 5.0, overlaps)
    assert times.step_s(8, 1, 0, 1.0, [8], [0], graphed=True) == pytest.approx(graphed_ms * MS)
    assert times.step_s(8, 1, 0, 1.0, [8], [0], graphed=False) == pytest.approx(eager_ms * MS)


@pytest.mark.parametrize("limit, first_ms", [(0, 7.0), (3, 7.0), (4, 2.0), (1 << 20, 2.0)])
def test_a_prompt_step_replays_a_graph_only_up_to_the_engines_limit(limit, first_ms):
    """Device 1 ms, host 2 ms overlapped, dispatch 5 ms. One request, prompt 4 tokens, 3 outputs,
    on an idle server: its prompt step takes 7 ms eagerly (limit under 4 tokens) and 2 ms from a
    graph; its two decode steps replay a graph either way, 2 ms each."""
    requests = Requests(np.zeros(1), np.array([4]), np.array([3]))
    knobs = EngineKnobs(max_num_batched_tokens=8, block_size=4, prompt_graph_tokens=limit)
    run = simulate(requests, _times(1.0, 2.0, 5.0, True), kv_blocks=100, knobs=knobs)
    assert run.first_token_s == pytest.approx([first_ms * MS])
    assert run.finish_s == pytest.approx([(first_ms + 4.0) * MS])


def test_a_mixed_step_over_the_limit_is_eager_and_decode_steps_are_not():
    """Limit 4 tokens. A (prompt 4, 4 outputs) at 0; B (prompt 8, 1 output) arrives at 1.5 ms.
    [0, 2]: A's prompt, 4 tokens, graphed (2 ms: the host's 2 over the device's 1). [2, 9]: composed
    at 2 ms with B in: A's decode and B's 8 prompt tokens, 9 tokens, eager: max(1, 2 + 5) = 7 ms;
    B's first and only token at 9 ms. [9, 11] and [11, 13]: A decodes alone, graphed: A's 4th token
    at 13 ms."""
    requests = Requests(np.array([0.0, 1.5 * MS]), np.array([4, 8]), np.array([4, 1]))
    knobs = EngineKnobs(max_num_batched_tokens=16, block_size=4, prompt_graph_tokens=4)
    run = simulate(requests, _times(1.0, 2.0, 5.0, True), kv_blocks=100, knobs=knobs)
    assert run.first_token_s == pytest.approx([2 * MS, 9 * MS])
    assert run.finish_s == pytest.approx([13 * MS, 9 * MS])


def test_more_graphed_prompt_tokens_never_slow_a_run():
    """Property: over the same closed loop, raising the graph limit never raises a request's TTFT."""
    requests = Requests(np.array([0.0, 0.0, np.nan, np.nan]), np.array([6, 3, 5, 9]), np.array([3, 4, 2, 2]), 2)
    ttfts = []
    for limit in (0, 3, 6, 9, 12, 1 << 20):
        knobs = EngineKnobs(max_num_batched_tokens=16, block_size=4, prompt_graph_tokens=limit)
        run = simulate(requests, _times(1.0, 2.0, 5.0, True), kv_blocks=100, knobs=knobs)
        ttfts.append(per_request(run)["ttft_s"])
    for slower, faster in zip(ttfts, ttfts[1:]):
        assert np.all(faster <= slower + 1e-12)


def test_the_eager_dispatch_is_what_analyze_eager_counts_for_one_sequence():
    """The dispatch a simulated eager step pays is the host dispatch of the same model's step with
    every kernel launched from the host (``analyze --eager``: each op's launches at the settings'
    cost per launch); twice the cost per launch, twice the dispatch; none with no engine."""
    model, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    settings = Settings(engine="vllm")
    times = step_times(model, hw, Precision(), 1, settings, 8192, 256)
    w = Workload(model, "decode", 1, 1, precision=Precision(), tp=1, cuda_graphs=False)
    eager = evaluate(step_ops(w), settings.ceilings(hw, 1, cuda_graphs=False))
    assert times.eager_dispatch_s == pytest.approx(float(np.sum(eager.host_s)))
    assert times.eager_dispatch_s > 100 * settings.launch_overhead_s  # hundreds of launches, not one
    doubled = step_times(
        model, hw, Precision(), 1, replace(settings, launch_overhead_s=2 * settings.launch_overhead_s), 8192, 256
    )
    assert doubled.eager_dispatch_s == pytest.approx(2 * times.eager_dispatch_s)
    ideal = step_times(model, hw, Precision(), 1, Settings(), 8192, 256)
    assert ideal.eager_dispatch_s == 0.0


def test_each_engine_graphs_prompt_steps_as_its_defaults_do():
    """vLLM replays steps of up to min(2 x max_num_seqs, 512) tokens; SGLang's and TensorRT-LLM's
    prompt steps run eagerly (their piecewise graphs are off by default); a setting overrides."""
    h100 = get_hardware("h100-sxm")
    assert knobs_from(Settings(engine="vllm"), True, h100).prompt_graph_tokens == 512
    assert knobs_from(Settings(engine="vllm", max_num_seqs=64), True, h100).prompt_graph_tokens == 128
    assert knobs_from(Settings(engine="sglang"), True, h100).prompt_graph_tokens == 0
    assert knobs_from(Settings(engine="trtllm"), True, h100).prompt_graph_tokens == 0
    assert knobs_from(Settings(engine="sglang", prompt_graph_tokens=4096), True, h100).prompt_graph_tokens == 4096
    for engine in ("vllm", "sglang", "trtllm"):
        assert engine_profile(engine).prompt_graph_source


def test_the_words_say_which_steps_replay_a_graph():
    assert graph_words({"eager_dispatch_s": 0.0, "prompt_graph_tokens": 512}) == ""
    words = graph_words({"eager_dispatch_s": 0.0123, "prompt_graph_tokens": 0})
    assert "decode steps replayed" in words and "12.3 ms" in words
    assert "up to 512 tokens" in graph_words({"eager_dispatch_s": 0.0123, "prompt_graph_tokens": 512})


@pytest.mark.parametrize("bad", [-1, 1.5, True, "512", 1 << 25])
def test_a_bad_graph_limit_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="prompt_graph_tokens"):
        Settings(prompt_graph_tokens=bad)
    with pytest.raises(ValueError, match="prompt_graph_tokens"):
        EngineKnobs(prompt_graph_tokens=bad)


def test_serve_takes_a_graph_limit_and_says_which_steps_replay(capsys):
    """The command line: the limit and the cost per launch act in the simulation and on the steady
    frontier (tests/test_steady_prompts.py), and the output says which steps replay a graph."""
    from roofline.cli import main

    base = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "sglang"]
    load = ["--prompt-len", "256", "--output-len", "8", "--concurrency", "1", "--requests", "3"]
    assert main([*base, *load, "--prompt-graph-tokens", "256", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["engine"]["prompt_graph_tokens"] == 256 and data["engine"]["eager_dispatch_s"] > 0
    assert main([*base, *load]) == 0
    assert "steps with prompt tokens dispatched kernel by kernel" in capsys.readouterr().out
    for flag in (["--prompt-graph-tokens", "256"], ["--launch-overhead-us", "50"]):
        assert main([*base, *flag]) == 0  # the frontier's prompt steps take them
        capsys.readouterr()
    assert main([*base, "--recv-interval", "4"]) == 2
    assert "act in the simulation" in capsys.readouterr().err
    for flag, value in (
        ("--prompt-graph-tokens", "many"),
        ("--prompt-graph-tokens", "99999999999"),
        ("--launch-overhead-us", "1e12"),
        ("--launch-overhead-us", "nan"),
    ):
        with pytest.raises(SystemExit):
            main([*base, *load, flag, value])
        assert f"argument {flag}: expected" in capsys.readouterr().err


def test_validate_scores_the_runs_at_a_cost_per_launch_when_asked(tmp_path, capsys):
    """``validate --load --launch-overhead-us U``: an SGLang run whose prompt steps run eagerly is
    scored at that cost (a slower host, a later first token; the ideal bound, with no host, the
    same), the report says which cost it assumed, and the flag is refused outside --load or out of
    range."""
    import csv
    import gzip

    from roofline.cli import main
    from tests.test_validate import FIELDS, _row

    path = tmp_path / "sample.csv.gz"
    with gzip.open(path, "wt", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerow(
            _row(
                id="a",
                backend="sglang",
                backend_version="0.5.9",
                isl=128,
                osl=8,
                batch_size=1,
                silicon_ttft_ms=20.0,
                silicon_tpot_ms=8.0,
            )
        )
    ttft, ideal = {}, {}
    for us in ("10.6", "200"):
        assert (
            main(["validate", "--sample", str(path), "--load", "--every", "1", "--launch-overhead-us", us, "--json"])
            == 0
        )
        report = json.loads(capsys.readouterr().out)
        assert report["launch_overhead_us"] == float(us)
        ttft[us] = report["results"][0]["tables_ttft_ms"]
        ideal[us] = report["results"][0]["datasheet_ttft_ms"]
    assert ttft["200"] > ttft["10.6"]
    assert ideal["200"] == ideal["10.6"]  # the ideal bound has no host, whatever a launch costs
    assert main(["validate", "--sample", str(path), "--launch-overhead-us", "5"]) == 2
    assert "--launch-overhead-us: only with --load" in capsys.readouterr().err
    assert main(["validate", "--sample", str(path), "--load", "--launch-overhead-us", "2e6"]) == 2
    assert "--launch-overhead-us: expected a number of microseconds" in capsys.readouterr().err


def test_a_prefill_timed_from_a_graph_the_engine_would_not_replay_says_so():
    """analyze's prefill (CUDA graphs by default) says where the engine would run it eagerly and the
    host's dispatch would outlast the kernels, with the eager step's time (what --eager gives):
    SmolLM2's at any length in SGLang, past 512 tokens in vLLM; not Llama 3.1 8B's 1,024-token
    prefill, whose kernels outlast its dispatch; not with --eager, not for the ideal engine."""
    from roofline.format import fmt_seconds
    from roofline.inference import analyze_step

    hw = get_hardware("h100-sxm")

    def step(model: str, engine: str, tokens: int, graphs: bool = True):
        w = Workload(get_model(model), "prefill", 1, tokens, precision=Precision(), tp=1, cuda_graphs=graphs)
        return analyze_step(w, hw, Settings(engine=engine))

    def graph_note(result) -> str:
        return " ".join(n for n in result.notes if "CUDA graph" in n)

    words = graph_note(step("smollm2-135m", "sglang", 128))
    eager = float(step("smollm2-135m", "sglang", 128, graphs=False).table.step_time_s)
    assert "SGLang replays no prompt step from one" in words and f"takes {fmt_seconds(eager)}" in words
    assert "up to 512 tokens" in graph_note(step("smollm2-135m", "vllm", 1024))
    assert not graph_note(step("smollm2-135m", "vllm", 512))
    assert not graph_note(step("llama-3.1-8b", "vllm", 1024))
    assert not graph_note(step("smollm2-135m", "sglang", 128, graphs=False))
    assert not graph_note(step("smollm2-135m", "ideal", 4096))
