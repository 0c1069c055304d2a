"""Whether an InferenceX run decoded speculatively (roofline.inferencex_runs), read from the
configurations that ran it (scripts/inferencex_runs.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from roofline import inferencex_runs
from roofline.inferencex_runs import EITHER, PLAIN, run_decoding, why_speculative
from roofline.inferencex_scripts import INFERENCEX_MODELS
from roofline.silicon_sample import load_silicon_sample, why_not_scored

ROOT = Path(__file__).resolve().parent.parent
PLAIN_IMAGE = "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post2"
MTP_IMAGE = "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3"


def row(measured: str, image: str, clients: int = 4, osl: int = 1024, source: str = "source_file=2026-03-25.csv"):
    return {
        "id": "r",
        "model_path": "deepseek-ai/DeepSeek-R1",
        "system": "b200_sxm",
        "backend": "trtllm",
        "precision": "fp8",
        "mode": "agg",
        "isl": "1024",
        "osl": str(osl),
        "tp_size": "8.0",
        "moe_ep_size": "1.0",
        "attention_dp_size": "1.0",
        "batch_size": str(clients),
        "silicon_tpot_ms": "5.0",
        "silicon_ttft_ms": "200.0",
        "silicon_data_source": f"{source}; model=DeepSeek-R1; silicon_concurrency={clients}; measured={measured}; "
        f"wip=False; image={image}",
    }


def config(key: str, image: str, spec: str) -> str:
    return (
        f"{key}:\n  image: {image}\n  model: deepseek-ai/DeepSeek-R1-0528\n  model-prefix: dsr1\n"
        "  runner: b200-trt\n  precision: fp8\n  framework: trt\n  multinode: false\n  seq-len-configs:\n"
        "  - isl: 1024\n    osl: 1024\n    search-space:\n"
        f"    - {{ tp: 8, ep: 1, conc-start: 4, conc-end: 16, spec-decoding: {spec} }}\n"
    )


def commit(repo: Path, when: str, files: dict[str, str], message: str | None = None) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    env = os.environ | {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True, env=env, capture_output=True)
    subprocess.run([*git, "commit", "-q", "-m", message or when], check=True, env=env, capture_output=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def generator():
    import importlib.util

    spec = importlib.util.spec_from_file_location("inferencex_runs_script", ROOT / "scripts" / "inferencex_runs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def written(tmp_path, monkeypatch):
    """A clone with three changes, run through scripts/inferencex_runs.py:
    - 2026-01-10 12:00 UTC: the plain configuration, rerun;
    - 2026-02-05 19:55: its MTP twin on a newer image, rerun alone;
    - 2026-03-25 16:34: both on one image, rerun together (a glob);
    - 2026-03-25 16:36: the plain one alone, rerun again."""
    pytest.importorskip("yaml")
    repo = tmp_path / "InferenceX"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    master, log = "configs/nvidia-master.yaml", "perf-changelog.yaml"
    plain = config("dsr1-fp8-b200-trt", PLAIN_IMAGE, "none")
    entry = "- config-keys:\n    - {}\n  description:\n    - 'a change'\n\n"
    commit(repo, "2026-01-10T12:00:00Z", {master: plain, log: entry.format("dsr1-fp8-b200-trt")})
    mtp = config("dsr1-fp8-b200-trt-mtp", MTP_IMAGE, "mtp")
    changelog = entry.format("dsr1-fp8-b200-trt") + entry.format("dsr1-fp8-b200-trt-mtp")
    commit(repo, "2026-02-05T19:55:01Z", {master: plain + mtp, log: changelog})
    both = plain + config("dsr1-fp8-b200-trt-mtp", PLAIN_IMAGE, "mtp")
    changelog += entry.format("dsr1-fp8-b200-trt*")
    commit(repo, "2026-03-25T16:34:10Z", {master: both, log: changelog})
    commit(repo, "2026-03-25T16:36:00Z", {log: changelog + entry.format("dsr1-fp8-b200-trt")})
    out = tmp_path / "inferencex_runs.toml"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "inferencex_runs.py"), str(repo), "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    monkeypatch.setattr(inferencex_runs, "INFERENCEX_RUNS", out)
    inferencex_runs._runs.cache_clear()
    yield out
    inferencex_runs._runs.cache_clear()


def test_the_configurations_written_say_which_runs_decoded_speculatively(written):
    text = written.read_text()
    # The versions start with the first speculative configuration: the plain one's earlier version is
    # not needed (nothing before it could have been speculative).
    assert 'speculation_since = "2026-02-05T19:55:01Z"' in text
    # Versions: the plain one (unchanged from then on), the MTP one on its own image, then on the plain
    # one's; changes: the three that reran configurations from then on.
    assert text.count("[[trigger]]") == 3 and text.count("[[config]]") == 3
    assert '[1024, 1024, 8, 1, false, "mtp", [4, 8, 16]]' in text  # conc-start 4 to conc-end 16, doubling

    # A run on more GPUs than a node, or on a rack-scale system: InferenceX's multi-node sweeps took
    # MTP on and off, which its single-node configurations do not tell; DeepSeek-R1 alone has the head.
    for many in (
        row("2026-02-05T19:55:05Z", MTP_IMAGE) | {"tp_size": "16.0"},
        row("2025-11-17", "") | {"system": "gb200"},
    ):
        decoding = run_decoding(many)
        assert decoding.kind == EITHER and decoding.multi_node and "multi-node" in why_speculative(many)
    assert run_decoding(row("2025-11-17", "") | {"system": "gb200", "model_path": "openai/gpt-oss-120b"}) is None
    # Before the first speculative configuration took effect: plain, whatever ran.
    before = run_decoding(row("2026-01-10T12:00:04Z", PLAIN_IMAGE))
    assert before.kind == PLAIN and before.speculative is False and "2026-02-05" in before.where
    # Four seconds after the change that reran the MTP configuration alone: MTP, named with its commit.
    mtp = run_decoding(row("2026-02-05T19:55:05Z", MTP_IMAGE))
    assert mtp.kind == "mtp" and mtp.speculative is True
    assert "dsr1-fp8-b200-trt-mtp" in mtp.where and "2026-02-05T19:55:01Z" in mtp.where
    # A source that records the day only: every change of that day.
    for day in ("2026-02-05T00:00:00.000Z", "2026-02-05T00:00:00Z", "2026-02-05T00:00:00+00:00", "2026-02-05"):
        assert run_decoding(row(day, MTP_IMAGE)).kind == "mtp"
    # Both reran on one image: the row cannot say which.
    either = run_decoding(row("2026-03-25T16:34:14Z", PLAIN_IMAGE))
    assert either.kind == EITHER and either.speculative is None
    assert "dsr1-fp8-b200-trt, dsr1-fp8-b200-trt-mtp" in either.where
    # Two changes within the window: the nearest before the measured time that reran its shape.
    assert run_decoding(row("2026-03-25T16:36:04Z", PLAIN_IMAGE)).kind == PLAIN
    # Ten minutes after a change is not that change's run: the configurations then in effect decide
    # (the plain one alone had the old image on 2026-02-06).
    later = run_decoding(row("2026-02-06T10:00:00Z", PLAIN_IMAGE))
    assert later.kind == PLAIN and "in effect on 2026-02-06" in later.where
    # No configuration ran that shape (32 clients, 8,192 output tokens): not established.
    assert run_decoding(row("2026-02-05T19:55:05Z", MTP_IMAGE, clients=32)) is None
    assert run_decoding(row("2026-02-05T19:55:05Z", MTP_IMAGE, osl=8192)) is None
    # A measured field that is no time, or a time without a zone (read as UTC).
    assert run_decoding(row("last tuesday", MTP_IMAGE)) is None
    assert run_decoding(row("2026-02-05T19:55:05", MTP_IMAGE)).kind == "mtp"
    # An image given as the source's bare last field (as the database dumps give it).
    dumped = f"db-dump/2026-04-27; config_id=1; silicon_concurrency=4; measured=2026-02-05; {MTP_IMAGE}"
    dump = row("2026-02-05", MTP_IMAGE) | {"silicon_data_source": dumped}
    assert run_decoding(dump).kind == "mtp"
    assert run_decoding(dump | {"silicon_data_source": dump["silicon_data_source"].replace("post3", "post9")}) is None
    # Another source, or no measured time: nothing to read.
    assert (
        run_decoding(
            row("2026-02-05T19:55:05Z", MTP_IMAGE, source="source_file=/x/gap.csv")
            | {"silicon_data_source": "source_file=/x/gap.csv"}
        )
        is None
    )


def test_a_speculative_run_is_not_scored_and_says_why(written):
    mtp, either = row("2026-02-05T19:55:05Z", MTP_IMAGE), row("2026-03-25T16:34:14Z", PLAIN_IMAGE)
    assert (
        why_not_scored(mtp)
        == why_speculative(mtp)
        == ("speculative decoding (mtp: its configuration set it; the row does not say)")
    )
    assert why_not_scored(either).startswith("speculative decoding or not")
    assert why_speculative(row("2026-01-10T12:00:04Z", PLAIN_IMAGE)) is None


def test_the_shipped_configurations_on_the_samples_deepseek_runs():
    """engine_db/inferencex_runs.toml on real rows: DeepSeek-R1 FP8 on eight B200s with TensorRT-LLM,
    1,024 tokens in and out, 4 clients. 5d517074c (2026-02-05 19:55 UTC) moved the MTP configuration to
    TP 8, EP 1 on 1.2.0rc6.post3 and reran it alone: that row measured TPOT 5.4 ms, the plain one of
    2026-01-29 (ec7bafaae, 1.2.0rc6.post2) 10.3 ms. On 2026-03-25 (12ba0ae07) SGLang's plain and MTP
    configurations reran on one image: two rows of one shape, 6.7 and 8.8 ms, and neither says which."""
    rows = {r["id"]: r for r in load_silicon_sample()}
    prefix = "2026_03_25_deepseek_r1_b200_sxm_"
    mtp = run_decoding(rows[prefix + "trtllm_fp8_agg_1024x1024_c4_tp8_0_ep1_0_1021"])
    assert mtp.kind == "mtp" and "dsr1-fp8-b200-trt-mtp (rerun by 5d517074c" in mtp.where
    plain = run_decoding(rows[prefix + "trtllm_fp8_agg_1024x1024_c4_tp8_0_ep1_0_1190"])
    assert plain.kind == PLAIN and "dsr1-fp8-b200-trt (rerun by ec7bafaae" in plain.where
    for run_id in ("sglang_fp8_agg_1024x1024_c4_tp8_0_ep1_0_265", "sglang_fp8_agg_1024x1024_c4_tp8_0_ep1_0_284"):
        assert run_decoding(rows[prefix + run_id]).kind == EITHER
    # Before 2026-01-14 InferenceX had no speculative configuration on one node.
    early = [r for r in rows.values() if "measured=2025-12" in r["silicon_data_source"] and r["system"] != "gb200"]
    gpus = {r["id"]: float(r["tp_size"] or 1) * float(r["attention_dp_size"] or 1) for r in early}
    early = [r for r in early if r["model_path"] in INFERENCEX_MODELS and gpus[r["id"]] <= 8]
    assert len(early) > 50 and all(run_decoding(r).kind == PLAIN for r in early)
    # InferenceX's GB200 runs of November 2025 at TP 64 and 32 were multi-node, swept with MTP on and off.
    gb200 = run_decoding(rows["2026_04_06_deepseek_r1_gb200_trtllm_fp4_agg_8192x1024_c538_tp64_ep1_113"])
    assert gb200.kind == EITHER and gb200.multi_node
    # Other sources are not read, even one that records a measured time and clients.
    others = [r for r in rows.values() if r["silicon_data_source"].startswith("source_file=/")]
    assert others and all(run_decoding(r) is None for r in others)
    forged = others[0] | {
        "silicon_data_source": others[0]["silicon_data_source"] + "; silicon_concurrency=4; "
        "measured=2026-02-05T19:55:05Z",
        "model_path": "deepseek-ai/DeepSeek-R1",
    }
    assert run_decoding(forged) is None


def test_explain_names_the_configurations_of_a_run_left_out_and_of_one_scored():
    from roofline.validate_explain import explain, render_explain

    prefix = "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp8_agg_1024x1024_c4_tp8_0_ep1_0_"
    with pytest.raises(ValueError, match=r"not scored: speculative decoding \(mtp.*dsr1-fp8-b200-trt-mtp \(rerun by"):
        explain(prefix + "1021")
    text = render_explain(explain(prefix + "1190"))
    assert "Decoding: plain (InferenceX's configurations dsr1-fp8-b200-trt (rerun by ec7bafaae" in text


def test_the_changelog_is_read_as_inferencex_reads_it(tmp_path):
    """A change reruns the configurations its added entries name (``*`` alone a wildcard, over the
    whole key), unless InferenceX's sweep refused it: a deleted line, or [skip-sweep] while its
    workflow skipped such commits; a search space runs start to end doubling, then the end."""
    pytest.importorskip("yaml")
    gen = generator()
    assert gen.concurrencies({"conc-start": 4, "conc-end": 48}) == [4, 8, 16, 32, 48]
    assert gen.concurrencies({"conc-start": 4, "conc-end": 64}) == [4, 8, 16, 32, 64]
    assert gen.concurrencies({"conc-list": [64, 4]}) == [4, 64] and gen.concurrencies({"tp": 8}) == []
    assert gen.matches("dsr1-fp8-*-trt", "dsr1-fp8-b200-trt") and not gen.matches(
        "dsr1-fp8-*-trt", "dsr1-fp8-b200-trt-mtp"
    )
    assert not gen.matches("dsr1-fp8-b200-trt?", "dsr1-fp8-b200-trtx") and not gen.matches("dsr1", "dsr1-fp8")
    repo = tmp_path / "InferenceX"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    skip = "on:\n  push:\njobs:\n  sweep:\n    if: !contains(github.event.head_commit.message, '[skip-sweep]')\n"
    one = "- config-keys:\n    - dsr1-fp8-*-trt\n  description:\n    - word\n"
    first = commit(repo, "2026-02-01T00:00:00Z", {"perf-changelog.yaml": one, ".github/workflows/run-sweep.yml": skip})
    assert gen.changelog_keys(repo, first) == ["dsr1-fp8-*-trt"]  # not the one-word description
    two = one + "- config-keys:\n    - gptoss*\n"
    skipped = commit(repo, "2026-02-02T00:00:00Z", {"perf-changelog.yaml": two}, message="docs [skip-sweep]")
    assert gen.changelog_keys(repo, skipped) is None
    deleted = commit(repo, "2026-02-03T00:00:00Z", {"perf-changelog.yaml": "- config-keys:\n    - gptoss*\n"})
    assert gen.changelog_keys(repo, deleted) is None
    # Without the workflow's condition, [skip-sweep] no longer skips a main-branch sweep.
    commit(repo, "2026-02-04T00:00:00Z", {".github/workflows/run-sweep.yml": "on:\n  push:\n"})
    path = "perf-changelog.yaml"
    kept = commit(repo, "2026-02-05T00:00:00Z", {path: "- config-keys:\n    - gptoss*\n" + one}, message="[skip-sweep]")
    assert gen.changelog_keys(repo, kept) == ["dsr1-fp8-*-trt"]
