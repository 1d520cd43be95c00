"""What the `launch` host and its commands (`launch/commands/*`, `tasks/<name>/cli.py`)
print and how they exit: the consoles, the exit codes scripts can trust, known errors
mapped to one line and a code (`guarded`), the plan and the run report.

One module both sides import, so a command never reaches into the host's privates and
every command prints and exits the same way.  Imports only Typer at start-up (rich and
the run machinery on first use), as `launch status` is polled.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from .plan import Plan
    from .run_control import ExecChoice, LaunchOutcome
    from .rundir import RunDir

EXIT_OK, EXIT_INCOMPLETE, EXIT_INPUT, EXIT_CLUSTER, EXIT_IN_PROGRESS = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130


class _LazyConsole:
    """A rich Console made on first use: importing rich costs start-up time `--help` and
    `status --json` do not need."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def get(self) -> Console:
        if self._console is None:
            from rich.console import Console

            # markup off: most of what is printed is text we did not write (paths, exceptions,
            # tools' and providers' messages); a line with our own style tags says markup=True
            # and passes the rest through verbatim().
            self._console = Console(stderr=self._stderr, soft_wrap=True, markup=False)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)


out: Any = _LazyConsole(stderr=False)
err: Any = _LazyConsole(stderr=True)


def verbatim(text: object) -> str:
    """`text` escaped for a rich console: a message we did not write (an exception, a tool's
    or provider's error, a path) is printed as it is -- ``pip install 'veribatch[hf]'`` keeps
    its ``[hf]``, which rich would take for a style tag and drop."""
    from rich.markup import escape

    return escape(str(text))


def fail(message: str, code: int) -> typer.Exit:
    err.print(f"[bold red]error:[/] {verbatim(message)}", highlight=False, markup=True)
    return typer.Exit(code)


def _input_errors() -> tuple[type[BaseException], ...]:
    """Every package owns its "unknown name" error (tasks, engines, verifiers), since
    inference/ and verifiers/ import nothing of ours; imported only when something failed."""
    from veribatch.inference.errors import EngineError, UnknownEngineError
    from veribatch.rundir.paths import RunDirError
    from veribatch.tasks.base import DatasetError, UnknownNameError
    from veribatch.verifiers.registry import UnknownToolError

    from .locks import LockUnsupportedError
    from .manifest import RunConflictError
    from .plan import PlanError
    from .profiles import ProfileError
    from .rundir import RunNotFoundError

    return (UnknownNameError, UnknownEngineError, EngineError, UnknownToolError, DatasetError,
            PlanError, ProfileError, RunConflictError, RunNotFoundError, RunDirError,
            LockUnsupportedError, FileNotFoundError, ValueError)


def interrupted() -> typer.Exit:
    err.print("interrupted; finished instances are kept in the ledgers "
              "(launch resume RUN continues)", highlight=False)
    return typer.Exit(EXIT_INTERRUPTED)


def guarded(fn: Callable[[], Any]) -> Any:
    """Map known errors to a one-line message and a documented exit code."""
    try:
        return fn()
    except KeyboardInterrupt:
        raise interrupted() from None
    except Exception as e:
        from .locks import RunBusyError
        from .slurm_calls import SubmitError  # SlurmUnreachable too: exit 3

        if isinstance(e, SubmitError):
            raise fail(str(e), EXIT_CLUSTER) from None
        if isinstance(e, RunBusyError):
            raise fail(str(e), EXIT_IN_PROGRESS) from None
        if isinstance(e, PermissionError):
            raise fail(f"permission denied: {e.filename or e}", EXIT_INPUT) from None
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            # What was recorded is durable (ledgers are fsynced line by line); the rest is
            # an incomplete run that resume finishes once there is room.
            raise fail(f"the file system is full ({e.strerror}: {e.filename or '?'}); what was "
                       "recorded is kept — free space, then `launch resume RUN`",
                       EXIT_INCOMPLETE) from None
        if isinstance(e, _input_errors()):
            raise fail(str(e), EXIT_INPUT) from None
        raise


def describe_plan(plan: Plan, root: Path, choice: ExecChoice) -> None:
    from rich.table import Table as RichTable

    t = RichTable(title=f"plan {plan.run_id} → {root}")
    # What each stage declares; the lines below the table are the executor's
    # (`Executor.describe_plan`: for SLURM what sbatch receives, the profile's floors and
    # gres applied).
    for col in ("stage", "resource", "needs", "shards", "instances/shard", "cpus declared",
                "gpus declared", "mem GB declared"):
        t.add_column(col)
    sizes = [b - a for a, b in plan.shard_bounds()]
    per = f"{min(sizes)}–{max(sizes)}" if min(sizes) != max(sizes) else str(sizes[0])
    for s in plan.stages:
        t.add_row(s.name, s.resource, ",".join(s.needs) or "-", str(plan.shards), per,
                  str(s.cpus_per_task), str(s.gpus_per_task), str(s.mem_gb))
    t.add_row("aggregate", "cpu", "all", "1", "-", "1", "0", "4")
    out.print(t)
    drawn = (f" (a random sample, --sample {plan.config.sample} --sample-seed {plan.config.sample_seed})"
             if plan.config.sample is not None else "")
    out.print(f"{len(plan.instances)} instances{drawn}, dataset {plan.config.dataset!r}, "
              f"model {plan.config.model or '(reference arms)'}, executor {choice.executor}"
              + (f", profile {choice.profile}" if choice.profile else ""), highlight=False)
    from .assignment import LPT, MIN_GAIN

    a = plan.assignment
    if a is not None and a.source and a.source.get("error"):
        out.print(f"shards: contiguous slices of the instances sorted by id; the costs file "
                  f"was not used: {a.source['error']}", highlight=False, soft_wrap=True)
    elif a is not None and a.source:
        src = a.source
        exp = src.get("expected_max_shard_s") or {}
        how = ("spread by measured cost (longest first onto the least loaded shard)"
               if a.method == LPT else
               f"contiguous slices of the instances sorted by id (a spread by cost would gain "
               f"less than {MIN_GAIN:.0%})")
        out.print(f"shards: {how}: expected longest shard {exp.get('contiguous')} s contiguous, "
                  f"{exp.get('lpt')} s spread; {src.get('measured')} of {src.get('instances')} "
                  f"instance(s) measured, stages {', '.join(src.get('stages') or [])}, from "
                  f"{src.get('file')} (sha256 {str(src.get('sha256'))[:12]})",
                  highlight=False, soft_wrap=True)
    else:
        out.print("shards: contiguous slices of the instances sorted by id ("
                  + ("one shard" if plan.shards == 1 else "no per-instance costs measured")
                  + ")", highlight=False)
    from .executors import executor_class

    for line in executor_class(choice.executor).describe_plan(choice, plan):
        out.print(line, highlight=False, markup=False, soft_wrap=True)


def report(o: LaunchOutcome, quiet: bool = False) -> int:
    for n in o.notes:
        err.print(n, highlight=False, markup=False)
    s = o.submit
    if s is not None and not s.finished:
        for j in s.jobs:
            out.print(f"submitted {j['stage']}: job {j['array_id']} "
                      f"({len(j['jobs'])} element(s); dependency {j.get('dependency') or '-'})",
                      highlight=False)
        out.print(f"follow with: launch status {o.rd.root}", highlight=False)
        return EXIT_OK
    failed = s is not None and bool(s.failed)
    if o.aggregate is not None:
        # with failed shards the tables hold only what finished (often nothing): not printed,
        # so the failure summary below is what a user sees
        if not quiet and o.aggregate.markdown and not failed:
            out.print(o.aggregate.markdown, highlight=False, markup=False, soft_wrap=True)
        if o.aggregate.paths:
            out.print(f"tables: {o.rd.root / 'tables'}"
                      + (" (partial: only the shards that finished)" if failed else ""),
                      highlight=False)
        if not o.aggregate.complete and not failed:
            err.print(f"[yellow]tables are partial:[/] {verbatim(o.aggregate.message)}", highlight=False,
                      markup=True)
    if failed:
        assert s is not None
        failure_summary(o.rd, s.failed, s.message)
    return EXIT_OK if o.ok else EXIT_INCOMPLETE


def failure_summary(rd: RunDir, failed: list[tuple[str, int]], message: str) -> None:
    """Which shards failed and the first line of each one's error, then where to look."""
    from rich.markup import escape

    from .status import run_state

    try:
        reasons = {(sh.stage, sh.shard): ("not started: " if sh.blocked else "") + sh.reason
                   for col in run_state(rd, live=False).shards.values() for sh in col}
    except Exception:  # the summary must not hide the failure it reports
        reasons = {}
    err.print(f"[red]{len(failed)} shard(s) failed[/]" + (f" ({escape(message)})" if message else "")
              + ":", highlight=False, markup=True)
    for stage, k in failed[:10]:
        why = (reasons.get((stage, k)) or "").strip().splitlines()
        err.print(f"  {stage}/{k}: " + escape(why[0][:300] if why else "(no reason recorded)"),
                  highlight=False, soft_wrap=True)
    if len(failed) > 10:
        err.print(f"  ... and {len(failed) - 10} more", highlight=False)
    err.print(f"see: launch logs {rd.root} --failed; then: launch resume {rd.root}",
              highlight=False, soft_wrap=True)
