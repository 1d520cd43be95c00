"""DafnyComp-only subcommands: ``launch dafnycomp strip FILE`` and ``launch dafnycomp
integrity ORIGINAL CANDIDATE`` — the task's stripping and integrity check on files, for
looking at one program without planning a run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise typer.BadParameter(f"{path}: {e}") from None


def strip_cmd(program: Annotated[Path, typer.Argument(help="a Dafny program with its specifications")]) -> None:
    """Print the program without its contract clauses (DafnyComp §3.3); counts go to stderr."""
    from veribatch.tasks.dafnycomp.strip import strip_specs
    from veribatch.tasks.dafnycomp.syntax import DafnySyntaxError

    try:
        result = strip_specs(_read(program))
    except DafnySyntaxError as e:
        typer.echo(f"error: {program}: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(result.text, nl=False)
    removed = ", ".join(f"{k} {n}" for k, n in sorted(result.removed.items())) or "nothing"
    typer.echo(f"{program}: {result.declarations} declarations; removed {removed}", err=True)


def integrity_cmd(
    original: Annotated[Path, typer.Argument(help="the benchmark's program (with specs)")],
    candidate: Annotated[Path, typer.Argument(help="a model's whole program")],
) -> None:
    """Check a candidate against its original under the strict protocol; exit 0 when honest,
    1 for a cheat or unreadable (allowed App. H-style edits are listed, not refused)."""
    from veribatch.tasks.dafnycomp.integrity import CHEAT_KINDS, NOTES, check

    got = check(_read(original), _read(candidate))
    typer.echo(got.status)
    for kind in got.kinds:
        typer.echo(f"  {kind}: {CHEAT_KINDS[kind]}")
    for detail in got.details:
        typer.echo(f"    {detail}")
    for note in got.notes:
        typer.echo(f"  allowed: {note}: {NOTES[note]}")
    raise typer.Exit(0 if got.ok else 1)


def register(app: typer.Typer, task_apps: dict[str, typer.Typer]) -> None:
    sub = task_apps.get("dafnycomp")
    if sub is None:
        return
    sub.command("strip")(strip_cmd)
    sub.command("integrity")(integrity_cmd)
