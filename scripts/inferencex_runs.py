"""Write engine_db/inferencex_runs.toml: which InferenceX single-node configurations ran speculative
decoding, and which configurations each run of InferenceX's benchmarks ran, from a local clone of
SemiAnalysisAI/InferenceX (Apache-2.0).

InferenceX's exports in the silicon sample do not say whether a run decoded speculatively: a
configuration ``dsr1-fp8-b200-trt-mtp`` (MTP, three drafted tokens a step) and its plain twin
``dsr1-fp8-b200-trt`` export the same fields. Its repository does:
- ``configs/nvidia-master.yaml`` (``.github/configs/`` before) lists every configuration: image,
  model, precision, runner, framework and search space, each entry with its ``spec-decoding``;
- ``perf-changelog.yaml`` gains an entry with every change, naming the configurations (globs) the
  change reran; a run's measured time in the exports is its workflow's start, seconds after the
  commit that added that entry.

This script writes, from the first version of the configurations with a single-node entry that
decodes speculatively (InferenceX ran none before; its first speculative single-node script came in
that same commit), every version of every single-node configuration of the models roofline scores,
with the time it took effect, and every commit that added changelog entries with the configurations
they name. ``roofline.inferencex_runs`` reads them.

    git clone https://github.com/SemiAnalysisAI/InferenceX && python scripts/inferencex_runs.py InferenceX
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "engine_db" / "inferencex_runs.toml"
MASTER = ("configs/nvidia-master.yaml", ".github/configs/nvidia-master.yaml")
CHANGELOG = "perf-changelog.yaml"
MODELS = ("70b", "dsr1", "gptoss", "kimik2.5")  # roofline.inferencex_scripts.INFERENCEX_MODELS' values
ENGINES = {"trt": "trtllm", "sglang": "sglang", "vllm": "vllm"}
# run-sweep.yml's condition, in the versions that skipped a main-branch sweep for such a commit message
SKIP_SWEEP = "head_commit.message, '[skip-sweep]'"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False).stdout


def utc(stamp: str) -> str:
    return datetime.fromisoformat(stamp).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def concurrencies(entry: dict) -> list[int]:
    """The client counts a search-space entry ran: its list, or start to end doubling, the end
    itself last where doubling misses it."""
    if entry.get("conc-list"):
        return sorted(int(c) for c in entry["conc-list"])
    start, end = entry.get("conc-start"), entry.get("conc-end")
    if start is None or end is None:
        return []
    out, c = [], int(start)
    while c <= int(end):
        out.append(c)
        c *= 2
    if out and out[-1] < int(end):
        out.append(int(end))
    return out


def changelog_keys(repo: Path, commit: str) -> list[str] | None:
    """The config-keys (globs) of the perf-changelog entries a commit added, as InferenceX's
    utils/process_changelog.py reads them; None where that commit's sweep did not run: it deleted a
    non-blank line (which process_changelog refuses), its added lines are not YAML, or its message
    says [skip-sweep] while run-sweep.yml skipped such commits."""
    added = []
    for line in git(repo, "show", "--format=", commit, "--", CHANGELOG).split("\n"):
        if line.startswith("-") and not line.startswith("---"):
            if line[1:].strip():
                return None
        elif line.startswith("+") and not line.startswith("+++"):
            added.append(line[1:])
    if "[skip-sweep]" in git(repo, "log", "-1", "--format=%B", commit):
        if SKIP_SWEEP in git(repo, "show", f"{commit}:.github/workflows/run-sweep.yml"):
            return None
    try:
        entries = yaml.load("\n".join(added), Loader=LOADER) or []
    except yaml.YAMLError:
        return None
    return [str(k) for e in entries if isinstance(e, dict) for k in e.get("config-keys") or []]


def matches(glob: str, key: str) -> bool:
    """process_changelog's wildcard: ``*`` alone, over the whole key."""
    return re.fullmatch(re.escape(glob).replace(r"\*", ".*"), key) is not None


def configs(text: str) -> dict[str, dict]:
    """The single-node configurations of the scored models in one version of the master file:
    key -> model, precision, GPU, engine, image and shapes [isl, osl, tp, ep, dp_attn, speculation, clients]."""
    try:
        doc = yaml.load(text, Loader=LOADER)
    except yaml.YAMLError:
        return {}
    out = {}
    for key, c in (doc or {}).items():
        if not isinstance(c, dict) or c.get("multinode") or c.get("model-prefix") not in MODELS:
            continue
        engine = ENGINES.get(str(c.get("framework")))
        if engine is None:
            continue
        seqs = c.get("seq-len-configs") or (c.get("scenarios") or {}).get("fixed-seq-len") or []
        shapes = []
        for s in seqs:
            for e in s.get("search-space") or []:
                shapes.append(
                    [
                        int(s["isl"]),
                        int(s["osl"]),
                        int(e.get("tp", 1)),
                        int(e.get("ep") or 1),
                        bool(e.get("dp-attn", False)),
                        str(e.get("spec-decoding", "none")),
                        concurrencies(e),
                    ]
                )
        out[key] = {
            "model": c["model-prefix"],
            "precision": str(c.get("precision")),
            "gpu": str(c.get("runner", "")).split("-")[0],
            "engine": engine,
            "image": str(c.get("image", "")).replace("#", "/"),
            "shapes": shapes,
        }
    return out


def speculative(found: dict[str, dict]) -> bool:
    return any(shape[5] != "none" for c in found.values() for shape in c["shapes"])


def toml_config(key: str, c: dict, since: str, until: str) -> list[str]:
    return [
        "[[config]]",
        f"key = {json.dumps(key)}",
        *(f"{k} = {json.dumps(c[k])}" for k in ("model", "precision", "gpu", "engine", "image")),
        f'since = "{since}"',
        f'until = "{until}"',
        "shapes = [",
        *(f"  {json.dumps(shape)}," for shape in c["shapes"]),
        "]",
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="a clone of SemiAnalysisAI/InferenceX")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    head = git(args.repo, "rev-parse", "HEAD").strip()
    if not re.fullmatch(r"[0-9a-f]{40}", head):
        sys.exit(f"{args.repo}: not a git clone of InferenceX (git rev-parse HEAD failed)")
    log = git(args.repo, "log", "--reverse", "--format=%H %cI", "HEAD", "--", *MASTER, CHANGELOG).split("\n")
    versions: dict[str, tuple[str, dict]] = {}  # key -> (since, content) of the version in effect
    out, triggers, since, current = [], [], None, {}
    for line in filter(None, log):
        commit, stamp = line.split()
        when = utc(stamp)
        changed = git(args.repo, "show", "--format=", "--name-only", commit).split()
        if any(path in changed for path in MASTER):
            text = next((t for path in MASTER if (t := git(args.repo, "show", f"{commit}:{path}"))), "")
            current = configs(text)
            if since is None and speculative(current):
                since = (when, commit)
            if since is not None:
                for key in sorted(set(versions) | set(current)):
                    old = versions.get(key)
                    if old is not None and current.get(key) == old[1]:
                        continue
                    if old is not None:
                        out += toml_config(key, old[1], old[0], when)
                        del versions[key]
                    if key in current:
                        versions[key] = (when, current[key])
        if since is None or CHANGELOG not in changed:
            continue
        globs = changelog_keys(args.repo, commit) or []
        keys = sorted(k for k in current if any(matches(g, k) for g in globs))
        if keys:  # a change that reran none of them is no run of theirs
            triggers += ["[[trigger]]", f'commit = "{commit}"', f'time = "{when}"', f"keys = {json.dumps(keys)}", ""]
    if since is None:
        sys.exit("no single-node configuration with speculative decoding in this clone")
    for key, (start, c) in sorted(versions.items()):
        out += toml_config(key, c, start, "")
    head_lines = [
        "# InferenceX's single-node configurations of the models roofline scores, version by version",
        "# (until: when the next version took effect; empty: still in effect), and the configurations",
        "# each commit that added perf-changelog entries reran. Written by scripts/inferencex_runs.py;",
        "# do not edit by hand. Shapes: [isl, osl, tp, ep, dp-attn, spec-decoding, clients].",
        f'source = "SemiAnalysisAI/InferenceX (Apache-2.0), {MASTER[0]} and {CHANGELOG} up to {head}"',
        f'speculation_since = "{since[0]}"',
        f'speculation_since_commit = "{since[1]}"',
        "",
    ]
    args.out.write_text("\n".join(head_lines + out + triggers))
    print(f"wrote {args.out}: {out.count('[[config]]')} configuration versions, {triggers.count('[[trigger]]')} runs")


if __name__ == "__main__":
    main()
