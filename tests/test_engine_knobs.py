"""The scheduler settings that hold new requests back (SGLang's intake interval, TensorRT-LLM's
batch waiting), worked step by step; and the reader of the benchmark scripts that set them."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.script_setup import condition, digest, evaluate
from roofline.serving.simulation.load import Requests
from roofline.serving.simulation.run import simulate
from roofline.serving.simulation.scheduler import EngineKnobs
from tests.test_simulation import MS, flat_times


def _two(policy: str, second_prompt: int = 10, **knobs) -> np.ndarray:
    """A: at 0, prompt 10, 20 outputs; B: at 2.5 ms, prompt ``second_prompt``, 2 outputs. Every
    step costs 1 ms. Returns each request's first-token time."""
    requests = Requests(np.array([0.0, 2.5 * MS]), np.array([10, second_prompt]), np.array([20, 2]))
    k = EngineKnobs(max_num_batched_tokens=100, max_num_seqs=8, block_size=4, policy=policy, **knobs)
    return simulate(requests, flat_times(), kv_blocks=1000, knobs=k).first_token_s


def test_tensorrt_llms_batch_waiting_step_by_step():
    """A's prompt runs alone (0-1 ms: nothing to wait beside); A decodes 1-3 ms. B arrives at
    2.5 ms: from the step at 3 ms its prompt (10 tokens) beside A's decode (1) makes 11 tokens,
    under 0.9 x 100, so B is held: steps at 3, 4 and 5 ms run A alone (waits 1, 2, 3); at 6 ms
    three waits reach batch_wait_iters = 3 and B runs: its first token at 7 ms."""
    first = _two("trtllm", batch_wait_iters=3, batch_wait_ratio=0.9)
    assert first == pytest.approx([1 * MS, 7 * MS])
    # Off (the engine's default): B runs at 3 ms, its first token at 4 ms.
    assert _two("trtllm") == pytest.approx([1 * MS, 4 * MS])
    # A prompt of 95 tokens (+ A's 1 >= 90) fills the step enough: no wait.
    assert _two("trtllm", 95, batch_wait_iters=3, batch_wait_ratio=0.9) == pytest.approx([1 * MS, 4 * MS])
    # vLLM's scheduler has no batch waiting: the settings are TensorRT-LLM's alone.
    with pytest.raises(ValueError, match="TensorRT-LLM's batch waiting"):
        _two("vllm", batch_wait_iters=3, batch_wait_ratio=0.9)


def test_sglangs_intake_interval_step_by_step():
    """recv_interval 4. At 0 the idle server takes A in; A's prefill (0-1 ms) sets the counter past
    4, so at 1 ms the scheduler takes in (nothing) and counts again from 0. A decodes at 1, 2, 3
    and 4 ms (counter 1, 2, 3, 4); B, arrived at 2.5 ms, is taken in at 5 ms: its prefill runs
    alone (SGLang: prefill first), first token at 6 ms."""
    assert _two("sglang", recv_interval=4) == pytest.approx([1 * MS, 6 * MS])
    # Every step (the default): B is taken in at 3 ms, first token at 4 ms.
    assert _two("sglang") == pytest.approx([1 * MS, 4 * MS])


def test_held_requests_all_finish_and_tokens_are_conserved():
    rng = np.random.default_rng(0)
    n = 300
    prompt, output = rng.integers(1, 200, n), rng.integers(1, 60, n)
    arrival = np.sort(rng.uniform(0, 0.5, n))
    for policy, knobs in (
        ("sglang", {"recv_interval": 30}),
        ("trtllm", {"batch_wait_iters": 20, "batch_wait_ratio": 0.9}),
    ):
        k = EngineKnobs(max_num_batched_tokens=512, max_num_seqs=64, block_size=16, policy=policy, **knobs)
        run = simulate(Requests(arrival, prompt, output), flat_times(), kv_blocks=2000, knobs=k)
        assert np.isfinite(run.finish_s).all() and (run.first_token_s >= run.arrival_s).all()
        base = simulate(
            Requests(arrival, prompt, output),
            flat_times(),
            kv_blocks=2000,
            knobs=EngineKnobs(max_num_batched_tokens=512, max_num_seqs=64, block_size=16, policy=policy),
        )
        assert run.step_tokens.sum() == base.step_tokens.sum() == (prompt + output - 1).sum()
        # Holding requests back never brings a first token earlier on average.
        assert np.mean(run.first_token_s - run.arrival_s) >= np.mean(base.first_token_s - base.arrival_s)


@pytest.mark.parametrize(
    "knobs, message",
    [
        ({"recv_interval": 0}, "recv_interval must be an integer in [1, 1000]"),
        ({"batch_wait_iters": -1}, "batch_wait_iters must be an integer"),
        ({"batch_wait_ratio": 1.5}, "batch_wait_ratio must be a number in [0, 1]"),
    ],
)
def test_bad_knobs_are_named(knobs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        EngineKnobs(**knobs)


SCRIPT = """#!/usr/bin/env bash
# A comment naming --max_num_tokens 1 is no setting.
PORT=${PORT:-8888}
if [[ "$ISL" == "1024" && "$OSL" == "1024" && ${TP} -lt 8 ]]; then
cat > c.yml << 'EOF'
batch_wait_max_tokens_ratio: 0.9
batch_wait_timeout_iters: 20
EOF
fi
if [[ $CONC -ge 16 ]]; then
  RECV=30
elif [[ $CONC -ge 8 ]]; then
  RECV=20
else
  RECV=10
fi
TOKENS=$(( ($CONC+$ISL+64+63)/64*64 ))
TOKENS=$(( TOKENS > 8192 ? TOKENS : 8192 ))
if [ "${EVAL_ONLY}" = "true" ]; then
  TOKENS="$EVAL_MAX_MODEL_LEN"
fi
if [[ "$MODEL" != /* ]]; then hf download "$MODEL"; fi
serve --scheduler-recv-interval $RECV --max_num_tokens=$TOKENS \\
  --chunked-prefill-size "$((ISL * 2))" --max-num-batched-tokens $UNSET_BY_THE_RUN
"""


def test_a_scripts_settings_are_read_for_a_runs_variables():
    lines = digest(SCRIPT)
    assert not any(line.startswith("#") for line in lines)
    env = {"ISL": "1024", "OSL": "1024", "TP": "4", "CONC": "8", "EVAL_ONLY": ""}
    got = evaluate(lines, env)
    # (8 + 1024 + 127) // 64 * 64 = 1152, raised to 8192; 2 x 1024 = 2048.
    assert got == {
        "batch_wait_max_tokens_ratio": "0.9",
        "batch_wait_timeout_iters": "20",
        "scheduler_recv_interval": "20",
        "max_num_tokens": "8192",
        "chunked_prefill_size": "2048",
        "max_num_batched_tokens": None,  # a variable the run does not give
    }
    wide = evaluate(lines, env | {"TP": "8", "CONC": "64", "ISL": "8192"})
    assert "batch_wait_timeout_iters" not in wide and wide["scheduler_recv_interval"] == "30"
    assert wide["max_num_tokens"] == str((64 + 8192 + 127) // 64 * 64) == "8320"
    assert evaluate(lines, env | {"CONC": "4"})["scheduler_recv_interval"] == "10"
    # An unknown test leaves what it decides unknown.
    unknown = evaluate(lines, {"ISL": "1024", "OSL": "1024", "CONC": "8", "EVAL_ONLY": ""})
    assert "batch_wait_timeout_iters" not in unknown or unknown["batch_wait_timeout_iters"] is None
    assert evaluate(lines, {"ISL": "1024", "OSL": "1024", "TP": "4", "CONC": "8"})["max_num_tokens"] is None


def test_shell_tests_and_conflicts():
    env = {"A": "3", "B": "x"}
    assert condition('[[ $A -gt 2 && "$B" == "x" ]]', env) is True
    assert condition('[ "$A" = "4" ] || [[ $B != y ]]', env) is True
    assert condition("[[ ! $A -le 2 ]]; then", env) is True
    assert condition("[[ $C -gt 2 ]]", env) is None
    assert condition("[[ $C -gt 2 || $A -gt 2 ]]", env) is True  # known either way
    assert condition("[[ -n $B && -z $D ]]", env) is None
    # Two launches that disagree: the setting cannot be told.
    lines = digest("serve --chunked-prefill-size 8192\nserve --chunked-prefill-size 16384\n")
    assert evaluate(lines, {}) == {"chunked_prefill_size": None}


def test_an_inferencex_runs_scheduler_is_the_one_its_scripts_set():
    """engine_db/inferencex_setup.toml, run for a row's own variables."""
    from roofline.silicon_sample import documented_setup

    def row(model, system, backend, precision, tp, conc, isl=1024, osl=1024, day="2025-10-29"):
        return {
            "model_path": model,
            "system": system,
            "backend": backend,
            "precision": precision,
            "tp_size": str(tp),
            "batch_size": str(conc),
            "isl": str(isl),
            "osl": str(osl),
            "silicon_data_source": f"source_file=2026-04-06.csv; measured={day}T00:00:00Z",
        }

    # TensorRT-LLM, Llama 3.1 70B FP8 on H200 (benchmarks/70b_fp8_h200_trt_slurm.sh): 1k/1k below
    # TP 8 waits up to 20 steps for 90% of --max_num_tokens 16384; TP 8 does not.
    held = documented_setup(row("meta-llama/Llama-3.1-70B", "h200_sxm", "trtllm", "fp8", 4, 8))
    assert (held.token_budget, held.batch_wait_iters, held.batch_wait_ratio) == (16384, 20, 0.9)
    assert "70b_fp8_h200_trt_slurm.sh" in held.where
    assert "held up to 20 steps" in held.words()
    free = documented_setup(row("meta-llama/Llama-3.1-70B", "h200_sxm", "trtllm", "fp8", 8, 8))
    assert free.batch_wait_iters is None and free.token_budget == 16384
    # SGLang, DeepSeek-R1 FP4 on B200 (single_node/dsr1_fp4_b200.sh, from 2026-05-12): every 10 decode
    # steps below 16 clients, every 30 from 16.
    few = documented_setup(row("deepseek-ai/DeepSeek-R1", "b200_sxm", "sglang", "fp4", 8, 8, day="2026-05-20"))
    many = documented_setup(row("deepseek-ai/DeepSeek-R1", "b200_sxm", "sglang", "fp4", 8, 16, day="2026-05-20"))
    assert (few.recv_interval, many.recv_interval) == (10, 30)
    # Another source documents no script.
    other = row("meta-llama/Llama-3.1-70B", "h200_sxm", "trtllm", "fp8", 4, 8)
    other["silicon_data_source"] = "source_file=/x/gap.csv"
    assert documented_setup(other) is None


def _serve(extra: list[str], capsys) -> tuple[int, str, str]:
    from tests.test_simulation import SERVE, _cli

    argv = SERVE + ["--concurrency", "8", "--requests", "64", "--output-len", "64", "--output-max", "192", *extra]
    try:
        return _cli(argv, capsys)
    except SystemExit as exc:  # argparse refuses a value before the command runs
        out, err = capsys.readouterr()
        return int(exc.code), out, err


def test_serve_takes_the_engines_settings_that_hold_requests_back(capsys):
    import json

    ttft = {}
    for name, extra in {
        "trtllm": ["--engine", "trtllm"],
        "trtllm held": ["--engine", "trtllm", "--batch-wait-iters", "20", "--batch-wait-ratio", "0.9"],
        "sglang": ["--engine", "sglang"],
        "sglang every 30": ["--engine", "sglang", "--recv-interval", "30"],
    }.items():
        code, out, err = _serve(extra + ["--json"], capsys)
        assert code == 0, err
        data = json.loads(out)
        ttft[name] = data["ttft_s"]["mean"]
        assert data["completed"] == 64
    assert data["engine"]["recv_interval"] == 30
    assert ttft["trtllm held"] > ttft["trtllm"] and ttft["sglang every 30"] > ttft["sglang"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--engine", "vllm", "--recv-interval", "30"], "recv_interval is SGLang's --scheduler-recv-interval"),
        (["--engine", "sglang", "--recv-interval", "5000"], "--recv-interval: expected an integer in [1, 1000]"),
        (["--engine", "sglang", "--batch-wait-iters", "3"], "are TensorRT-LLM's batch waiting"),
        (["--engine", "trtllm", "--batch-wait-ratio", "2"], "--batch-wait-ratio: expected a number in [0, 1]"),
        (["--engine", "trtllm", "--batch-wait-iters", "-1"], "--batch-wait-iters: expected a non-negative integer"),
        # TensorRT-LLM holds prompts only while both hold, so one alone would change nothing
        (["--engine", "trtllm", "--batch-wait-iters", "20"], "--batch-wait-iters: holds prompts only beside --batch"),
        (["--engine", "trtllm", "--batch-wait-ratio", "0.9"], "--batch-wait-ratio: holds prompts only beside --batch"),
        (["--batch-wait-iters", "20"], "are TensorRT-LLM's batch waiting"),  # the default engine: said so first
    ],
)
def test_serve_refuses_those_settings_clearly(extra, message, capsys):
    code, out, err = _serve(extra, capsys)
    assert code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "script, env, expected",
    [
        # Forms the reader does not follow are unknown, never a wrong number.
        ("X=$((TP>4 ? 1 : TP>2 ? 2 : 3))\nserve --chunked-prefill-size $X", {"TP": "4"}, None),
        ("X=$((10#08))\nserve --chunked-prefill-size $X", {}, None),
        ('if [[ "${ISL,,}" == "1024" ]]; then\nserve --chunked-prefill-size 1\nfi', {"ISL": "1024"}, None),
        ("X=${A:-$B}\nserve --chunked-prefill-size $X", {"A": ""}, None),
        ("if false; then\nserve --chunked-prefill-size 1\nfi", {}, None),
        ("C=8192\nif [[ $TP -gt 4 ]]; then C=4096; fi\nserve --chunked-prefill-size $C", {}, None),
        ("for tp in 4 8; do\n  C=$tp\ndone\nserve --chunked-prefill-size $C", {}, None),
        ('case "$ISL" in\n1024) C=1 ;;\n*) C=2 ;;\nesac\nserve --chunked-prefill-size $C', {"ISL": "1024"}, None),
        ("[[ $TP -gt 4 ]] && serve --chunked-prefill-size 1", {}, None),
        ('EXTRA="--chunked-prefill-size 10"\nserve $EXTRA', {}, None),
        ("serve --chunked-prefill-size ${MAX_MODEL_LEN:-8192}", {}, None),  # the workflow may set it
        # ... and the ones it follows are worked as bash works them.
        ("C=8192\nif [[ $TP -gt 4 ]]; then C=4096; fi\nserve --chunked-prefill-size $C", {"TP": "8"}, "4096"),
        ("if [[ $TP -gt 4 ]]; then\n  C=1; fi\nserve --chunked-prefill-size ${C:-7}", {"TP": "2"}, None),
        ("[[ $TP -gt 4 ]] && serve --chunked-prefill-size 1", {"TP": "8"}, "1"),
        ("serve --chunked-prefill-size $(( (ISL - 4097) / 2 ))", {"ISL": "1"}, "-2048"),  # truncated, as in C
        ("serve --chunked-prefill-size ${EVAL:-16384}", {"EVAL": ""}, "16384"),
        ("serve --chunked-prefill-size '$X'", {}, "$X"),
    ],
)
def test_the_script_reader_is_unknown_rather_than_wrong(script, env, expected):
    assert evaluate(digest(script), env).get("chunked_prefill_size") == expected


def test_serve_says_the_held_back_settings_need_a_simulation(capsys):
    from tests.test_simulation import SERVE, _cli

    code, out, err = _cli(SERVE + ["--engine", "sglang", "--recv-interval", "30"], capsys)
    assert code == 2 and "act in the simulation: add --rate" in err


def test_a_removal_ends_a_script_unless_it_is_back_within_a_week():
    """A commit date does not tell when a change reached the main branch: a script "removed" and
    back a day later (a branch) still counts; one removed for months (InferenceX's B200 Slurm
    scripts, 2025-10-01 to 2025-12-31) is gone in between, and one removed after every version
    (moved) is gone from then on."""
    from roofline.silicon_sample import _scripts_in_effect

    def script(path, *versions):
        return {"path": path, "model": "70b", "precision": "fp8", "gpu": "h200", "engine": "vllm", "versions": versions}

    scripts = (
        script("a.sh", ("2025-09-01", "1", "fp8"), ("2025-10-29", "2", "removed"), ("2025-10-30", "3", "fp8")),
        script("b.sh", ("2025-09-01", "4", "bf16"), ("2026-02-19", "5", "removed")),
        script("c.sh", ("2025-09-28", "6", "fp8"), ("2025-10-01", "7", "removed"), ("2025-12-31", "8", "fp8")),
    )
    row = {
        "model_path": "meta-llama/Llama-3.1-70B",
        "system": "h200_sxm",
        "backend": "vllm",
        "precision": "fp8",
        "silicon_data_source": "source_file=2026-04-06.csv; measured=2025-10-29T00:00:00Z",
    }

    def on(day: str) -> dict:
        source = f"source_file=2026-04-06.csv; measured={day}"
        return _scripts_in_effect(dict(row, silicon_data_source=source), scripts)[1]

    # 2025-10-29: a.sh's removal is undone the next day, so its September version stands; c.sh has
    # been gone four weeks (back only after 91 days).
    assert on("2025-10-29") == {"a.sh": [("2025-09-01", "1", "fp8")], "b.sh": [("2025-09-01", "4", "bf16")]}
    assert on("2025-09-30")["c.sh"] == [("2025-09-28", "6", "fp8")]  # before its removal
    assert "c.sh" not in on("2025-12-30")
    assert on("2026-01-05")["c.sh"] == [("2025-12-31", "8", "fp8")]  # back
    # b.sh removed after its last version: gone from that day on.
    assert on("2026-03-01") == {"a.sh": [("2025-10-30", "3", "fp8")], "c.sh": [("2025-12-31", "8", "fp8")]}
