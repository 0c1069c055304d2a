"""Flags that parse one by one but contradict each other or the model, each once accepted in silence
by a hostile run (the flag dropped, the output as if it had not been given): now refused by name
before any work, and the commands the pages write never carry such a flag."""

from __future__ import annotations

import json

import pytest

from roofline.cli import main

ANALYZE = ["analyze", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--phase", "decode", "--seq-len", "1024"]
SERVE = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm"]


@pytest.mark.parametrize(
    "argv, said",
    [
        (
            [*ANALYZE, "--group-size", "64"],
            "--group-size: sets int4 weights' elements per scale; the weights here are bf16",
        ),
        (
            [*ANALYZE, "--fp8-scaling", "block"],
            "--fp8-scaling: sets how fp8 weights carry their scales; the weights here are bf16",
        ),
        (
            [*ANALYZE, "--weight-dtype", "int4", "--fp8-scaling", "per-tensor"],
            "--fp8-scaling: sets how fp8 weights carry their scales; the weights here are int4",
        ),
        (
            [*ANALYZE, "--expert-weight-dtype", "fp8"],
            "--expert-weight-dtype: Llama 3.1 8B has no routed experts (a dense model)",
        ),
        ([*SERVE, "--rate", "2", "--expert-weight-dtype", "fp8"], "--expert-weight-dtype: Llama 3.1 8B has no routed"),
        ([*SERVE, "--capacity", "--group-size", "32"], "--group-size: sets int4 weights' elements per scale"),
        (
            [*ANALYZE, "--batch", "8", "--max-num-seqs", "1"],
            "--batch: 8 sequences exceed --max-num-seqs 1, the most a step runs",
        ),
        (
            ["kv", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "16", "--max-num-seqs", "8"],
            "--batch: 16 sequences exceed --max-num-seqs 8",
        ),
        (
            [*SERVE, "--rate", "5", "--requests", "20", "--spec-k", "6"],
            "--spec-k: speculative decoding is priced beside the steady-state plan (serve without a load); the "
            "simulation of --rate decodes one token a step",
        ),
        ([*SERVE, "--sweep", "--spec-alpha", "0.9"], "--spec-alpha: speculative decoding is priced beside"),
        ([*SERVE, "--concurrency", "4", "--draft-model", "llama-3.2-1b"], "--draft-model: speculative decoding"),
        (
            [*SERVE, "--draft-model", "llama-3.1-70b"],
            "--draft-model: Llama 3.1 70B (70.6 B parameters a token) is not smaller than the target Llama 3.1 8B "
            "(8.0 B)",
        ),
    ],
)
def test_a_flag_the_run_would_drop_is_refused_by_name(argv, said, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and said in err and "Traceback" not in err


@pytest.mark.parametrize("flag, value", [("--prompt-len", "4096"), ("--output-len", "64")])
def test_a_trace_carries_its_own_lengths_and_refuses_others(flag, value, tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 100, "output_length": 10}\n')
    assert main([*SERVE, "--trace", str(trace), flag, value]) == 2
    assert f"{flag}: --trace carries its lines' lengths; it would be ignored" in capsys.readouterr().err
    assert main([*SERVE, "--trace", str(trace), "--json"]) == 0  # the trace alone runs
    assert json.loads(capsys.readouterr().out)["completed"] == 1


def test_the_flags_that_agree_still_run(capsys):
    """int4 with its group size, fp8 with its scaling, an MoE's experts' format with their scaling, a
    batch at the cap, and a draft smaller than the target are all taken."""
    for extra in (
        ["--weight-dtype", "int4", "--group-size", "64"],
        ["--weight-dtype", "fp8", "--fp8-scaling", "block"],
        ["--batch", "8", "--max-num-seqs", "8"],
    ):
        assert main([*ANALYZE, *extra, "--json"]) == 0, extra
        capsys.readouterr()
    moe = ["analyze", "--model", "qwen3-235b-a22b", "--hardware", "h100-sxm", "--phase", "decode", "--seq-len", "1024"]
    assert main([*moe, "--tp", "8", "--expert-weight-dtype", "fp8", "--fp8-scaling", "block", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["precision"]["fp8_scaling"] == "block"
    assert main([*SERVE, "--draft-model", "llama-3.2-1b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["levers"]["speculative_decoding"]["draft"] == "llama-3.2-1b"


def test_the_serving_pages_command_leaves_out_what_its_precision_does_not_use():
    """The Serving page's capacity command carries the page's precision: a scaling picked beside
    bf16 weights, or an experts' format on a dense model, would have made it a command that the
    command line refuses."""
    from dashboard.serving_capacity import capacity_command
    from roofline.cli.args import precision_from_args
    from roofline.cli.parser import build_parser
    from roofline.models import get_model
    from roofline.serving.simulation.load import Lengths
    from roofline.serving.simulation.metrics import Targets
    from roofline.settings import Settings
    from roofline.workload import Precision

    model = get_model("llama-3.1-8b")
    page = Precision(expert_weight_dtype="fp8", fp8_scaling="block", group_size=64)
    settings = Settings(engine="vllm", moe_kernel="marlin", moe_routing="balanced")  # the page's MoE pickers
    command = capacity_command(
        model, [], Lengths(1024), Lengths(256), Targets(0.5, 0.05), page, 1, settings, 90, 0, None
    )
    assert "--fp8-scaling" not in command and "--group-size" not in command and "--expert" not in command
    assert "--moe-" not in command  # a dense model: the command line refuses them
    args = build_parser().parse_args(command.split()[3:])
    assert precision_from_args(args, model) == Precision()


def test_train_measure_names_the_flag_whose_setup_the_harness_does_not_run(capsys):
    """The default precision (mixed) is not measured: the error named a field ("precision: ..."),
    now the flag, and says it is the default."""
    pytest.importorskip("torch")
    argv = ["train", "--model", "smollm2-135m", "--hardware", "h100-sxm", "--micro-batch", "1", "--seq-len", "64"]
    assert main([*argv, "--measure", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --precision: mixed (16-bit weights with an fp32 master copy, the default)")
    assert "measure amp, fp32 or pure-bf16 (with --measure)" in err
    assert main([*argv, "--measure", "cpu", "--precision", "amp", "--optimizer", "adamw-8bit"]) == 2
    assert capsys.readouterr().err.startswith("error: --optimizer: adamw-8bit needs bitsandbytes")


def test_moe_flags_on_a_dense_model_are_refused_and_run_on_a_moe_one(capsys):
    """--moe-kernel and --moe-routing on a dense model had been taken and changed nothing."""
    argv = ["analyze", "--hardware", "h100-sxm", "--phase", "decode", "--seq-len", "1024", "--json"]
    assert main([*argv, "--model", "llama-3.1-8b", "--moe-kernel", "marlin", "--moe-routing", "balanced"]) == 2
    err = capsys.readouterr().err
    assert "--moe-kernel and --moe-routing: Llama 3.1 8B has no routed experts (a dense model)" in err
    assert main([*argv, "--model", "qwen3-30b-a3b", "--moe-routing", "balanced"]) == 0


def test_advise_refuses_an_output_length_beside_one_step(capsys):
    """`advise --phase prefill --output-len 99` had ranked one prefill step and dropped the 99 in silence."""
    argv = ["advise", "--model", "llama-3.1-8b", "--seq-len", "1024", "--json"]
    assert main([*argv, "--phase", "prefill", "--output-len", "99"]) == 2
    assert "--output-len: sets a request's generated tokens; --phase prefill is one step" in capsys.readouterr().err
    assert main([*argv, "--phase", "request", "--output-len", "99"]) == 0
    assert json.loads(capsys.readouterr().out)["output_len"] == 99
