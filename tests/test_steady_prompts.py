"""How the steady state's prompts reach the steps: whole prompts (or budget-sized chunks) in a
share of the steps, the rest decode only (``roofline.serving.prompt_chunks``); SGLang's prompts as
steps of their own. Worked by hand, then against the frontier and the validation's step."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from roofline.engine import evaluate
from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.ops import step_ops
from roofline.serving import Traffic, mixed_step_ops, prefill_batches, prompt_chunks, serving_sweep
from roofline.settings import Settings
from roofline.validate import predict_tpot
from roofline.workload import Precision, Workload

H100, LLAMA = get_hardware("h100-sxm"), get_model("llama-3.1-8b")


def test_prompt_chunks_by_hand():
    # 8 sequences, 1,024-token prompts, 128-token outputs: 8 x 1024 / 128 = 64 prompt tokens a
    # step on average, which arrive as one whole prompt every 1024 / 64 = 16 steps.
    chunk, share = prompt_chunks(8, 1024, 128, 8192)
    assert (float(chunk), float(share)) == (1024.0, 1 / 16)
    # 100 sequences and 8,192-token prompts with an 8,192-token budget: chunks of 8,092 tokens
    # beside the decodes, 100 x 8192 / 1024 = 800 prompt tokens a step, in 800 / 8092 of the steps.
    chunk, share = prompt_chunks(100, 8192, 1024, 8192)
    assert float(chunk) == 8092 and float(share) == pytest.approx(800 / 8092)
    # Outputs of 2 tokens: 4,096 prompt tokens a step, more than a whole prompt: every step has them.
    chunk, share = prompt_chunks(8, 1024, 2, 8192)
    assert (float(chunk), float(share)) == (4096.0, 1.0)
    # Arrays over the batch: past the budget (9,000 decodes) every step carries its 9,000 prompt tokens.
    chunk, share = prompt_chunks(np.array([1, 9000]), 512, 512, 8192)
    assert chunk.tolist() == [512.0, 9000.0] and share.tolist() == [1 / 512, 1.0]


def test_the_frontiers_tpot_is_the_mean_of_its_two_kinds_of_step():
    pts = serving_sweep(LLAMA, [H100], Traffic(1024, 128), batches=np.array([8]))
    run = Workload(LLAMA, "decode", 8, 1088, cuda_graphs=True)
    ceilings = Settings().ceilings(H100, 1, cuda_graphs=True)
    carrying = evaluate(mixed_step_ops(run, 8, 1024.0, 1024), ceilings).step_time_s
    decoding = evaluate(mixed_step_ops(run, 8, 0.0, 1024), ceilings).step_time_s
    assert pts.tpot_s[0, 0] == pytest.approx(carrying / 16 + decoding * 15 / 16, rel=1e-9)
    assert decoding < pts.tpot_s[0, 0] < carrying
    assert pts.ttft_s[0, 0] == pytest.approx(carrying, rel=1e-9)  # its prompt whole, in one carrying step


def test_the_first_token_waits_for_the_step_its_prompt_shares():
    # 256 sequences, 1,024-token prompts, 64-token outputs: 256 x 1024 / 64 = 4,096 prompt tokens
    # a step, four prompts in every step; a prompt's first token comes with its step, T(256, 4096),
    # not with a step holding it alone. So no TTFT is below the mean step (TPOT) at any batch.
    pts = serving_sweep(LLAMA, [H100], Traffic(1024, 64), batches=np.array([1, 8, 64, 256, 1024]))
    run = Workload(LLAMA, "decode", 256, 1056, cuda_graphs=True)
    ceilings = Settings().ceilings(H100, 1, cuda_graphs=True)
    shared = evaluate(mixed_step_ops(run, 256, 4096.0, 1024), ceilings).step_time_s
    assert pts.ttft_s[0, 3] == pytest.approx(shared, rel=1e-9) == pytest.approx(pts.tpot_s[0, 3], rel=1e-9)
    assert np.all(pts.ttft_s >= pts.tpot_s * (1 - 1e-12))


def test_a_moe_model_reads_fewer_experts_than_a_thin_chunk_in_every_step_would():
    # gpt-oss-120b on an H200 at 4 sequences, 8,192 -> 1,024 tokens: 32 prompt tokens a step spread
    # over every step would route 36 tokens a step through the experts (most of the 128 experts of
    # each layer read every step); a whole prompt in one step of 256 reads them once.
    oss, h200 = get_model("gpt-oss-120b"), get_hardware("h200-sxm")
    precision = Precision(expert_weight_dtype="mxfp4")
    run = Workload(oss, "decode", 4, 8704, precision=precision, cuda_graphs=True)
    ceilings = Settings().ceilings(h200, 1, cuda_graphs=True)
    thin = evaluate(mixed_step_ops(run, 4, 32.0, 8192), ceilings).step_time_s
    pts = serving_sweep(oss, [h200], Traffic(8192, 1024), precision, batches=np.array([4]))
    assert pts.tpot_s[0, 0] < 0.6 * thin


def test_sglang_runs_prompts_as_steps_of_their_own():
    # Each output token's decode step, and a 1,024-token prompt's prefill for every 128 / 8 of them.
    pred = predict_tpot(LLAMA, "h100-sxm", Precision(), 1, 1024, 128, 8, mixed=False)
    run = Workload(LLAMA, "decode", 8, 1088, cuda_graphs=True)
    ceilings = Settings().ceilings(H100, 1, cuda_graphs=True)
    decoding = evaluate(mixed_step_ops(run, 8, 0.0, 1024), ceilings).step_time_s
    prompt = evaluate(step_ops(replace(run, phase="prefill", batch=1, seq_len=1024)), ceilings).step_time_s
    assert pred.datasheet_s == pytest.approx(decoding + 8 / 128 * prompt, rel=1e-9)
    mixed = predict_tpot(LLAMA, "h100-sxm", Precision(), 1, 1024, 128, 8)
    assert mixed.datasheet_s < pred.datasheet_s  # the decodes wait out every prefill


def _engine_roofs(engine: str, eager: bool):
    """The H100's roofs under ``engine``'s tables and host work, replayed from a CUDA graph or with
    every kernel dispatched from the host (the settings' cost a launch)."""
    roofs = Settings(engine=engine).ceilings(H100, 1, cuda_graphs=True)
    return replace(roofs, launch_overhead_s=Settings().launch_overhead_s, graph_replay_s=0.0) if eager else roofs


def test_a_step_with_prompt_tokens_past_the_engines_graph_limit_is_dispatched_from_the_host():
    """As the serving simulation runs it: SGLang replays only decode batches from a CUDA graph
    (its prompt steps are eager), vLLM steps of up to min(2 x max_num_seqs, 512) tokens. Llama 3.2
    1B's 128-token prompt is short enough that the host's dispatch sets its step."""
    from roofline.roofs import kernel_tables

    small = get_model("llama-3.2-1b")
    run = Workload(small, "decode", 8, 192, cuda_graphs=True)
    sglang = kernel_tables("sglang", "h100-sxm")
    pred = predict_tpot(small, "h100-sxm", Precision(), 1, 128, 128, 8, sglang, mixed=False)
    decoding = evaluate(mixed_step_ops(run, 8, 0.0, 128), _engine_roofs("sglang", False))
    prompt_ops = step_ops(replace(run, phase="prefill", batch=1, seq_len=128))
    eager = evaluate(prompt_ops, _engine_roofs("sglang", True))
    graphed = evaluate(prompt_ops, _engine_roofs("sglang", False))
    assert pred.tables_s == pytest.approx(decoding.step_time_s + 8 / 128 * eager.step_time_s, rel=1e-9)
    assert eager.step_time_s > graphed.step_time_s * 1.2  # the host's dispatch shows
    # The ideal bound keeps no host.
    ideal = decoding.ideal_step_time_s + 8 / 128 * graphed.ideal_step_time_s
    assert pred.datasheet_s == pytest.approx(float(ideal), rel=1e-9)
    # vLLM at a 64-token budget: steps of 8 + 56 tokens stay within its 512-token graphs.
    vllm = kernel_tables("vllm", "h100-sxm")
    within = predict_tpot(
        small, "h100-sxm", Precision(), 1, 128, 128, 8, vllm, settings=Settings(max_batched_tokens=64)
    )
    chunk, share = prompt_chunks(8, 128, 128, 64)
    roofs = _engine_roofs("vllm", False)
    carrying = evaluate(mixed_step_ops(run, 8, float(chunk), 128), roofs).step_time_s
    expected = share * carrying + (1 - share) * evaluate(mixed_step_ops(run, 8, 0.0, 128), roofs).step_time_s
    assert within.tables_s == pytest.approx(float(expected), rel=1e-9)


def test_the_frontier_dispatches_its_prompt_steps_as_the_engine_does():
    # Llama 3.2 1B, 8 sequences of 128 -> 128 tokens: a prompt-carrying step's device time is short
    # enough that SGLang's host (its work a step and the eager dispatch of every kernel) sets it.
    small = get_model("llama-3.2-1b")
    # Prompts mixed into the decodes' steps (SGLang's --enable-mixed-chunk; its default runs them apart).
    pts = serving_sweep(
        small, [H100], Traffic(128, 128), settings=Settings(engine="sglang"), batches=np.array([8]), chunked=True
    )
    run = Workload(small, "decode", 8, 192, cuda_graphs=True)
    carrying = evaluate(mixed_step_ops(run, 8, 128.0, 128), _engine_roofs("sglang", True)).step_time_s
    decoding = evaluate(mixed_step_ops(run, 8, 0.0, 128), _engine_roofs("sglang", False)).step_time_s
    assert pts.tpot_s[0, 0] == pytest.approx(carrying / 16 + decoding * 15 / 16, rel=1e-9)
    assert pts.ttft_s[0, 0] == pytest.approx(carrying, rel=1e-9)  # one 128-token chunk beside the decodes
    graphed = evaluate(mixed_step_ops(run, 8, 128.0, 128), _engine_roofs("sglang", False)).step_time_s
    assert carrying > graphed * 1.2  # the dispatch shows
    # On the datasheet (no engine, no host) every step stays as the device runs it.
    ideal = serving_sweep(small, [H100], Traffic(128, 128), batches=np.array([8]))
    assert ideal.tpot_s[0, 0] < pts.tpot_s[0, 0]


def test_prefill_batches_by_hand():
    # 8 sequences, 128-token outputs: 1/16 of a prompt waits each output step: one prompt a prefill
    # step, every 16 output steps.
    k, steps = prefill_batches(8, 1024, 128, 8192)
    assert (float(k), float(steps)) == (1.0, 1 / 16)
    # 448 sequences, 100-token outputs: 4.48 prompts of 1,000 tokens wait each output step, and an
    # 8,192-token budget takes all of them into one prefill step.
    k, steps = prefill_batches(448, 1000, 100, 8192)
    assert float(k) == pytest.approx(4.48) and float(steps) == pytest.approx(1.0)
    # 512 sequences, 2-token outputs: 256 prompts wait, the budget holds 8 of 1,000 tokens: 32 steps.
    k, steps = prefill_batches(np.array([512]), 1000, 2, 8192)
    assert (k.tolist(), steps.tolist()) == ([8.0], [32.0])


def test_sglang_batches_the_prompts_waiting_into_one_prefill_step():
    # 448 sequences, 1,000 -> 100 tokens: an output step's decode and a prefill step of 4.48
    # prompts, as 52% of a 4-prompt step and 48% of a 5-prompt one.
    pred = predict_tpot(LLAMA, "h100-sxm", Precision(), 1, 1000, 100, 448, mixed=False)
    run = Workload(LLAMA, "decode", 448, 1050, cuda_graphs=True)
    roofs = Settings().ceilings(H100, 1, cuda_graphs=True)
    decoding = evaluate(mixed_step_ops(run, 448, 0.0, 1000), roofs).step_time_s
    four, five = (
        evaluate(step_ops(replace(run, phase="prefill", batch=b, seq_len=1000)), roofs).step_time_s for b in (4, 5)
    )
    assert pred.datasheet_s == pytest.approx(decoding + 0.52 * four + 0.48 * five, rel=1e-9)
    # Batched, the prompts read the weights once a step, not once a prompt.
    one = evaluate(step_ops(replace(run, phase="prefill", batch=1, seq_len=1000)), roofs).step_time_s
    assert pred.datasheet_s < decoding + 4.48 * one


def test_serve_takes_the_graph_limit_and_the_launch_cost_for_its_frontier():
    """--prompt-graph-tokens and --launch-overhead-us time the frontier's prompt steps too, so serve
    takes them without a simulation flag."""
    import json
    import subprocess
    import sys

    base = [sys.executable, "-m", "roofline", "serve", "--model", "llama-3.2-1b", "--hardware", "h100-sxm"]
    base += ["--engine", "vllm", "--prompt-len", "128", "--output-len", "128", "--tp", "1", "--json"]
    runs = {}
    for extra in ((), ("--prompt-graph-tokens", "0"), ("--prompt-graph-tokens", "0", "--launch-overhead-us", "50")):
        out = subprocess.run([*base, *extra], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        runs[extra] = min(p["ttft_s"] for p in json.loads(out.stdout)["frontier"])  # a small batch's prompt step
    default, eager, slow = runs.values()
    assert default < eager < slow  # past a limit of 0 every prompt step is dispatched, slower at 50 us a launch


def test_the_one_point_view_draws_the_step_as_the_frontier_times_it():
    """The step the Serving page's One point view draws: the one carrying a prompt, whole or a
    budget's chunk, dispatched from the host past the engine's CUDA graphs (SGLang: always)."""
    from dashboard.serving_view import point_step
    from roofline.serving import eager_ceilings

    run = Workload(LLAMA, "decode", 8, 1088, cuda_graphs=True)
    traffic = Traffic(1024, 128)
    sglang = Settings(engine="sglang")
    table, title = point_step(run, 8, traffic, True, sglang, H100, 1)
    assert title == (
        "A step carrying a prompt (6% of the steps): 8 decoding sequences + 1,024 prompt tokens, every kernel "
        "dispatched from the host (past the engine's CUDA graphs)"
    )
    roofs = eager_ceilings(sglang.ceilings(H100, 1, True), sglang)
    assert table.total_time_s == evaluate(mixed_step_ops(run, 8, 1024.0, 1024), roofs).total_time_s
    _, within = point_step(run, 8, traffic, True, Settings(engine="vllm"), H100, 1)  # 1,032 tokens > vLLM's 512
    assert within.endswith("(past the engine's CUDA graphs)")
    _, graphed = point_step(run, 8, Traffic(256, 128), True, Settings(engine="vllm"), H100, 1)  # 264 tokens
    assert graphed == "A step carrying a prompt (6% of the steps): 8 decoding sequences + 256 prompt tokens"
    _, decode = point_step(run, 8, traffic, False, sglang, H100, 1)
    assert decode == "A decode step: 8 sequences (the prompts run in prefill steps of their own)"


def test_the_cheapest_setup_runs_its_prompts_as_the_frontier_does():
    """Unchunked (SGLang's way) the plan's step is a decode step plus prefill steps of their own,
    as the unchunked frontier prices it: the search takes the same setting."""
    from roofline.serving import best_under_targets

    traffic = Traffic(1024, 128)
    mixed = best_under_targets(LLAMA, [H100], traffic, 2.0, 0.05, tps=(1,), precisions=(("bf16", "bf16"),))[0]
    apart = best_under_targets(
        LLAMA, [H100], traffic, 2.0, 0.05, tps=(1,), precisions=(("bf16", "bf16"),), chunked=False
    )[0]
    batch = apart.point["batch"]
    frontier = serving_sweep(LLAMA, [H100], traffic, chunked=False, batches=np.array([batch]))
    assert apart.point["tpot_s"] == pytest.approx(float(frontier.tpot_s[0, 0]), rel=1e-9)
    assert apart.point != mixed.point


def test_the_frontier_holds_as_many_sequences_as_the_engines_cache_not_a_whole_batch_prefilled_at_once():
    """No step of a continuous-batching engine takes in more prompt tokens than its budget, so a
    batch of B sequences needs their caches at full length beside the engine's largest step (its
    profile run at the budget), not the activations of B prompts prefilled together. Llama 3.1 8B,
    1,024 in / 256 out: each sequence ends holding 1,279 tokens, 80 blocks of 16, at 32 layers x 8
    KV heads x 128 dims x 2 (K, V) x 2 bytes = 131,072 bytes a token: 167,772,160 bytes."""
    from roofline.memory import footprint
    from roofline.serving.simulation.api import kv_blocks

    settings = Settings(engine="vllm")
    per_sequence = 80 * 16 * 32 * 8 * 128 * 2 * 2
    assert per_sequence == 167_772_160
    one = footprint(Workload(LLAMA, "decode", 1, 1, cuda_graphs=True), H100, settings, with_smallest_tp=False)
    most = int(one.kv_budget_bytes // per_sequence)
    assert most == kv_blocks(LLAMA, H100, Precision(), 1, settings.for_device(H100)) // 80  # the simulation's
    points = serving_sweep(LLAMA, [H100], Traffic(1024, 256), settings=settings, batches=np.array([most, most + 1]))
    assert points.fits[0].tolist() == [True, False]
    # Against the engine: vLLM 0.19.0's start-up log of the same model on an H100 at 0.95 of its
    # memory (engine_db/vllm_startup_logs.toml, log A.1) holds 476,016 tokens, 371 such sequences.
    logged = Settings(engine="vllm", memory_utilization=0.95, max_num_seqs=1024, max_batched_tokens=8192)
    at_95 = serving_sweep(LLAMA, [H100], Traffic(1024, 256), settings=logged, batches=np.arange(300, 400))
    assert np.flatnonzero(at_95.fits[0]).max() + 300 == pytest.approx(476_016 // 1280, rel=0.03)
