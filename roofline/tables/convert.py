"""Convert aiconfigurator-core's measured kernel tables into compact per (device, engine, version) files.

aiconfigurator-core (NVIDIA, Apache-2.0, https://github.com/ai-dynamo/aiconfigurator) ships per-op
latencies measured inside vLLM, SGLang and TensorRT-LLM as parquet files under
``aiconfigurator_core/systems/data/<system>/<family>/<framework>/<version>/``. This module reads the
GEMM, FP8 scale computation, context and generation attention, MLA decode and its absorbed
projections, MoE, custom all-reduce
and NCCL tables and writes one ``<device>/<engine>-<version>.npz`` per (device, engine, version)
plus ``manifest.json`` with the source, its version and licence. Reading the parquet files needs
pyarrow (a dependency of streamlit); reading the converted files needs only numpy.

Where several kernels were measured for one shape (e.g. FlashAttention 3 and 4, eager and graph
all-reduce) the converted file keeps the fastest: the kernel an engine's auto-tuning would pick.
MoE layers are the exception: which kernel runs them is a server setting (TensorRT-LLM's
``moe_config.backend``, SGLang's ``--moe-runner-backend``, vLLM's ``--moe-backend``), not a tuning
choice, so the MoE table keeps the fastest of each kernel family (``MOE_KERNEL_MARKS``) in its own
``kernel`` column, and keeps each routing of tokens to experts the database timed (``distribution``:
balanced, or a power law of exponent 1.01 or 1.2; see ``roofline.routing``). Latencies are stored in
milliseconds as in the source, as float16.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import numpy as np

SOURCE_PACKAGE = "aiconfigurator-core"
SOURCE_URL = "https://github.com/ai-dynamo/aiconfigurator"
LICENCE = "Apache-2.0 (Copyright NVIDIA CORPORATION & AFFILIATES)"

# aiconfigurator system name -> hardware_db id (None: no entry in hardware_db; kept under its own name).
SYSTEM_TO_HARDWARE = {
    "a100_sxm": "a100-sxm-80gb",
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200-sxm",
    "b200_sxm": "b200",
    "b300_sxm": "b300",
    "gb200": "gb200",
    "gb300": "gb300",
    "l40s": "l40s",
    "l4": "l4",
    "rtx_pro_6000_server": "rtx-pro-6000-blackwell",
    "b60": "b60",
}
ENGINES = ("vllm", "sglang", "trtllm")

ATTENTION_KEYS = [
    "attn_dtype",
    "kv_cache_dtype",
    "batch_size",
    "isl",
    "step",
    "num_heads",
    "num_key_value_heads",
    "head_dim",
    "window_size",
]
# table name -> (family folder, parquet file, key columns kept)
TABLES = {
    "gemm": ("gemm", "gemm_perf.parquet", ["gemm_dtype", "m", "n", "k"]),
    "context_attention": (
        "attention",
        "context_attention_perf.parquet",
        ATTENTION_KEYS,
    ),
    "generation_attention": (
        "attention",
        "generation_attention_perf.parquet",
        ATTENTION_KEYS,
    ),
    "custom_allreduce": ("comm", "custom_allreduce_perf.parquet", ["allreduce_dtype", "num_gpus", "message_size"]),
    # MLA's decode kernel on the cached latent (DeepSeek-V3 layout; num_heads per GPU).
    "generation_mla": (
        "mla",
        "generation_mla_perf.parquet",
        ["mla_dtype", "kv_cache_dtype", "num_heads", "batch_size", "isl", "step"],
    ),
    # MLA decode's absorbed projections: each head's query through its W_UK slice before the latent
    # attention (op_name mla_gen_pre) and the output through W_UV after it (mla_gen_post), one
    # batched GEMM over num_heads per GPU, by tokens and the BMM's dtype.
    "mla_bmm": ("mla_bmm", "mla_bmm_perf.parquet", ["bmm_dtype", "op_name", "num_heads", "num_tokens"]),
    # MLA's prefill attention (DeepSeek-V3 layout: 128 + 64 query/key and 128 value dims per head,
    # num_heads per GPU), after the latent is expanded to per-head keys and values.
    "context_mla": (
        "mla",
        "context_mla_perf.parquet",
        ["mla_dtype", "kv_cache_dtype", "num_heads", "batch_size", "isl", "step"],
    ),
    # What computing an activation's FP8 scale costs: dynamic less static per-tensor quantization
    # of the same (m, k) activation, each timed apart (the per-tensor FP8 GEMM tables were timed
    # with the dynamic one; see roofline.tables.predict.STATIC_SCALE_NOTE).
    "compute_scale": ("quantize", "computescale_perf.parquet", ["quant_dtype", "m", "k"]),
    # One fused MoE layer (routed experts' GEMMs and activation) for a model's expert shape.
    "moe": (
        "moe",
        "moe_perf.parquet",
        [
            "moe_dtype",
            "hidden_size",
            "inter_size",
            "topk",
            "num_experts",
            "moe_tp_size",
            "moe_ep_size",
            "distribution",
            "num_tokens",
            "kernel",
        ],
    ),
}
# The MoE kernel families a server can be set to run (roofline.roofs.MOE_KERNELS), by what the
# database's ``kernel_source`` names (first match wins): TensorRT-LLM-gen's kernels (TensorRT-LLM's
# TRTLLM backend, its min-latency mode in aiconfigurator's collector; FlashInfer's ``trtllm`` MoE in
# vLLM and SGLang), DeepGEMM, CUTLASS (TensorRT-LLM's own, its non-gated MoE among them, and
# FlashInfer's port), Marlin and Triton (vLLM's and SGLang's fused_moe).
MOE_KERNEL_MARKS = (
    ("trtllm-gen", ("min_latency", "flashinfer_trtllm")),
    ("deepgemm", ("deepgemm", "deep_gemm")),
    ("cutlass", ("cutlass", "nongated")),
    ("marlin", ("marlin",)),
    ("triton", ("triton", "fused_moe")),
)
# aiconfigurator's TensorRT-LLM collector (collector/trtllm/collect_moe.py) names a layer plain
# "moe_torch_flow" where it ran neither CUTLASS nor DeepGEMM nor the min-latency kernels: gpt-oss's
# experts (and MXFP4 ones), with the TRTLLM backend on Blackwell and Triton on Hopper.
BLACKWELL_SYSTEMS = {"b200_sxm", "b300_sxm", "gb200", "gb300", "rtx_pro_6000_server"}
HOPPER_SYSTEMS = {"h100_sxm", "h200_sxm"}


def moe_kernel(kernel_source: str, system: str = "") -> str:
    """The kernel family a MoE table row was timed with (``MOE_KERNEL_MARKS``), or "default"."""
    source = kernel_source.lower()
    for family, marks in MOE_KERNEL_MARKS:
        if any(mark in source for mark in marks):
            return family
    if source == "moe_torch_flow":
        return "trtllm-gen" if system in BLACKWELL_SYSTEMS else "triton" if system in HOPPER_SYSTEMS else "default"
    return "default"


# The measured TTFT/TPOT of real serving runs: the test set of ``roofline.validate`` (never fitted on).
SILICON_SAMPLE = "silicon_sample.csv.gz"
NCCL_KEYS = ["op_name", "nccl_dtype", "num_gpus", "message_size"]


def _version_key(v: str) -> tuple:
    return tuple(int(x) if x.isdigit() else -1 for x in re.split(r"[.\-a-z]+", v) if x)


def find_systems_dir(source: str | Path | None = None) -> Path:
    """The ``systems`` folder of an unpacked aiconfigurator-core: a wheel (unpacked to a temporary
    folder by the caller), a site-packages install, or the package folder itself."""
    if source is None:
        import importlib.util

        spec = importlib.util.find_spec("aiconfigurator_core")
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(
                "aiconfigurator_core is not installed: pass --source WHEEL_OR_FOLDER "
                "(pip download --no-deps aiconfigurator-core)"
            )
        source = Path(list(spec.submodule_search_locations)[0])
    source = Path(source)
    for candidate in (source / "systems", source / "aiconfigurator_core" / "systems", source):
        if (candidate / "data").is_dir():
            return candidate
    raise FileNotFoundError(f"no aiconfigurator_core/systems/data under {source}")


def unpack_wheel(wheel: Path, into: Path) -> Path:
    """Extract only the data this converter reads (and the version files) from a wheel."""
    with zipfile.ZipFile(wheel) as z:
        wanted = {f"/{family}/" for family, _, _ in TABLES.values()}
        names = [
            n
            for n in z.namelist()
            if (n.endswith(".parquet") and any(w in n for w in wanted))
            or n.endswith(("query_versions.yaml", "silicon_sample.csv"))
            or ".dist-info/METADATA" in n
        ]
        z.extractall(into, members=names)
    return into


def current_versions(systems: Path) -> dict[tuple[str, str], str]:
    """(system, engine) -> the version aiconfigurator serves by default (its query_versions.yaml)."""
    path = systems / "query_versions.yaml"
    try:
        import yaml
    except ImportError:  # without PyYAML every table takes its newest version
        return {}
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not readable YAML ({str(exc).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("defaults", {}), dict):
        raise ValueError(
            f"{path}: expected a mapping with 'defaults' and 'overrides' per system, got {type(data).__name__}"
        )
    out: dict[tuple[str, str], str] = {}
    defaults = data.get("defaults") or {}
    overrides = data.get("overrides") or {}
    for system in SYSTEM_TO_HARDWARE:
        for engine in ENGINES:
            mine = overrides.get(system) if isinstance(overrides, dict) else None
            slot = (mine if isinstance(mine, dict) else {}).get(engine) or defaults.get(engine) or {}
            if isinstance(slot, dict) and slot.get("current"):
                out[(system, engine)] = str(slot["current"])
    return out


def _reduce(df, keys: list[str]) -> dict[str, np.ndarray]:
    """Fastest measured kernel per key; ints as int32, categories as strings, latency float16 ms."""
    import pandas as pd

    df = df.copy()
    for c in keys:  # older collections lack newer columns (window_size, step): the default they imply
        if c not in df.columns:
            df[c] = 0 if c in ("window_size", "step") else "balanced" if c == "distribution" else ""
    df = df[keys + ["latency"]].dropna()
    df = df[df["latency"] > 0]
    best = df.groupby(keys, as_index=False, sort=True)["latency"].min()
    out: dict[str, np.ndarray] = {}
    for c in keys:
        col = best[c]
        numeric = pd.api.types.is_numeric_dtype(col)
        out[c] = col.to_numpy(np.int32) if numeric else col.astype(str).to_numpy().astype("U")
    # float16 keeps 11 significant bits (0.05 % rounding), far inside the run-to-run spread of a
    # kernel timing, and makes the files 40 % smaller.
    out["latency_ms"] = best["latency"].to_numpy(np.float16)
    return out


def _read(path: Path):
    import pandas as pd

    return pd.read_parquet(path)


def _pick_version(folder: Path, wanted: str | None) -> str | None:
    if not folder.is_dir():
        return None
    versions = sorted((p.name for p in folder.iterdir() if p.is_dir()), key=_version_key)
    if not versions:
        return None
    return wanted if wanted in versions else versions[-1]


def convert(
    systems: Path, out: Path, systems_wanted: list[str] | None = None, package_version: str = "unknown"
) -> dict:
    """Write the compact files and the manifest; return the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    current = current_versions(systems)
    files = []
    for system, hw_id in SYSTEM_TO_HARDWARE.items():
        if systems_wanted and system not in systems_wanted and hw_id not in systems_wanted:
            continue
        base = systems / "data" / system
        if not base.is_dir():
            continue
        for engine in ENGINES:
            wanted = current.get((system, engine))
            arrays: dict[str, np.ndarray] = {}
            versions: dict[str, str] = {}
            for table, (family, fname, keys) in TABLES.items():
                version = _pick_version(base / family / engine, wanted)
                if version is None or not (base / family / engine / version / fname).exists():
                    continue
                df = _read(base / family / engine / version / fname)
                if table == "moe":
                    sources = df["kernel_source"] if "kernel_source" in df.columns else [""] * len(df)
                    df = df.assign(kernel=[moe_kernel(str(k), system) for k in sources])
                reduced = _reduce(df, keys)
                for c, a in reduced.items():
                    arrays[f"{table}/{c}"] = a
                versions[table] = version
            if "gemm" not in versions and "context_attention" not in versions:
                continue
            version = versions.get("gemm") or versions.get("context_attention")
            target = out / hw_id / f"{engine}-{version}.npz"
            target.parent.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(target, **arrays)
            files.append(
                {
                    "file": f"{hw_id}/{target.name}",
                    "device": hw_id,
                    "system": system,
                    "engine": engine,
                    "version": version,
                    "table_versions": versions,
                    "rows": {t: int(len(arrays[f"{t}/latency_ms"])) for t in versions},
                    "bytes": target.stat().st_size,
                }
            )
        nccl_dir = base / "comm" / "nccl"
        version = _pick_version(nccl_dir, None)
        if version and (nccl_dir / version / "nccl_perf.parquet").exists():
            reduced = _reduce(_read(nccl_dir / version / "nccl_perf.parquet"), NCCL_KEYS)
            target = out / hw_id / f"nccl-{version}.npz"
            target.parent.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(target, **{f"nccl/{c}": a for c, a in reduced.items()})
            files.append(
                {
                    "file": f"{hw_id}/{target.name}",
                    "device": hw_id,
                    "system": system,
                    "engine": "nccl",
                    "version": version,
                    "table_versions": {"nccl": version},
                    "rows": {"nccl": int(len(reduced["latency_ms"]))},
                    "bytes": target.stat().st_size,
                }
            )
    sample = systems / "silicon_sample.csv"
    if sample.exists():
        import pandas as pd

        pd.read_csv(sample).to_csv(out / SILICON_SAMPLE, index=False, compression={"method": "gzip", "mtime": 0})
    manifest = {
        "source": f"{SOURCE_PACKAGE} {package_version}",
        "source_url": SOURCE_URL,
        "licence": LICENCE,
        "units": {"latency_ms": "milliseconds per kernel call", "message_size": "elements"},
        "note": "fastest measured kernel per shape (per kernel family for MoE); converted by roofline.tables.convert",
        "files": files,
        "silicon_sample": SILICON_SAMPLE if sample.exists() else None,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def package_version_of(systems: Path) -> str:
    for meta in list(systems.parent.parent.glob("aiconfigurator_core-*.dist-info/METADATA")) + list(
        systems.parent.glob("*.dist-info/METADATA")
    ):
        for line in meta.read_text().splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    try:
        from importlib.metadata import version

        return version("aiconfigurator-core")
    except Exception:
        return "unknown"
