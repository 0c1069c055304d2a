"""The summary table, the failing inputs listed per class, and the rerun of one case."""

from __future__ import annotations

import re
import shlex
import shutil
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

from benchmarks.hostile.cases import _stub_measurements, _WouldMeasure
from benchmarks.hostile.runners import _argv, materialize, run_page
from benchmarks.hostile.values import BIG_MB, ENTRIES, FAIL_CLASSES, FLAG_CLASSES, ROOT, SLOW_S, _short
from benchmarks.hostile.workers import _show_input


def summarize(cases: list[dict], results: list[dict], regenerate) -> dict:
    """Counts per entry point; ``regenerate(task)`` rebuilds a case whose worker could not describe
    it (a hang or a crash)."""
    summary: dict = {}
    for case, result in zip(cases, results):
        if result["outcome"] == "skip":
            continue
        entry = summary.setdefault(
            case["entry"],
            {
                "cases": 0,
                "valid": 0,
                "clean_error": 0,
                **{c: 0 for c in FAIL_CLASSES},
                **{c: 0 for c in FLAG_CLASSES},
                "slowest_accepted_s": 0.0,
                "slowest_accepted": None,
                "peak_accepted_mb": 0.0,
                "peak_accepted": None,
                "slowest_any_s": 0.0,
                "total_wall_s": 0.0,
                "failures": defaultdict(list),
            },
        )
        entry["cases"] += 1
        outcome = result["outcome"]
        entry[outcome] += 1
        shown = result.get("input") or (_show_input(regenerate(case)) if outcome in FAIL_CLASSES else "")
        record = {
            "id": case["id"],
            "input": shown,
            "message": result["message"],
            "wall_s": round(result["wall"], 3),
            "mb": round(result["mb"], 1),
        }
        if outcome in FAIL_CLASSES:
            entry["failures"][outcome].append(record)
        entry["slowest_any_s"] = max(entry["slowest_any_s"], result["wall"])
        entry["total_wall_s"] += result["wall"]
        if outcome == "valid":
            if result["wall"] > entry["slowest_accepted_s"]:
                entry["slowest_accepted_s"], entry["slowest_accepted"] = result["wall"], record
            if result["mb"] > entry["peak_accepted_mb"]:
                entry["peak_accepted_mb"], entry["peak_accepted"] = result["mb"], record
            if result["wall"] > SLOW_S:
                entry["slow"] += 1
                entry["failures"]["slow"].append(record)
            if result["mb"] > BIG_MB:
                entry["big_memory"] += 1
                entry["failures"]["big_memory"].append(record)
    return summary


COLUMNS = [
    ("cases", "cases"),
    ("valid", "valid"),
    ("clean_error", "clean err"),
    ("traceback", "traceback"),
    ("uncaught", "page exc"),
    ("hang", "hang"),
    ("unclean_error", "bad error"),
    ("nan_json", "NaN JSON"),
    ("memory_error", "MemoryError"),
    ("crash", "crash"),
    ("slow", ">5 s"),
    ("big_memory", ">1 GB"),
]


def render(summary: dict, examples: int, wall: float, seed: int) -> str:
    header = ["entry point"] + [title for _, title in COLUMNS] + ["slowest ok s", "peak ok MB"]
    rows = []
    totals = Counter()
    for name in ENTRIES:
        if name not in summary:
            continue
        s = summary[name]
        rows.append(
            [name]
            + [f"{s[key]:,}" for key, _ in COLUMNS]
            + [f"{s['slowest_accepted_s']:.2f}", f"{s['peak_accepted_mb']:.1f}"]
        )
        totals.update({key: s[key] for key, _ in COLUMNS})
    rows.append(
        ["total"]
        + [f"{totals[key]:,}" for key, _ in COLUMNS]
        + [
            f"{max((s['slowest_accepted_s'] for s in summary.values()), default=0):.2f}",
            f"{max((s['peak_accepted_mb'] for s in summary.values()), default=0):.1f}",
        ]
    )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    out = [
        f"hostile run: seed {seed}, {totals['cases']:,} cases in {wall:.0f} s",
        "",
        line(header),
        line(["-" * w for w in widths]),
    ]
    out += [line(r) for r in rows[:-1]] + [line(["-" * w for w in widths]), line(rows[-1])]
    failures = [
        (name, cls, summary[name]["failures"][cls])
        for name in ENTRIES
        if name in summary
        for cls in (*FAIL_CLASSES, *FLAG_CLASSES)
        if summary[name]["failures"].get(cls)
    ]
    if failures:
        out += ["", f"failing inputs (first {examples} per class; rerun one with --seed {seed} --repro ID):"]
        for name, cls, items in failures:
            kinds = Counter(_kind(item["message"]) for item in items)
            out.append(
                f"\n[{name}] {cls}: {len(items)} case(s); by message: "
                + "; ".join(f"{n}× {k}" for k, n in kinds.most_common(6))
            )
            for item in items[:examples]:
                out.append(f"  {item['id']}  {item['wall_s']:.2f} s  {item['mb']:.0f} MB  {item['message']}")
                out.append(f"      {item['input']}")
    else:
        out += ["", "no failing inputs"]
    out += [
        "",
        "MB: the peak a case adds over its worker's memory (subprocess: the child's whole peak RSS); "
        f"a case over {SLOW_S:g} s or {BIG_MB:g} MB that was accepted counts under >5 s / >1 GB.",
    ]
    return "\n".join(out)


def _kind(message: str) -> str:
    """A message with its numbers and quoted values blanked: failures grouped by cause."""
    message = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", message)
    return re.sub(r"\d[\d_.e+-]*", "N", message)[:90]


def repro(case: dict) -> int:
    folder = Path(tempfile.gettempdir()) / "hostile-repro" / case["id"]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    materialize(case, folder)
    print(f"case {case['id']}: {case['desc']}")
    print(f"files in {folder}" if case.get("files") else "no files")
    if case["mode"] in ("cli", "subprocess"):
        argv = _argv(case, folder)
        print("command: python -m roofline " + shlex.join(argv))
        _stub_measurements()
        from roofline.cli import main

        try:
            return main(argv)
        except _WouldMeasure:
            print("(measure passed its checks; it would measure now)")
            return 0
    if case["mode"] == "parse_results":
        from roofline.measure.schema import parse_results

        print(f"parse_results(open({str(folder / 'results.json')!r}).read(), 'upload.json')")
        parse_results((folder / "results.json").read_text(errors="surrogateescape"), "upload.json")
        print("parsed")
        return 0
    if case["mode"] == "decode":
        from roofline.hardware import Hardware
        from roofline.models import ModelConfig
        from roofline.records import decode_record

        print(f"decode_record({_short(case['text'], 200)!r}, ...)")
        print(decode_record(case["text"], ModelConfig if case["param"] == "cmodel" else Hardware, case["param"]))
        return 0
    from urllib.parse import urlencode

    print(f"page {case['page']}?{urlencode(case['params'], doseq=True)[:2000]}")
    result = run_page(case, 120)
    print(result)
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / case["page"]), default_timeout=120)
    for key, values in case["params"].items():
        at.query_params[key] = values if len(values) > 1 else values[0]
    at.run()
    for e in at.exception:
        print(e.message)
        print("\n".join(e.stack_trace))
    return 0
