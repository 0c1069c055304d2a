"""Every flag of `serve` shapes the run it is given with, or is refused: --sweep and --capacity
took --requests, --burstiness, --prompt-max and --no-chunked-prefill and dropped them in silence,
as a steady-state `serve` dropped --seed and a closed loop --burstiness (kept from a hostile run)."""

from __future__ import annotations

import dataclasses
import json

import pytest

BASE = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--prompt-len", "1024", "--output-len", "128"]


@pytest.mark.parametrize(
    "extra, said",
    [
        (["--sweep", "--replicas", "2"], "--replicas: it shapes a run of --rate, --concurrency, --trace; with --sweep"),
        (["--capacity", "--router", "random", "--replicas", "2"], "--replicas: it shapes a run of"),
        (["--concurrency", "8", "--burstiness", "0.5"], "--burstiness: it shapes a run of --rate, --sweep, --capacity"),
        (
            ["--seed", "3"],
            "--seed: it shapes a run of --rate, --concurrency, --trace, --measured, --sweep, --capacity; "
            "without a simulated load (the steady-state frontier) it would be ignored",
        ),
        (["--sweep", "--router", "least-loaded"], "--router: it shapes a run of --rate, --concurrency, --trace"),
        (["--rate", "2", "--percentile", "99"], "--percentile: it shapes a run of --capacity; with --rate"),
        (["--prompt-max", "2000"], "--prompt-max: it shapes a run of"),
        # The steady-state plan prices and disaggregates; a simulated rate does neither.
        (
            ["--rate", "5", "--price", "h100-sxm=3"],
            "--price: it shapes the steady-state plan (serve with no load) and a run of --capacity; with --rate",
        ),
        (["--concurrency", "4", "--kv-link-gb-per-s", "5"], "--kv-link-gb-per-s: it shapes the steady-state plan"),
        (["--rate", "1", "--burstiness", "0"], "argument --burstiness: expected a number in (0, 1000], got '0'"),
        (["--capacity", "--seed", "-1"], "--seed: expected an integer in [0, 2^62), got -1"),
    ],
)
def test_a_flag_the_run_would_ignore_is_refused(extra, said, capsys):
    from roofline.cli import main

    try:
        code = main([*BASE, *extra])
    except SystemExit as exc:  # the parser's own refusals exit from inside it
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


def _json(argv, capsys) -> dict:
    from roofline.cli import main

    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_sweep_runs_the_requests_arrivals_and_lengths_asked(capsys):
    plain = _json([*BASE, "--sweep"], capsys)
    assert "Poisson rates" in plain["method"] and "300 requests each" in plain["method"]
    bursty = _json([*BASE, "--sweep", "--burstiness", "0.3", "--requests", "400", "--prompt-max", "3000"], capsys)
    assert "gamma (burstiness 0.3) rates" in bursty["method"] and "400 requests each" in bursty["method"]
    # Longer prompts on average (uniform to 3,000 tokens) and burstier arrivals: a lower saturation
    # rate, and a slower p99 first token at the sweep's lowest rate.
    assert bursty["saturation_rate_per_s"] < plain["saturation_rate_per_s"]
    assert bursty["points"][0]["p99_ttft_s"] > plain["points"][0]["p99_ttft_s"]


def test_capacity_runs_without_chunked_prefill_when_asked(capsys):
    argv = [*BASE, "--capacity", "--requests", "200", "--ttft-ms", "300", "--tpot-ms", "30"]
    chunked = _json(argv, capsys)
    whole = _json([*argv, "--no-chunked-prefill"], capsys)
    assert "chunked prefill on" in chunked["method"] and "chunked prefill off" in whole["method"]
    # Whole prompts as their own steps stall every running decode for a 1,024-token prefill: the
    # TPOT the server holds at a given rate is no better than with the prompts chunked in.
    one, two = chunked["ranking"][0], whole["ranking"][0]
    assert (one["max_rate_per_s"], one["p90_tpot_s"]) != (two["max_rate_per_s"], two["p90_tpot_s"])


def test_command_flags_are_read_back_as_the_same_settings_and_precision():
    from roofline.cli.args import precision_from_args
    from roofline.cli.parser import build_parser
    from roofline.cli.setting_flags import command_flags, settings_from_args
    from roofline.settings import Settings
    from roofline.workload import Precision

    settings = Settings(
        engine="sglang",
        memory_utilization=0.8,
        block_size=32,
        max_num_seqs=64,
        recv_interval=10,
        non_torch_bytes=0.5e9,
        prompt_graph_tokens=256,
        moe_routing="balanced",
    )
    precision = Precision(weight_dtype="fp8", kv_dtype="fp8", fp8_scaling="block")
    flags, left = command_flags(settings, precision)
    assert left == [] and flags[:2] == ["--engine", "sglang"]
    args = build_parser().parse_args([*BASE, *flags])
    read = settings_from_args(args)
    for field in dataclasses.fields(Settings):  # the microsecond flags' defaults round-trip to 1e-20 s
        assert getattr(read, field.name) == pytest.approx(getattr(settings, field.name), abs=1e-15), field.name
    assert precision_from_args(args) == precision
    _, left = command_flags(Settings(memory_scale=2.0))
    assert left == ["the what-if scales of compute, memory, link or capacity"]
    # TensorRT-LLM's batch waiting: both flags, or neither where one alone holds nothing (it is refused)
    held = Settings(engine="trtllm", batch_wait_iters=20, batch_wait_ratio=0.9)
    assert command_flags(held)[0] == ["--engine", "trtllm", "--batch-wait-ratio", "0.9", "--batch-wait-iters", "20"]
    assert command_flags(Settings(engine="trtllm", batch_wait_iters=20))[0] == ["--engine", "trtllm"]


def test_a_run_that_splits_prompts_otherwise_than_its_engine_says_so(capsys):
    """TensorRT-LLM keeps prompts whole by default (enable_chunked_prefill off) and vLLM splits them:
    a simulated run that does the other says which way each goes, in words and in its JSON."""
    from roofline.cli import main

    run = [*BASE, "--concurrency", "4", "--requests", "20"]
    trt = _json([*run, "--engine", "trtllm", "--chunked-prefill", "on"], capsys)["engine"]
    assert (trt["chunked_prefill"], trt["engine_name"], trt["engine_chunked_prefill"]) == (True, "TensorRT-LLM", False)
    main([*run, "--engine", "trtllm", "--chunked-prefill", "on"])
    assert (
        "Prompts split over steps (chunked prefill on), where TensorRT-LLM keeps them whole" in capsys.readouterr().out
    )
    for as_by_default in ([], ["--no-chunked-prefill"], ["--chunked-prefill", "off"]):  # nothing to say
        main([*run, "--engine", "trtllm", *as_by_default])
        assert "Prompts" not in capsys.readouterr().out
    main([*run, "--engine", "vllm", "--no-chunked-prefill"])
    assert "Prompts kept whole (chunked prefill off), where vLLM splits them over steps" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["serve", "--model", "llama-3.1-8b", "--spec-k", "1000"],
            "argument --spec-k: expected an integer from 1 to 64",
        ),
        (
            ["train", "--model", "llama-3.1-8b", "--micro-batch", "2000000"],
            "argument --micro-batch: expected an integer",
        ),
        (["profile", "--model", "smollm2-135m", "--batch", "10**12"], "argument --batch: expected a positive integer"),
        (
            ["profile", "--model", "smollm2-135m", "--batch", "1000000000000"],
            "from 1 to 1,048,576, got '1000000000000'",
        ),
    ],
)
def test_a_count_past_its_limit_is_refused_naming_the_flag(argv, said, capsys):
    """These had been refused after parsing under a field's inner name ("k must be a positive integer
    up to 64", "micro_batch must be ..."), the profile only after the model was built."""
    from roofline.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and said in err and "k must be" not in err and "micro_batch must" not in err


def test_settings_refuse_a_block_past_a_thousand_tokens():
    from roofline.settings import Settings

    assert Settings(block_size=1024).block_size == 1024
    with pytest.raises(ValueError, match="block_size"):
        Settings(block_size=1025)
