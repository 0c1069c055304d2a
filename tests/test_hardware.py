"""The hardware database: schema, loader errors, user folders, and spot checks against datasheets."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from roofline.datafiles import DataError
from roofline.hardware import (
    HARDWARE_DIR_ENV,
    SHIPPED_HARDWARE_DIR,
    get_hardware,
    load_hardware,
    load_hardware_file,
)
from roofline.workload import Precision

REQUIRED_IDS = {
    "h100-sxm",
    "h100-pcie",
    "h100-nvl",
    "h200-sxm",
    "b200",
    "gb200",
    "a100-sxm-40gb",
    "a100-sxm-80gb",
    "a100-pcie-80gb",
    "v100-sxm2-32gb",
    "l40s",
    "l4",
    "a10",
    "rtx-4090",
    "rtx-3090",
    "mi300x",
    "mi325x",
    "mi250x",
    "gaudi2",
    "gaudi3",
    "tpu-v4",
    "tpu-v5e",
    "tpu-v5p",
    "tpu-v6e",
    # added later: the devices people use now
    "h20",
    "b300",
    "gb300",
    "gh200",
    "rtx-5090",
    "rtx-pro-6000-blackwell",
    "rtx-6000-ada",
    "l20",
    "a6000",
    "a40",
    "t4",
    "mi350x",
    "mi355x",
    "tpu-v7",
    "trainium2",
    "m4-max",
    "m3-ultra",
}

GOOD = (SHIPPED_HARDWARE_DIR / "h100-sxm.toml").read_text()


def test_every_shipped_file_loads_and_cites_a_source():
    devices = load_hardware()
    assert REQUIRED_IDS <= set(devices)
    for hw in devices.values():
        assert hw.sources, hw.id
        assert all(s.url.startswith("http") for s in hw.sources)
        assert hw.memory_bandwidth_tbps > 0 and hw.memory_gb > 0


@pytest.mark.parametrize(
    "hardware_id, field, expected",
    [
        # H100 whitepaper Table 3: bf16 dense 989.4 (1978.9 with sparsity).
        ("h100-sxm", "bf16", 989.4),
        ("h100-sxm", "fp8", 1978.9),
        # H200 datasheet: 1,979 bf16 "with sparsity" -> 989.5 dense.
        ("h200-sxm", "bf16", 989.5),
        # A100 datasheet: 312 | 624* bf16.
        ("a100-sxm-80gb", "bf16", 312.0),
        # MI300X datasheet: 1307.4 bf16 dense, 2614.9 fp8 dense.
        ("mi300x", "bf16", 1307.4),
        ("mi300x", "fp8", 2614.9),
        # HGX B200: 4.5 PFLOPS bf16 with sparsity -> 2250 dense.
        ("b200", "bf16", 2250.0),
        # L4 datasheet: 242 bf16 with sparsity -> 121 dense.
        ("l4", "bf16", 121.0),
        ("tpu-v5e", "bf16", 197.0),
        # H20: no NVIDIA datasheet; the trade-press table's 148 is dense (a measured bf16 GEMM
        # reaches 142 TFLOP/s, which a sparse reading, 74 dense, would rule out).
        ("h20", "bf16", 148.0),
        # Blackwell Ultra datasheet, HGX B300 column: FP16/BF16 4.5 PFLOPS with sparsity -> 2250.
        ("b300", "bf16", 2250.0),
        # GB300 column: BF16 5 PFLOPS* -> 2500; FP4 printed "20 | 15" (sparse | dense): 15000 as printed.
        ("gb300", "bf16", 2500.0),
        ("gb300", "fp4", 15000.0),
        # GH200: the H100 GPU's figures, 1,979 bf16 with sparsity -> 989.5.
        ("gh200", "bf16", 989.5),
        # GeForce/RTX PRO Blackwell: "AI TOPS" is FP4 with sparsity: 3,352 / 2 and 4,000 / 2.
        ("rtx-5090", "fp4", 1676.0),
        ("rtx-pro-6000-blackwell", "fp4", 2000.0),
        # RTX 6000 Ada datasheet: tensor 1,457 TFLOPS is FP8 with sparsity -> 728.5.
        ("rtx-6000-ada", "fp8", 728.5),
        # RTX A6000 datasheet: tensor 309.7 TFLOPS (FP16, sparsity) -> 154.85.
        ("a6000", "fp16", 154.85),
        # A40 datasheet prints dense | sparse pairs: 149.7 | 299.4 bf16.
        ("a40", "bf16", 149.7),
        # T4 (Turing, no sparsity): mixed-precision FP16/FP32 65 TFLOPS, INT8 130 TOPS.
        ("t4", "fp16", 65.0),
        ("t4", "int8", 130.0),
        # AMD prints dense figures: MI350X 2.3 PFLOPS bf16, MI355X 10.1 PFLOPS MXFP4.
        ("mi350x", "bf16", 2300.0),
        ("mi355x", "fp4", 10100.0),
        # Google Cloud TPU7x table: 2,307 bf16, 4,614 fp8 per chip.
        ("tpu-v7", "bf16", 2307.0),
        ("tpu-v7", "fp8", 4614.0),
        # AWS Neuron: Trainium2 667 TFLOPS bf16 dense (1,299 fp8).
        ("trainium2", "bf16", 667.0),
    ],
)
def test_peak_spot_checks(hardware_id, field, expected):
    assert get_hardware(hardware_id).peak_tflops.as_dict()[field] == pytest.approx(expected)


@pytest.mark.parametrize(
    "hardware_id, bandwidth_tbps, memory_gb",
    [
        ("h200-sxm", 4.8, 141),
        ("a100-sxm-80gb", 2.039, 80),
        ("h100-sxm", 3.35, 80),
        ("mi300x", 5.3, 192),
        ("a100-sxm-40gb", 1.555, 40),
    ],
)
def test_memory_spot_checks(hardware_id, bandwidth_tbps, memory_gb):
    hw = get_hardware(hardware_id)
    assert hw.memory_bandwidth_tbps == pytest.approx(bandwidth_tbps)
    assert hw.memory_gb == pytest.approx(memory_gb)


# Dense ratios a sparse figure would break: tensor math doubles from tf32 to bf16 and from bf16 to
# fp8 on every part that has them, except where the vendor prints equal rates (listed, with why).
EQUAL_RATE = {
    ("trainium2", "tf32", "bf16"): "AWS prints TF32 = BF16 = FP16 = 667 TFLOPS",
    ("gaudi3", "bf16", "fp8"): "Gaudi 3's MME runs bf16 and fp8 at the same 1,835 TFLOPS",
}
# GeForce Blackwell halves FP8 with FP32 accumulate (the rate recorded) but runs block-scaled FP4
# with FP32 accumulate at full rate: 419 -> 1,676 in the RTX Blackwell whitepaper.
FOUR_X_FP4 = {("rtx-5090", "fp8", "fp4")}


def test_every_device_passes_the_dense_and_unit_checks():
    for hw in load_hardware().values():
        peaks = hw.peak_tflops.as_dict()
        for low, high in (("tf32", "bf16"), ("bf16", "fp8"), ("fp8", "fp4")):
            if low in peaks and high in peaks:
                ratio = peaks[high] / peaks[low]
                if (hw.id, low, high) in EQUAL_RATE:
                    assert ratio == pytest.approx(1.0), hw.id
                elif (hw.id, low, high) in FOUR_X_FP4:
                    assert ratio == pytest.approx(4.0), hw.id
                elif (low, high) == ("fp8", "fp4"):
                    # 2x on Blackwell and CDNA 4; Blackwell Ultra's NVFP4 units make it 3x (GB300: 15 / 5 PF).
                    assert 2.0 <= ratio <= 3.0 + 1e-9, (hw.id, low, high, ratio)
                else:
                    # 2x, up to the vendor's rounding in PFLOPS (B200: 2.2 / 4.5 PF with sparsity).
                    assert ratio == pytest.approx(2.0, rel=0.05), (hw.id, low, high, ratio)
        if "bf16" in peaks and "fp16" in peaks:
            assert peaks["bf16"] == peaks["fp16"], hw.id
        # Units: TFLOPS not PFLOPS or GFLOPS, TB/s not GB/s, GB not bytes.
        assert all(0.1 <= v <= 20_000 for v in hw.peak_tflops.published().values()), hw.id
        assert 0.05 <= hw.memory_bandwidth_tbps <= 10, hw.id
        assert 8 <= hw.memory_gb <= 600, hw.id
        if hw.memory_exposed_bytes:
            # What the runtime exposes is within 10% below the nominal figure read as GiB.
            assert 0.9 <= hw.memory_exposed_bytes / (hw.memory_gb * 2**30) <= 1.0, hw.id
        if hw.interconnect:
            assert 1 <= hw.interconnect.bandwidth_gb_per_s <= 2_000, hw.id
        if "fp32_matrix" in hw.peak_tflops.published():
            assert hw.peak_tflops.fp32_matrix >= hw.peak_tflops.fp32, hw.id


def test_devices_without_published_peaks_say_so():
    # Apple publishes no GPU FLOPS; NVIDIA publishes no L20 specification.
    for hid in ("m4-max", "m3-ultra", "l20"):
        hw = get_hardware(hid)
        assert hw.peak_tflops.as_dict() == {} and hw.memory_bandwidth_tbps > 0
    assert get_hardware("m4-max").kind == "soc" and get_hardware("m4-max").memory_bandwidth_tbps == 0.546


def test_unpublished_figures_are_absent_not_zero():
    # Volta has no bf16 math; Gaudi 2's fp8 figure is disputed and left out.
    assert get_hardware("v100-sxm2-32gb").peak_tflops.bf16 is None
    assert "fp8" not in get_hardware("gaudi2").dtypes
    assert get_hardware("b200").compute_units is None


def test_interconnect_direction_convention():
    # NVLink 4 "900 GB/s" adds both directions: 450 GB/s each way.
    assert get_hardware("h100-sxm").interconnect.unidirectional_bytes_per_s == pytest.approx(450e9)
    # Gaudi 3: 24 x 200 GbE = 4800 Gb/s = 600 GB/s per direction.
    assert get_hardware("gaudi3").interconnect.unidirectional_bytes_per_s == pytest.approx(600e9)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_misspelt_key_is_rejected_naming_file_and_field(tmp_path):
    path = _write(tmp_path, "h100-sxm", GOOD.replace("memory_bandwidth_tbps", "memory_bandwith_tbps"))
    with pytest.raises(DataError) as err:
        load_hardware_file(path)
    message = str(err.value)
    assert str(path) in message
    assert "memory_bandwith_tbps" in message and "unknown field" in message
    assert "missing required field 'memory_bandwidth_tbps'" in message


def test_negative_bandwidth_is_rejected(tmp_path):
    path = _write(tmp_path, "h100-sxm", GOOD.replace("memory_bandwidth_tbps = 3.35", "memory_bandwidth_tbps = -3.35"))
    with pytest.raises(
        DataError, match=r"h100-sxm.toml: field 'memory_bandwidth_tbps'.*greater than or equal to 0.000001"
    ):
        load_hardware_file(path)


def test_missing_required_field_is_rejected(tmp_path):
    text = "\n".join(line for line in GOOD.splitlines() if not line.startswith("memory_gb"))
    path = _write(tmp_path, "h100-sxm", text)
    with pytest.raises(DataError, match=r"missing required field 'memory_gb'"):
        load_hardware_file(path)


def test_misspelt_dtype_in_peaks_is_rejected(tmp_path):
    path = _write(tmp_path, "h100-sxm", GOOD.replace("bf16 = 989.4", "bfloat16 = 989.4"))
    with pytest.raises(DataError, match=r"unknown field 'peak_tflops.bfloat16'"):
        load_hardware_file(path)


def test_malformed_toml_is_rejected(tmp_path):
    path = _write(tmp_path, "broken", "id = \n")
    with pytest.raises(DataError, match=r"broken.toml: malformed TOML"):
        load_hardware_file(path)


def test_id_must_match_file_name(tmp_path):
    path = _write(tmp_path, "other-name", GOOD)
    with pytest.raises(DataError, match=r"field 'id' is 'h100-sxm' but the file is named 'other-name'"):
        load_hardware_file(path)


def test_user_folder_adds_and_overrides(tmp_path, monkeypatch):
    _write(
        tmp_path,
        "my-gpu",
        GOOD.replace('id = "h100-sxm"', 'id = "my-gpu"').replace('name = "NVIDIA H100 SXM5 80GB"', 'name = "My GPU"'),
    )
    _write(tmp_path, "h100-sxm", GOOD.replace("memory_bandwidth_tbps = 3.35", "memory_bandwidth_tbps = 3.0"))
    devices = load_hardware(tmp_path)
    assert devices["my-gpu"].name == "My GPU"
    assert devices["h100-sxm"].memory_bandwidth_tbps == 3.0
    assert len(devices) == len(load_hardware()) + 1
    monkeypatch.setenv(HARDWARE_DIR_ENV, str(tmp_path))
    assert load_hardware()["h100-sxm"].memory_bandwidth_tbps == 3.0


def test_unknown_id_lists_the_allowed_ones():
    with pytest.raises(ValueError, match=r"unknown hardware 'h1000'; allowed: .*h100-sxm"):
        get_hardware("h1000")


def test_missing_dtype_error_lists_the_device_dtypes():
    with pytest.raises(ValueError, match=r"a100-sxm-80gb has no 'fp8' peak; allowed dtypes for a100-sxm-80gb: fp64"):
        get_hardware("a100-sxm-80gb").peak_flops_per_s("fp8")


def test_copying_the_shipped_folder_changes_nothing(tmp_path):
    copy = tmp_path / "hw"
    shutil.copytree(SHIPPED_HARDWARE_DIR, copy)
    assert load_hardware(copy) == load_hardware()


def test_every_device_records_the_formats_its_kernels_take():
    for hw in load_hardware().values():
        f = hw.formats
        assert f is not None and f.sources and f.basis, hw.id
        # the 16-bit float the device computes in is a weight and KV format too
        assert set(f.math) & {"bf16", "fp16"} <= set(f.weights) & set(f.kv), hw.id
        # fp8 math needs fp8 weights; a published fp8 peak means fp8 math
        assert "fp8" not in f.math or "fp8" in f.weights, hw.id
        assert "fp8" not in hw.peak_tflops.as_dict() or "fp8" in f.math, hw.id


@pytest.mark.parametrize("hardware_id", ["v100-sxm2-32gb", "t4", "tpu-v4"])
def test_parts_without_fp8_kernels_refuse_fp8_weights(hardware_id):
    hw = get_hardware(hardware_id)
    assert hw.supports_weight_format("fp8") is False and hw.supports_math("fp8") is False
    with pytest.raises(ValueError, match=rf"^{hardware_id} has no kernels for fp8 weights"):
        Precision(weight_dtype="fp8").on(hw)
    # a memory question still answers, with a note
    _, notes = Precision(weight_dtype="fp8").on(hw, need_peak=False)
    assert any("no kernels for fp8 weights" in n for n in notes)


def test_a_dense_model_ignores_the_experts_weight_format():
    from roofline.models import get_model
    from roofline.workload import Workload

    mi300x, mxfp4 = get_hardware("mi300x"), Precision(expert_weight_dtype="mxfp4")
    run, _ = Workload(get_model("qwen3-8b"), "decode", precision=mxfp4).on(mi300x)  # no experts to store
    assert run.precision.expert_weight_dtype is None
    with pytest.raises(ValueError, match=r"^mi300x has no kernels for mxfp4 weights"):
        Workload(get_model("gpt-oss-120b"), "decode", precision=mxfp4).on(mi300x)


def test_format_support_follows_the_architecture():
    h100, a100, t4, tpu = (get_hardware(h) for h in ("h100-sxm", "a100-sxm-80gb", "t4", "tpu-v4"))
    assert h100.supports_weight_format("fp8") and h100.supports_math("fp8") and h100.supports_kv_format("fp8")
    # Ampere: fp8 checkpoints weight-only (FP8 Marlin), no fp8 math
    assert a100.supports_weight_format("fp8") and not a100.supports_math("fp8")
    assert t4.supports_weight_format("int4") and not t4.supports_weight_format("bf16")
    assert tpu.supports_kv_format("fp8") is False and tpu.supports_weight_format("int8")
    assert get_hardware("b200").supports_weight_format("nvfp4") and not h100.supports_weight_format("nvfp4")
    assert h100.unsupported_formats(("int4", "nvfp4"), ("fp8",), "fp4") == ["nvfp4 weights", "fp4 math"]


def test_a_file_with_an_unknown_format_is_rejected(tmp_path):
    path = _write(tmp_path, "h100-sxm", GOOD.replace('kv = ["fp32"', 'kv = ["fp7", "fp32"'))
    with pytest.raises(DataError, match=r"h100-sxm.toml: field 'formats.kv'.*unknown KV-cache format\(s\) 'fp7'"):
        load_hardware_file(path)


def test_shipped_peaks_have_no_impossible_orderings():
    # Checked on every shipped device before the rule was added: bf16 equals fp16 wherever both
    # are published, and fp8 is at least bf16 (Gaudi 3 prints them equal).
    for hw in load_hardware().values():
        p = hw.peak_tflops
        if p.bf16 and p.fp16:
            assert p.bf16 == p.fp16, hw.id
        if p.bf16 and p.fp8:
            assert p.fp8 >= p.bf16, hw.id


def test_bf16_twice_fp16_is_rejected_as_a_sparse_figure(tmp_path):
    # 1978.9 is H100's bf16 "with sparsity": beside the dense fp16 989.4 it is exactly twice.
    path = _write(tmp_path, "h100-sxm", GOOD.replace("bf16 = 989.4 ", "bf16 = 1978.9 "))
    with pytest.raises(DataError, match=r"h100-sxm.toml: field 'peak_tflops'.*bf16 \(1978.9\) is twice fp16 \(989.4\)"):
        load_hardware_file(path)


def test_fp8_below_bf16_is_rejected(tmp_path):
    path = _write(tmp_path, "h100-sxm", GOOD.replace("fp8 = 1978.9 ", "fp8 = 494.7 "))
    with pytest.raises(DataError, match=r"h100-sxm.toml: field 'peak_tflops'.*fp8 \(494.7\) is below bf16 \(989.4\)"):
        load_hardware_file(path)
