"""One run of the silicon sample explained: its steady-state step op by op (where each op's time
comes from, on the datasheet and on its engine's tables), its first token under its load beside
its prompts alone, and the setup its source documents (``validate --explain RUN_ID``)."""

from __future__ import annotations

from pathlib import Path

from roofline.engines import engine_profile
from roofline.format import ranks_of
from roofline.inferencex_runs import SPECULATIVE_REASON, run_decoding
from roofline.silicon_sample import _number, documented_kv_dtype, documented_setup, load_silicon_sample
from roofline.validate import score_rows


def explain(run_id: str, path: Path | None = None) -> dict[str, object]:
    """One run's prediction op by op: where each op's time comes from, on both columns."""
    sample = load_silicon_sample(path)
    rows = [r for r in sample if r["id"] == run_id]
    if not rows:
        raise ValueError(f"no run {run_id!r} in the silicon sample")
    results, skipped = score_rows(rows, tables=True, with_ops=True, exact=True)
    decoding = run_decoding(rows[0])
    if not results:
        speculative = any(reason.startswith(SPECULATIVE_REASON) for reason in skipped)
        where = f" ({decoding.where})" if decoding and speculative else ""
        if rows[0].get("same_as"):
            where = f": {rows[0]['same_as']}"
        raise ValueError(f"run {run_id!r} is not scored: {', '.join(skipped)}{where}")
    documented = documented_kv_dtype(rows[0])
    kv = f"{documented[0]} ({documented[1]})" if documented else "bf16 (the engines' default; the source records none)"
    setup = documented_setup(rows[0])
    scheduler = f"{setup.words()} ({setup.where})" if setup else "the engine's defaults (the source records none)"
    if (profile := engine_profile(rows[0]["backend"])) and not profile.chunked_prefill:
        scheduler += f"; prompts kept whole, as {profile.name} runs them unless enable_chunked_prefill is set"
    extra = {"kv_cache": kv, "scheduler": scheduler}
    if repeats := [r["id"] for r in sample if r.get("same_as") == run_id]:
        extra["repeats"] = repeats  # the sample's other rows of this run (roofline.sample_twins)
    if decoding:
        extra["decoding"] = f"{decoding.kind} ({decoding.where})"
    extra["ttft"] = _first_token(rows[0])
    if rows[0].get("recorded_parallelism"):
        extra["parallelism"] = (
            f"TP {_number(rows[0], 'tp_size'):g}, experts split {_number(rows[0], 'moe_tp_size'):g} x "
            f"{_number(rows[0], 'moe_ep_size'):g} (TP x EP) "
            f"as its config ran it; the row records {rows[0]['recorded_parallelism']} (TP x EP as TP)"
        )
    return results[0] | extra


def _first_token(row: dict[str, str]) -> dict[str, object]:
    """The run's mean TTFT as ``validate --load`` simulates it at its clients, beside the same run
    with one client (a rank, under attention data parallelism): its prompts alone in the server, so
    the gap between the two is the waiting and the steps shared with the other clients' work, and
    the second is the prefill itself."""
    from roofline.validate_load import simulate_row

    cache: dict = {}
    loaded, alone = simulate_row(row, cache), simulate_row({**row, "batch_size": "1"}, cache)
    return {
        "measured_ms": loaded["measured_ttft_ms"],
        "clients": f"{loaded['concurrency']} clients" + (" a rank" if loaded.get("attention_dp") else ""),
        **{f"{c}_ms": loaded[f"{c}_ttft_ms"] for c in ("datasheet", "tables") if f"{c}_ttft_ms" in loaded},
        **{f"one_client_{c}_ms": alone[f"{c}_ttft_ms"] for c in ("datasheet", "tables") if f"{c}_ttft_ms" in alone},
    }


def _ttft_line(t: dict[str, object]) -> str:
    def both(prefix: str) -> str:
        return ", ".join(
            f"{c} {t[prefix + c + '_ms']:.1f} ms" for c in ("datasheet", "tables") if prefix + c + "_ms" in t
        )

    return (
        f"TTFT measured {t['measured_ms']:.1f} ms; simulated at its {t['clients']} (validate --load): "
        f"{both('')}; with one client, its prompts alone in the server: {both('one_client_')}"
    )


def _clients(result: dict[str, object]) -> str:
    """The run's concurrency, and under attention data parallelism its ranks and each one's share."""
    d, c = int(result.get("attention_dp") or 1), result["concurrency"]
    if d <= 1:
        return f"concurrency {c}"
    return f"{ranks_of(int(result['tp']), d, 'GPU')}, concurrency {c} a rank ({c * d} in all)"


def render_explain(result: dict[str, object]) -> str:
    lines = [
        f"{result['id']}: {result['model']} on {result['device']}, "
        f"{(result['engine'] + ' ' + (result['engine_version'] or '')).strip()}, "
        f"TP {result['tp']}, {_clients(result)}, {result['isl']} in / {result['osl']} out",
        f"TPOT measured {result['measured_tpot_ms']:.2f} ms, datasheet {result['datasheet_tpot_ms']:.2f} ms, "
        f"tables {result['tables_tpot_ms']:.2f} ms",
        *([_ttft_line(result["ttft"])] if result.get("ttft") else []),
        f"KV cache: {result.get('kv_cache', 'bf16')}",
        f"Scheduler (validate --load): {result.get('scheduler', 'the engine defaults')}",
        *([f"Parallelism: {result['parallelism']}"] if result.get("parallelism") else []),
        *([f"Decoding: {result['decoding']}"] if result.get("decoding") else []),
        *([f"The sample repeats this run as: {', '.join(result['repeats'])}"] if result.get("repeats") else []),
        f"{'op':<48} {'count':>5} {'datasheet ms':>12} {'tables ms':>10}  source",
    ]
    for op in result["ops"]:
        lines.append(
            f"{op['name'][:48]:<48} {op['count']:>5} {op['datasheet_s'] * 1e3:>12.3f} {op['tables_s'] * 1e3:>10.3f}  "
            f"{op['source']}"
        )
    return "\n".join(lines)
