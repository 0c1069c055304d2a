"""MLA's projections read off an engine's kernel tables (``roofline.tables.source``).

- The absorbed per-head products of MLA decode (each head's query through its W_UK slice before
  the latent attention, the output through W_UV after it) are one batched GEMM each; the tables
  time them by tokens and heads per GPU (aiconfigurator's ``mla_bmm``: ``mla_gen_pre`` and
  ``mla_gen_post``). They run in the dtype of the checkpoint's ``kv_b_proj``, from which they are
  taken: bf16 for a bf16 checkpoint, fp8 for an fp8 one (where the engine has an fp8 kernel; vLLM
  keeps them in bf16 and its table times only that), and bf16 for an NVFP4 one, whose published
  checkpoints leave the q and kv projections unquantized (``NVFP4_KV_B``): the step's ops are
  built so (``roofline.ops.kernels.mla_qkv_precision``), datasheet bound and all.
- The down and up projections before MLA attention are plain GEMMs: q_a and kv_a fused into one
  over the hidden size (as SGLang, TensorRT-LLM and vLLM run DeepSeek-V3's), then q_b from the
  query's latent to the heads. Each is read in the GEMM table of the op's weights and the two are
  added; in bf16 for an NVFP4 checkpoint, as above.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

BMM_DTYPES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8"}  # kv_b_proj's weights -> bmm_dtype
NVFP4_KV_B = (
    "NVFP4 checkpoints keep MLA's q and kv projections in bf16 (nvidia/DeepSeek-V3.1-NVFP4's "
    "hf_quant_config.json excludes every layer's; nvidia/DeepSeek-R1-0528-FP4-v2's model card says it "
    "quantizes, beyond the first version, only the attention's wo)"
)


def absorb_answer(tables, op):
    """The absorbed W_UK or W_UV product of one MLA decode step, per occurrence, in the table of
    kv_b_proj's weight dtype (the op's ``meta['weight_dtype']``, which
    ``roofline.ops.kernels.mla_qkv_precision`` has already made bf16 for an NVFP4 checkpoint)."""
    from roofline.tables.source import OpAnswer

    meta = op.meta
    weights = str(meta.get("weight_dtype", ""))
    dtype = BMM_DTYPES.get(weights)
    if dtype is None:
        return OpAnswer(None, f"MLA absorbed product with {weights or 'unknown'} weights: no table")
    note = NVFP4_KV_B if meta.get("nvfp4_kept") else ""
    keys = {"bmm_dtype": dtype, "op_name": str(meta["mla_bmm"])}
    if dtype == "fp8" and tables.predictor.grid("mla_bmm", keys) is None:
        from roofline.tables.predict import ENGINE_NAMES

        keys["bmm_dtype"] = "bfloat16"
        engine = ENGINE_NAMES.get(tables.predictor.engine, tables.predictor.engine)
        note = f"{engine} runs it in bf16 (its table times no fp8 one)"
    tokens = np.maximum(np.asarray(meta["m"], float), 1.0)
    heads = float(meta["matrices"])
    answer = tables.read("mla_bmm", keys, (tokens, heads), f"{keys['bmm_dtype']} MLA absorbed product")
    return replace(answer, label=f"{answer.label}; {note}") if note and answer.seconds is not None else answer


def parts_answer(tables, op):
    """A fused projection of several GEMMs (``meta['parts']``: their (n, k)), each read at the
    op's rows in the GEMM table of its weights, added; no answer unless every part has one."""
    from roofline.tables.source import OpAnswer

    parts = op.meta["parts"]
    per_param = float(np.asarray(op.weight_bytes, float).reshape(-1)[0]) / sum(n * k for n, k in parts)
    note = NVFP4_KV_B if op.meta.get("nvfp4_kept") else ""
    total, labels, extrapolated = 0.0, [], False
    for n, k in parts:
        meta = {key: v for key, v in op.meta.items() if key != "parts"} | {"n": n, "k": k, "matrices": 1}
        answer = tables.gemm(replace(op, meta=meta, weight_bytes=per_param * n * k))
        if answer.seconds is None:
            return OpAnswer(None, f"its {int(n)}x{int(k)} GEMM: {answer.label}")
        total = total + np.asarray(answer.seconds, float)
        labels.append(answer.label)
        extrapolated = extrapolated or answer.extrapolated
    label = labels[0] if len(set(labels)) == 1 else "; ".join(dict.fromkeys(labels))
    return OpAnswer(total, f"{label} ({len(parts)} GEMMs)" + (f"; {note}" if note else ""), extrapolated)
