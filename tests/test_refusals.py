"""What the command line and the pages refuse, and how they say it: settings named as their flags,
serve's kinds of run, load's TP, devices without bf16, calibration notes, fp8 math, formatting,
validate --explain's conflicts and the Training page's global batch; each kept from a hostile run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "flag, value, said",
    [
        ("--non-torch-gb", "1e12", "--non-torch-gb: expected a number in [0, 1e+06], got 1000000000000.0"),
        ("--launch-overhead-us", "1e12", "--launch-overhead-us: expected a number in [0, 1e+06]"),
        ("--graph-launch-overhead-us", "5e6", "--graph-launch-overhead-us: expected a number in [0, 1e+06]"),
        ("--block-size", "1000000000", "--block-size: expected an integer in [1, 1024], got 1000000000"),
    ],
)
def test_a_setting_out_of_range_is_named_as_its_flag_in_its_units(flag, value, said, capsys):
    from roofline.cli import main

    argv = ["request", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--prompt-len", "10", "--output-len", "10"]
    assert main([*argv, flag, value]) == 2
    err = capsys.readouterr().err
    assert said in err and "_bytes" not in err and "_s must" not in err


def test_matmuls_kernel_floor_out_of_range_is_named_as_its_flag(capsys):
    """It read "graph_launch_overhead_s must be a number in [0, 1], got 1000.0"."""
    from roofline.cli import main

    assert main(["matmul", "--m", "1", "--n", "1", "--k", "1", "--kernel-floor-us", "1e9"]) == 2
    assert capsys.readouterr().err == "error: --kernel-floor-us: expected a number in [0, 1e+06], got 1000000000.0\n"


@pytest.mark.parametrize("tp", ["3", "1000"])
def test_load_refuses_a_tp_that_does_not_split_the_heads(tp, capsys):
    from roofline.cli import main

    assert main(["load", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", tp]) == 2
    assert f"tp={tp} does not divide llama-3.1-8b's 32 attention heads" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [[], ["--act-dtype", "fp16"], ["--kv-dtype", "fp16"]])
def test_a_device_without_bf16_runs_fp16_whichever_part_was_asked_in_fp16(extra, capsys):
    from roofline.cli import main

    argv = ["request", "--model", "llama-3.1-8b", "--hardware", "t4", "--prompt-len", "10", "--output-len", "10"]
    assert main([*argv, *extra, "--json"]) == 0  # the T4 has no bf16 kernels: every bf16 part runs fp16
    data = json.loads(capsys.readouterr().out)
    p = data["precision"]
    assert (p["weight_dtype"], p["act_dtype"], p["kv_dtype"]) == ("fp16", "fp16", "fp16")


def test_a_calibration_is_not_also_called_the_engines_kernel_tables(capsys):
    from roofline.cli import main

    argv = ["request", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--prompt-len", "64", "--output-len", "8"]
    assert main([*argv, "--calibration", str(ROOT / "examples/h100-sxm-quick-run.json")]) == 0
    out = capsys.readouterr().out
    assert "calibrated roofs" in out and "engine-measured roofs, vLLM" not in out
    assert "your calibration's roofs stand in for vLLM's kernel tables; vLLM's host work per step applies" in out


def test_the_pages_engine_captions_say_where_a_calibration_stands_in():
    from types import SimpleNamespace

    from dashboard.state import engine_notes
    from roofline.hardware import get_hardware

    devices = {h: get_hardware(h) for h in ("h100-sxm", "b200")}
    text = engine_notes("vllm", devices, ["h100-sxm", "b200"], calibration=SimpleNamespace(hardware_id="h100-sxm"))
    h100, b200 = text.split("  \n")
    assert "your calibration's roofs stand in for vLLM's kernel tables" in h100
    assert "engine-measured roofs, vLLM" in b200  # the device not measured keeps the engine's tables


@pytest.mark.parametrize(
    "extra, said",
    [
        (["--sweep", "--capacity"], "--sweep and --capacity are two kinds of run: give one"),
        (["--sweep", "--rate", "5"], "--sweep and --rate are two kinds of run"),
        (["--capacity", "--concurrency", "8"], "--capacity and --concurrency are two kinds of run"),
        (["--rate", "5", "--target-rate", "100"], "--target-rate: the replicas a rate needs come with --capacity"),
        (["--capacity", "--target-rate", "0"], "--target-rate: expected a rate above 0 requests/s, got 0"),
        (["--target-rate", "100"], "--target-rate: the replicas a rate needs come with --capacity"),
    ],
)
def test_serve_refuses_two_kinds_of_run_rather_than_dropping_one(extra, said, capsys):
    from roofline.cli import main

    assert main(["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", *extra]) == 2
    assert said in capsys.readouterr().err


def test_the_capacity_ranking_prints_the_replicas_a_target_rate_needs(capsys):
    from roofline.cli import main

    argv = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--capacity", "--requests", "200"]
    assert main([*argv, "--target-rate", "100"]) == 0
    text = capsys.readouterr().out
    assert main([*argv, "--target-rate", "100", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["ranking"][0]
    n = row["replicas_for_target"]
    assert n >= 100 / row["max_rate_per_s"] and f"h100-sxm TP1: {n} replicas ({n} devices) for 100 requests/s" in text


def test_fp8_weights_with_16_bit_math_say_they_run_weight_only_where_engines_run_w8a8(capsys):
    from roofline.cli import main

    argv = ["request", "--model", "llama-3.1-8b", "--prompt-len", "64", "--output-len", "8", "--weight-dtype", "fp8"]
    assert main([*argv, "--hardware", "h100-sxm", "--act-dtype", "bf16"]) == 0
    out = capsys.readouterr().out
    assert "fp8 weights with bf16 math run weight-only" in out and "as W8A8, in fp8 math" in out
    assert main([*argv, "--hardware", "h100-sxm", "--act-dtype", "fp8"]) == 0
    assert "run weight-only" not in capsys.readouterr().out  # W8A8 asked: nothing to say
    assert main([*argv, "--hardware", "a100-sxm-80gb", "--act-dtype", "bf16"]) == 0
    assert "run weight-only" not in capsys.readouterr().out  # no fp8 math there: weight-only is what runs


def test_the_default_math_is_what_the_engines_run_the_weights_in(capsys):
    from roofline.cli import main

    argv = ["request", "--model", "llama-3.1-8b", "--prompt-len", "64", "--output-len", "8", "--json"]
    runs = {}
    for hw, weights in (("h100-sxm", "fp8"), ("a100-sxm-80gb", "fp8"), ("b200", "nvfp4"), ("h100-sxm", "int4")):
        assert main([*argv, "--hardware", hw, "--weight-dtype", weights]) == 0
        runs[hw, weights] = json.loads(capsys.readouterr().out)
    math = {k: r["precision"]["act_dtype"] for k, r in runs.items()}
    # W8A8 on Hopper, weight-only on Ampere (no fp8 math), W4A4 on Blackwell, int4 weight-only everywhere.
    assert math == {
        ("h100-sxm", "fp8"): "fp8",
        ("a100-sxm-80gb", "fp8"): "bf16",
        ("b200", "nvfp4"): "fp4",
        ("h100-sxm", "int4"): "bf16",
    }
    assert any("math fp8 (auto): fp8 weights run W8A8" in n for n in runs["h100-sxm", "fp8"]["notes"])
    assert any(
        "has no fp8 math, so the fp8 weights are timed weight-only" in n for n in runs["a100-sxm-80gb", "fp8"]["notes"]
    )
    assert not any("(auto)" in n for n in runs["h100-sxm", "int4"]["notes"])
    # The same as asking for it: auto is a default, not a model of its own.
    assert main([*argv, "--hardware", "h100-sxm", "--weight-dtype", "fp8", "--act-dtype", "fp8"]) == 0
    asked = json.loads(capsys.readouterr().out)
    assert asked["ttft_s"] == runs["h100-sxm", "fp8"]["ttft_s"]


def test_advise_prints_a_rate_under_one_token_a_second_with_its_figures(capsys):
    from roofline.cli import main

    argv = ["advise", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--phase", "request"]
    assert main([*argv, "--seq-len", "131072", "--output-len", "1", "--engine", "ideal"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("1 "))
    assert " 0 " not in row and "0.3" in row  # 2.6 s for one token: 0.38 tokens/s, not "0"


@pytest.mark.parametrize("other", [["--load"], ["--memory"], ["--no-tables"], ["--every", "3"], ["--csv", "x.csv"]])
def test_explain_is_refused_beside_an_option_it_would_drop(other, capsys):
    from roofline.cli import main

    assert main(["validate", "--explain", "some_run", *other]) == 2
    assert f"not with {other[0]}" in capsys.readouterr().err


def test_training_page_refuses_a_global_batch_of_part_micro_batches():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "views/training_page.py"), default_timeout=60)
    at.query_params.update({"model": "llama-3.1-8b", "mb": "2", "gb": "3"})
    at.run()
    assert not at.exception
    assert any("does not split into micro-batches of 2" in e.value for e in at.error)
    at.number_input(key="gb").set_value(4).run()  # two micro-batches of 2: analysed
    assert not at.exception and not at.error


@pytest.mark.parametrize(
    "args, message",
    [
        (["--global-batch", "3", "--micro-batch", "2"], "--global-batch: a global batch of 3 sequences does not split"),
        (["--global-batch", "4", "--dp", "8"], "give a multiple of 8 (micro-batch x data-parallel devices)"),
    ],
)
def test_train_refuses_a_global_batch_of_part_micro_batches(args, message, capsys):
    from roofline.cli import main

    assert main(["train", "--model", "llama-3.1-8b", *args]) == 2
    assert message in capsys.readouterr().err


def test_a_lever_that_cannot_run_the_global_batch_is_not_offered():
    from roofline.hardware import get_hardware
    from roofline.models import get_model
    from roofline.training import TrainSetup, levers, plan_to_fit

    s = TrainSetup(get_model("llama-3.1-70b"), global_batch=4)  # 4 sequences: no 8-way data parallelism
    h100 = get_hardware("h100-sxm")
    assert not any(lever.name.startswith("ZeRO-3 / FSDP over 8") for lever in levers(s, h100))
    plan, result = plan_to_fit(s, h100)
    assert plan and not any("over 8 devices" in step for step in plan) and result.setup.dp == 1


def test_a_calibration_note_on_a_device_without_engine_tables_and_in_serve(capsys):
    from roofline.cli import main
    from roofline.roofs import engine_note

    a100 = "NVIDIA A100 SXM4 80GB"
    assert engine_note("auto", "a100-sxm-80gb", a100, calibrated=True) == (
        f"{a100}: your calibration's roofs stand in for the datasheet's"
    )
    said = engine_note("vllm", "a100-sxm-80gb", a100, calibrated=True)
    assert "stand in for the datasheet's (no vLLM kernel tables for it); vLLM's host work per step applies" in said
    argv = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--json"]
    assert main([*argv, "--calibration", str(ROOT / "examples/h100-sxm-quick-run.json")]) == 0
    roofs = json.loads(capsys.readouterr().out)["roofs"]["h100-sxm"]
    assert "your calibration's roofs stand in for vLLM's kernel tables" in roofs


@pytest.mark.parametrize(
    "text, read", [("v0.24.0", "0.24.0"), ("0.24.0+cu128", "0.24.0+cu128"), ("1.0.0rc3", "1.0.0rc3")]
)
def test_an_engine_version_as_releases_write_it(text, read):
    from roofline.cli.args import engine_version

    assert engine_version(text) == read


def test_a_group_size_alone_is_not_a_precision_of_its_own_to_search():
    from roofline.serving import extra_precision
    from roofline.workload import Precision

    assert extra_precision(Precision(group_size=64)) is None  # bf16 throughout: searched anyway
    assert extra_precision(Precision("int4", group_size=64)) == Precision("int4", group_size=64)


def test_advise_names_the_device_diagnosed_when_it_alone_cannot_run_the_workload(capsys):
    """advise ranks every device and diagnoses --hardware (h100-sxm unless given): nvfp4 weights,
    which the H100 has no kernels for, failed naming neither --hardware nor why that device."""
    from roofline.cli import main

    argv = ["advise", "--model", "llama-3.1-8b", "--phase", "decode", "--seq-len", "1024", "--weight-dtype", "nvfp4"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--hardware h100-sxm (the device diagnosed) cannot run this workload: h100-sxm has no kernels for" in err
    assert main([*argv, "--hardware", "b200", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["diagnosis"]["hardware"] == "b200"


def test_matmul_says_what_rate_a_tiny_gemm_is_predicted_beside_the_roofline_it_could_attain(capsys):
    """A 1 x 1 x 1 GEMM printed only 'attainable: 1.1 TFLOPS' (the memory roof at its intensity)
    while its kernel floor binds: 2 FLOP over the ideal bound's 1.2 µs floor is 1.67 MFLOP/s."""
    from roofline.cli import main

    assert main(["matmul", "--m", "1", "--n", "1", "--k", "1", "--hardware", "h100-sxm", "--engine", "ideal"]) == 0
    out = capsys.readouterr().out
    assert "attainable: 1.1 TFLOPS of 989.4 peak (the roofline at this intensity)" in out
    assert "predicted:  1.67 MFLOPS expected, 1.67 MFLOPS at the ideal bound" in out


def test_serve_plans_a_device_named_twice_once(capsys):
    """serve --hardware h100-sxm --hardware h100-sxm printed the H100's row twice, and a simulation
    of one device refused it as two."""
    from roofline.cli import main

    argv = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--hardware", "h100-sxm", "--json"]
    assert main(argv) == 0
    assert [b["hardware"] for b in json.loads(capsys.readouterr().out)["best"]] == ["h100-sxm"]
    assert main([*argv, "--rate", "2", "--requests", "20"]) == 0
    assert json.loads(capsys.readouterr().out)["hardware"] == "h100-sxm"


def test_load_refuses_a_host_with_no_ram(capsys):
    """load --host-ram-gb 0 had been taken, every method then 'not fitting the host'."""
    from roofline.cli import main

    with pytest.raises(SystemExit) as stopped:  # argparse's refusal
        main(["load", "--model", "llama-3.1-8b", "--host-ram-gb", "0"])
    assert stopped.value.code == 2
    assert "--host-ram-gb: expected a finite number > 0, got '0'" in capsys.readouterr().err
    assert main(["load", "--model", "llama-3.1-8b", "--host-ram-gb", "64", "--json"]) == 0


def test_a_checkpoint_folder_given_as_the_model_is_told_to_give_its_config(tmp_path, capsys):
    """A folder had been called an unknown model id, with the 31 ids listed."""
    from roofline.cli import main

    argv = ["analyze", "--hardware", "h100-sxm", "--phase", "decode", "--seq-len", "10", "--model"]
    assert main([*argv, str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: model {str(tmp_path)!r} is a folder: it holds no config.json\n"
    (tmp_path / "config.json").write_text("{}")
    assert main([*argv, f"{tmp_path}/"]) == 2
    assert f"is a folder: give its config.json ({tmp_path / 'config.json'})" in capsys.readouterr().err


def test_a_results_files_version_written_as_a_string_is_named_so(tmp_path, capsys):
    """It read "version '2' is not supported; this build reads version 2"."""
    from roofline.cli import main

    data = json.loads((ROOT / "examples" / "h100-sxm-kernel-sweeps.json").read_text()) | {"version": "2"}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(data))
    argv = ["analyze", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--phase", "decode", "--seq-len", "64"]
    assert main([*argv, "--calibration", str(path)]) == 2
    assert capsys.readouterr().err == f"error: {path}: \"version\" must be the number 2, not the string '2'\n"
