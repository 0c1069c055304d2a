"""The serving engines: their host work per step (added between steps, or overlapped), the fit of
that work on a declared split, their schedulers worked by hand, and their token budgets."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from roofline.engine import Ceilings, evaluate
from roofline.engines import engine_profile, fit_host_work, in_host_fit_split, load_engines
from roofline.hardware import get_hardware
from roofline.models import get_model
from roofline.ops import step_ops
from roofline.optable import step_with_engine
from roofline.serving.simulation.load import Requests
from roofline.serving.simulation.run import simulate
from roofline.serving.simulation.scheduler import EngineKnobs
from roofline.settings import Settings
from roofline.workload import Workload
from tests.test_simulation import MS, flat_times

H100 = get_hardware("h100-sxm")


def _ceilings(**kw) -> Ceilings:
    return Ceilings(name="t", peak_flops_per_s={"bf16": 1e15}, memory_bandwidth_bytes_per_s=1e12, **kw)


def test_host_work_adds_between_steps_and_hides_under_the_device_when_overlapped():
    # 1 ms per step and 10 us per sequence; 64 sequences: 1.64 ms of host work.
    serial = _ceilings(engine_step_s=1e-3, engine_per_seq_s=10e-6)
    overlapped = replace(serial, engine_overlap=True)
    # A 5 ms device step with 0.2 ms of dispatch: 5 + 1.64 between steps, max(5, 0.2 + 1.64) overlapped.
    assert step_with_engine(5e-3, 0.2e-3, serial, 64) == pytest.approx(6.64e-3)
    assert step_with_engine(5e-3, 0.2e-3, overlapped, 64) == pytest.approx(5e-3)
    # A 1 ms step: the host's 1.64 ms of work and 0.2 ms of dispatch, on one thread, set it.
    assert step_with_engine(1e-3, 0.2e-3, overlapped, 64) == pytest.approx(1.84e-3)
    # Dispatch longer than the device's work, between steps: max(1, 2) + 1.64.
    assert step_with_engine(1e-3, 2e-3, serial, 64) == pytest.approx(3.64e-3)


def test_a_step_counts_its_sampled_sequences_from_the_lm_head():
    w = Workload(get_model("llama-3.1-8b"), "decode", 32, 1024, cuda_graphs=True)
    c = replace(Settings().ceilings(H100, 1, True), engine_step_s=1e-3, engine_per_seq_s=10e-6)
    table = evaluate(step_ops(w), c)
    device = float(table.device_time_s)
    assert float(table.step_time_s) == pytest.approx(max(device, float(table.host_time_s)) + 1e-3 + 32 * 10e-6)
    assert float(table.ideal_step_time_s) == pytest.approx(max(device, float(table.host_time_s)))


def test_which_versions_overlap_their_host_work():
    vllm = engine_profile("vllm")
    assert not vllm.overlaps("0.12.0") and vllm.overlaps("0.14.0") and vllm.overlaps("0.18.0") and vllm.overlaps(None)
    assert engine_profile("sglang").overlaps("0.5.9") and engine_profile("trtllm").overlaps(None)
    assert engine_profile("ideal") is None
    assert set(load_engines()) == {"vllm", "sglang", "trtllm"}


def test_the_engine_sets_the_serving_step_not_the_training_step():
    c = Settings(engine="vllm").ceilings(H100, 1, True)
    profile = engine_profile("vllm")
    assert (c.engine_step_s, c.engine_per_seq_s, c.engine_overlap) == (
        profile.host_step_s,
        profile.host_per_seq_s,
        True,
    )
    assert "vLLM's host work" in c.engine_step_note
    assert Settings(engine="vllm").ceilings(H100, 1, True, serving=False).engine_step_s == 0.0
    assert Settings(engine="ideal").ceilings(H100, 1, True).engine_step_s == 0.0
    old = Settings(engine="vllm", engine_version="0.12.0").ceilings(H100, 1, True)
    assert not old.engine_overlap and "between steps" in old.engine_step_note


def test_the_fit_recovers_a_known_host_work():
    # Device TPOTs of 5-40 ms at 8-256 sequences; the "measured" ones add 2 ms + 30 us per sequence.
    rng = np.random.default_rng(0)
    device = rng.uniform(5e-3, 40e-3, 60)
    c = rng.choice([8, 16, 32, 64, 128, 256], 60).astype(float)
    measured = device + 2e-3 + 30e-6 * c
    step_s, seq_s = fit_host_work(device, measured, c, np.zeros(60, bool))
    # Within a grid step (100 us, 1 us) and the tie rule's pull toward less host work.
    assert step_s == pytest.approx(2e-3, abs=1e-4) and seq_s == pytest.approx(30e-6, abs=1.5e-6)


def test_an_overlapped_host_work_the_device_hides_fits_as_none():
    # Every device step is longer than any host work the data could show: the least, 0, is taken.
    device = np.linspace(20e-3, 40e-3, 30)
    step_s, seq_s = fit_host_work(device, device, np.full(30, 8.0), np.ones(30, bool))
    assert (step_s, seq_s) == (0.0, 0.0)


def test_the_declared_split():
    assert in_host_fit_split({"model_path": "Qwen/Qwen3-32B", "system": "h100_sxm"})
    assert not in_host_fit_split({"model_path": "Qwen/Qwen3-32B", "system": "h200_sxm"})


def test_sglang_runs_a_prefill_batch_before_any_decode():
    """Budget 8, blocks of 4. A: prompt 4, 3 outputs at t = 0; B: prompt 6, 1 output at 1.5 ms.
    step 1 (0-1 ms): prefill A -> A's 1st token.  step 2 (1-2 ms): A decodes -> 2nd token.
    step 3 (2-3 ms): B waits, so a prefill batch of B alone runs; A does not decode -> B's token, B done.
    step 4 (3-4 ms): A decodes its 3rd and last token.
    vLLM's policy would put B's prompt beside A's decode in step 3 (A done at 3 ms)."""
    requests = Requests(np.array([0.0, 1.5 * MS]), np.array([4, 6]), np.array([3, 1]))
    sglang = simulate(requests, flat_times(), 100, EngineKnobs(8, 4, 4, policy="sglang"))
    assert sglang.first_token_s == pytest.approx([1 * MS, 3 * MS])
    assert sglang.finish_s == pytest.approx([4 * MS, 3 * MS])
    vllm = simulate(requests, flat_times(), 100, EngineKnobs(8, 4, 4, policy="vllm"))
    assert vllm.finish_s == pytest.approx([3 * MS, 3 * MS])


def test_trtllm_admits_a_request_only_with_room_for_its_whole_output():
    """Blocks of 4 tokens, 4 blocks in all. A and B: prompt 4, 8 outputs (12 tokens: 3 blocks each).
    TensorRT-LLM reserves A's 3 blocks at admission; B's 3 do not fit beside them, so B waits for A
    (never preempted). vLLM admits both (1 block each) and preempts B when the cache runs out."""
    requests = Requests(np.zeros(2), np.array([4, 4]), np.array([8, 8]))
    trt = simulate(requests, flat_times(), 4, EngineKnobs(16, 4, 4, policy="trtllm"))
    assert int(trt.preemptions.sum()) == 0
    assert trt.first_token_s[1] >= trt.finish_s[0]
    vllm = simulate(requests, flat_times(), 4, EngineKnobs(16, 4, 4, policy="vllm"))
    assert int(vllm.preemptions.sum()) >= 1


def test_each_engines_default_token_budget():
    vllm, sglang, trt = (engine_profile(e) for e in ("vllm", "sglang", "trtllm"))
    assert vllm.token_budget(H100) == 8192 and vllm.token_budget(get_hardware("a100-sxm-80gb")) == 2048
    assert vllm.token_budget(get_hardware("l4")) == 2048
    assert sglang.token_budget(get_hardware("l4")) == 2048  # 24 GB
    assert sglang.token_budget(get_hardware("h200-sxm")) == 8192 and sglang.token_budget(get_hardware("b200")) == 16384
    assert trt.token_budget(get_hardware("b200")) == 8192


def test_settings_left_unset_take_the_engines_defaults_on_each_device():
    from roofline.engines import vllm_batch_defaults
    from roofline.settings import Settings

    # vLLM's get_batch_defaults: 70 GiB or more and not an A100 -> 8192 tokens and 1024 sequences.
    # The H100 SXM exposes 79.18 GiB; the A100 80GB 79.14 GiB, excluded by name; the L40S 44.53 GiB.
    assert vllm_batch_defaults(H100) == (8192, 1024)
    assert vllm_batch_defaults(get_hardware("a100-sxm-80gb")) == (2048, 256)
    assert vllm_batch_defaults(get_hardware("l40s")) == (2048, 256)
    assert vllm_batch_defaults(get_hardware("b200")) == (8192, 1024)
    # Unset, the token budget is the engine's own there (the ideal bound reads vLLM's) and the cap vLLM's.
    b200 = get_hardware("b200")
    assert (Settings().for_device(b200).max_batched_tokens, Settings().for_device(b200).max_num_seqs) == (8192, 1024)
    assert Settings(engine="sglang").for_device(b200).max_batched_tokens == 16384
    assert Settings().for_device(get_hardware("l4")).max_num_seqs == 256
    # Set, they stand on every device.
    mine = Settings(max_batched_tokens=512, max_num_seqs=8)
    assert mine.for_device(b200) is mine


def test_a_bad_scheduler_policy_names_the_allowed_ones():
    with pytest.raises(ValueError, match="policy must be one of vllm, sglang, trtllm"):
        EngineKnobs(policy="tgi")


def test_the_host_fit_never_exceeds_a_step_it_was_fitted_on():
    # Thirty runs at 20 ms of device time, measured 25 ms, and one at 8 ms measured 8 ms: with the
    # host's work overlapped, 25 ms of host work would fit the median best, but the run that took
    # 8 ms a token shows the host cannot take more than 8 ms a step.
    device = np.array([20e-3] * 30 + [6e-3])
    measured = np.array([25e-3] * 30 + [8e-3])
    step_s, seq_s = fit_host_work(device, measured, np.full(31, 1.0), np.ones(31, bool))
    assert step_s + seq_s <= 8e-3 + 1e-12


def test_a_step_past_the_splits_concurrencies_says_its_host_work_is_extrapolated():
    from roofline.inference import analyze_request
    from roofline.models import get_model
    from roofline.settings import Settings
    from roofline.workload import Workload

    # SGLang's per-sequence host work was fitted on Qwen3-32B on an H100 at 16 to 128 clients (the
    # split's concurrencies, engine_db/engines.toml); 512 sequences read it four times past them.
    sglang = engine_profile("sglang")
    assert sglang.host_fit.sequences == (16, 128)
    assert sglang.host_fit.beyond(128, 68.0, "SGLang") == ""
    assert "at 512 it is extrapolated" in sglang.host_fit.beyond(512, 68.0, "SGLang")
    # TensorRT-LLM's fit has no per-sequence part: nothing is extrapolated.
    assert engine_profile("trtllm").host_fit.beyond(4096, 0.0, "TensorRT-LLM") == ""
    w = Workload(get_model("llama-3.1-8b"), "request", 512, 1000, output_len=64, cuda_graphs=True)
    notes = analyze_request(w, get_hardware("h200-sxm"), Settings(engine="sglang")).notes
    assert any("fitted at 16 to 128 sequences" in n and "at 512 it is extrapolated" in n for n in notes)
    small = Workload(get_model("llama-3.1-8b"), "request", 64, 1000, output_len=64, cuda_graphs=True)
    assert not any(
        "extrapolated" in n for n in analyze_request(small, get_hardware("h200-sxm"), Settings(engine="sglang")).notes
    )


def test_each_engine_says_whether_it_splits_a_prompt_and_validate_runs_it_so(monkeypatch):
    """vLLM V1 and SGLang split a prompt past the token budget over steps by default; TensorRT-LLM
    does not (enable_chunked_prefill defaults to False: a prompt runs whole or waits). `validate`
    simulates each run with its engine's own."""
    import roofline.validate_load as vl
    from roofline.silicon_sample import load_silicon_sample

    assert [engine_profile(e).chunked_prefill for e in ("vllm", "sglang", "trtllm")] == [True, True, False]
    assert "enable_chunked_prefill defaults to False" in engine_profile("trtllm").chunked_prefill_source
    # Budget 8: two 6-token prompts at t = 0, one output each. Split, B's first 2 tokens ride in
    # step 1 beside A's 6 and its last 4 in step 2; whole, B waits for step 2. Both first tokens
    # come at 1 and 2 ms either way; what differs is what step 1 carries: 8 tokens, or A's 6.
    requests = Requests(np.zeros(2), np.array([6, 6]), np.array([1, 1]))
    split = simulate(requests, flat_times(), 100, EngineKnobs(8, 4, 4, policy="vllm", chunked_prefill=True))
    whole = simulate(requests, flat_times(), 100, EngineKnobs(8, 4, 4, policy="trtllm", chunked_prefill=False))
    assert list(split.step_tokens) == [8, 4] and list(whole.step_tokens) == [6, 6]
    seen = []
    real = vl.simulate
    monkeypatch.setattr(
        vl, "simulate", lambda r, t, b, knobs: seen.append(knobs.chunked_prefill) or real(r, t, b, knobs)
    )
    rows = {r["id"]: r for r in load_silicon_sample()}
    trt = rows[
        "meta_llama_llama_3_1_8b_instruct_meta_llama_llama_3_1_8b_instruct_h100_sxm_trtllm_agg_1024x128_c8_tp8_epnone_133"
    ]
    vl.simulate_row(trt, {}, tables=False)
    assert seen == [False]
    from roofline.validate_explain import explain

    assert (
        "prompts kept whole, as TensorRT-LLM runs them unless enable_chunked_prefill" in explain(trt["id"])["scheduler"]
    )
    # A run whose token budget could never hold its prompt whole is refused by name, not run forever.
    monkeypatch.setattr("roofline.validate.documented_budget", lambda row, hw: 512)
    with pytest.raises(ValueError, match=r"TensorRT-LLM keeps a prompt whole and the run's token budget \(512\)"):
        vl.simulate_row(trt, {}, tables=False)


def test_vllms_per_device_defaults_are_said_from_the_figures_the_rule_reads():
    from roofline.engines import vllm_batch_defaults, vllm_default_words

    assert vllm_default_words("max_num_seqs") == "1,024 on a GPU of 70 GiB or more other than an A100, else 256"
    assert vllm_default_words("max_batched_tokens") == "8,192 on a GPU of 70 GiB or more other than an A100, else 2,048"
    assert vllm_batch_defaults(get_hardware("h100-sxm")) == (8192, 1024)
    assert vllm_batch_defaults(get_hardware("a100-sxm-80gb")) == vllm_batch_defaults(get_hardware("l4")) == (2048, 256)
    with pytest.raises(ValueError, match="workspace_bytes needs the engine's token budget and sequence cap"):
        Settings().require_device("workspace_bytes")
