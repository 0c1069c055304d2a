"""One measurement exported several times counts once (roofline.sample_twins)."""

from __future__ import annotations

import collections

import pytest

from roofline.sample_twins import SAME_RUN_REASON, mark_twins
from roofline.silicon_sample import load_silicon_sample, why_not_scored

BASE = {
    "system": "b200_sxm",
    "backend": "sglang",
    "precision": "fp4",
    "isl": "1024",
    "osl": "1024",
    "batch_size": "32.0",
    "silicon_ttft_ms": "7101.497480100079",
    "silicon_tpot_ms": "18.621108686591846",
    "mode": "agg",
}


def run(run_id: str, source: str, **changes: str) -> dict[str, str]:
    return BASE | {"id": run_id, "silicon_data_source": source} | changes


def test_the_row_that_records_the_most_is_kept_and_the_others_point_to_it():
    dump = run("dump", "db-dump/2026-04-27; config_id=88; measured=2025-11-10T00:00:00.000Z")
    april = run("april", "source_file=2026-04-06.csv; model=DeepSeek-R1; measured=2025-11-10T00:00:00.000Z")
    march = run("march", "source_file=2026-03-25.csv; model=DeepSeek-R1; measured=2025-11-10T05:32:44Z")
    # The time of day decides first, wherever the row stands in the file.
    marked = mark_twins([dump, april, march])
    assert [r.get("same_as") for r in marked] == ["march", "march", None]
    # Without a time of day, the row whose source names the model.
    assert [r.get("same_as") for r in mark_twins([dump, april])] == ["april", None]
    # Where the rows record as much, the first in the file.
    assert [r.get("same_as") for r in mark_twins([april, april | {"id": "again"}])] == [None, "april"]
    # The rows given are not changed.
    assert "same_as" not in dump and "same_as" not in april


@pytest.mark.parametrize(
    "change",
    [
        {"silicon_ttft_ms": "7101.49748011"},  # another measured figure: another run
        {"batch_size": "16.0"},
        {"system": "b300"},
        {"backend": "vllm"},
        {"isl": "8192"},
        {"precision": "fp8"},
        {"silicon_data_source": "db-dump/2026-04-27; measured=2025-11-11T00:00:00.000Z"},  # another day
    ],
)
def test_rows_that_differ_in_what_was_run_or_measured_are_two_runs(change):
    one = run("one", "db-dump/2026-04-27; measured=2025-11-10T00:00:00.000Z")
    two = run("two", "source_file=2026-04-06.csv; measured=2025-11-10T00:00:00.000Z") | change
    assert [r.get("same_as") for r in mark_twins([one, two])] == [None, None]


def test_rows_without_both_measured_figures_are_never_twins():
    for blank in (
        {"silicon_ttft_ms": ""},
        {"silicon_tpot_ms": "n/a"},
        {"silicon_ttft_ms": "nan"},
        {"silicon_tpot_ms": "inf"},
    ):
        one = run("one", "x", **blank)
        assert [r.get("same_as") for r in mark_twins([one, one | {"id": "two"}])] == [None, None]


def test_the_clients_are_read_from_the_source_where_it_records_them():
    # DeepSeek-R1 FP8 on eight H200s with TensorRT-LLM and attention data parallelism, 64 clients:
    # the 2026-03-25 export writes batch_size 16 (attention DP 8), the 2026-04-06 one 2 (DP 64).
    march = run("march", "source_file=2026-03-25.csv; silicon_concurrency=64; measured=2026-01-05T10:00:04Z")
    april = run("april", "source_file=2026-04-06.csv; silicon_concurrency=64; measured=2026-01-05T00:00:00.000Z")
    marked = mark_twins([march | {"batch_size": "16.0"}, april | {"batch_size": "2.0"}])
    assert [r.get("same_as") for r in marked] == [None, "march"]
    # Other clients are another run, whatever batch_size says.
    other = run("other", "source_file=2026-04-06.csv; silicon_concurrency=32; measured=2026-01-05T00:00:00.000Z")
    assert [r.get("same_as") for r in mark_twins([march, other])] == [None, None]


def test_a_row_kept_without_an_id_is_still_named():
    one, two = run("", "a"), run("two", "b")
    assert [r.get("same_as") for r in mark_twins([one, two])] == [None, "row 1 of the sample"]


def test_the_exports_last_digits_do_not_split_a_run():
    # DeepSeek-R1 FP4 on four B200s with TensorRT-LLM, 16 clients, measured 2026-02-03: the db-dump
    # writes 181.12318591593066 ms and 11.966515769437363 ms, the 2026-03-25 export ...063 and ...365.
    dump = run("dump", "db-dump/2026-04-27; measured=2026-02-03T00:00:00.000Z")
    march = run("march", "source_file=2026-03-25.csv; measured=2026-02-03T17:34:19Z")
    dump |= {"silicon_ttft_ms": "181.12318591593066", "silicon_tpot_ms": "11.966515769437363"}
    march |= {"silicon_ttft_ms": "181.12318591593063", "silicon_tpot_ms": "11.966515769437365"}
    assert [r.get("same_as") for r in mark_twins([dump, march])] == ["march", None]


def test_a_copy_rounded_to_hundredths_is_the_run_it_rounds():
    # Kimi-K2.5 on eight B200s with vLLM 0.15.1, 1,024/1,024 tokens, 64 clients: the 2026-03-25
    # export writes TTFT 328.86881737613294 ms; kimi-k2.5-gap-analysis.csv copies it as 328.87.
    full = run("march", "source_file=2026-03-25.csv; measured=2026-03-24T20:03:09Z")
    full |= {"silicon_ttft_ms": "328.86881737613294", "silicon_tpot_ms": "28.536114501953125"}
    copy = run("copy", "source_file=kimi-k2.5-gap-analysis.csv")
    copy |= {"silicon_ttft_ms": "328.87", "silicon_tpot_ms": "28.54"}
    # The copy points to the run, wherever it stands in the file; the run is never marked.
    assert [r.get("same_as") for r in mark_twins([copy, full])] == ["march", None]
    assert [r.get("same_as") for r in mark_twins([full, copy])] == [None, "march"]
    # One figure off by 0.01 ms, or another setup: another run.
    for change in (
        {"silicon_ttft_ms": "328.86"},
        {"silicon_tpot_ms": "28.55"},
        {"batch_size": "16.0"},
        {"isl": "8192"},
    ):
        assert [r.get("same_as") for r in mark_twins([full, copy | change])] == [None, None], change
    # The same copy in exponent form; a copy in whole milliseconds is tied to no run.
    assert mark_twins([full, copy | {"silicon_ttft_ms": "3.2887e2"}])[1].get("same_as") == "march"
    assert mark_twins([full, copy | {"silicon_ttft_ms": "329", "silicon_tpot_ms": "29"}])[1].get("same_as") is None
    # Two runs that round to it: the one the exact rule would keep (a time of day), in either order.
    other = run("dump", "db-dump/2026-04-27; measured=2026-03-24T00:00:00.000Z")
    other |= {"silicon_ttft_ms": "328.871", "silicon_tpot_ms": "28.5361"}
    assert mark_twins([other, full, copy])[2]["same_as"] == mark_twins([copy, full, other])[0]["same_as"] == "march"
    # Two rows both written to hundredths are compared as they are written (the exact rule above).
    rounded = full | {"silicon_ttft_ms": "328.87", "silicon_tpot_ms": "28.54"}
    assert [r.get("same_as") for r in mark_twins([rounded, copy])] == [None, None]


def test_a_twin_is_not_scored_and_explain_names_the_row_kept():
    from roofline.validate_explain import explain, render_explain

    twin = run("dump", "db-dump/2026-04-27") | {"same_as": "march"}
    assert why_not_scored(twin) == SAME_RUN_REASON
    with pytest.raises(ValueError, match=r"the same run as another row .*: 2026_04_06_deepseek_r1_b200_sxm_sglang"):
        explain("dsr1_b200_sglang_fp4_agg_1024x1024_c32_cfg88")
    # ... and the row kept names its repeats.
    kept = explain("2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c32_tp4_ep1_212")
    assert kept["repeats"] == ["dsr1_b200_sglang_fp4_agg_1024x1024_c32_cfg88"]
    assert "The sample repeats this run as: dsr1_b200_sglang_fp4_agg_1024x1024_c32_cfg88" in render_explain(kept)


def test_the_shipped_sample_scores_each_run_once():
    """InferenceX's three exports repeat most runs measured before March 2026, and two gap analyses
    copy 123 of its runs rounded: 5,221 rows hold 3,780 runs. DeepSeek-R1 on four B200s with SGLang
    at 32 clients (measured 2025-11-10, TTFT 7,101 ms) is in the db-dump as DeepSeek-V3 and in the
    2026-04-06 export as DeepSeek-R1."""
    rows = load_silicon_sample()
    kept = [r for r in rows if not r.get("same_as")]
    assert (len(rows), len(kept)) == (5221, 3780)
    copies = [r for r in rows if "gap-analysis.csv" in r["silicon_data_source"]]
    assert len(copies) == 123 and all(r.get("same_as") for r in copies)
    ids = {r["id"] for r in rows}
    assert all(r["same_as"] in ids and r["same_as"] in {k["id"] for k in kept} for r in rows if r.get("same_as"))
    same = [r for r in rows if r["silicon_ttft_ms"] == "7101.497480100079"]
    assert {r["model_path"] for r in same} == {"deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1"}
    assert [r["id"] for r in same if not r.get("same_as")] == [
        "2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c32_tp4_ep1_212"
    ]
    # The row kept never loses what its twin knew: a repeat is scored exactly where the row kept is,
    # but for repeats whose export wrote their attention data parallel ranks as TP x EP.
    by_id = {r["id"]: r for r in rows}
    for twin in (r for r in rows if r.get("same_as")):
        alone = {k: v for k, v in twin.items() if k != "same_as"}
        kept_ok, alone_ok = why_not_scored(by_id[twin["same_as"]]) is None, why_not_scored(alone) is None
        if kept_ok != alone_ok and "gap-analysis.csv" in twin["silicon_data_source"]:
            # Kimi-K2.5 on four B200s with vLLM 0.17.0: both exports write the ranks of InferenceX's
            # { tp: 4, ep: 4 } so that they cannot be the run's; the copy's own reading of the same
            # config (TP 4, EP 4) is no more certain, its script passing no expert-parallel flag.
            assert why_not_scored(by_id[twin["same_as"]]).startswith("attention data parallel over 16 GPUs"), twin["id"]
            continue
        assert kept_ok or not alone_ok, twin["id"]
        if kept_ok != alone_ok:
            assert why_not_scored(alone).startswith("attention data parallel"), twin["id"]
    # No two runs kept carry the same measured figures on the same setup.
    seen = collections.Counter(
        (r["system"], r["backend"], r["isl"], r["osl"], r["batch_size"])
        + tuple(f"{float(r[f]):.12g}" for f in ("silicon_ttft_ms", "silicon_tpot_ms"))
        for r in kept
        if r["silicon_ttft_ms"] and r["silicon_tpot_ms"]
    )
    assert max(seen.values()) == 1
