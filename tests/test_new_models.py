"""The models people use now: parameter totals, KV bytes, what each new schema feature does to
FLOPs, bytes and the cache, and Hugging Face config.json files read offline."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from roofline.cli import main
from roofline.datafiles import DataError
from roofline.hf_config import SUPPORTED_FAMILIES, load_hf_config, model_from_hf_config, parse_hf_config
from roofline.memory import kv_cache_bytes, weight_bytes_per_device
from roofline.models import get_model, load_models
from roofline.ops import chunked_pairs, step_ops
from roofline.workload import Precision, Workload

CONFIGS = Path(__file__).parent / "data" / "hf_configs"
NEW = [
    "qwen3-8b",
    "qwen3-32b",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "llama-4-scout",
    "llama-4-maverick",
    "gpt-oss-20b",
    "gpt-oss-120b",
    "gemma-3-4b",
    "gemma-3-27b",
    "deepseek-r1",
    "kimi-k2",
    "phi-4",
    "mistral-small-3.1",
]


def ops(w: Workload) -> dict:
    return {op.name: op for op in step_ops(w)}


@pytest.mark.parametrize("model_id", sorted(load_models()))
def test_parameter_totals_match_the_model_card(model_id):
    # Within 0.5% of the card's total (a vision tower the card counts is added; where the card
    # rounds coarser than that, e.g. Kimi K2's "1T", within half its rounding).
    m = get_model(model_id)
    total = m.param_counts()["total"] / 1e9 + (m.vision_params_b or 0.0)
    tolerance = max(0.005 * m.published_params_b, (m.published_params_rounding_b or 0.0) / 2)
    assert abs(total - m.published_params_b) <= tolerance, (model_id, total)


def test_every_new_model_is_in_the_database():
    assert set(NEW) <= set(load_models())


@pytest.mark.parametrize(
    "model_id, per_token",
    [
        # 2 (K, V) x KV heads x head dim x layers x 2 B, or MLA's (512 + 64) x layers x 2 B
        ("qwen3-8b", 2 * 8 * 128 * 36 * 2),  # 147,456
        ("qwen3-32b", 2 * 8 * 128 * 64 * 2),  # 262,144
        ("qwen3-30b-a3b", 2 * 4 * 128 * 48 * 2),  # 98,304
        ("qwen3-235b-a22b", 2 * 4 * 128 * 94 * 2),  # 192,512
        ("llama-4-scout", 2 * 8 * 128 * 48 * 2),  # 196,608 (before the chunk cap)
        ("llama-4-maverick", 2 * 8 * 128 * 48 * 2),
        ("gpt-oss-20b", 2 * 8 * 64 * 24 * 2),  # 49,152
        ("gpt-oss-120b", 2 * 8 * 64 * 36 * 2),  # 73,728
        ("gemma-3-4b", 2 * 4 * 256 * 34 * 2),  # 139,264
        ("gemma-3-27b", 2 * 16 * 128 * 62 * 2),  # 507,904
        ("deepseek-r1", (512 + 64) * 61 * 2),  # 70,272
        ("kimi-k2", (512 + 64) * 61 * 2),
        ("phi-4", 2 * 10 * 128 * 40 * 2),  # 204,800
        ("mistral-small-3.1", 2 * 8 * 128 * 40 * 2),  # 163,840
    ],
)
def test_kv_bytes_per_token(model_id, per_token):
    assert get_model(model_id).kv_bytes_per_token("bf16") == per_token


def test_interleaved_local_and_global_layers_cap_the_cache():
    # Gemma 3 27B: layer i is global when (i + 1) % 6 == 0: 10 global, 52 local with a 1024 window.
    # One 8192-token sequence: (10 x 8192 + 52 x 1024) tokens x 2 x 16 x 128 x 2 B = 1,107,296,256 B
    g = get_model("gemma-3-27b")
    assert g.local_layers == 52
    assert kv_cache_bytes(g, Precision(), 1, 1, 8192) == (10 * 8192 + 52 * 1024) * 8192 == 1_107_296_256
    # gpt-oss-20b alternates 128-token windows and full layers: 12 + 12. Decode at 1000 cached reads
    # 12 x 1001 + 12 x 128 keys x 8 KV heads x 64 x 2 (K, V) x 2 B.
    o = ops(Workload(get_model("gpt-oss-20b"), "decode", 1, 1000))
    local, full = o["attention (fused decode) (sliding window)"], o["attention (fused decode) (global)"]
    assert local.count == full.count == 12
    assert local.kv_bytes == 128 * 2048 + 2048 and full.kv_bytes == 1001 * 2048 + 2048


def test_chunked_attention():
    # Llama 4: 36 chunked layers (8192-token chunks), 12 global. A prefill of 20,000 tokens: two
    # whole chunks of 8192 x 8193 / 2 pairs plus 3,616 x 3,617 / 2 for the remainder.
    assert chunked_pairs(20_000, 8192) == 2 * 8192 * 8193 / 2 + 3616 * 3617 / 2
    scout = get_model("llama-4-scout")
    o = ops(Workload(scout, "prefill", 1, 20_000))
    chunked = o["attention (FlashAttention) (chunked)"]
    assert chunked.count == 36
    assert chunked.flops == 2 * 40 * chunked_pairs(20_000, 8192) * (128 + 128)
    # Decode at 20,000 cached: the new token (position 20,000) sees 20,000 mod 8192 + 1 = 3,617 keys.
    d = ops(Workload(scout, "decode", 1, 20_000))["attention (fused decode) (chunked)"]
    assert d.kv_bytes == 3617 * 2 * 8 * 128 * 2 + 2 * 8 * 128 * 2
    # The cache holds at most a chunk per chunked layer: (12 x 20,001 + 36 x 8,192) tokens x 4096 B.
    assert kv_cache_bytes(scout, Precision(), 1, 1, 20_001) == (12 * 20_001 + 36 * 8192) * 4096


def test_moe_every_kth_layer_and_dense_first_layers():
    maverick = get_model("llama-4-maverick")  # MoE on layers 1, 3, ..., 47
    assert maverick.moe_layers == 24 and maverick.dense_mlp_layers == 24
    o = ops(Workload(maverick, "decode", 1, 100))
    assert o["MoE experts gate+up"].count == 24 and o["MLP gate+up projection"].count == 24
    # the dense layers are 16,384 wide: gate+up weights 5120 x 32,768 x 2 B
    assert o["MLP gate+up projection"].weight_bytes == 5120 * 2 * 16384 * 2
    assert get_model("deepseek-r1").moe_layers == 58 and get_model("kimi-k2").moe_layers == 60


def test_shared_experts():
    # Llama 4's shared expert is one more SwiGLU of width 8192 on every MoE layer, always active.
    o = ops(Workload(get_model("llama-4-scout"), "decode", 1, 100))
    shared = o["shared expert gate+up projection"]
    assert shared.count == 48 and shared.weight_bytes == 5120 * 2 * 8192 * 2
    # Top-1 of 16 routed experts at batch 1 reads one expert: 5120 x 2 x 8192 x 2 B of gate+up.
    assert o["MoE experts gate+up"].weight_bytes == pytest.approx(5120 * 2 * 8192 * 2)


def test_attention_sinks():
    oss = get_model("gpt-oss-20b")
    # one learned logit per head and layer: 64 x 24 = 1,536 parameters
    assert oss.extra_attention_params() == 64
    no_sinks = oss.model_copy(update={"attention_sinks": False})
    assert oss.param_counts()["total"] - no_sinks.param_counts()["total"] == 64 * 24
    # each query row's softmax takes one more logit per head: + 2 x 64 FLOPs per decode row
    w, w0 = Workload(oss, "decode", 1, 1000), Workload(no_sinks, "decode", 1, 1000)
    a, a0 = ops(w)["attention (fused decode) (global)"], ops(w0)["attention (fused decode) (global)"]
    assert a.flops - a0.flops == 2 * 64 and a.kv_bytes == a0.kv_bytes


def test_per_tensor_dtypes_reproduce_the_gpt_oss_checkpoint():
    # gpt-oss-20b ships its routed experts in MXFP4 (4.25 bits) and the rest in bf16.
    # Experts: 24 layers x 32 x 3 x 2880 x 2880 = 19,110,297,600 params x 4.25 / 8 B;
    # the other 1,797,754,176 params x 2 B: 13,747,291,152 B = 12.80 GiB (the released files: 12.8 GiB).
    oss = get_model("gpt-oss-20b")
    experts = 24 * oss.routed_expert_params()
    assert experts == 19_110_297_600
    mixed = weight_bytes_per_device(oss, Precision(expert_weight_dtype="mxfp4"))
    assert mixed == pytest.approx(experts * 4.25 / 8 + (oss.param_counts()["total"] - experts) * 2)
    assert mixed / 2**30 == pytest.approx(12.8, abs=0.05)
    # and the experts' traffic in decode: batch 1 loads 4 of 32 experts per layer at 4.25 bits
    o = ops(Workload(oss, "decode", 1, 100, precision=Precision(expert_weight_dtype="mxfp4")))
    assert o["MoE experts gate+up"].weight_bytes == pytest.approx(4 * 2880 * 2 * 2880 * 4.25 / 8)
    assert o["QKV projection"].weight_bytes == 2880 * (64 + 16) * 64 * 2  # attention stays bf16


def test_qk_norm():
    qwen = get_model("qwen3-8b")
    assert qwen.extra_attention_params() == 2 * 128  # q and k RMSNorm weights, per layer
    norm = ops(Workload(qwen, "prefill", 1, 100))["QK norm (rmsnorm)"]
    assert norm.count == 36 and norm.flops == 4.0 * 100 * (32 + 8) * 128


# ---- Hugging Face config.json -------------------------------------------------------------------
# What config.json does not hold: names, sources, the card's counts and the published FP8 checkpoint.
ARCHITECTURE = {
    "id",
    "name",
    "family",
    "sources",
    "published_params_b",
    "published_params_rounding_b",
    "notes",
    "fp8_checkpoint",
}


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.json")), ids=lambda p: p.stem)
def test_config_json_round_trips_to_the_shipped_model(path):
    imported = load_hf_config(path)
    shipped = get_model(path.stem)
    assert imported.id == path.stem
    assert imported.model_dump(exclude=ARCHITECTURE | {"vision_params_b"}) == shipped.model_dump(
        exclude=ARCHITECTURE | {"vision_params_b"}
    )
    assert imported.param_counts() == shipped.param_counts()


def test_every_family_has_a_round_trip_fixture():
    families = {
        json.loads(p.read_text()).get("text_config", {}).get("model_type") or json.loads(p.read_text())["model_type"]
        for p in CONFIGS.glob("*.json")
    }
    aliases = {"gemma3_text": "gemma3", "llama4_text": "llama4", "kimi_k2": "deepseek_v3"}
    assert {aliases.get(f, f) for f in families} >= set(SUPPORTED_FAMILIES)


@pytest.mark.parametrize(
    "config, message",
    [
        ({"model_type": "bert", "hidden_size": 8}, "model_type 'bert' is not supported; supported: llama, mistral"),
        ({}, "no 'model_type' field: not a Hugging Face config.json; supported model types: llama"),
        (
            {"model_type": "llama", "num_hidden_layers": 2},
            "missing field 'hidden_size' (needed for model_type 'llama')",
        ),
        ([1, 2], "a config.json holds one JSON object"),
        (
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "intermediate_size": 128,
                "vocab_size": -5,
            },
            "field 'vocab_size' must be an integer from 1 to 1,048,576 (or null), got -5",
        ),
        (
            {
                "model_type": "gpt_oss",
                "hidden_size": 64,
                "num_hidden_layers": 3,
                "num_attention_heads": 4,
                "intermediate_size": 64,
                "vocab_size": 10,
                "max_position_embeddings": 512,
                "num_local_experts": 4,
                "num_experts_per_tok": 2,
                "layer_types": ["full_attention", "sliding_attention", "full_attention"],
            },
            "global attention on layers [0, 2] is not one every n layers",
        ),
    ],
)
def test_config_errors_name_the_problem(config, message):
    with pytest.raises(
        DataError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")
    ):
        model_from_hf_config(config)


def test_config_parsing_is_strict_and_bounded():
    with pytest.raises(DataError, match="NaN is not allowed"):
        parse_hf_config('{"model_type": "llama", "hidden_size": NaN}')
    with pytest.raises(DataError, match="more than a config.json holds"):
        parse_hf_config(" " * (2 << 20))
    with pytest.raises(DataError, match="not valid JSON"):
        parse_hf_config("[" * 100_000)


def test_every_command_takes_a_config_json(tmp_path):
    path = tmp_path / "my-qwen" / "config.json"
    path.parent.mkdir()
    path.write_text((CONFIGS / "qwen3-8b.json").read_text())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["analyze", "--model", str(path), "--phase", "decode", "--seq-len", "100", "--json"]) == 0
    data = json.loads(out.getvalue())
    assert data["model"] == "my-qwen"
    shipped = io.StringIO()
    with contextlib.redirect_stdout(shipped):
        main(["analyze", "--model", "qwen3-8b", "--phase", "decode", "--seq-len", "100", "--json"])
    assert data["total"] == json.loads(shipped.getvalue())["total"]


# ---- FLOPs of a new architecture against torch's FlopCounterMode --------------------------------
torch = pytest.importorskip("torch")


def test_a_tiny_llama4_layer_pair_matches_flop_counter():
    """A two-layer Llama 4-style model from a config.json dict: layer 0 a dense SwiGLU of
    intermediate_size_mlp, layer 1 a top-1 MoE with a shared expert (interleave step 2), GQA.
    Built in torch with random weights; its matmul FLOPs equal the engine's."""
    from torch.utils.flop_counter import FlopCounterMode

    h, heads, kv, hd, inter, inter_mlp, experts = 64, 4, 2, 16, 96, 128, 4
    config = {
        "model_type": "llama4",
        "text_config": {
            "model_type": "llama4_text",
            "hidden_size": h,
            "num_hidden_layers": 2,
            "num_attention_heads": heads,
            "num_key_value_heads": kv,
            "head_dim": hd,
            "intermediate_size": inter,
            "intermediate_size_mlp": inter_mlp,
            "vocab_size": 100,
            "max_position_embeddings": 4096,
            "num_local_experts": experts,
            "num_experts_per_tok": 1,
            "interleave_moe_layer_step": 2,
            "attention_chunk_size": 8192,
        },
    }
    model = model_from_hf_config(config, "tiny-llama4")
    assert model.moe_layers == 1 and model.dense_mlp_layers == 1
    nn = torch.nn
    torch.manual_seed(0)

    def mlp(width):
        return nn.ModuleList(
            [nn.Linear(h, width, bias=False), nn.Linear(h, width, bias=False), nn.Linear(width, h, bias=False)]
        )

    def run_mlp(m, x):
        return m[2](nn.functional.silu(m[0](x)) * m[1](x))

    layers = []
    for i in range(2):
        layer = nn.ModuleDict(
            {
                "q": nn.Linear(h, heads * hd, bias=False),
                "k": nn.Linear(h, kv * hd, bias=False),
                "v": nn.Linear(h, kv * hd, bias=False),
                "o": nn.Linear(heads * hd, h, bias=False),
            }
        )
        if i == 1:
            layer["router"] = nn.Linear(h, experts, bias=False)
            layer["experts"] = nn.ModuleList(mlp(inter) for _ in range(experts))
            layer["shared"] = mlp(inter)
        else:
            layer["mlp"] = mlp(inter_mlp)
        layers.append(layer)

    batch, seq = 2, 24
    x = torch.randn(batch, seq, h)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        for i, layer in enumerate(layers):
            q = layer["q"](x).view(batch, seq, heads, hd).transpose(1, 2)
            k = layer["k"](x).view(batch, seq, kv, hd).transpose(1, 2).repeat_interleave(heads // kv, 1)
            v = layer["v"](x).view(batch, seq, kv, hd).transpose(1, 2).repeat_interleave(heads // kv, 1)
            scores = (q @ k.transpose(-1, -2) / math.sqrt(hd)).softmax(-1)
            x = x + layer["o"]((scores @ v).transpose(1, 2).reshape(batch, seq, heads * hd))
            flat = x.reshape(batch * seq, h)
            if i == 1:
                chosen = layer["router"](flat).argmax(-1)
                out = run_mlp(layer["shared"], flat)
                for e in range(experts):
                    rows = (chosen == e).nonzero(as_tuple=True)[0]
                    if rows.numel():
                        out = out.index_add(0, rows, run_mlp(layer["experts"][e], flat[rows]))
            else:
                out = run_mlp(layer["mlp"], flat)
            x = x + out.view(batch, seq, h)
    counted = counter.get_total_flops()
    modelled = sum(
        float(np.sum(op.flops)) * op.count
        for op in step_ops(Workload(model, "prefill", batch, seq, attention="naive"))
        if op.meta.get("kind") in ("matmul", "attention") and op.group != "logits"
    )
    assert modelled == pytest.approx(counted, rel=1e-9)


def test_an_odd_rotary_width_is_refused_with_the_field_named(capsys):
    """RoPE turns pairs of dimensions: a head width of 63 (2,016 / 32) built no model and the measured
    paths crashed inside torch. Refused as the config is read, the field named; an even explicit
    head_dim on a hidden size the heads do not divide is a model (as transformers builds it)."""
    base = {
        "model_type": "llama",
        "hidden_size": 2016,
        "intermediate_size": 8192,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 2,
        "vocab_size": 1000,
        "max_position_embeddings": 4096,
    }
    with pytest.raises(DataError, match=r"field 'head_dim' must be even .* got 63 \(hidden_size 2016 // num_"):
        model_from_hf_config(base, origin="odd.json")
    with pytest.raises(DataError, match=r"field 'head_dim' must be even .* got 63$"):
        model_from_hf_config({**base, "head_dim": 63}, origin="odd.json")
    assert model_from_hf_config({**base, "hidden_size": 2047, "head_dim": 64}, origin="even.json").head_dim == 64
    text = {**base, "model_type": "llama4_text", "head_dim": 65, "num_local_experts": 4, "num_experts_per_tok": 1}
    nested = {"model_type": "llama4", "text_config": text}
    with pytest.raises(DataError, match=r"field 'text_config.head_dim' must be even"):
        model_from_hf_config(nested, origin="nested.json")


def test_model_show_prints_sections_as_fields_and_no_none(capsys):
    assert main(["model", "show", "deepseek-v3"]) == 0
    out = capsys.readouterr().out
    assert "None" not in out and "{" not in out
    assert "mla: q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64" in out
