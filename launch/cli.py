"""The `launch` command line (Typer).

    launch <task> [options]     plan a run, write its manifest, run or submit its stages
    launch status RUN           per stage: shards done/running/pending/failed, instances done
    launch resume RUN           re-run only incomplete (stage, shard) pairs
    launch logs RUN [--failed]  error, shard log and SLURM output of shards
    launch cancel RUN           scancel the run's jobs / stop its local shard processes
    launch aggregate RUN        (re)build the run's tables

Exit codes scripts can trust: 0 success (run complete); 1 the run is incomplete
because shards failed; 2 bad input (unknown task/dataset/option/profile, run
directory of another configuration, unwritable runs dir); 3 the cluster refused
or is unreachable; 4 (`status` only) still running or pending, nothing failed.

Other modules add commands through `launch/commands/<name>.py`, each defining
``register(app, task_apps)``.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table as RichTable

from inference.errors import EngineError, UnknownEngineError
from tasks.base import DatasetError, UnknownNameError, get_task, task_names
from verifiers.registry import UnknownToolError

from .api import (
    ExecChoice,
    LaunchOutcome,
    cancel_run,
    launch_run,
    plan_run,
    resume_run,
    run_directory,
)
from .executors.slurm import SubmitError
from .finalize import aggregate_run
from .instances import RunDirError
from .manifest import RunConflictError
from .plan import Plan, PlanError
from .profiles import ProfileError
from .rundir import RunDir, RunNotFoundError, resolve_run
from .status import RunState, run_state

SHARD_STATES = ("done", "running", "pending", "failed")
EXIT_OK, EXIT_INCOMPLETE, EXIT_INPUT, EXIT_CLUSTER, EXIT_IN_PROGRESS = 0, 1, 2, 3, 4
# Every package owns its "unknown name" error (tasks, engines, verifiers), since
# inference/ and verifiers/ import nothing of ours.
INPUT_ERRORS = (UnknownNameError, UnknownEngineError, EngineError, UnknownToolError, DatasetError, PlanError,
                ProfileError, RunConflictError, RunNotFoundError, RunDirError, ValueError)

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

app = typer.Typer(help="Run LLM program-verification benchmarks on a laptop or a SLURM cluster.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)


def fail(message: str, code: int) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def guarded(fn: Callable[[], Any]) -> Any:
    """Map known errors to a one-line message and a documented exit code."""
    try:
        return fn()
    except SubmitError as e:
        raise fail(str(e), EXIT_CLUSTER) from None
    except INPUT_ERRORS as e:
        raise fail(str(e), EXIT_INPUT) from None
    except PermissionError as e:
        raise fail(f"permission denied: {e.filename or e}", EXIT_INPUT) from None


RunsDirOpt = Annotated[Path | None, typer.Option("--runs-dir", help="Where run directories live "
                                                 "(env VERIBATCH_RUNS_DIR; default ./runs).")]
RunArg = Annotated[str, typer.Argument(help="Run id, run name, or path to a run directory.")]


def _describe_plan(plan: Plan, root: Path, choice: ExecChoice) -> None:
    t = RichTable(title=f"plan {plan.run_id} → {root}")
    for col in ("stage", "resource", "needs", "shards", "instances/shard", "cpus", "gpus", "mem GB"):
        t.add_column(col)
    sizes = [b - a for a, b in plan.shard_bounds()]
    per = f"{min(sizes)}–{max(sizes)}" if min(sizes) != max(sizes) else str(sizes[0])
    for s in plan.stages:
        t.add_row(s.name, s.resource, ",".join(s.needs) or "-", str(plan.shards), per,
                  str(s.cpus_per_task), str(s.gpus_per_task), str(s.mem_gb))
    t.add_row("aggregate", "cpu", "all", "1", "-", "1", "0", "4")
    out.print(t)
    out.print(f"{len(plan.instances)} instances, dataset {plan.config.dataset!r}, "
              f"model {plan.config.model or '(reference arms)'}, executor {choice.executor}"
              + (f", profile {choice.profile}" if choice.profile else ""), highlight=False)
    if choice.executor == "slurm":
        from .profiles import job_time

        prof = choice.profile_obj()
        for s in plan.stages:
            spec = prof.for_resource(s.resource, s.name)
            t = job_time(spec, {"resource": s.resource, "seconds_per_instance": s.seconds_per_instance},
                         max(sizes), plan.config.model)
            out.print(f"  {s.name}: partition {spec.partition or '(cluster default)'}"
                      + (f", gres {spec.gres}" if spec.gres else "")
                      + f", time {t.describe()}", highlight=False)
    else:
        from .executors.local import available_cpus

        n, why = available_cpus()
        out.print(f"  local executor: {choice.workers or n} CPU(s) for shard processes"
                  + ("" if choice.workers else f" ({why})"), highlight=False)


def _report(o: LaunchOutcome, quiet: bool = False) -> int:
    for n in o.notes:
        err.print(n, highlight=False)
    s = o.submit
    if s is not None and not s.finished:
        for j in s.jobs:
            out.print(f"submitted {j['stage']}: job {j['array_id']} "
                      f"({len(j['jobs'])} element(s); dependency {j.get('dependency') or '-'})",
                      highlight=False)
        out.print(f"follow with: launch status {o.rd.root}", highlight=False)
        return EXIT_OK
    if s is not None and s.failed:
        err.print(f"[red]{len(s.failed)} shard(s) failed:[/] "
                  + ", ".join(f"{a}/{b}" for a, b in s.failed[:10])
                  + (f"; {s.message}" if s.message else ""), highlight=False)
        err.print(f"see: launch logs {o.rd.root} --failed; then: launch resume {o.rd.root}",
                  highlight=False)
    if o.aggregate is not None:
        if not quiet and o.aggregate.markdown:
            out.print(o.aggregate.markdown, highlight=False, markup=False, soft_wrap=True)
        if o.aggregate.paths:
            out.print(f"tables: {o.rd.root / 'tables'}", highlight=False)
        if not o.aggregate.complete:
            err.print(f"[yellow]tables are partial:[/] {o.aggregate.message}", highlight=False)
    return EXIT_OK if o.ok else EXIT_INCOMPLETE


def _task_app(name: str) -> typer.Typer:
    sub = typer.Typer(help=f"Run the {name} benchmark (see `launch {name} --help`).",
                      invoke_without_command=True, no_args_is_help=False)

    @sub.callback(invoke_without_command=True)
    def run(
        ctx: typer.Context,
        dataset: Annotated[str | None, typer.Option(help="Dataset name or path.")] = None,
        model: Annotated[str | None, typer.Option(help="Engine spec, e.g. hf:/path or "
                                                  "vllm:Qwen/Qwen2.5-72B-Instruct; none: "
                                                  "the task's reference arms.")] = None,
        executor: Annotated[str, typer.Option(help="local | slurm")] = "local",
        profile: Annotated[str | None, typer.Option(help="SLURM profile name or YAML path.")] = None,
        partition: Annotated[list[str] | None, typer.Option(
            help="SLURM partition for all stages, or RESOURCE=NAME (cpu=..., gpu=...); "
                 "repeatable; overrides the profile.")] = None,
        account: Annotated[str | None, typer.Option(help="SLURM account (overrides profile).")] = None,
        qos: Annotated[str | None, typer.Option(help="SLURM QOS (overrides profile).")] = None,
        shards: Annotated[int, typer.Option(help="Shards per stage.")] = 1,
        limit: Annotated[int | None, typer.Option(help="Use only K instances (the task's first K).")] = None,
        option: Annotated[list[str] | None, typer.Option("--option", "-o",
                                                         help="Task option key=value; repeatable.")] = None,
        n: Annotated[int | None, typer.Option("--n", help="Samples per instance.")] = None,
        temperature: Annotated[float | None, typer.Option(help="Sampling temperature.")] = None,
        seed: Annotated[int | None, typer.Option(help="Sampling seed.")] = None,
        max_tokens: Annotated[int | None, typer.Option(help="Max completion tokens.")] = None,
        strategy: Annotated[str | None, typer.Option(help="Task strategy name.")] = None,
        verifier: Annotated[str | None, typer.Option(help="Verifier name.")] = None,
        runs_dir: RunsDirOpt = None,
        run_name: Annotated[str | None, typer.Option(help="Directory name for the run "
                                                     "(default: the run id).")] = None,
        workers: Annotated[int | None, typer.Option(help="Local executor: CPUs for shard "
                                                    "processes (default: those this process may use: its affinity mask, at most SLURM_CPUS_ON_NODE).")] = None,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan, submit "
                                              "nothing.")] = False,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or "
                                            "tables.")] = False,
    ) -> None:
        if ctx.invoked_subcommand is not None:
            return
        choice = ExecChoice(executor=executor, profile=profile, partitions=partition or (),
                            account=account, qos=qos, workers=workers)
        sampling = {"n": n, "temperature": temperature, "seed": seed, "max_tokens": max_tokens}

        def go() -> int:
            plan = plan_run(name, dataset=dataset, model=model, sampling=sampling,
                            options=option or (), shards=shards, limit=limit,
                            strategy=strategy, verifier=verifier)
            root = run_directory(plan, runs_dir, run_name)
            if dry_run:
                _describe_plan(plan, root, choice)
                return EXIT_OK
            def ready(rd: RunDir, created: bool) -> None:
                out.print(f"run {plan.run_id}: {rd.root}" + ("" if created else
                          " (existing: only what is incomplete runs)"), highlight=False)

            return _report(launch_run(plan, root, choice, progress=not quiet, on_ready=ready),
                           quiet)

        raise typer.Exit(guarded(go))

    return sub


task_apps: dict[str, typer.Typer] = {}
for _name in task_names():
    task_apps[_name] = _task_app(_name)
    app.add_typer(task_apps[_name], name=_name)


def _load(run: str, runs_dir: Path | None) -> RunDir:
    return guarded(lambda: resolve_run(run, runs_dir))


def _status_table(st: RunState) -> RichTable:
    t = RichTable(title=f"run {st.manifest['run_id']} ({st.rd.root})")
    for head in ("stage", "shards", "done", "running", "pending", "failed", "instances done"):
        t.add_column(head, justify="right" if head != "stage" else "left")
    for name, col in st.shards.items():
        c = st.counts(name)
        t.add_row(name, str(len(col)), str(c["done"]), str(c["running"]), str(c["pending"]),
                  f"[red]{c['failed']}[/]" if c["failed"] else "0",
                  f"{sum(s.recorded for s in col)}/{sum(s.instances for s in col)}")
    agg = st.aggregate.get("status")
    t.add_row("aggregate", "1", "1" if agg == "complete" else "0", "0",
              "0" if agg == "complete" else "1", "0", agg or "not run")
    return t


def _in_progress(st: RunState) -> bool:
    return any(s.state in ("running", "pending") and (s.state == "running" or s.job_state)
               for col in st.shards.values() for s in col)


@app.command()
def status(run: RunArg, runs_dir: RunsDirOpt = None,
           as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
           live: Annotated[bool, typer.Option(help="Ask squeue/sacct for live job "
                                              "states.")] = True,
           watch: Annotated[float | None, typer.Option(
               help="Refresh every SECONDS until nothing runs or is queued.")] = None) -> None:
    """Per stage: shards done/running/pending/failed and instances done (from the run dir)."""
    rd = _load(run, runs_dir)
    st = guarded(lambda: run_state(rd, live=live))
    if watch and not as_json:
        with Live(_status_table(st), console=out, refresh_per_second=4) as view:
            while _in_progress(st):
                time.sleep(max(0.5, watch))
                st = run_state(rd, live=live)
                view.update(_status_table(st))
        out.print()
    if as_json:
        print(json.dumps({
            "run_id": st.manifest["run_id"], "run_dir": str(rd.root), "complete": st.complete,
            "stages": {name: {**{k: st.counts(name)[k] for k in SHARD_STATES}, "instances":
                              sum(s.instances for s in col),
                              "instances_done": sum(s.recorded for s in col)}
                       for name, col in st.shards.items()},
            "failed": [{"stage": s.stage, "shard": s.shard, "reason": s.reason, "job": s.job}
                       for s in st.failed()],
            "aggregate": st.aggregate.get("status", "not run"),
        }, indent=2))
    else:
        if not watch:
            out.print(_status_table(st))
        for s in st.failed()[:20]:
            out.print(f"[red]failed[/] {s.stage}/{s.shard}"
                      + (f" (job {s.job})" if s.job else "") + f": {s.reason}", highlight=False)
        if len(st.failed()) > 20:
            out.print(f"... and {len(st.failed()) - 20} more (launch logs --failed)")
    if st.complete:
        raise typer.Exit(EXIT_OK)
    raise typer.Exit(EXIT_INCOMPLETE if st.failed() else EXIT_IN_PROGRESS)


@app.command()
def resume(run: RunArg, runs_dir: RunsDirOpt = None,
           executor: Annotated[str | None, typer.Option(help="local | slurm (default: as "
                                                        "last launched).")] = None,
           profile: Annotated[str | None, typer.Option(help="SLURM profile.")] = None,
           partition: Annotated[list[str] | None, typer.Option(help="Partition override.")] = None,
           workers: Annotated[int | None, typer.Option(help="Local executor: CPUs to use.")] = None,
           quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False) -> None:
    """Re-run only the incomplete (stage, shard) pairs; a complete run is a no-op."""
    rd = _load(run, runs_dir)
    choice = None
    if executor or profile or partition or workers:
        from .jobs import read_jobs

        last = read_jobs(rd).get("last_launch") or {}
        choice = ExecChoice(executor=executor or last.get("executor", "local"),
                            profile=profile or last.get("profile"),
                            partitions=partition or last.get("partitions") or (),
                            account=last.get("account"), qos=last.get("qos"), workers=workers)
    o = guarded(lambda: resume_run(rd, choice, progress=not quiet))
    raise typer.Exit(_report(o, quiet))


@app.command()
def logs(run: RunArg, runs_dir: RunsDirOpt = None,
         failed: Annotated[bool, typer.Option("--failed", help="Only failed shards.")] = False,
         stage: Annotated[str | None, typer.Option(help="Only this stage.")] = None,
         shard: Annotated[int | None, typer.Option(help="Only this shard.")] = None,
         lines: Annotated[int, typer.Option(help="Tail length per file.")] = 30) -> None:
    """Error, shard log and SLURM output of the selected shards."""
    rd = _load(run, runs_dir)
    st = guarded(lambda: run_state(rd))
    shown = 0
    for name, col in st.shards.items():
        if stage and name != stage:
            continue
        for s in col:
            if (failed and s.state != "failed") or (shard is not None and s.shard != shard):
                continue
            if not failed and not rd.shard_dir(name, s.shard).exists():
                continue
            shown += 1
            out.rule(f"{name}/{s.shard}: {s.state}" + (f" — {s.reason}" if s.reason else ""))
            files = [rd.error(name, s.shard), rd.log(name, s.shard),
                     rd.shard_dir(name, s.shard) / "worker.err"]
            if s.job:
                files += [rd.slurm_logs / f"{s.job}_0_log.err", rd.slurm_logs / f"{s.job}_0_log.out"]
            for f in files:
                if f.exists() and f.stat().st_size:
                    text = f.read_text(errors="replace")
                    if f.name == "error.json":
                        text = json.loads(text).get("traceback", text)
                    tail = "\n".join(text.splitlines()[-lines:])
                    out.print(f"[bold]{f}[/]", highlight=False)
                    out.print(tail, highlight=False, markup=False)
    if not shown:
        out.print("no failed shards" if failed else "no shard has logs yet")


@app.command()
def cancel(run: RunArg, runs_dir: RunsDirOpt = None) -> None:
    """scancel the run's SLURM jobs and stop its local shard processes (ledgers are kept).

    RUN may also be a `launch serve` directory: its server is asked to stop, then scancelled."""
    if (Path(run) / "serve.json").is_file():
        from .commands.serve import stop_serve

        out.print(f"stopped serve {run}: {stop_serve(Path(run))}", highlight=False)
        return
    rd = _load(run, runs_dir)
    actions = guarded(lambda: cancel_run(rd))
    out.print("\n".join(actions) if actions else "nothing to cancel")


@app.command("aggregate")
def aggregate_cmd(run: RunArg, runs_dir: RunsDirOpt = None,
                  fmt: Annotated[list[str] | None, typer.Option(
                      "--format", help="Extra formats besides md+csv: tex, html.")] = None) -> None:
    """(Re)build the run's tables from its complete shards; exit 1 when shards are missing."""
    rd = _load(run, runs_dir)
    res = guarded(lambda: aggregate_run(rd, ("md", "csv", *(fmt or []))))
    out.print(res.markdown, highlight=False, markup=False, soft_wrap=True)
    out.print(f"tables: {rd.tables}", highlight=False)
    if not res.complete:
        err.print(f"[yellow]partial:[/] {res.message}", highlight=False)
        raise typer.Exit(EXIT_INCOMPLETE)


def _register_commands() -> None:
    """Call `register(app, task_apps)` of every module in launch/commands/."""
    from . import commands

    for info in pkgutil.iter_modules(commands.__path__):
        if info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"{commands.__name__}.{info.name}")
            register = getattr(module, "register", None)
            if callable(register):
                register(app, task_apps)
        except Exception as e:  # noqa: BLE001  (one broken extension must not take down status/resume)
            err.print(f"[yellow]warning:[/] commands from launch/commands/{info.name}.py are "
                      f"unavailable: {type(e).__name__}: {e}", highlight=False)


_register_commands()


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted; finished instances are kept in the ledgers "
                  "(launch resume RUN continues)")
        sys.exit(130)


__all__ = ["app", "main", "get_task"]
