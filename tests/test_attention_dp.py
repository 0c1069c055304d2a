"""Attention data parallelism: the step of one rank, its memory, the simulation of its ranks, and the
silicon sample's rows that record it. Values worked by hand for Llama 3.1 8B (32 layers, hidden
4096, 32 heads, 8 KV heads of 128, MLP 14336, vocabulary 128256) and DeepSeek-R1 (MLA)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from roofline.cli import main as cli_main
from roofline.hardware import get_hardware
from roofline.memory import footprint, kv_cache_bytes, weight_bytes_per_device
from roofline.models import get_model
from roofline.ops import step_ops
from roofline.sample_ranks import attention_ranks, why_ranks_not_scored
from roofline.serving.simulation.api import kv_blocks, simulate_serving
from roofline.serving.simulation.load import Lengths, Load, make_requests
from roofline.settings import Settings
from roofline.workload import Precision, Workload

LLAMA = get_model("llama-3.1-8b")
DSR1 = get_model("deepseek-r1")


def _op(ops, name):
    found = [op for op in ops if op.name == name]
    assert len(found) == 1, name
    return found[0]


def test_attention_dp_must_divide_tp_and_says_so():
    with pytest.raises(ValueError, match=r"\(attention_dp=3\) must divide the TP degree \(tp=8\)"):
        Workload(LLAMA, "decode", 4, 100, tp=8, attention_dp=3)
    for bad in (0, -2, True, 2.0, "2"):
        with pytest.raises(ValueError, match="attention_dp must be a positive integer"):
            Workload(LLAMA, "decode", 4, 100, tp=8, attention_dp=bad)
    w = Workload(LLAMA, "decode", 4, 100, tp=8, attention_dp=4)
    assert w.attention_tp == 2
    assert w.describe()["attention_dp"] == 4
    assert Workload(LLAMA, "decode", 4, 100, tp=8).describe()["attention_dp"] == 1


def test_one_rank_runs_its_own_attention_and_every_ranks_mlp():
    # TP 8 as 4 ranks of 2 devices, 3 sequences a rank, decoding.
    ops = step_ops(Workload(LLAMA, "decode", 3, 100, tp=8, attention_dp=4))
    # QKV at the rank's TP 2: 16 query heads and 4 KV heads of 128 out of 4096, 3 rows.
    assert _op(ops, "QKV projection").flops == pytest.approx(2 * 3 * 4096 * (16 + 2 * 4) * 128)
    # The MLP over the 4 ranks' 12 rows at TP 8: 2 x 14336 / 8 = 3584 gate+up outputs.
    assert _op(ops, "MLP gate+up projection").flops == pytest.approx(2 * 12 * 4096 * 3584)
    # Gathered to the 8 devices and summed back by an all-gather and a reduce-scatter of the 12 rows:
    # each device receives 7/8 of the message, then sends 7/8 of it, an all-reduce's bytes, two latencies.
    message = 12 * 4096 * 2
    op = _op(ops, "all-gather to the MLP + reduce-scatter back (every rank's tokens)")
    assert op.meta["message_bytes"] == pytest.approx(message) and op.meta["tp"] == 8
    assert op.comm_bytes == pytest.approx(7 / 8 * message + 7 / 8 * message)
    assert op.collectives == 2
    assert not [o for o in ops if o.name == "all-reduce (MLP)"]
    # The attention output is reduced inside the rank: 3 rows over its 2 devices.
    attention = _op(ops, "all-reduce (attention)")
    assert attention.meta["tp"] == 2 and attention.meta["message_bytes"] == pytest.approx(3 * 4096 * 2)
    # The LM head is the rank's: its 3 rows over a vocabulary split 2 ways.
    assert _op(ops, "logits (LM head)").flops == pytest.approx(2 * 3 * 4096 * 128256 / 2)
    names = [op.name for op in ops]
    assert names.index("MLP gate+up projection") < names.index("final norm")


def test_mlp_work_is_conserved_across_ranks_and_devices():
    """Per device MLP FLOPs x devices equals the whole batch's MLP FLOPs on one device; the
    attention per device is that of a TP group of the rank's size."""

    def flops(w, group):  # the router is replicated: every device routes every token
        return sum(float(op.flops) * op.count for op in step_ops(w) if op.group in group and op.name != "MoE router")

    for model, tp, d, b in ((LLAMA, 8, 4, 3), (LLAMA, 8, 8, 5), (DSR1, 8, 8, 2)):
        ranked = Workload(model, "decode", b, 500, tp=tp, attention_dp=d)
        whole = Workload(model, "decode", b * d, 500, tp=1)
        assert flops(ranked, ("mlp", "moe")) * tp == pytest.approx(flops(whole, ("mlp", "moe")), rel=1e-9)
        rank = Workload(model, "decode", b, 500, tp=tp // d)
        assert flops(ranked, ("attention",)) == pytest.approx(flops(rank, ("attention",)))
        if model.moe:
            router = _op(step_ops(ranked), "MoE router")
            assert router.flops == pytest.approx(_op(step_ops(whole), "MoE router").flops)


def test_weights_split_attention_over_the_rank_and_the_rest_over_the_group():
    bf16 = Precision()
    # Llama 3.1 8B at TP 8: as 8 ranks of 1, each device holds every attention weight, the
    # embedding and the LM head whole: 7/8 more of them than at TP 8.
    attention = 32 * (4096 * 4096 + 2 * 4096 * 1024 + 4096 * 4096)
    embedding_and_head = 2 * 128256 * 4096
    extra = (attention + embedding_and_head) * 7 / 8 * 2
    assert weight_bytes_per_device(LLAMA, bf16, 8, 8) - weight_bytes_per_device(LLAMA, bf16, 8) == pytest.approx(extra)
    assert weight_bytes_per_device(LLAMA, bf16, 8, 1) == weight_bytes_per_device(LLAMA, bf16, 8)


def test_the_cache_is_the_ranks_own():
    hw = get_hardware("h200-sxm")
    # GQA: a rank of 2 devices holds 4 of the 8 KV heads: 2 x 4 x 128 x 2 bytes a token a layer, for
    # its 3 sequences of 112 tokens (7 blocks of 16).
    w = Workload(LLAMA, "decode", 3, 111, tp=8, attention_dp=4)
    assert footprint(w, hw, Settings()).kv_cache_bytes == pytest.approx(3 * 32 * 112 * 2 * 4 * 128 * 2)
    # MLA: every device holds the latent of its rank's sequences only, so 8 ranks of 1 hold 8 times the
    # sequences that TP 8 (which keeps every latent on every device) holds in the same budget, less what
    # the replicated attention weights take.
    fp8 = Precision("fp8", "fp8", "bf16")
    one = kv_blocks(DSR1, hw, fp8, 8, Settings())
    ranks = kv_blocks(DSR1, hw, fp8, 8, Settings(attention_dp=8))
    assert 4 * one < 8 * ranks < 8 * one
    per_token = float(kv_cache_bytes(DSR1, fp8, 1, 1, 1))
    assert per_token == pytest.approx(61 * (512 + 64) * 2)


def test_ranks_share_the_clients_and_finish_every_request():
    hw = get_hardware("h200-sxm")
    fp8 = Precision("fp8", "fp8", "bf16")
    load = Load("concurrency", 64, Lengths(512), Lengths(64), concurrency=16)
    sim = simulate_serving(DSR1, hw, make_requests(load), fp8, 8, Settings(attention_dp=4))
    assert sim.attention_dp == 4
    assert np.all(np.isfinite(sim.run.finish_s))
    # Little's law on a closed loop: 16 clients always in the system.
    e2e = sim.run.finish_s - sim.run.arrival_s
    rate = 64 / (sim.run.finish_s.max() - sim.run.arrival_s.min())
    assert rate * e2e.mean() == pytest.approx(16, rel=0.25)
    with pytest.raises(ValueError, match="attention_dp: 8 attention ranks"):
        simulate_serving(
            DSR1,
            hw,
            make_requests(Load("concurrency", 20, Lengths(64), Lengths(8), concurrency=4)),
            fp8,
            8,
            Settings(attention_dp=8),
        )


def test_sample_rows_read_as_their_ranks():
    row = {
        "system": "b200_sxm",
        "tp_size": "1.0",
        "attention_dp_size": "8.0",
        "moe_tp_size": "1.0",
        "moe_ep_size": "8.0",
        "batch_size": "16.0",
        "silicon_data_source": "source_file=2026-03-25.csv; silicon_concurrency=128; measured=2026-02-03",
    }
    assert why_ranks_not_scored(row) is None and attention_ranks(row) == 8
    assert "not its batch times its ranks" in why_ranks_not_scored(row | {"batch_size": "32.0"})
    assert "not its experts'" in why_ranks_not_scored(row | {"moe_ep_size": "4.0"})
    assert "split both ways" in why_ranks_not_scored(row | {"moe_tp_size": "2.0", "moe_ep_size": "4.0"})
    # An export that writes D as TP x EP: 64 ranks of 1 on an 8-GPU board.
    wide = row | {"attention_dp_size": "64.0", "moe_ep_size": "64.0"}
    assert "scale-up domain of 8" in why_ranks_not_scored(wide)
    for value in ("", "1.0", "0.0"):
        assert why_ranks_not_scored(row | {"attention_dp_size": value}) is None
        assert attention_ranks(row | {"attention_dp_size": value}) == 1
    assert "not a whole number" in why_ranks_not_scored(row | {"attention_dp_size": "2.5"})
    assert "not a number" in why_ranks_not_scored(row | {"attention_dp_size": "x"})


def test_cli_takes_attention_dp(capsys):
    args = (
        "request --model deepseek-r1 --hardware h200-sxm --tp 8 --attention-dp 8 --weight-dtype fp8 --act-dtype fp8 "
        "--batch 4 --prompt-len 512 --output-len 16"
    ).split()
    assert cli_main(args) == 0
    out = capsys.readouterr().out
    assert "8 attention ranks of 1 device" in out
    with pytest.raises(SystemExit):
        cli_main(args[:-2] + ["--attention-dp", "0"])
    assert "--attention-dp" in capsys.readouterr().err
    assert (
        cli_main(
            [
                "request",
                "--model",
                "llama-3.1-8b",
                "--tp",
                "8",
                "--attention-dp",
                "3",
                "--prompt-len",
                "8",
                "--output-len",
                "2",
            ]
        )
        == 2
    )
    assert "(attention_dp=3) must divide the TP degree (tp=8)" in capsys.readouterr().err


def test_kv_counts_one_ranks_sequences(capsys):
    args = ["kv", "--model", "deepseek-r1", "--hardware", "h200-sxm", "--weight-dtype", "fp8", "--tp", "8"]
    assert cli_main(args + ["--json"]) == 0
    group = json.loads(capsys.readouterr().out)
    assert cli_main(args + ["--attention-dp", "8", "--json"]) == 0
    rank = json.loads(capsys.readouterr().out)
    assert rank["attention_dp"] == 8 and group["attention_dp"] == 1
    # The latent per token per device is the same; each rank holds only its own sequences' latents, so the
    # ranks together hold more sequences, less what the replicated attention weights and workspace take.
    assert rank["kv_bytes_per_token"] == group["kv_bytes_per_token"]
    assert group["max_batch"] < 8 * rank["max_batch"] and rank["max_batch"] < group["max_batch"]
    assert rank["weights_bytes"] > group["weights_bytes"]
    assert cli_main(args + ["--attention-dp", "8"]) == 0
    assert "8 attention ranks of 1 device: every figure is one rank's" in capsys.readouterr().out


def test_explain_names_the_ranks(capsys):
    run = "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c128_tp8_0_ep8_0_1085"
    assert cli_main(["validate", "--explain", run]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "TP 8, 8 attention ranks of 1 GPU, concurrency 16 a rank (128 in all)" in head


def test_sglang_splits_its_budgets_over_the_ranks_and_the_others_do_not():
    from roofline.serving.simulation.api import most_in_flight, rank_settings

    h200 = get_hardware("h200-sxm")
    s = Settings(engine="sglang", attention_dp=8, max_batched_tokens=8192, max_num_seqs=256)
    rank = rank_settings(s, h200)
    # SGLang: chunked_prefill_size // dp_size, and max_running_requests // dp_size a worker.
    assert (rank.max_batched_tokens, rank.max_num_seqs) == (1024, 32)
    assert most_in_flight(s, h200) == 256
    for engine in ("trtllm", "vllm"):
        other = Settings(engine=engine, attention_dp=8, max_batched_tokens=8192, max_num_seqs=256)
        assert rank_settings(other, h200) == other
        assert most_in_flight(other, h200) == 8 * 256
    # Left unset, one rank's are the engine's defaults on the device: SGLang's chunked prefill of
    # 8,192 tokens under 160 GiB, and vLLM's cap of 1,024 sequences on a GPU of 70 GiB or more.
    one = rank_settings(Settings(engine="sglang"), h200)
    assert (one.max_batched_tokens, one.max_num_seqs) == (8192, 1024)


def test_halving_tp_keeps_the_ranks_that_still_divide_it():
    from dataclasses import replace

    from roofline.advisor import levers, workload_time

    w = Workload(LLAMA, "decode", 8, 1000, tp=8, attention_dp=8)
    hw = get_hardware("h100-sxm")
    base = replace(workload_time(w, hw), bound="communication")  # the lever of a communication-bound step
    names = [lever.name for lever in levers(w, hw, base)]
    assert "TP=4 (4 attention ranks)" in names


def test_serve_says_its_group_is_ranks(capsys):
    args = (
        "serve --model deepseek-r1 --hardware h200-sxm --tp 8 --weight-dtype fp8 --act-dtype fp8 --engine sglang "
        "--concurrency 16 --requests 32 --prompt-len 256 --output-len 8 --attention-dp 4"
    ).split()
    assert cli_main(args) == 0
    out = capsys.readouterr().out
    assert "on 8 x NVIDIA H200 SXM 141GB as 4 attention ranks, 16 concurrent clients" in out
    assert "the busiest of 4 attention ranks, 4 to a replica" in out
