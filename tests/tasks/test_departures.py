"""Every benchmark doc has a "Where we depart from the paper" table, and every option it names
as giving the paper's behaviour exists: a `-o key=value` is one of the task's declared options
(`Task.default_options`), a `--flag` one of `launch <task>`'s (or its subcommands') options.
A renamed or removed option makes the table lie; this fails then."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
import typer

from veribatch.launch.cli import app
from veribatch.tasks.base import get_task

DOCS = Path(__file__).resolve().parents[2] / "docs"
TASKS = ("invbench", "cebench", "refute", "dafnycomp")
HEADING = "## Where we depart from the paper"
COLUMN = "paper's behaviour with"


def departures(task: str) -> list[dict[str, str]]:
    """The section's table rows as {header: cell}."""
    text = (DOCS / f"{task}.md").read_text()
    assert HEADING in text, f"docs/{task}.md has no '{HEADING}' section"
    section = text[text.index(HEADING) + len(HEADING):]
    section = section[:m.start()] if (m := re.search(r"^## ", section, re.MULTILINE)) else section
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert lines[1].replace("|", "").replace("-", "").strip() == "", lines[1]
    return [dict(zip(header, _cells(ln), strict=True)) for ln in lines[2:]]


def _cells(line: str) -> list[str]:
    """A table row's cells; a `|` inside backticks belongs to the cell."""
    cells, cur, code = [], "", False
    for ch in line.strip()[1:-1]:
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*cells, cur.strip()]


def named_options(cell: str) -> list[str]:
    """`-o key=value` and `--flag ...` spans of a cell."""
    return [span for span in re.findall(r"`([^`]+)`", cell) if span.startswith(("-o ", "--"))]


def _flags(task: str) -> set[str]:
    first = typer.main.get_command(app)
    first.list_commands(click.Context(first))  # registers every command (`launch.cli._LazyGroup`)
    group = typer.main.get_command(app)  # built again: the task groups with their subcommands
    cmd = group.get_command(click.Context(group), task)
    assert cmd is not None, task
    commands = [cmd, *getattr(cmd, "commands", {}).values()]  # typer's own click: no isinstance
    return {opt for c in commands for p in c.params for opt in p.opts}


@pytest.mark.parametrize("task", TASKS)
def test_every_option_named_in_the_departures_table_exists(task: str) -> None:
    rows = departures(task)
    assert len(rows) >= 3 and all(COLUMN in r for r in rows), rows[:1]
    options, flags = set(get_task(task).default_options()), _flags(task)
    named = [span for r in rows for span in named_options(r[COLUMN])]
    assert named, f"docs/{task}.md names no option in '{COLUMN}'"
    for span in named:
        if span.startswith("-o "):
            key = span[3:].split("=", 1)[0].strip()
            assert key in options, f"docs/{task}.md: {span!r}: {task} has no option {key!r}"
        else:
            flag = span.split()[0].split("=", 1)[0]
            assert flag in flags, f"docs/{task}.md: {span!r}: launch {task} has no {flag}"


def test_the_check_sees_a_missing_option() -> None:
    """The parser reads what the check needs: an invented option is caught."""
    row = {COLUMN: "`-o no_such_option=1` or `--no-such-flag 3`"}
    spans = named_options(row[COLUMN])
    assert spans == ["-o no_such_option=1", "--no-such-flag 3"]
    assert "no_such_option" not in get_task("refute").default_options()
    assert "--no-such-flag" not in _flags("refute") and "--verifier" in _flags("refute")
