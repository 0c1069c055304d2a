"""Kernel tables: log-space interpolation worked by hand, the converter on a tiny synthetic
database, and the shipped H100 tables."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from roofline.tables import TablePredictor, store
from roofline.tables.grid import LogGrid, leave_one_out_log_errors, near_pair_log_differences


def test_power_law_between_points_is_exact():
    # t = 1 us x m on m = 1, 4, 16: halfway in log(m) between 1 and 4 is m = 2, t = 2 us.
    grid = LogGrid.from_rows([np.array([1, 4, 16])], np.array([1e-6, 4e-6, 16e-6]))
    log_t, extrapolated = grid((2.0,))
    assert math.exp(log_t) == pytest.approx(2e-6)
    assert not extrapolated


def test_flat_then_linear():
    # A launch-bound floor of 10 us up to m = 64, then linear: at m = 128 (between 64 and 256,
    # t = 10 and 40 us) the power law between the two neighbours gives 10 x 2 = 20 us.
    grid = LogGrid.from_rows([np.array([16, 64, 256])], np.array([10e-6, 10e-6, 40e-6]))
    assert math.exp(grid((32.0,))[0]) == pytest.approx(10e-6)
    assert math.exp(grid((128.0,))[0]) == pytest.approx(20e-6)


def test_extrapolation_continues_the_edge_slope():
    grid = LogGrid.from_rows([np.array([1, 4, 16])], np.array([1e-6, 4e-6, 16e-6]))
    log_t, extrapolated = grid((64.0,))
    assert extrapolated
    assert math.exp(log_t) == pytest.approx(64e-6)
    # Below the grid a falling edge is clamped to slope 0: the time at the edge.
    falling = LogGrid.from_rows([np.array([4, 16])], np.array([8e-6, 2e-6]))
    assert math.exp(falling((1.0,))[0]) == pytest.approx(8e-6)


def test_past_the_largest_size_time_grows_at_most_as_the_work_does():
    # A last segment that climbs steeply (t = 140 then 218 us from n = 51,200 to 65,536: slope 1.79
    # in log-log) carries on at slope 1 where the work grows in proportion: at n = 131,072, twice
    # the widest, 2 x 218 = 436 us; uncapped it would be 218 x 2^1.79 = 754 us.
    n = np.array([16384, 51200, 65536])
    t = np.array([46e-6, 140e-6, 218e-6])
    slope = math.log(218 / 140) / math.log(65536 / 51200)
    uncapped = LogGrid.from_rows([n], t)
    assert math.exp(uncapped((131072.0,))[0]) == pytest.approx(218e-6 * 2**slope)
    capped = LogGrid.from_rows([n], t, max_slopes=(1.0,))
    assert math.exp(capped((131072.0,))[0]) == pytest.approx(436e-6)
    # Inside the range nothing changes; a prompt's attention (work as length squared) keeps slope 2.
    assert capped((40000.0,))[0] == pytest.approx(uncapped((40000.0,))[0])
    square = LogGrid.from_rows([np.array([1024, 2048])], np.array([1e-3, 4e-3]), max_slopes=(2.0,))
    assert math.exp(square((4096.0,))[0]) == pytest.approx(16e-3)


def test_the_shipped_lm_head_of_llama_3_is_not_read_past_twice_the_widest_gemm():
    """vLLM's H100 table measures GEMMs up to 65,536 columns; Llama 3's LM head has 128,256."""
    p = TablePredictor.open("h100-sxm", "vllm", None)
    if p is None:
        pytest.skip("no vLLM H100 tables")
    grid = p.grid("gemm", {"gemm_dtype": "bfloat16"})
    widest = math.exp(grid((1.0, 65536.0, 4096.0))[0])
    head = math.exp(grid((1.0, 128256.0, 4096.0))[0])
    assert widest < head <= 128256 / 65536 * widest * (1 + 1e-9)


def test_two_axes_and_a_missing_corner():
    # t = m x n ns on a 2 x 2 grid: at (2, 2) bilinear in log space is exact, 4 ns.
    m = np.array([1, 1, 4, 4])
    n = np.array([1, 4, 1, 4])
    grid = LogGrid.from_rows([m, n], m * n * 1e-9)
    assert math.exp(grid((2.0, 2.0))[0]) == pytest.approx(4e-9)
    # Without the (4, 4) corner the three measured corners are averaged with weights 1/3 each:
    # exp((log 1 + log 4 + log 4) / 3) ns.
    partial = LogGrid.from_rows([m[:3], n[:3]], (m * n * 1e-9)[:3])
    assert math.exp(partial((2.0, 2.0))[0]) == pytest.approx(16 ** (1 / 3) * 1e-9)


def test_leave_one_out_of_a_power_law_is_zero():
    m = np.repeat([1, 2, 4, 8], 3)
    k = np.tile([16, 32, 64], 4)
    grid = LogGrid.from_rows([m, k], 1e-9 * m * k**2)
    errors = leave_one_out_log_errors(grid)
    assert set(errors) == {0, 1}
    assert len(errors[0]) == 2 * 3 and len(errors[1]) == 4 * 1
    assert np.allclose(np.concatenate(list(errors.values())), 0.0)


def test_near_pairs_show_a_tile_boundary_that_no_interpolation_sees():
    # m = 64, 65 and 128 on one n: 64 rows fill one 64-row tile, 65 need two. Latency 10 ns per
    # tile: 10, 20, 20 ns. Only 64 and 65 are less than 2% apart; they differ by log(2).
    m = np.array([64, 65, 128])
    grid = LogGrid.from_rows([m, np.full(3, 8)], 1e-9 * 10 * np.ceil(m / 64))
    pairs = near_pair_log_differences(grid)
    assert set(pairs) == {0} and np.allclose(pairs[0], math.log(2))
    # Leaving 65 out, its neighbours 64 and 128 predict it at 10 * 2^(log(65/64)/log(2)) ns: 10.2 ns
    # against 20 measured, an error the grid's own step explains.
    (err,) = leave_one_out_log_errors(grid)[0]
    assert math.exp(err) == pytest.approx(10 * 2 ** (math.log(65 / 64) / math.log(2)) / 20)


def _write_fake_database(root, rows):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    folder = root / "systems" / "data" / "h100_sxm" / "gemm" / "vllm" / "9.9.9"
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(folder / "gemm_perf.parquet")
    return root


def test_converter_keeps_the_fastest_kernel_and_the_predictor_reads_it(tmp_path, monkeypatch):
    from roofline.tables.convert import convert, find_systems_dir

    rows = []
    for m, ms in [(1, 0.010), (4, 0.010), (16, 0.020)]:
        for kernel, factor in [("slow", 2.0), ("fast", 1.0)]:
            rows.append(
                {
                    "kernel_source": kernel,
                    "gemm_dtype": "bfloat16",
                    "m": m,
                    "n": 4096,
                    "k": 4096,
                    "latency": ms * factor,
                }
            )
    _write_fake_database(tmp_path / "pkg", rows)
    out = tmp_path / "db"
    manifest = convert(find_systems_dir(tmp_path / "pkg"), out, package_version="0.0-test")
    assert [f["file"] for f in manifest["files"]] == ["h100-sxm/vllm-9.9.9.npz"]
    assert "Apache-2.0" in manifest["licence"]
    monkeypatch.setenv("ROOFLINE_KERNEL_DB", str(out))
    monkeypatch.setattr(store, "SHIPPED_DIR", tmp_path / "nowhere")
    monkeypatch.setattr(store, "USER_DIR", tmp_path / "nowhere")
    p = TablePredictor.open("h100-sxm", "vllm")
    assert p.version == "9.9.9"
    assert p.gemm(4, 4096, 4096).time_s == pytest.approx(10e-6, rel=1e-3)  # the fast kernel, ms -> s
    # m = 8 halfway (in log) between 4 (10 us) and 16 (20 us): 10 x sqrt(2) us.
    assert p.gemm(8, 4096, 4096).time_s == pytest.approx(10e-6 * 2**0.5, rel=1e-3)
    assert "vLLM 9.9.9 kernels, h100-sxm" in p.gemm(8, 4096, 4096).label
    # n off the single measured value: no answer, and the label says so.
    missing = p.gemm(8, 8192, 4096)
    assert missing.time_s is None and "outside the measured grid" in missing.label
    assert p.gemm(8, 4096, 4096, "fp8").time_s is None


shipped = pytest.mark.skipif(not (store.SHIPPED_DIR / "manifest.json").exists(), reason="no shipped kernel_db")


@shipped
def test_shipped_h100_vllm_gemm_reads_back_a_measured_point():
    p = TablePredictor.open("h100-sxm", "vllm")
    t = p.tables["gemm"]
    i = np.flatnonzero((t["gemm_dtype"] == "bfloat16") & (t["m"] == 64) & (t["n"] == 4096) & (t["k"] == 4096))[0]
    assert p.gemm(64, 4096, 4096).time_s == pytest.approx(float(t["latency_ms"][i]) * 1e-3, rel=1e-6)
    times = [p.gemm(m, 4096, 14336, "fp8").time_s for m in (1, 100, 1000, 10000)]
    assert all(a <= b for a, b in zip(times, times[1:]))
    # A large GEMM runs below the datasheet's 989 bf16 TFLOP/s, above half of it.
    t_big = p.gemm(8192, 8192, 8192).time_s
    assert 0.5 * 989e12 < 2 * 8192**3 / t_big < 989e12


@shipped
def test_shipped_attention_and_all_reduce():
    p = TablePredictor.open("h100-sxm", "vllm")
    decode = p.attention("decode", 64, 2048, 32, 8, 128)
    kv_bytes = 64 * 2048 * 8 * 128 * 2 * 2
    assert decode.time_s > kv_bytes / 3.35e12  # no faster than reading the cache at the datasheet rate
    longer = p.attention("decode", 64, 4096, 32, 8, 128)
    assert longer.time_s > decode.time_s
    assert p.attention("prefill", 1, 3000, 32, 8, 128).time_s > 0
    assert p.attention("decode", 64, 2048, 32, 8, 100).time_s is None  # head dim never measured
    ar = p.all_reduce(64 * 4096 * 2, 8)
    assert 1e-6 < ar.time_s < 1e-4
    assert TablePredictor.open("h100-sxm", "no-such-engine") is None


WHEEL = sorted(Path("/tmp/aic").glob("aiconfigurator_core-*.whl"))


@pytest.mark.skipif(not WHEEL, reason="no aiconfigurator-core wheel at /tmp/aic (pip download --no-deps)")
def test_tables_import_from_a_wheel(tmp_path, capsys):
    from roofline.cli import main

    out = tmp_path / "db"
    assert main(["tables", "import", "--source", str(WHEEL[-1]), "--out", str(out), "--devices", "h100-sxm"]) == 0
    assert "from aiconfigurator-core" in capsys.readouterr().out
    assert (out / "h100-sxm" / "vllm-0.24.0.npz").exists() and (out / "silicon_sample.csv.gz").exists()
    shipped_file = store.SHIPPED_DIR / "h100-sxm" / "vllm-0.24.0.npz"
    if shipped_file.exists():  # the shipped files are what the converter writes
        assert (out / "h100-sxm" / "vllm-0.24.0.npz").read_bytes() == shipped_file.read_bytes()


@shipped
def test_shipped_moe_reads_back_a_measured_point():
    p = TablePredictor.open("h100-sxm", "trtllm")
    t = p.tables["moe"]
    shape = {"hidden_size": 4096, "inter_size": 1536, "topk": 8, "num_experts": 128, "moe_tp_size": 4, "moe_ep_size": 1}
    mask = t["moe_dtype"] == "fp8_block"
    for column, value in shape.items():
        mask &= t[column] == value
    i = np.flatnonzero(mask & (t["num_tokens"] == 64))[0]
    got = p.moe(64, 4096, 1536, 8, 128, 4, 1, "fp8_block")
    assert got.time_s == pytest.approx(float(t["latency_ms"][i]) * 1e-3, rel=1e-6)
    assert p.moe(64, 4096, 1000, 8, 128, 4, 1, "fp8_block").time_s is None  # no such expert shape


@shipped
def test_mxfp4_experts_take_the_fastest_measured_kernel():
    p = TablePredictor.open("b200", "trtllm")
    shape = (64, 2880, 2880, 4, 128, 1, 1)
    both = [p.moe(*shape, weight_dtype=d).time_s for d in ("w4a16_mxfp4", "w4a8_mxfp4_mxfp8")]
    assert p.moe(*shape, weight_dtype="mxfp4").time_s == min(both)
    # Hopper has only the bf16-activation kernel.
    h100 = TablePredictor.open("h100-sxm", "vllm")
    assert (
        h100.moe(64, 2880, 2880, 4, 128, 1, 1, "mxfp4").time_s
        == h100.moe(64, 2880, 2880, 4, 128, 1, 1, "w4a16_mxfp4").time_s
    )


def _fake_engine_db(root, engine, system, gemm_rows, scale_rows=None, version="9.9.9"):
    """A tiny aiconfigurator-like database: one engine's GEMM table on one system, and its FP8
    scale-computation table when ``scale_rows`` are given."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    base = root / "systems" / "data" / system
    (base / "gemm" / engine / version).mkdir(parents=True)
    pd.DataFrame(gemm_rows).to_parquet(base / "gemm" / engine / version / "gemm_perf.parquet")
    if scale_rows:
        (base / "quantize" / engine / version).mkdir(parents=True)
        pd.DataFrame(scale_rows).to_parquet(base / "quantize" / engine / version / "computescale_perf.parquet")


def _open_only(tmp_path, monkeypatch):
    from tests.table_fixtures import install_converted

    install_converted(tmp_path, monkeypatch)


def test_fp8_gemm_loses_its_measured_dynamic_scale_computation(tmp_path, monkeypatch):
    """The FP8 GEMM tables were timed with a dynamic activation scale; the database timed that
    scale's computation apart, and an engine serving a checkpoint's static scales skips it. A file
    without that table keeps the GEMM as timed, and says why."""
    from types import SimpleNamespace

    from roofline.tables.predict import NO_SCALE_TABLE_NOTE, STATIC_SCALE_NOTE
    from roofline.tables.source import KernelTables

    gemm_ms = {4: 0.020, 16: 0.030, 64: 0.010}
    scale_ms = {4: 0.008, 16: 0.012, 64: 0.015}  # at m = 64 not below the GEMM's own time: kept
    gemm = [{"gemm_dtype": "fp8", "m": m, "n": 4096, "k": 4096, "latency": t} for m, t in gemm_ms.items()]
    scale = [{"quant_dtype": "fp8", "m": m, "k": 4096, "latency": t} for m, t in scale_ms.items()]
    _fake_engine_db(tmp_path / "pkg", "trtllm", "h100_sxm", gemm, scale)
    _fake_engine_db(tmp_path / "pkg", "vllm", "h100_sxm", gemm)  # an older collection: no scale table
    _open_only(tmp_path, monkeypatch)
    trt, old = TablePredictor.open("h100-sxm", "trtllm"), TablePredictor.open("h100-sxm", "vllm")
    # m = 4: 20 us less 8 us.
    assert trt.gemm(4, 4096, 4096, "fp8").time_s == pytest.approx(12e-6, rel=2e-3)
    assert STATIC_SCALE_NOTE in trt.gemm(4, 4096, 4096, "fp8").label
    # m = 8, halfway in log between 4 and 16: GEMM sqrt(20 x 30) us, scale sqrt(8 x 12) us.
    assert trt.gemm(8, 4096, 4096, "fp8").time_s == pytest.approx((600**0.5 - 96**0.5) * 1e-6, rel=2e-3)
    # m = 64: the scale (15 us) is not below the GEMM (10 us): the table's time stands.
    assert trt.gemm(64, 4096, 4096, "fp8").time_s == pytest.approx(10e-6, rel=2e-3)
    assert STATIC_SCALE_NOTE not in trt.gemm(64, 4096, 4096, "fp8").label
    assert old.gemm(4, 4096, 4096, "fp8").time_s == pytest.approx(20e-6, rel=2e-3)
    assert NO_SCALE_TABLE_NOTE in old.gemm(4, 4096, 4096, "fp8").label
    # The same through a step's op, over a sweep of m, and a prompt chunk's share of the kernel.
    op = SimpleNamespace(
        meta={"kind": "matmul", "m": np.array([4.0, 8.0]), "n": 4096, "k": 4096, "work_share": 0.5},
        weight_bytes=4096 * 4096 * 1.0,
        dtype="fp8",
    )
    answer = KernelTables(trt).op_seconds(op)
    assert answer.seconds == pytest.approx(0.5 * np.array([12.0, 600**0.5 - 96**0.5]) * 1e-6, rel=2e-3)
    assert STATIC_SCALE_NOTE in answer.label
    kept = KernelTables(old).op_seconds(op)
    assert kept.seconds == pytest.approx(0.5 * np.array([20.0, 600**0.5]) * 1e-6, rel=2e-3)
    assert NO_SCALE_TABLE_NOTE in kept.label


@shipped
def test_shipped_fp8_gemm_is_the_table_less_the_scale_computation():
    for engine in ("trtllm", "vllm"):
        p = TablePredictor.open("b200", engine)
        g, s = p.tables["gemm"], p.tables["compute_scale"]
        i = np.flatnonzero((g["gemm_dtype"] == "fp8") & (g["m"] == 4) & (g["n"] == 8192) & (g["k"] == 8192))[0]
        j = np.flatnonzero((s["quant_dtype"] == "fp8") & (s["m"] == 4) & (s["k"] == 8192))[0]
        gemm_s, scale_s = float(g["latency_ms"][i]) * 1e-3, float(s["latency_ms"][j]) * 1e-3
        assert 0 < scale_s < gemm_s
        assert p.gemm(4, 8192, 8192, "fp8").time_s == pytest.approx(gemm_s - scale_s, rel=1e-6)
        # bf16 was timed as engines run it: read as measured.
        k = np.flatnonzero((g["gemm_dtype"] == "bfloat16") & (g["m"] == 4) & (g["n"] == 8192) & (g["k"] == 8192))[0]
        assert p.gemm(4, 8192, 8192, "bf16").time_s == pytest.approx(float(g["latency_ms"][k]) * 1e-3, rel=1e-6)


def test_an_eagerly_timed_gemm_table_answers_only_where_the_kernel_set_its_time(tmp_path, monkeypatch):
    """vLLM's block-FP8 GEMMs were timed without CUDA graphs: a call took about the longer of the
    host's dispatch, which depends on the shape, and the kernel. Over twice the graph-timed
    per-tensor FP8 GEMM of the same shape the host set it, and the table has no answer."""
    from types import SimpleNamespace

    from roofline.tables.source import KernelTables

    block_ms = {1: 0.060, 16: 0.090, 256: 0.100, 1024: 0.200, 4096: 0.500}  # the dispatch grows with m here
    fp8_ms = {1: 0.010, 16: 0.012, 256: 0.040, 1024: 0.150, 4096: 0.400}  # graph-timed, the same shapes
    gemm = [{"gemm_dtype": "fp8_block", "m": m, "n": 4096, "k": 4096, "latency": t} for m, t in block_ms.items()]
    gemm += [{"gemm_dtype": "fp8", "m": m, "n": 4096, "k": 4096, "latency": t} for m, t in fp8_ms.items()]
    _fake_engine_db(tmp_path / "pkg", "vllm", "h100_sxm", gemm)
    _fake_engine_db(tmp_path / "pkg", "sglang", "h100_sxm", gemm)  # timed in a graph: read as measured
    _open_only(tmp_path, monkeypatch)
    vllm, sglang = TablePredictor.open("h100-sxm", "vllm"), TablePredictor.open("h100-sxm", "sglang")
    host = vllm.gemm(1, 4096, 4096, "fp8_block")  # 60 us against 10 us
    assert host.time_s is None and "timed without CUDA graphs" in host.label
    assert vllm.gemm(16, 4096, 4096, "fp8_block").time_s is None  # 90 against 12
    assert vllm.gemm(256, 4096, 4096, "fp8_block").time_s is None  # 100 against 40: 2.5x
    # m = 512, halfway in log between 256 (host-bound) and 1024: read across, 100 x sqrt(2) us against
    # 40 x sqrt(3.75) us would pass as 1.83x, but half of it is the host's; the point beside a
    # host-bound one is no answer, and says why.
    between = vllm.gemm(512, 4096, 4096, "fp8_block")
    assert between.time_s is None and "timed without CUDA graphs" in between.label
    # m = 2048, halfway in log between 1024 and 4096, both kernel-bound: 200 x sqrt(2.5) us.
    assert vllm.gemm(2048, 4096, 4096, "fp8_block").time_s == pytest.approx(200e-6 * 2.5**0.5, rel=2e-3)
    assert vllm.gemm(1024, 4096, 4096, "fp8_block").time_s == pytest.approx(200e-6, rel=2e-3)
    assert vllm.gemm(4096, 4096, 4096, "fp8_block").time_s == pytest.approx(500e-6, rel=2e-3)
    assert sglang.gemm(1, 4096, 4096, "fp8_block").time_s == pytest.approx(60e-6, rel=2e-3)
    # In a step: the host-bound points keep the datasheet (NaN here), the rest are measured.
    meta = {"kind": "matmul", "m": np.array([1.0, 4096.0]), "n": 4096, "k": 4096}
    op = SimpleNamespace(meta=meta, weight_bytes=4096 * 4096.0, dtype="fp8")
    answer = KernelTables(vllm, gemm_dtype="fp8_block").op_seconds(op)
    assert np.isnan(answer.seconds[0]) and answer.seconds[1] == pytest.approx(500e-6, rel=2e-3)
    op.meta["m"] = np.array([1.0, 16.0, 512.0])
    answer = KernelTables(vllm, gemm_dtype="fp8_block").op_seconds(op)
    assert answer.seconds is None and "timed without CUDA graphs" in answer.label


def test_a_strict_grid_gives_no_answer_beside_a_point_left_out():
    """A plain grid reads the corners it has (a table skips some combinations); a strict one, whose
    NaN marks a point known to be no answer, gives none anywhere that point has weight."""
    from roofline.tables.grid import LogGrid

    axes = (np.log([1.0, 4.0, 16.0]),)
    log_t = np.log([np.nan, 2e-5, 8e-5])
    plain, strict = LogGrid(axes, log_t), LogGrid(axes, log_t, strict=True)
    assert np.exp(plain((2.0,))[0]) == pytest.approx(2e-5)  # the measured corner, read flat
    assert np.isnan(strict((2.0,))[0]) and np.isnan(strict((1.0,))[0])
    assert np.exp(strict((8.0,))[0]) == pytest.approx(4e-5)  # both corners measured: sqrt(2 x 8) x 1e-5
    assert np.exp(strict((4.0,))[0]) == pytest.approx(2e-5)  # on a measured point
    assert np.exp(strict((32.0,))[0]) == pytest.approx(16e-5)  # past the edge: the last slope (1) carries on


def test_a_gemm_timed_slower_than_twice_its_rows_keeps_its_time_and_says_so(tmp_path, monkeypatch):
    """Twice the rows is twice the work: a table timing m = 1 at 30 us and m = 2 at 12 us ran the
    smaller GEMM on a slower path. The engine runs it so (the time stands); the label says what
    was measured. 12 -> 13 -> 14 us is an ordinary small GEMM, and the largest m has no 2 m."""
    from types import SimpleNamespace

    from roofline.tables.source import KernelTables

    gemm_ms = {1: 0.030, 2: 0.012, 4: 0.013, 8: 0.014}
    _fake_engine_db(
        tmp_path / "pkg",
        "vllm",
        "b200_sxm",
        [{"gemm_dtype": "bfloat16", "m": m, "n": 4096, "k": 4096, "latency": t} for m, t in gemm_ms.items()],
    )
    _open_only(tmp_path, monkeypatch)
    p = TablePredictor.open("b200", "vllm")
    one = p.gemm(1, 4096, 4096, "bf16")
    assert one.time_s == pytest.approx(30e-6, rel=2e-3)
    assert "at m = 1 this table measured 2.5x its time at m = 2 (twice the rows" in one.label  # 30 / 12
    for m in (2, 4, 8):  # 12/13, 13/14, and 16 past the grid
        assert "twice the rows" not in p.gemm(m, 4096, 4096, "bf16").label
    meta = {"kind": "matmul", "m": np.array([2.0, 1.0, 4.0]), "n": 4096, "k": 4096}
    op = SimpleNamespace(meta=meta, weight_bytes=4096 * 4096 * 2.0, dtype="bf16")
    answer = KernelTables(p).op_seconds(op)
    assert answer.seconds == pytest.approx(np.array([12e-6, 30e-6, 13e-6]), rel=2e-3)
    assert "at m = 1 this table measured 2.5x" in answer.label
    op.meta["m"] = np.array([2.0, 4.0])
    assert "twice the rows" not in KernelTables(p).op_seconds(op).label


@shipped
def test_shipped_vllm_fp8_gemm_at_one_row_on_blackwell_is_said_to_be_slower_than_two():
    """vLLM 0.24.0's per-tensor FP8 GEMM at m = 1 on a B200 measured over twice its m = 2 time
    (same kernel class recorded); on an H100 it did not."""
    b200, h100 = TablePredictor.open("b200", "vllm"), TablePredictor.open("h100-sxm", "vllm")
    slow = b200.gemm(1, 4096, 4096, "fp8")
    assert "at m = 1 this table measured" in slow.label and slow.time_s > 2 * b200.gemm(2, 4096, 4096, "fp8").time_s
    assert "twice the rows" not in b200.gemm(2, 4096, 4096, "fp8").label
    assert "twice the rows" not in h100.gemm(1, 4096, 4096, "fp8").label
