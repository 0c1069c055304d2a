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
    with pytest.raises(DataError, match=r"h100-sxm.toml: field 'memory_bandwidth_tbps'.*greater than 0"):
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
