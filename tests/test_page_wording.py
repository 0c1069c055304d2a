"""Words on the pages that had read wrong: a caption naming a regime the legend does not, a waste
of 0 B said as a waste, a table with no heading."""

from __future__ import annotations

from tests.page_helpers import page


def test_the_kv_memory_caption_names_the_last_blocks_waste_only_where_there_is_some():
    # Context 1,000 in 16-token blocks: 63 blocks hold 1,008 slots, 8 of them empty.
    partly = page("views/kv_page.py", view="Memory", context="1000")
    (line,) = [c.value for c in partly.caption if c.value.startswith("Per sequence")]
    assert "is the partly filled last block (16-token blocks)" in line and "of which 0 B" not in line
    whole = page("views/kv_page.py", view="Memory", context="8192")  # 512 whole blocks
    (line,) = [c.value for c in whole.caption if c.value.startswith("Per sequence")]
    assert "none of it a partly filled last block: the context fills whole 16-token blocks" in line
    # Reserved: 256 MiB (268 MB) of non-torch memory, a band too thin on a 0-190 GB axis to read
    # without its size; at TP=2 the communication buffers' 1.95 GB join it.
    assert "Reserved (268 MB on each device) is non-torch memory (CUDA context, library workspaces):" in line
    tp2 = page("views/kv_page.py", view="Memory", tp="2")
    (line,) = [c.value for c in tp2.caption if c.value.startswith("Per sequence")]
    assert (
        "Reserved (2.22 GB on each device) is non-torch memory (CUDA context, library workspaces, communication" in line
    )


def test_the_disaggregation_table_has_a_heading_and_says_whose_devices_it_counts():
    at = page("views/serving_page.py", view="Techniques")
    assert any(m.value.startswith("**Prefill/decode disaggregation at batch") for m in at.markdown)
    (table,) = [d.value for d in at.dataframe if "KV transfer" in d.value.columns]
    one_pool = table[table["setup"].str.startswith("one pool")].iloc[0]
    assert one_pool["KV per prompt"] == one_pool["KV transfer"] == "—"  # no KV moves between devices
    assert any("its devices count in the tokens/s per device" in c.value for c in at.caption)


def test_the_llm_roofline_caption_names_the_regime_its_legend_names():
    at = page("views/llm_page.py")
    (line,) = [c.value for c in at.caption if c.value.startswith("Marker area")]
    assert "overhead-bound" in line and "launch-bound" not in line


def test_the_hardware_table_leads_with_what_a_roofline_rests_on():
    """Capacity, bandwidth, the bf16 and fp8 peaks and the ridge before the rest: at 1440 px the table
    shows about ten columns before it scrolls, and these had been past them."""
    at = page("views/hardware_page.py")
    columns = list(at.dataframe[0].value.columns)
    assert columns[:7] == [
        "id",
        "device",
        "memory GB",
        "bandwidth TB/s",
        "bf16 TFLOPS",
        "fp8 TFLOPS",
        "bf16 ridge FLOP/B",
    ]
    assert {"fp64 TFLOPS", "TDP W", "source"} <= set(columns)  # nothing dropped


def test_the_gemm_table_puts_the_ideal_bounds_three_terms_beside_it():
    """Compute, memory and the kernel floor, the largest of which names the regime, come right after
    the regime: at 1440 px they had been past the columns shown."""
    at = page("views/roofline_page.py")
    table = next(d.value for d in at.dataframe if "regime" in d.value.columns)
    first = ["device", "time", "ideal bound", "regime", "compute time", "memory time", "kernel floor"]
    assert list(table.columns[:7]) == first
    assert {"expected TFLOP/s", "attainable (ideal bound) TFLOP/s", "rests on"} <= set(table.columns)


def test_the_op_table_gives_each_ops_intensity_beside_its_regime():
    at = page("views/llm_page.py", view="Op table")
    table = next(d.value for d in at.dataframe if "op" in d.value.columns and "regime" in d.value.columns)
    columns = list(table.columns)
    assert columns[columns.index("regime") + 1] == "FLOP/B"
