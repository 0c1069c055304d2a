"""Request traces in the shapes public traces are published in: Azure's LLM inference traces
and BurstGPT (CSV), Mooncake and the documented JSONL; arrivals worked by hand, failed requests
left out and counted, a slice of a large file, and bad files named by line and column."""

from __future__ import annotations

import json

import numpy as np
import pytest

from roofline.serving.simulation.traces import MAX_TRACE_BYTES, read_trace

AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:16:46.6805900,20000,5000
2023-11-16 18:17:00.0000000,0,7
"""

BURSTGPT = """Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
45,ChatGPT,1087,230,1317,Conversation log
118,GPT-4,417,276,693,Conversation log
120,GPT-4,300,0,300,API log
"""


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_azures_trace_reads_its_wall_clock_times_as_seconds_from_the_first(tmp_path):
    """18:15:46.6805900 is 0; 18:15:50.9951690 is 4.314579 s later; 18:16:46.6805900 is 60 s.
    The request with 0 context tokens is left out and counted."""
    trace = read_trace(_write(tmp_path, "AzureLLMInferenceTrace_conv.csv", AZURE))
    assert trace.arrival_s == pytest.approx([0.0, 4.314579, 60.0], abs=1e-6)
    assert list(trace.prompt_tokens) == [374, 396, 20000]
    assert list(trace.output_tokens) == [44, 109, 5000]
    assert trace.skipped == 1 and trace.concurrency is None


def test_burstgpts_trace_is_in_seconds_however_large(tmp_path):
    """Timestamps 5, 45, 118 s: arrivals 0, 40, 113 s. The failed request (0 response tokens) is
    left out. A later file's timestamps (past 1e6 s, BurstGPT_2's start) stay seconds, not ms."""
    trace = read_trace(_write(tmp_path, "BurstGPT_1.csv", BURSTGPT))
    assert list(trace.arrival_s) == [0.0, 40.0, 113.0]
    assert list(trace.prompt_tokens) == [472, 1087, 417] and list(trace.output_tokens) == [18, 230, 276]
    assert trace.skipped == 1
    late = BURSTGPT.splitlines()[0] + "\n5270414.0,ChatGPT,10,5,15,x\n5270416.5,ChatGPT,20,6,26,x\n"
    assert list(read_trace(_write(tmp_path, "BurstGPT_2.csv", late)).arrival_s) == [0.0, 2.5]
    # The release with sessions: two more columns, found by name.
    sessions = "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    sessions += "3.5,ab-12,0.9,ChatGPT,100,20,120,Conversation log\n1.5,cd-34,1.1,GPT-4,50,10,60,API log\n"
    trace = read_trace(_write(tmp_path, "BurstGPT_3.csv", sessions))
    assert list(trace.arrival_s) == [0.0, 2.0] and list(trace.prompt_tokens) == [50, 100]


def test_a_csv_with_the_jsonl_columns_and_mooncakes_milliseconds(tmp_path):
    trace = read_trace(_write(tmp_path, "t.csv", "arrival_s,prompt_tokens,output_tokens\n0.5,10,2\n0.25,20,3\n"))
    assert list(trace.arrival_s) == [0.0, 0.25] and list(trace.prompt_tokens) == [20, 10]
    # Mooncake's JSONL: timestamps in milliseconds.
    lines = [
        {"timestamp": 27482 + 1000 * i, "input_length": 6955, "output_length": 52, "hash_ids": [i]} for i in range(3)
    ]
    path = _write(tmp_path, "mooncake.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n")
    assert list(read_trace(path).arrival_s) == [0.0, 1000.0, 2000.0]  # below 1e6: read as seconds
    lines = [{"timestamp": 1_700_000_000 + 500 * i, "input_length": 10, "output_length": 2} for i in range(3)]
    path = _write(tmp_path, "ms.jsonl", "\n".join(json.dumps(x) for x in lines))
    assert list(read_trace(path).arrival_s) == [0.0, 0.5, 1.0]  # above 1e6: milliseconds


def test_the_first_requests_of_a_file_larger_than_the_limit(tmp_path):
    path = tmp_path / "big.csv"
    row = "1.0,ChatGPT,100,20,120," + "x" * 1000 + "\n"
    with path.open("w") as f:
        f.write(BURSTGPT.splitlines()[0] + "\n")
        for i in range(MAX_TRACE_BYTES // len(row) + 10):
            f.write(f"{i}" + row[3:])
    with pytest.raises(ValueError, match="larger than 64 MiB; simulate its first requests"):
        read_trace(path)
    first = read_trace(path, first=5)
    assert first.count == 5 and list(first.arrival_s) == [0.0, 1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="more than 3 requests"):
        read_trace(_write(tmp_path, "b.csv", BURSTGPT.replace(",0,300", ",9,309")), limit=3)


@pytest.mark.parametrize(
    "text, message",
    [
        ("time,prompt,output\n1,2,3\n", "trace line 1: neither a JSON object .a JSONL trace. nor a CSV header"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,5,5\n", "trace line 2: TIMESTAMP must be a date and time"),
        (
            "Timestamp,Request tokens,Response tokens\n1,-5,3\n",
            r"trace line 2: Request tokens must be an integer in \[0",
        ),
        ("Timestamp,Request tokens,Response tokens\n1,5.5,3\n", "trace line 2: Request tokens must be an integer"),
        ("Timestamp,Request tokens,Response tokens\nnan,5,3\n", "trace line 2: Timestamp must be a number in"),
        ("Timestamp,Request tokens,Response tokens\n1,5\n", "trace line 2: 2 columns where the header has 3"),
        ("Timestamp,Request tokens,Response tokens\n", "has no requests"),
        ("Timestamp,Request tokens,Response tokens\n1,0,3\n2,4,0\n", r"has no requests \(2 without prompt or output"),
        ('{"timestamp": 1e14, "input_length": 1, "output_length": 1}', r"timestamp must be a number in \(-1, 1e13\]"),
    ],
)
def test_a_bad_trace_is_named_by_line_and_column(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        read_trace(_write(tmp_path, "bad.csv", text))


def test_a_line_too_long_or_not_text_is_refused(tmp_path):
    path = tmp_path / "long.csv"
    path.write_bytes(b"Timestamp,Request tokens,Response tokens\n1,2," + b"3" * (2 << 20) + b"\n")
    with pytest.raises(ValueError, match="trace line 2: longer than 1 MiB"):
        read_trace(path)
    path.write_bytes(b"Timestamp,Request tokens,Response tokens\n\xff\xfe,2,3\n")
    with pytest.raises(ValueError, match="trace line 2: not UTF-8 text"):
        read_trace(path)


def test_serve_simulates_a_public_trace_and_a_slice_of_it(tmp_path, capsys):
    from roofline.cli import main

    path = _write(tmp_path, "BurstGPT_1.csv", BURSTGPT)
    argv = ["serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--trace", str(path)]
    assert main(argv + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["completed"] == 3 and data["load"] == {
        "kind": "trace",
        "file": str(path),
        "requests": 3,
        "skipped": 1,
    }
    assert main(argv) == 0
    assert "(1 request without prompt or output tokens left out)" in capsys.readouterr().out
    assert main(argv + ["--requests", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["completed"] == 2


def test_a_timestamps_unit_is_judged_on_the_whole_file_not_the_slice_read(tmp_path):
    """Mooncake's milliseconds: 2,000 requests a second apart, timestamps 0 to 1,999,000. Read
    whole or its first 500 lines, they are a second apart; only ``timestamp`` is read so, never
    ``arrival_s``; epoch milliseconds are read too."""
    lines = [json.dumps({"timestamp": 1000 * i, "input_length": 500, "output_length": 20}) for i in range(2000)]
    path = _write(tmp_path, "mooncake.jsonl", "\n".join(lines))
    assert read_trace(path).arrival_s[-1] == 1999.0
    for first in (500, 1001, 1002):
        part = read_trace(path, first=first)
        assert part.count == first and part.arrival_s[-1] == first - 1.0
    seconds = _write(tmp_path, "s.jsonl", '{"arrival_s": 2000000, "prompt_tokens": 5, "output_tokens": 2}\n' * 2)
    seconds.write_text(seconds.read_text() + '{"arrival_s": 2000010, "prompt_tokens": 5, "output_tokens": 2}\n')
    assert list(read_trace(seconds).arrival_s) == [0.0, 0.0, 10.0]
    epoch = [json.dumps({"timestamp": 1.7e12 + 250 * i, "input_length": 5, "output_length": 2}) for i in range(3)]
    assert list(read_trace(_write(tmp_path, "epoch.jsonl", "\n".join(epoch))).arrival_s) == [0.0, 0.25, 0.5]


def test_a_large_file_whose_first_lines_leave_the_unit_open_is_refused(tmp_path):
    path = tmp_path / "big.jsonl"
    pad = "x" * 2000
    with path.open("w") as f:
        for i in range(MAX_TRACE_BYTES // 2000 + 10):
            f.write(json.dumps({"timestamp": i, "input_length": 5, "output_length": 2, "pad": pad}) + "\n")
    with pytest.raises(ValueError, match="none of whose first lines says: write the arrivals as arrival_s"):
        read_trace(path, first=100)


def test_the_request_limit_counts_the_requests_kept(tmp_path):
    trace = read_trace(_write(tmp_path, "b.csv", BURSTGPT), limit=3)  # 4 lines, one of them a failed request
    assert trace.count == 3 and trace.skipped == 1
    with pytest.raises(ValueError, match=r"more than 2 requests; simulate its first \(--requests N\)"):
        read_trace(_write(tmp_path, "c.csv", BURSTGPT), limit=2)


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"Timestamp,Request tokens,Response tokens\n1,\xc2\xb2,3\n", r"Request tokens must be an integer .*'²'"),
        (b"Timestamp,Request tokens,Response tokens\n1," + b"9" * 5000 + b",3\n", "Request tokens must be an integer"),
        (b"Timestamp,Request tokens,Response tokens\r1,2,3\r2,3,4\r", "not a CSV row"),
        (b'Timestamp,Request tokens,Response tokens\n1,2,"' + b"3" * 200_000 + b'"\n', "not a CSV row"),
    ],
)
def test_odd_cells_are_named_not_a_traceback(tmp_path, raw, message):
    path = tmp_path / "odd.csv"
    path.write_bytes(raw)
    with pytest.raises(ValueError, match=message):
        read_trace(path)


def test_a_byte_order_mark_is_read_past(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 2}\n')
    assert read_trace(path).count == 1
    path.write_bytes(b"\xef\xbb\xbf" + BURSTGPT.encode())
    assert read_trace(path).count == 3


def _serving(**params):
    from tests.page_helpers import page

    return page("views/serving_page.py", hw="h100-sxm", view="Under load", **params)


def test_the_serving_page_asks_for_a_trace_and_says_it_cannot_travel_in_the_url():
    at = _serving(load_kind="trace")
    assert not at.exception and not at.error, [e.message for e in at.exception]
    said = " ".join(i.value for i in at.info)
    assert (
        "Upload a trace to simulate its requests as they arrived" in said and "cannot travel in the page's URL" in said
    )
    assert any("max requests/s" in d.value.columns for d in at.dataframe)  # the capacity table still shows
    assert any("the trace file is not in it" in c.value for c in at.caption)  # the Share panel says so


def test_the_page_runs_an_uploaded_traces_requests_as_they_arrived():
    """The page's run of a trace (what an upload hands it): every request of the file's first lines,
    at its own arrival, not placed on the sweep of the page's lengths."""
    from dashboard.serving_arrivals import Trace
    from roofline.hardware import get_hardware
    from roofline.models import get_model
    from roofline.serving import Traffic
    from roofline.serving.simulation.metrics import Targets
    from roofline.serving.simulation.sweep import load_run
    from roofline.serving.simulation.traces import parse_trace
    from roofline.settings import Settings
    from roofline.workload import Precision

    trace = Trace("BurstGPT_1.csv", parse_trace(BURSTGPT.encode(), "BurstGPT_1.csv", 5000, 3))
    assert trace.requests.count == 3 and list(trace.requests.arrival_s) == [0.0, 40.0, 113.0]
    run = load_run(
        get_model("llama-3.1-8b"),
        get_hardware("h100-sxm"),
        Traffic(1024, 128),
        Precision(),
        1,
        Settings(),
        True,
        trace.requests,
        Targets(),
    )
    assert run["completed"] == 3 and run["requests"] == 3
    # 40 s apart, each prompt meets an idle server: its TTFT is its own prefill, well under a second.
    assert all(0 < t < 1 for t in run["per_request"]["ttft_s"])
    # The server over the run: empty between the requests, drawn at 0, not joined across the gaps.
    time_s, running = np.asarray(run["series"]["time_s"]), np.asarray(run["series"]["running"])
    assert np.all(np.diff(time_s) >= 0)
    for arrival in (40.0, 113.0):  # each gap ends at 0 as the next request arrives, and began at 0
        at = np.flatnonzero(time_s == arrival)
        assert at.size and running[at[0]] == 0 and running[at[0] - 1] == 0
    assert run["duration_s"] > 113.0  # the last request arrives 113 s in


def test_a_slice_reads_no_further_than_it_needs(tmp_path):
    """Lines past the slice asked for are not requests: a bad one there is no error. A CSV in
    seconds, or JSONL arrivals in seconds, say nothing of a unit, so the read stops at the slice."""
    rows = [BURSTGPT.splitlines()[0]] + [f"{i},ChatGPT,10,2,12,x" for i in range(100)] + ["oops,ChatGPT,1,1,2,x"]
    path = _write(tmp_path, "b.csv", "\n".join(rows) + "\n")
    assert read_trace(path, first=5).count == 5
    with pytest.raises(ValueError, match="trace line 102: Timestamp must be a number"):
        read_trace(path)
    lines = [json.dumps({"arrival_s": i, "prompt_tokens": 5, "output_tokens": 2}) for i in range(100)]
    cut = _write(tmp_path, "cut.jsonl", "\n".join(lines) + '\n{"arrival_s": 100, "prompt_t')
    assert read_trace(cut, first=10).count == 10
    # A timestamp's unit is still read from the lines past the slice, a bad one there skipped.
    stamps = [json.dumps({"timestamp": 1000 * i, "input_length": 5, "output_length": 2}) for i in range(1500)]
    mixed = _write(tmp_path, "ms.jsonl", "\n".join(stamps[:10] + ["{not json"] + stamps[10:]))
    assert read_trace(mixed, first=10).arrival_s[-1] == 9.0


def test_a_line_nested_too_deep_is_named(tmp_path):
    deep = '{"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 2, "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(ValueError, match="trace line 1: not JSON"):
        read_trace(_write(tmp_path, "deep.jsonl", deep + "\n"))


def test_an_arrival_in_seconds_is_bounded_as_before():
    from roofline.serving.simulation.traces import parse_trace

    with pytest.raises(ValueError, match=r"arrival_s must be a number in \(-1, 1e12\]"):
        parse_trace(b'{"arrival_s": 1e13, "prompt_tokens": 5, "output_tokens": 2}\n')


def test_an_empty_trace_path_is_named_as_empty():
    """An empty --trace had been reported as "trace: . is not a file"."""
    import pytest

    from roofline.serving.simulation.traces import read_trace

    with pytest.raises(ValueError, match="^trace: expected a file, got an empty path$"):
        read_trace("")
