"""The `launch` command line (Typer).

    launch <task> [options]     plan a run, write its manifest, run or submit its stages
    launch status RUN           per stage: shards done/running/pending/failed, instances done
    launch resume RUN           re-run only incomplete (stage, shard) pairs (--dry-run: say which)
    launch logs RUN [--failed]  error, shard log and SLURM output of shards
    launch cancel RUN           scancel the run's jobs / stop its local shard processes
    launch aggregate RUN        (re)build the run's tables

Exit codes scripts can trust: 0 success (run complete); 1 the run is incomplete
because shards failed; 2 bad input (unknown task/dataset/option/profile, run
directory of another configuration, unwritable runs dir, a file system without
locks); 3 the cluster refused or is unreachable; 4 still running or pending, nothing
failed (`status`), or another launch/resume holds the run (`launch`, `resume`);
130 interrupted (Ctrl-C).

Start-up is kept cheap so that `status` can be polled: this module imports only
Typer; tasks, the executors, pyarrow and the extension commands are imported when a
command needs them (`launch status` never imports a task or pyarrow; `launch --help`
and `launch <task>` import the tasks and the commands).  Commands are installed as entry
points (group ``veribatch.commands``, and each task's `Task.cli_module`) naming a
``register(app, task_apps)``; keep their modules' top-level imports light too.  What the host and the commands print and how they exit
(consoles, exit codes, `guarded`, the run report) is `launch.console`: a command never imports
this module.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from .console import (
    EXIT_IN_PROGRESS,
    EXIT_INCOMPLETE,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    describe_plan,
    err,
    guarded,
    interrupted,
    out,
    report,
    verbatim,
)
from .executors import executor_names

if TYPE_CHECKING:
    import click
    from rich.table import Table as RichTable

    from veribatch.rundir.paths import RunDir

    from .run_control import ExecChoice, LaunchOutcome
    from .status import RunState

SHARD_STATES = ("done", "running", "pending", "failed")


class _LazyGroup(TyperGroup):
    """The top-level group: the task and installed commands are added on first need.

    `launch status RUN` never imports them; `launch --help`, a task name or an extension
    command does (once)."""

    def _load(self) -> None:
        if getattr(self, "_loaded", False):
            return
        self._loaded = True
        _load_everything()
        fresh = typer.main.get_group(app)
        for name, cmd in fresh.commands.items():
            self.commands.setdefault(name, cmd)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            self._load()
        return super().get_command(ctx, cmd_name)


app = typer.Typer(help="Run LLM program-verification benchmarks on a laptop or a SLURM cluster.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  cls=_LazyGroup)


RunsDirOpt = Annotated[Path | None, typer.Option("--runs-dir", help="Where run directories live "
                                                 "(env VERIBATCH_RUNS_DIR; default ./runs).")]
RunArg = Annotated[str, typer.Argument(help="Run id, run name, or path to a run directory.")]


def _describe_resume_set(o: LaunchOutcome, choice: ExecChoice) -> None:
    """`resume --dry-run`: what would be (re)submitted, and why, shard by shard."""
    todo = o.resume_set
    if not todo:
        out.print(f"run {o.run_id}: nothing would be resubmitted", highlight=False)
    else:
        out.print(f"run {o.run_id}: `launch resume` would run {todo.count} shard(s) with the "
                  f"{choice.executor} executor"
                  + (f" (profile {choice.profile})" if choice.profile else ""), highlight=False)
        for stage, shards in todo.shards.items():
            for k in shards:
                line = f"  {stage}/{k}: {todo.why.get((stage, k), '')}"
                waits = [f"{u}/{k} (job {j})" for (u, uk), j in todo.waiting_on.items()
                         if uk == k]
                if waits and stage != next(iter(todo.shards)):
                    line += f"; would wait for {', '.join(waits)}"
                out.print(line, highlight=False)
    if todo.supersede:
        out.print("would scancel queued job(s) waiting on resubmitted work: "
                  + ", ".join(sorted(set(todo.supersede.values()))), highlight=False)


def _unmet(message: str) -> int:
    """What a task could not run here: said after the stages that could run, exit 2."""
    from rich.markup import escape

    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True)
    return EXIT_INPUT


def _task_help(name: str) -> str:
    """The task's own menu in `launch <task> --help`: datasets, -o options, strategies and
    verifiers, read from the task itself so the help cannot drift from the code."""
    from veribatch.tasks.base import get_task

    task = get_task(name)
    opts = task.default_options()
    paragraphs = [
        f"Run the {name} benchmark.",
        f"Datasets (--dataset; default {task.default_dataset}):\n"
        + "\n".join(f"  {k}: {v}" for k, v in sorted(task.datasets().items())),
        "Task options (-o KEY=VALUE; defaults shown):\n"
        + ("\n".join(f"  {k}={v!r}" for k, v in opts.items()) or "  (none)"),
        "Strategies (--strategy): " + ", ".join(task.strategies) + "\n"
        + "Verifiers (--verifier): " + ", ".join(task.verifiers),
    ]
    # A paragraph after a \b line is printed as written (no rewrapping of the lists).
    return paragraphs[0] + "".join("\n\n\b\n" + p for p in paragraphs[1:])


def _task_app(name: str) -> typer.Typer:
    sub = typer.Typer(help=_task_help(name), invoke_without_command=True, no_args_is_help=False)

    @sub.callback(invoke_without_command=True)
    def run(
        ctx: typer.Context,
        dataset: Annotated[str | None, typer.Option(help="Dataset name or path (listed above).")] = None,
        model: Annotated[str | None, typer.Option(help="Engine spec, e.g. hf:/path or "
                                                  "vllm:Qwen/Qwen2.5-72B-Instruct; none: "
                                                  "the task's reference arms.")] = None,
        executor: Annotated[str, typer.Option(help=" | ".join(executor_names()))] = "local",
        profile: Annotated[str | None, typer.Option(help="SLURM profile name or YAML path.")] = None,
        partition: Annotated[list[str] | None, typer.Option(
            help="SLURM partition: RESOURCE=NAME (cpu=..., gpu=...), or a bare NAME for one "
                 "resource — the one NAME is or the profile gives it, else the GPU stages "
                 "(docs/configuration.md); repeatable; overrides the profile.")] = None,
        account: Annotated[str | None, typer.Option(help="SLURM account (overrides profile).")] = None,
        qos: Annotated[str | None, typer.Option(help="SLURM QOS (overrides profile).")] = None,
        shards: Annotated[int, typer.Option(help="Shards per stage (CPU stages: one SLURM "
                                            "array element each).")] = 1,
        gpu_shards: Annotated[int | None, typer.Option(
            help="SLURM: array elements (model loads) of the generate stage; default: sized "
                 "to its work (profile `generation`, docs/configuration.md).")] = None,
        limit: Annotated[int | None, typer.Option(help="Use only K instances (the task's first K).")] = None,
        sample: Annotated[int | None, typer.Option(help="Use a seeded random sample of K instances "
                                                   "(see --sample-seed; part of the run id).")] = None,
        sample_seed: Annotated[int, typer.Option(help="Seed of --sample (not the model's "
                                                 "sampling --seed).")] = 0,
        option: Annotated[list[str] | None, typer.Option("--option", "-o",
                                                         help="Task option KEY=VALUE (listed "
                                                              "above); repeatable.")] = None,
        n: Annotated[int | None, typer.Option("--n", help="Samples per instance.")] = None,
        temperature: Annotated[float | None, typer.Option(help="Sampling temperature.")] = None,
        seed: Annotated[int | None, typer.Option(help="Sampling seed.")] = None,
        max_tokens: Annotated[int | None, typer.Option(help="Max completion tokens.")] = None,
        strategy: Annotated[str | None, typer.Option(help="Task strategy (listed above).")] = None,
        verifier: Annotated[str | None, typer.Option(help="Verifier name (listed above).")] = None,
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
        from .run_control import ExecChoice, launch_run, plan_run, run_directory

        choice = ExecChoice(executor=executor, profile=profile, partitions=partition or (),
                            account=account, qos=qos, workers=workers, gpu_shards=gpu_shards)
        sampling = {"n": n, "temperature": temperature, "seed": seed, "max_tokens": max_tokens}

        def go() -> int:
            plan = plan_run(name, dataset=dataset, model=model, sampling=sampling,
                            options=option or (), shards=shards, limit=limit,
                            strategy=strategy, verifier=verifier, sample=sample,
                            sample_seed=sample_seed)
            choice.validate([(s.name, s.resource) for s in plan.stages])
            root = run_directory(plan, runs_dir, run_name)
            from veribatch.tasks.base import get_task

            unmet = get_task(name).unmet_requirements(plan.config)  # e.g. a verifier not here
            if dry_run:
                describe_plan(plan, root, choice)
                return _unmet(unmet) if unmet else EXIT_OK

            def ready(rd: RunDir, created: bool) -> None:
                out.print(f"run {plan.run_id}: {rd.root}" + ("" if created else
                          " (existing: only what is incomplete runs)"), highlight=False)

            code = report(launch_run(plan, root, choice, progress=not quiet, on_ready=ready),
                           quiet)
            if unmet:  # said last, so it is not lost above the tables; failed shards win
                hint = _unmet(unmet)
                return code if code != EXIT_OK else hint
            return code

        raise typer.Exit(guarded(go))

    return sub


task_apps: dict[str, typer.Typer] = {}
_everything_loaded = False


def _load_everything() -> None:
    """Add a sub-command per installed task and the installed commands (once)."""
    global _everything_loaded
    if _everything_loaded:
        return
    _everything_loaded = True
    from veribatch.tasks.base import task_names

    for name in task_names():
        task_apps[name] = _task_app(name)
        app.add_typer(task_apps[name], name=name)
    _register_commands()


def _load(run: str, runs_dir: Path | None) -> RunDir:
    from .rundir import resolve_run

    return guarded(lambda: resolve_run(run, runs_dir))


def _status_table(st: RunState) -> RichTable:
    from rich.table import Table as RichTable
    from rich.text import Text

    t = RichTable(title=f"run {st.manifest.run_id} ({st.rd.root})")
    for head in ("stage", "shards", "done", "running", "pending", "failed", "instances done"):
        t.add_column(head, justify="right" if head != "stage" else "left")
    for name, col in st.shards.items():
        c = st.counts(name)
        t.add_row(name, str(len(col)), str(c["done"]), str(c["running"]), str(c["pending"]),
                  Text(str(c["failed"]), style="red") if c["failed"] else "0",
                  f"{sum(s.recorded for s in col)}/{sum(s.instances for s in col)}")
    agg = st.aggregate_state
    t.add_row("aggregate", "1", "1" if agg == "complete" else "0", "0",
              "0" if agg == "complete" else "1", "0", agg)
    return t


def _in_progress(st: RunState) -> bool:
    return st.aggregating or any(s.state in ("running", "pending") and (s.state == "running" or s.job_state)
               for col in st.shards.values() for s in col)


def _status_json(st: RunState) -> dict[str, Any]:
    return {
        "run_id": st.manifest.run_id, "run_dir": str(st.rd.root), "complete": st.complete,
        "stages": {name: {**{k: st.counts(name)[k] for k in SHARD_STATES}, "instances":
                          sum(s.instances for s in col),
                          "instances_done": sum(s.recorded for s in col)}
                   for name, col in st.shards.items()},
        "failed": [{"stage": s.stage, "shard": s.shard, "reason": s.reason, "job": s.job}
                   for s in st.failed()],
        "blocked": [{"stage": s.stage, "shard": s.shard, "reason": s.reason}
                    for col in st.shards.values() for s in col if s.blocked],
        "aggregate": st.aggregate_state,
        "aggregate_job": st.aggregate_job,
        "code_versions": dict(st.code_versions),
        "problems": st.problems,
    }


@app.command()
def status(run: RunArg, runs_dir: RunsDirOpt = None,
           as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
           live: Annotated[bool, typer.Option(help="Ask squeue/sacct for live job "
                                              "states.")] = True,
           watch: Annotated[float | None, typer.Option(
               help="Refresh every SECONDS until nothing runs or is queued.")] = None) -> None:
    """Per stage: shards done/running/pending/failed and instances done (from the run dir)."""
    from .status import run_state

    rd = _load(run, runs_dir)
    st = guarded(lambda: run_state(rd, live=live))
    if watch and not as_json:
        from rich.live import Live

        try:
            with Live(_status_table(st), console=out.get(), refresh_per_second=4) as view:
                while _in_progress(st):
                    time.sleep(max(0.5, watch))
                    st = run_state(rd, live=live)
                    view.update(_status_table(st))
        except KeyboardInterrupt:
            raise interrupted() from None
        out.print()
    for p in st.problems:
        err.print(f"warning: {p}", highlight=False, markup=False)
    if as_json:
        print(json.dumps(_status_json(st), indent=2))
    else:
        if not watch:
            out.print(_status_table(st))
        for s in st.failed()[:20]:
            out.print(f"[red]failed[/] {s.stage}/{s.shard}"
                      + (f" (job {s.job})" if s.job else "") + f": {verbatim(s.reason)}", highlight=False,
                      markup=True)
        if len(st.failed()) > 20:
            out.print(f"... and {len(st.failed()) - 20} more (launch logs --failed)")
        if len(st.code_versions) > 1:
            out.print("complete shards come from several code versions: " + ", ".join(
                f"{v} ({n})" for v, n in sorted(st.code_versions.items())), highlight=False)
        if st.aggregate_state == "stale":
            out.print("aggregate is stale: shards changed since the tables were built "
                      f"(launch aggregate {rd.root})", highlight=False)
    if st.complete and not st.aggregating:
        raise typer.Exit(EXIT_OK)
    raise typer.Exit(EXIT_INCOMPLETE if st.failed() else EXIT_IN_PROGRESS)


@app.command()
def resume(run: RunArg, runs_dir: RunsDirOpt = None,
           executor: Annotated[str | None, typer.Option(help="local | slurm (default: as "
                                                        "last launched).")] = None,
           profile: Annotated[str | None, typer.Option(help="SLURM profile.")] = None,
           partition: Annotated[list[str] | None, typer.Option(help="Partition override.")] = None,
           workers: Annotated[int | None, typer.Option(help="Local executor: CPUs to use.")] = None,
           dry_run: Annotated[bool, typer.Option("--dry-run", help="Say which shards would be "
                                                 "(re)submitted and why; change nothing.")] = False,
           quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False) -> None:
    """Re-run only the incomplete (stage, shard) pairs; a complete run is a no-op."""
    from .run_control import ExecChoice, last_choice, resume_run

    rd = _load(run, runs_dir)
    choice = None
    if executor or profile or partition or workers:
        last = guarded(lambda: last_choice(rd))
        choice = ExecChoice(executor=executor or last.executor,
                            profile=profile or last.profile,
                            partitions=partition or last.partitions,
                            account=last.account, qos=last.qos, workers=workers,
                            gpu_shards=last.gpu_shards)
    o = guarded(lambda: resume_run(rd, choice, progress=not quiet, dry_run=dry_run))
    if dry_run:
        for n in o.notes:
            err.print(n, highlight=False, markup=False)
        _describe_resume_set(o, choice or guarded(lambda: last_choice(rd)))
        raise typer.Exit(EXIT_OK)
    raise typer.Exit(report(o, quiet))


@app.command()
def logs(run: RunArg, runs_dir: RunsDirOpt = None,
         failed: Annotated[bool, typer.Option("--failed", help="Only failed shards.")] = False,
         stage: Annotated[str | None, typer.Option(help="Only this stage.")] = None,
         shard: Annotated[int | None, typer.Option(help="Only this shard.")] = None,
         lines: Annotated[int, typer.Option(help="Tail length per file.")] = 30) -> None:
    """Error, shard log and SLURM output of the selected shards."""
    from .status import run_state

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
                        with contextlib.suppress(ValueError, AttributeError):
                            text = json.loads(text).get("traceback", text)
                    tail = "\n".join(text.splitlines()[-lines:])
                    out.print(f"[bold]{verbatim(f)}[/]", highlight=False, markup=True)
                    out.print(tail, highlight=False, markup=False)
    if not shown:
        out.print("no failed shards" if failed else "no shard has logs yet")


@app.command()
def cancel(run: RunArg, runs_dir: RunsDirOpt = None) -> None:
    """scancel every job the run ever submitted and stop its local processes (ledgers are kept).

    RUN may also be a `launch serve` directory: its server is asked to stop, then scancelled."""
    if (Path(run) / "serve.json").is_file():
        from .commands.serve import stop_serve

        out.print(f"stopped serve {run}: {stop_serve(Path(run))}", highlight=False)
        return
    from .run_control import cancel_run

    rd = _load(run, runs_dir)
    actions = guarded(lambda: cancel_run(rd))
    out.print("\n".join(actions) if actions else "nothing to cancel")


@app.command("aggregate")
def aggregate_cmd(run: RunArg, runs_dir: RunsDirOpt = None,
                  fmt: Annotated[list[str] | None, typer.Option(
                      "--format", help="Extra formats besides md+csv: tex, html.")] = None) -> None:
    """(Re)build the run's tables from its complete shards; exit 1 when shards are missing."""
    from .finalize import aggregate_run

    rd = _load(run, runs_dir)
    res = guarded(lambda: aggregate_run(rd, ("md", "csv", *(fmt or []))))
    out.print(res.markdown, highlight=False, markup=False, soft_wrap=True)
    out.print(f"tables: {rd.tables}", highlight=False)
    if not res.complete:
        err.print(f"[yellow]partial:[/] {verbatim(res.message)}", highlight=False, markup=True)
        raise typer.Exit(EXIT_INCOMPLETE)


def _register_commands() -> None:
    """Call ``register(app, task_apps)`` of every installed command (entry point group
    ``veribatch.commands``) and of every task's `Task.cli_module`."""
    from veribatch import registry
    from veribatch.tasks.base import task_class

    sources: list[tuple[str, Callable[[], Any]]] = [
        (f"command {name!r}", lambda name=name: registry.load(registry.COMMANDS, name))
        for name in registry.names(registry.COMMANDS)]
    for task in task_apps:
        def task_register(task: str = task) -> Any:
            module = task_class(task).cli_module
            return getattr(importlib.import_module(module), "register", None) if module else None
        sources.append((f"task {task!r}'s commands", task_register))
    for what, find in sources:
        try:
            register = find()
            if callable(register):
                register(app, task_apps)
        except Exception as e:  # noqa: BLE001  (one broken extension must not take down status/resume)
            err.print(f"[yellow]warning:[/] {what} unavailable: "
                      f"{verbatim(f'{type(e).__name__}: {e}')}", highlight=False, markup=True)


def main() -> None:
    from veribatch.rundir.paths import make_files_private

    make_files_private()
    try:
        app()
    except KeyboardInterrupt:
        interrupted()
        sys.exit(EXIT_INTERRUPTED)


__all__ = ["app", "main"]
