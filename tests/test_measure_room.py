"""A measurement that cannot fit this host is refused before anything is built: `load --measure`
of Llama 3.1 8B (a predicted 48 GB peak) began writing its checkpoint on a 24 GiB host."""

from __future__ import annotations

import pytest

from roofline.measure.room import SPARE, check_disk, check_ram


def test_ram_is_refused_past_the_available_with_a_quarter_spare():
    check_ram(8e9, "x", available_bytes=10e9)  # 8 GB x 1.25 = 10 GB: fits exactly
    with pytest.raises(ValueError) as err:
        check_ram(8.1e9, "load --measure of m", available_bytes=10e9)
    assert SPARE == 1.25
    said = str(err.value)
    assert said.startswith("load --measure of m: its predicted peak of 8.1 GB (with a quarter spare, 10.1 GB)")
    assert "the 10 GB this host has available" in said


def test_disk_is_refused_past_the_free_space(tmp_path):
    check_disk(5e9, str(tmp_path), "x", free_bytes=5e9)
    with pytest.raises(ValueError, match=r"x: its checkpoint files take 6 GB, more than the 5 GB free in .* TMPDIR"):
        check_disk(6e9, str(tmp_path), "x", free_bytes=5e9)


@pytest.mark.parametrize(
    "argv, said",
    [
        (["load", "--model", "llama-3.1-70b", "--measure"], "load --measure of llama-3.1-70b: its predicted peak of"),
        (
            ["train", "--model", "llama-3.1-70b", "--precision", "pure-bf16", "--measure", "cpu"],
            "train --measure cpu of llama-3.1-70b: its predicted peak of",
        ),
    ],
)
def test_a_70b_measurement_is_refused_on_any_ordinary_host(argv, said, capsys):
    pytest.importorskip("torch")
    from roofline.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


def test_a_cuda_training_step_without_cuda_is_refused_by_name(capsys):
    """train --measure cuda with a CPU-only torch had ended in torch's "not compiled with CUDA"
    traceback; measure and profile already named the option and what this host allows."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has a CUDA device")
    from roofline.cli import main

    argv = ["train", "--model", "smollm2-135m", "--precision", "amp", "--seq-len", "16", "--measure", "cuda"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--measure: cuda requested but torch sees no CUDA device; allowed here: cpu" in err
    assert "Traceback" not in err
