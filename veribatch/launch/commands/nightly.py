"""``launch nightly SUITE``: submit a pinned suite for tonight, compare finished runs with the
last good night, append the figures to the history.  Safe to run from cron/scrontab as often
as you like (docs/nightly.md has the lines): a second call in one night submits nothing new.

Exit codes: 0 complete, no regression · 1 regressions · 2 bad suite / runs not comparable ·
3 the cluster refused a submission · 4 runs still in progress (call again later, or --wait)
· 5 shards failed (the next call resumes them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def nightly_cmd(
    suite: Annotated[str, typer.Argument(help="Suite name (nightly/NAME.yaml) or YAML path.")],
    night: Annotated[str | None, typer.Option(help="Night label (default: today's date, "
                                                   "YYYY-MM-DD).")] = None,
    history: Annotated[Path | None, typer.Option(help="History directory (overrides the suite's "
                                                      "'history').")] = None,
    executor: Annotated[str | None, typer.Option(help="local | slurm (overrides the suite).")] = None,
    profile: Annotated[str | None, typer.Option(help="SLURM profile (overrides the suite).")] = None,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Wait for SLURM runs to finish, "
                                       "then compare (default: submit and return).")] = False,
    wait_timeout: Annotated[float, typer.Option(help="--wait: give up after this many seconds.")] = 6 * 3600,
    poll: Annotated[float, typer.Option(help="--wait: seconds between checks.")] = 10.0,
    report: Annotated[bool, typer.Option("--report/--no-report", help="Write nights/NIGHT/report.html.")] = True,
) -> None:
    """Run tonight's suite (resuming what failed), compare each finished run with the last good
    night, append to the history parquet, and write the night's report page."""
    from veribatch.launch.nightly import (
        EXIT_INPUT,
        NightBusyError,
        SuiteError,
        load_suite,
        run_night,
    )
    from veribatch.launch.nightly import EXIT_RUNNING as BUSY

    try:
        s = load_suite(suite, history)
        outcome = run_night(s, night, executor=executor, profile=profile, wait=wait,
                            wait_timeout_s=wait_timeout, poll_s=poll, report=report, echo=typer.echo)
    except NightBusyError as e:
        typer.echo(f"busy: {e}", err=True)
        raise typer.Exit(BUSY) from None
    except (SuiteError, ValueError, KeyError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(EXIT_INPUT) from None
    for e in outcome.entries:
        line = f"{e.name}: {e.status}"
        if e.status == "complete":
            line += (f"; against night {e.reference_night}: " + {0: "no regression", 1: f"{e.regressions} "
                     "regression(s)", 2: "not comparable"}.get(e.regress_exit, "?")
                     if e.reference_night else "; no earlier good night to compare with")
        if e.message:
            line += f" ({e.message})"
        typer.echo(line)
        if e.regress_exit == 1:
            typer.echo(e.regress_md)
    typer.echo(f"night {outcome.night}: {outcome.suite.history / 'nights' / outcome.night}"
               + (f"; report {outcome.report}" if outcome.report else ""))
    raise typer.Exit(outcome.exit_code)


def register(app: typer.Typer, task_apps: dict[str, typer.Typer]) -> None:
    app.command("nightly")(nightly_cmd)
