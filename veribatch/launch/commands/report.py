"""``launch report RUN... [--history NIGHTLY_DIR]``: one self-contained HTML page.

Every table of each run with its coverage and the plots its task declared, provenance side
by side, the `launch regress` summary when exactly two runs are given (first = BASE), and
trends over nights from a nightly history.  The page is built by `aggregate/report.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from veribatch.launch.console import EXIT_INPUT
from veribatch.launch.rundir import RunNotFoundError, resolve_run

HISTORY_FILE = "history.parquet"


def history_file(path: Path) -> Path:
    """A nightly history directory or the parquet file itself."""
    return path / HISTORY_FILE if path.is_dir() else path


def report_cmd(
    runs: Annotated[list[str], typer.Argument(help="Run ids, names or directories; with two, the "
                                                   "first is the BASE of a regress summary.")],
    runs_dir: Annotated[Path | None, typer.Option("--runs-dir", help="Where run directories live.")] = None,
    history: Annotated[Path | None, typer.Option(help="Nightly history directory (or its "
                                                      "history.parquet): adds trends over nights.")] = None,
    out: Annotated[Path | None, typer.Option(help="Output file (default: LAST_RUN/tables/report.html).")] = None,
    title: Annotated[str, typer.Option(help="Page title.")] = "",
) -> None:
    """Write one static HTML page (no script, no network) for one or more runs."""
    from veribatch.aggregate.regress import RegressError, regress
    from veribatch.aggregate.report import build_report

    try:
        dirs = [resolve_run(r, runs_dir).root for r in runs]
        hist = history_file(history) if history is not None else None
        if hist is not None and not hist.is_file():
            raise ValueError(f"--history {history}: no {HISTORY_FILE} there")
        comparisons = [regress(dirs[0], dirs[1])] if len(dirs) == 2 else []
        page = build_report(dirs, history=hist, regressions=comparisons, title=title)
    except (RegressError, RunNotFoundError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(EXIT_INPUT) from None
    target = out or dirs[-1] / "tables" / "report.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    typer.echo(f"report: {target} ({len(page) // 1024} KiB)")


def register(app: typer.Typer, task_apps: dict[str, typer.Typer]) -> None:
    app.command("report")(report_cmd)
