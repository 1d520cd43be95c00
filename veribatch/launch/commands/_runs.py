"""What the task commands that read finished runs share (``launch invbench compare | table4``,
``launch refute compare``...): each run read the way ``launch aggregate`` reads it
(`aggregate.records`: completed shards only, so it works from any login node), and the
resulting tables written and printed.  The leading underscore keeps the CLI from
loading this module as a command extension."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from veribatch.launch.rundir import resolve_run
from veribatch.rundir.manifest import Manifest

if TYPE_CHECKING:  # pandas is only needed when a command runs, not when `launch` starts
    import pandas as pd

    from veribatch.aggregate.table import Table

LoadedRun = tuple[str, Path, Manifest, dict[str, "pd.DataFrame"]]


def stage_frames(run_dir: Path) -> tuple[Manifest, dict[str, pd.DataFrame]]:
    """Manifest and merged records of the completed shards of every stage."""
    from veribatch.aggregate.records import load_run

    manifest, stages = load_run(run_dir)
    return manifest, {name: sr.frame for name, sr in stages.items()}


def load_runs(runs: list[str]) -> list[LoadedRun]:
    """(as given, run directory, manifest, stage frames) per run id, name or directory."""
    loaded = []
    for r in runs:
        root = resolve_run(r).root
        manifest, frames = stage_frames(root)
        loaded.append((r, root, manifest, frames))
    return loaded


def show_tables(tables: Iterable[Table], out: Path) -> None:
    """Write each table as md and csv into `out` and print it with where it went."""
    from veribatch.aggregate.render import to_markdown, write_table

    for table in tables:
        paths = write_table(table, out, ("md", "csv"))
        typer.echo(to_markdown(table))
        typer.echo("→ " + ", ".join(str(p) for p in paths))
