"""``launch regress BASE CURRENT``: per-instance and per-cell changes between two runs.

Exit codes a cron job or CI can act on: 0 no regression, 1 regressions, 2 the runs could
not be compared (different task or dataset content, unreadable run directory, bad option).
The comparison itself lives in `aggregate/regress.py` (it reads files only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from veribatch.launch.console import EXIT_INPUT
from veribatch.launch.rundir import RunNotFoundError, resolve_run

EXIT_REGRESSED = 1  # regress's own meaning of 1: something got worse

TimeFactor = Annotated[float, typer.Option(help="A record is slower/faster when its time changes by "
                                                "this factor or more.")]
MinTime = Annotated[float, typer.Option("--min-time-s", help="...and by at least this many seconds.")]
NearLimit = Annotated[float, typer.Option(help="A time at or above this fraction of its limit is "
                                               "'near the limit' (flapping-timeout filter).")]
Alpha = Annotated[float, typer.Option(help="Significance level for metrics from sampled generations.")]
Tolerance = Annotated[float | None, typer.Option(help="Also count non-sampled metrics that get worse by "
                                                      "more than this relative change (default: shown, "
                                                      "not counted).")]


def regress_cmd(
    base: Annotated[str, typer.Argument(help="The reference run (id, name or directory).")],
    current: Annotated[str, typer.Argument(help="The run to check.")],
    runs_dir: Annotated[Path | None, typer.Option("--runs-dir", help="Where run directories live.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="stdout format: md | json")] = "md",
    out: Annotated[Path | None, typer.Option(help="Also write regress.md and regress.json into "
                                                  "this folder.")] = None,
    time_factor: TimeFactor = 2.0,
    min_time_s: MinTime = 1.0,
    near_limit: NearLimit = 0.8,
    alpha: Alpha = 0.05,
    metric_tolerance: Tolerance = None,
    history: Annotated[list[str] | None, typer.Option(
        "--history", help="An earlier run of the same series (repeatable): with 3+ clean "
                          "timings of an instance, its time is judged against its own spread "
                          "(docs/nightly.md).")] = None,
) -> None:
    """Compare two runs: verdict flips, lost decisions, new errors, missing records, time
    changes (flapping timeouts filtered), and every declared table metric (significance-tested
    when it comes from sampled generations)."""
    from veribatch.aggregate.regress import RegressError, Thresholds, regress
    from veribatch.aggregate.regress_render import to_markdown

    if fmt not in ("md", "json"):
        typer.echo(f"error: --format {fmt!r}: expected md or json", err=True)
        raise typer.Exit(EXIT_INPUT)
    try:
        th = Thresholds(time_factor=time_factor, min_time_s=min_time_s, near_limit=near_limit,
                        alpha=alpha, metric_tolerance=metric_tolerance)
        b, c = resolve_run(base, runs_dir), resolve_run(current, runs_dir)
        past = [resolve_run(h, runs_dir).root for h in history or ()]
        report = regress(b.root, c.root, th, history=past)
    except (RegressError, RunNotFoundError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(EXIT_INPUT) from None
    md = to_markdown(report)
    data = report.to_json()
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "regress.md").write_text(md, encoding="utf-8")
        (out / "regress.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    typer.echo(md if fmt == "md" else json.dumps(data, indent=1))
    if report.refused:
        typer.echo(f"error: cannot compare: {report.refused}", err=True)
    raise typer.Exit(report.exit_code)


def register(app: typer.Typer, task_apps: dict[str, typer.Typer]) -> None:
    app.command("regress")(regress_cmd)
