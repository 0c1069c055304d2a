"""Every `python3 -m roofline ...` command in README.md's code blocks runs as pasted.

Commands run in-process through the command line's ``main`` (one interpreter, warm caches), from
the repository root as the README says. A code block right after a line
``<!-- readme-test: skip: <reason> -->`` is skipped with that reason (it measures the device)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from roofline.cli import main

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "python3 -m roofline "
SKIP = re.compile(r"<!--\s*readme-test:\s*skip:\s*(.+?)\s*-->")


def readme_commands(text: str) -> list[tuple[str, str | None]]:
    """(command, skip reason or None) for every `python3 -m roofline` line of the fenced code
    blocks, with backslash continuations joined."""
    commands = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        marker = SKIP.search(lines[i - 1]) if i else None
        block = []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            block.append(lines[i])
            i += 1
        i += 1
        for command in "\n".join(block).replace("\\\n", " ").splitlines():
            command = " ".join(command.split())
            if command.startswith(PREFIX):
                commands.append((command, marker.group(1) if marker else None))
    return commands


COMMANDS = readme_commands((ROOT / "README.md").read_text())


def test_the_readme_has_commands_and_none_with_placeholders():
    assert len(COMMANDS) >= 15
    for command, _ in COMMANDS:
        assert not re.search(r"\[|\]|\||\.\.\.|…", command), command


@pytest.mark.parametrize(("command", "skip"), COMMANDS, ids=[c for c, _ in COMMANDS])
def test_readme_command_runs_as_pasted(command, skip, capsys, monkeypatch):
    if skip:
        pytest.skip(skip)
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("ROOFLINE_HARDWARE_DIR", raising=False)
    argv = shlex.split(command)[len(shlex.split(PREFIX)) :]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse rejects the arguments
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 0, f"{command}\n{err}"
    assert out.strip(), command
