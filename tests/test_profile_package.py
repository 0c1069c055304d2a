"""The installable library: the example script runs, and ``pip install .`` into a fresh virtual
environment gives the ``roofline`` command, the Python API and the data folders."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(argv: list[str], cwd: Path, env: dict | None = None, timeout: float = 240) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_example_script_runs(tmp_path):
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = _run([sys.executable, str(ROOT / "examples" / "profile_model.py"), "--seq", "8"], tmp_path, env)
    assert "MLP:" in out and "training step" in out and "Llama 3.1 8B decode on an H100" in out


def test_import_roofline_is_light():
    code = "import sys, roofline, roofline.profile, roofline.cli; print('torch' in sys.modules)"
    assert _run([sys.executable, "-c", code], ROOT).strip() == "False"


def test_the_library_api_gives_what_the_command_line_prints(capsys):
    import json

    import roofline
    from roofline.cli import main

    step = roofline.analyze("llama-3.1-8b", "h100-sxm", phase="decode", seq_len=4096, batch=32)
    assert (
        main(
            ["analyze", "--model", "llama-3.1-8b", "--phase", "decode", "--seq-len", "4096", "--batch", "32", "--json"]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["total"] == step["total"]
    (best,) = roofline.serve("smollm2-135m", ["h100-sxm"])  # TP degrees its 9 heads do not split are skipped
    assert best["tp"] in (1,) and best["hardware"] == "h100-sxm"


@pytest.mark.slow
def test_pip_install_into_a_fresh_venv(tmp_path):
    """The wheel holds the package and the data folders; installed (its dependencies from this
    interpreter's site-packages, so nothing is downloaded), the command and the API find them."""
    wheels = tmp_path / "wheels"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(ROOT)],
        tmp_path,
    )
    (wheel,) = wheels.glob("roofline-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "roofline/profile/trace.py" in names and "hardware_db/h100-sxm.toml" in names
    assert "model_db/smollm2-135m.toml" in names and any(n.startswith("prices_db/") for n in names)
    assert not any(n.startswith(("tests/", "views/")) for n in names)
    assert "kernel_db/manifest.json" in names and "kernel_db/h100-sxm/vllm-0.24.0.npz" in names
    assert wheel.stat().st_size < 12_000_000  # the engine-measured kernel tables are most of it
    venv = tmp_path / "v"
    _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], tmp_path)
    python, command = venv / "bin" / "python", venv / "bin" / "roofline"
    _run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)], tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    assert "profile" in _run([str(command), "--help"], tmp_path, env)
    assert "smollm2-135m" in _run([str(command), "model", "list"], tmp_path, env)
    code = (
        "import roofline, json; assert 'site-packages' in roofline.__file__, roofline.__file__; "
        "print(roofline.analyze('llama-3.1-8b', 'h100-sxm')['total']['bound'])"
    )
    assert _run([str(python), "-c", code], tmp_path, env).strip() in ("memory", "compute", "overhead")
