"""Write engine_db/inferencex_kv.toml: the KV-cache format every InferenceX single-node benchmark
script set, version by version, from a local clone of SemiAnalysisAI/InferenceX (Apache-2.0); and
engine_db/inferencex_setup.toml: the digest of every version (roofline.script_setup.digest: the
lines that decide the scheduler's settings), which roofline runs for each benchmark's own input
and output lengths, TP and concurrency (roofline.silicon_sample.documented_setup).

InferenceX's exports in the silicon sample record no KV-cache format; the script that ran each
benchmark does (vLLM and SGLang: --kv-cache-dtype or a config's kv-cache-dtype; TensorRT-LLM: the
dtype under kv_cache_config; none set: the engine's default, the model's own dtype). For every
version of every script of the models roofline scores (Llama 3.1 70B, DeepSeek-R1, gpt-oss-120b,
Kimi K2.5), the date of its commit and the format it set are written out; roofline reads the
format in effect on a run's measured date (roofline.silicon_sample.documented_kv_dtype).

    git clone https://github.com/SemiAnalysisAI/InferenceX && python scripts/inferencex_kv.py InferenceX
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from roofline.script_setup import digest  # noqa: E402

OUT = ROOT / "engine_db" / "inferencex_kv.toml"
SETUP_OUT = ROOT / "engine_db" / "inferencex_setup.toml"
# Single-node scripts: benchmarks/[single_node/[fixed_seq_len/]]{model}_{precision}_{gpu}[_trt][_docker|_slurm].sh
SCRIPT = re.compile(
    r"^benchmarks/(single_node/(fixed_seq_len/)?)?(?P<model>70b|dsr1|gptoss|kimik2\.5)_(?P<precision>fp4|fp8|int4|bf16)_"
    r"(?P<gpu>b200|b300|h100|h200)(?P<trt>_trt)?(_docker|_slurm)?\.sh$"
)
LAUNCH = {"trtllm": "trtllm-serve", "sglang": "sglang.launch_server", "vllm": "vllm serve"}
VLLM_SGLANG_KV = re.compile(r"kv[-_]cache[-_]dtype[= :]+\"?([\w]+)")
TRT_KV = re.compile(r"kv_cache_config:\s*\n(?:[ \t]+\w+:.*\n)*?[ \t]+dtype:\s*(\w+)")


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)


def framework(text: str, trt: bool) -> str | None:
    found = [name for name, launch in LAUNCH.items() if launch in text]
    if trt:
        return "trtllm" if "trtllm" in found else None
    found = [f for f in found if f != "trtllm"]
    return found[0] if len(found) == 1 else None


def kv_format(text: str, engine: str) -> str:
    """fp8, bf16 (the engine's default: the model's dtype) or mixed (branches that disagree)."""
    pattern = TRT_KV if engine == "trtllm" else VLLM_SGLANG_KV
    found = pattern.findall(text)
    values = {"fp8" if v.startswith("fp8") else "bf16" if v in ("auto", "bfloat16", "bf16") else v for v in found}
    if not values:
        return "bf16"
    # vLLM and SGLang: every launch of the server must carry the flag (a launch without it runs the default).
    if len(values) > 1 or (engine != "trtllm" and len(found) < text.count(LAUNCH[engine])):
        return "mixed"
    return values.pop()


def script_block(path: str, m: re.Match, engine: str, versions: list[tuple[str, str, str]]) -> list[str]:
    """One script's TOML table: its path, what it runs, and (date, commit, value) per version."""
    return [
        "[[script]]",
        f'path = "{path}"',
        f'model = "{m["model"]}"',
        f'precision = "{m["precision"]}"',
        f'gpu = "{m["gpu"]}"',
        f'engine = "{engine}"',
        "versions = [",
        *(f'  ["{d}", "{c}", "{v}"],' for d, c, v in sorted(versions)),
        "]",
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="a clone of SemiAnalysisAI/InferenceX")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--setup-out", type=Path, default=SETUP_OUT)
    args = parser.parse_args()
    head = git(args.repo, "rev-parse", "HEAD").stdout.strip()
    paths = sorted(
        {
            p
            for p in git(args.repo, "log", "--format=", "--name-only", "HEAD", "--", "benchmarks").stdout.split()
            if SCRIPT.match(p)
        }
    )
    lines = [
        "# The KV-cache format each InferenceX single-node benchmark script set, version by version",
        '# ("removed": a commit that removed it). Written by scripts/inferencex_kv.py; do not edit by hand.',
        f'source = "SemiAnalysisAI/InferenceX (Apache-2.0), every version of benchmarks/ up to {head}"',
        "",
    ]
    setup = [
        "# The lines of each InferenceX single-node benchmark script, version by version, that decide its",
        "# server's scheduler settings (roofline.script_setup.digest), run for each benchmark's variables",
        "# (an empty digest: a commit that removed it).",
        "# Written by scripts/inferencex_kv.py; do not edit by hand.",
        f'source = "SemiAnalysisAI/InferenceX (Apache-2.0), every version of benchmarks/ up to {head}"',
        "",
    ]
    digests: dict[str, list[str]] = {}
    for path in paths:
        m = SCRIPT.match(path)
        versions, engine, digested = [], None, []
        for entry in git(args.repo, "log", "--format=%H %ad", "--date=short", "HEAD", "--", path).stdout.split("\n"):
            if not entry:
                continue
            commit, date = entry.split()
            shown = git(args.repo, "show", f"{commit}:{path}")
            if shown.returncode:  # a commit that removed or renamed it (the readers count the last one only)
                versions.append((date, commit, "removed"))
                digested.append((date, commit, ""))
                continue
            engine = engine or framework(shown.stdout, bool(m["trt"]))
            if engine:
                versions.append((date, commit, kv_format(shown.stdout, engine)))
                lines_kept = digest(shown.stdout)
                key = hashlib.sha1("\n".join(lines_kept).encode()).hexdigest()[:12]
                digests[key] = lines_kept
                digested.append((date, commit, key))
        if not engine or not versions:
            continue
        setup += script_block(path, m, engine, digested)
        lines += script_block(path, m, engine, versions)
    args.out.write_text("\n".join(lines))
    setup.append("[digest]")
    for key in sorted(digests):
        setup += [f"{key} = [", *(f"  {json.dumps(line)}," for line in digests[key]), "]"]
    args.setup_out.write_text("\n".join(setup) + "\n")
    print(f"wrote {args.out}: {sum(1 for line in lines if line == '[[script]]')} scripts")


if __name__ == "__main__":
    main()
