"""The model database: schema, parameter counts against published totals, KV bytes per token."""

from __future__ import annotations

import pytest

from roofline.datafiles import DataError
from roofline.models import SHIPPED_MODEL_DIR, get_model, load_model_file, load_models

REQUIRED = {
    "llama-2-7b",
    "llama-2-70b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "llama-3.2-1b",
    "mistral-7b-v0.1",
    "mixtral-8x7b",
    "mixtral-8x22b",
    "qwen2.5-7b",
    "qwen2.5-72b",
    "gemma-2-9b",
    "phi-3-mini",
    "falcon-7b",
    "gpt-3-175b",
    "deepseek-v3",
}


def test_every_shipped_model_loads_with_a_source():
    models = load_models()
    assert REQUIRED <= set(models)
    assert all(m.sources for m in models.values())


def test_attention_kinds_cover_what_people_serve():
    kinds = {m.id: m.attention_kind for m in load_models().values()}
    assert kinds["llama-2-7b"] == "MHA" and kinds["llama-3.1-8b"] == "GQA"
    assert kinds["falcon-7b"] == "MQA" and kinds["deepseek-v3"] == "MLA"
    assert get_model("mistral-7b-v0.1").sliding_window == 4096


def test_llama_3_1_8b_parameters_by_hand():
    counts = get_model("llama-3.1-8b").param_counts()
    # attention per layer: q 4096*4096 + k,v 2*4096*1024 + o 4096*4096 = 41,943,040
    # MLP per layer: 3 * 4096 * 14336 = 176,160,768; two RMSNorms 2 * 4096 = 8,192
    per_layer = 41_943_040 + 176_160_768 + 8_192
    # embeddings and untied LM head 2 * 128256 * 4096 = 1,050,673,152; final norm 4096
    assert counts["total"] == 32 * per_layer + 1_050_673_152 + 4_096 == 8_030_261_248
    assert counts["total"] / 1e9 == pytest.approx(8.03, abs=0.005)  # model card: 8.03B


def test_mixtral_8x7b_parameters_by_hand():
    counts = get_model("mixtral-8x7b").param_counts()
    # per layer: attention 41,943,040 + router 4096*8 + 8 experts * 3*4096*14336 + norms 8,192
    per_layer = 41_943_040 + 32_768 + 8 * 176_160_768 + 8_192
    embeddings = 2 * 32000 * 4096
    assert counts["total"] == 32 * per_layer + embeddings + 4096
    assert counts["total"] / 1e9 == pytest.approx(46.7, rel=0.002)  # "46.7B total"
    # active: 2 of 8 experts -> 12.9B ("12.9B active")
    assert counts["active_per_token"] / 1e9 == pytest.approx(12.9, rel=0.005)


@pytest.mark.parametrize("model_id", sorted(REQUIRED))
def test_parameter_totals_match_published(model_id):
    model = get_model(model_id)
    assert model.param_counts()["total"] / 1e9 == pytest.approx(model.published_params_b, rel=0.005)


def test_deepseek_v3_active_parameters():
    # Technical report: 671B total, 37B activated per token.
    assert get_model("deepseek-v3").param_counts()["active_per_token"] / 1e9 == pytest.approx(37, rel=0.02)


def test_kv_bytes_per_token_by_hand():
    # MHA, Llama 2 7B: 2 (K,V) * 32 heads * 128 * 32 layers * 2 B = 524,288 B
    assert get_model("llama-2-7b").kv_bytes_per_token("bf16") == 524_288
    # GQA, Llama 3.1 8B: 2 * 8 KV heads * 128 * 32 * 2 B = 131,072 B
    assert get_model("llama-3.1-8b").kv_bytes_per_token("bf16") == 131_072
    # MQA, Falcon 7B: 2 * 1 * 64 * 32 * 2 B = 8,192 B
    assert get_model("falcon-7b").kv_bytes_per_token("bf16") == 8_192
    # MLA, DeepSeek-V3: (512 latent + 64 rotary key) * 61 layers * 2 B = 70,272 B
    assert get_model("deepseek-v3").kv_bytes_per_token("bf16") == 70_272
    # fp8 halves it
    assert get_model("llama-3.1-8b").kv_bytes_per_token("fp8") == 65_536


GOOD = (SHIPPED_MODEL_DIR / "llama-3.1-8b.toml").read_text()


def test_misspelt_key_is_rejected(tmp_path):
    path = tmp_path / "llama-3.1-8b.toml"
    path.write_text(GOOD.replace("num_kv_heads", "num_kv_head"))
    with pytest.raises(DataError) as err:
        load_model_file(path)
    assert "unknown field 'num_kv_head'" in str(err.value)
    assert "missing required field 'num_kv_heads'" in str(err.value)
    assert str(path) in str(err.value)


def test_heads_must_divide(tmp_path):
    path = tmp_path / "llama-3.1-8b.toml"
    path.write_text(GOOD.replace("num_kv_heads = 8", "num_kv_heads = 5"))
    with pytest.raises(DataError, match=r"num_heads \(32\) must be a multiple of num_kv_heads \(5\)"):
        load_model_file(path)


def test_user_model_folder(tmp_path):
    (tmp_path / "my-model.toml").write_text(GOOD.replace('id = "llama-3.1-8b"', 'id = "my-model"'))
    assert "my-model" in load_models(tmp_path)
