"""Which database device a local GPU is, from the name the driver reports."""

from __future__ import annotations

# (all of these substrings, none of these, database id), first match wins.
_RULES: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    (("H200",), (), "h200-sxm"),
    (("H100", "NVL"), (), "h100-nvl"),
    (("H100", "PCIE"), (), "h100-pcie"),
    (("H100",), (), "h100-sxm"),  # "NVIDIA H100 80GB HBM3" is the SXM part
    (("GB200",), (), "gb200"),
    (("B200",), (), "b200"),
    (("A100", "PCIE"), ("40GB",), "a100-pcie-80gb"),
    (("A100", "80GB"), ("PCIE",), "a100-sxm-80gb"),
    (("A100",), ("PCIE", "80GB"), "a100-sxm-40gb"),
    (("V100",), (), "v100-sxm2-32gb"),
    (("L40S",), (), "l40s"),
    (("L4",), ("L40",), "l4"),
    (("A10",), ("A100",), "a10"),
    (("4090",), (), "rtx-4090"),
    (("3090",), (), "rtx-3090"),
    (("MI325X",), (), "mi325x"),
    (("MI300X",), (), "mi300x"),
    (("MI250X",), (), "mi250x"),
)


def match_hardware_id(device_name: str) -> str | None:
    name = device_name.upper().replace("-", " ")
    for need, avoid, hardware_id in _RULES:
        if all(n in name for n in need) and not any(a in name for a in avoid):
            return hardware_id
    return None
