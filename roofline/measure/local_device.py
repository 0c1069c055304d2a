"""What the local device is: its name, driver, clocks, cache and free memory, as a measurement
records it."""

from __future__ import annotations

import datetime as dt
import platform
import shutil
import subprocess

import torch

from roofline.measure.devices import match_hardware_id
from roofline.measure.room import available_ram_bytes
from roofline.measure.schema import DeviceInfo


def _nvidia_smi(device_index: int) -> tuple[str | None, dict[str, float] | None]:
    if not shutil.which("nvidia-smi"):
        return None, None
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                f"--id={device_index}",
                "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout.strip()
        driver, sm, mem = (p.strip() for p in out.split(","))
        return driver, {"sm_max": float(sm), "memory_max": float(mem)}
    except (OSError, subprocess.SubprocessError, ValueError):
        return None, None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_cache_bytes() -> float | None:
    for level in ("index3", "index2"):
        try:
            with open(f"/sys/devices/system/cpu/cpu0/cache/{level}/size") as fh:
                text = fh.read().strip()
        except OSError:
            continue
        scale = {"K": 2**10, "M": 2**20}.get(text[-1], 1)
        return float(text.rstrip("KM")) * scale
    return None


def device_info(device: torch.device) -> DeviceInfo:
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        driver, clocks = _nvidia_smi(device.index or 0)
        return DeviceInfo(
            name=props.name,
            kind="cuda",
            driver=driver,
            cuda_version=torch.version.cuda,
            torch_version=torch.__version__,
            clocks_mhz=clocks,
            memory_bytes=float(props.total_memory),
            l2_cache_bytes=float(getattr(props, "L2_cache_size", 0) or 0) or None,
            date=now,
            matched_hardware_id=match_hardware_id(props.name),
        )
    return DeviceInfo(
        name=f"CPU: {_cpu_name()} ({torch.get_num_threads()} threads)",
        kind="cpu",
        torch_version=torch.__version__,
        l2_cache_bytes=_cpu_cache_bytes(),
        date=now,
    )


def free_memory_bytes(device: torch.device) -> float:
    if device.type == "cuda":
        return float(torch.cuda.mem_get_info(device)[0])
    try:
        return available_ram_bytes()
    except (ValueError, OSError):
        return 8e9
