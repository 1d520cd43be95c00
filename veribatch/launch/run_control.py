"""Run control, the small public API behind the CLI: launch, resume, cancel.

`launch_run` plans, writes (or reuses) the run directory and hands the shards
still to do to an executor; `resume_run` recomputes that set from the run
directory alone.  Launching an identical configuration again is therefore the
same as resuming it, and resuming a complete run does nothing.

Everything that can be checked is checked before the first file is written (the
profile, partitions, the run directory's owner, whether the file system locks),
and planning plus submitting hold the run lock (`launch/locks.py`): two launches or
resumes of one run at the same time would otherwise submit its shards twice.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veribatch.rundir.manifest import Manifest
from veribatch.rundir.paths import RunDir, read_json
from veribatch.tasks.base import get_task

from .executors import executor_class, executor_names
from .executors.base import Executor, SubmitResult
from .jobs import load_jobs, update_jobs
from .locks import RUNNING_LOCALLY, RunLock, is_locked, read_holder, require_locking, run_lock
from .manifest import RunConflictError, check_reusable, code_version, create_or_reuse, load_manifest
from .plan import Plan, PlanError, check_run_name, make_config, make_plan
from .resume_set import ResumeSet, resume_set_for
from .rundir import default_runs_dir
from .status import RunState, run_state

if TYPE_CHECKING:  # rich and the executors' own modules are imported when a run really starts
    from rich.console import Console

    from .finalize import AggregateOutcome
    from .profiles import Profile


@dataclass
class ExecChoice:
    """How to run (not part of the run identity): executor, profile, overrides."""

    executor: str = "local"
    profile: str | None = None
    partitions: Sequence[str] = ()
    account: str | None = None
    qos: str | None = None
    workers: int | None = None
    gpu_shards: int | None = None  # generate array elements (None: sized by launch.sizing)

    def profile_obj(self, resources: Sequence[str] | None = None) -> Profile:
        """The profile with the command-line overrides; `resources` (the run's stage
        resources) decides where a bare `--partition NAME` goes (`profiles.apply_overrides`)."""
        from .profiles import apply_overrides, load_profile

        return apply_overrides(load_profile(self.profile), partitions=list(self.partitions),
                               account=self.account, qos=self.qos, resources=resources)

    def to_json(self) -> dict[str, Any]:
        return {"executor": self.executor, "profile": self.profile,
                "partitions": list(self.partitions), "account": self.account, "qos": self.qos,
                "gpu_shards": self.gpu_shards}

    def validate(self, stages: list[tuple[str, str]]) -> Profile | None:
        """Everything about *how* to run that can be wrong, checked before anything is written:
        the executor name (`executors.executor_names`), the counts, then what the executor checks
        of its choice (`Executor.check_choice`: the profile file, every key typed — also
        with the local executor, which does not use it —, a partition per stage resource)."""
        if self.executor not in executor_names():
            raise ValueError(f"unknown executor {self.executor!r}; known executors: "
                             + ", ".join(executor_names()))
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"--workers must be at least 1, got {self.workers}")
        if self.gpu_shards is not None and self.gpu_shards < 1:
            raise ValueError(f"--gpu-shards must be at least 1, got {self.gpu_shards}")
        return executor_class(self.executor).check_choice(self, stages)

    def executor_for(self, manifest: Manifest, *, progress: bool = True,
                     console: Console | None = None) -> Executor:
        """The executor this choice names, built for the run of `manifest`."""
        return executor_class(self.executor).from_choice(
            self, [s.resource for s in manifest.task_stages], progress=progress,
            console=console)


@dataclass
class LaunchOutcome:
    rd: RunDir
    run_id: str
    created: bool
    resume_set: ResumeSet             # what is (re)run, with reasons (dry runs print it)
    submit: SubmitResult | None = None
    aggregate: AggregateOutcome | None = None
    notes: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        if self.submit is not None and self.submit.failed:
            return False
        return self.aggregate is None or self.aggregate.complete


def plan_run(task_name: str, *, dataset: str | None = None, model: str | None = None,
             sampling: Mapping[str, Any] | None = None, options: Sequence[str] = (),
             shards: int = 1, limit: int | None = None, strategy: str | None = None,
             verifier: str | None = None, sample: int | None = None, sample_seed: int = 0) -> Plan:
    task = get_task(task_name)
    config = make_config(task, dataset=dataset, model=model, sampling=sampling, options=options,
                         shards=shards, limit=limit, strategy=strategy, verifier=verifier,
                         sample=sample, sample_seed=sample_seed)
    return make_plan(task, config)


def run_directory(plan: Plan, runs_dir: Path | None, run_name: str | None) -> Path:
    base = runs_dir if runs_dir is not None else default_runs_dir()
    return base / (check_run_name(run_name) if run_name is not None else plan.run_id)


def check_engine_installed(model: str | None) -> None:
    """Refuse (exit 2) a run whose engine's packages this environment lacks, naming the extra.
    A `--dry-run` only plans and is not refused: it may be planned from another machine."""
    from veribatch.inference.registry import missing_engine_packages

    problem = missing_engine_packages(model) if model else None
    if problem:
        raise PlanError(problem)


def launch_run(plan: Plan, root: Path, choice: ExecChoice, *, progress: bool = True,
               console: Console | None = None,
               on_ready: Callable[[RunDir, bool], None] | None = None) -> LaunchOutcome:
    """Write (or reuse) the run directory, then run or submit what is incomplete.

    `on_ready(run_dir, created)` is called once the directory exists, before any work."""
    choice.validate([(s.name, s.resource) for s in plan.stages])
    check_engine_installed(plan.config.model)  # not after a queue wait, on every node
    check_reusable(plan, root)               # a foreign directory is refused untouched
    fresh = not root.exists()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RunConflictError(f"cannot create run directory {root}: {e.strerror}") from None
    try:
        require_locking(root)                # before the first file of the run is written
    except BaseException:
        if fresh:
            with contextlib.suppress(OSError):
                root.rmdir()
        raise
    with run_lock(root, "planning") as lock:
        rd, created = create_or_reuse(plan, root)
        if on_ready is not None:
            on_ready(rd, created)
        return _execute(rd, choice, lock, created=created, progress=progress, console=console)


def last_choice(rd: RunDir) -> ExecChoice:
    last = load_jobs(rd).data.get("last_launch") or {}
    if not isinstance(last, dict):
        last = {}
    return ExecChoice(executor=last.get("executor", "local"), profile=last.get("profile"),
                      partitions=last.get("partitions") or (), account=last.get("account"),
                      qos=last.get("qos"), gpu_shards=last.get("gpu_shards"))


def resume_run(rd: RunDir, choice: ExecChoice | None = None, *, progress: bool = True,
               console: Console | None = None, dry_run: bool = False) -> LaunchOutcome:
    choice = choice or last_choice(rd)
    manifest = load_manifest(rd)
    if not dry_run:
        check_engine_installed(manifest.model)
    choice.validate([(s.name, s.resource) for s in manifest.task_stages])
    if dry_run:
        return _execute(rd, choice, None, created=False, progress=progress, console=console,
                        dry_run=True)
    with run_lock(rd.root, "planning a resume") as lock:
        return _execute(rd, choice, lock, created=False, progress=progress, console=console)


def _version_notes(state: RunState) -> list[str]:
    """A resume across code versions mixes their outputs: say so, with the counts."""
    now = code_version()
    planned = state.manifest.code_version
    others = {v: n for v, n in state.code_versions.items() if v != now}
    if planned == now and not others:
        return []
    written = ", ".join(f"{v} ({n} shard(s))" for v, n in sorted(state.code_versions.items()))
    return [f"warning: code version {now} differs from the one that planned this run "
            f"({planned}) or wrote its complete shards ({written or 'none yet'}); resuming "
            "mixes their outputs (each shard's DONE records its version; plan a new run "
            "with --run-name to keep them apart)"]


def _execute(rd: RunDir, choice: ExecChoice, lock: RunLock | None, *, created: bool,
             progress: bool, console: Console | None, dry_run: bool = False) -> LaunchOutcome:
    manifest = load_manifest(rd)
    state = run_state(rd, deep=True)  # bit rot must be redone, not skipped
    todo = resume_set_for(state)
    out = LaunchOutcome(rd, manifest.run_id, created, todo, dry_run=dry_run)
    out.notes += [f"warning: {p}" for p in state.problems]
    if not created:
        out.notes += _version_notes(state)
    if todo.busy:
        names = [f"{s.stage}/{s.shard}" for s in todo.busy]
        out.notes.append(f"{len(names)} shard(s) still running or queued, not resubmitted: "
                         + ", ".join(names[:8]) + (" ..." if len(names) > 8 else ""))
    if not todo and (state.aggregate_state == "complete" or todo.busy):
        out.notes.append("nothing to do: every shard is complete" if not todo.busy else
                         "nothing resubmitted")
        return out
    if dry_run:
        return out
    ex = choice.executor_for(manifest, progress=progress, console=console)
    _remember(rd, choice)
    supersede = list(todo.supersede.values()) + ex.superseded(rd)
    if supersede:
        cancelled = scancel_jobs(rd, supersede)
        out.notes.append(f"cancelled {len(cancelled)} queued job(s) that waited on work now "
                         "resubmitted: " + ", ".join(cancelled[:8]))
    if lock is not None:
        lock.phase(ex.lock_phase)
    out.submit = ex.submit(rd, manifest, todo.shards, waiting_on=todo.waiting_on,
                           also_after=todo.live_jobs)
    out.aggregate = out.submit.aggregate
    return out


def _remember(rd: RunDir, choice: ExecChoice) -> None:
    def change(data: dict[str, Any]) -> None:
        data["last_launch"] = {**choice.to_json(), "host": socket.gethostname()}

    update_jobs(rd, change)


def _job_names(rd: RunDir) -> dict[str, str | None]:
    """Recorded job id → the job name it was submitted with (None: not recorded)."""
    names: dict[str, str | None] = {}
    for sub in load_jobs(rd).submissions:
        for job in [sub.get("array_id"), *sub["jobs"].values()]:
            if job:
                names[str(job)] = sub.get("job_name")
    return names


def scancel_jobs(rd: RunDir, jobs: list[str]) -> list[str]:
    """scancel recorded jobs of this run, each only under the name it was submitted with, so
    a job id SLURM has since given to someone else's job is never touched."""
    names = _job_names(rd)
    groups: dict[str | None, list[str]] = {}
    for j in sorted(set(jobs)):
        groups.setdefault(names.get(j) or names.get(j.split("_")[0]), []).append(j)
    done = []
    for name, ids in groups.items():
        cmd = ["scancel", *([f"--name={name}"] if name else []), *ids]
        try:
            subprocess.run(cmd, capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        done += ids
    return done


def cancel_run(rd: RunDir) -> list[str]:
    """scancel every job ever submitted for the run; stop its local processes on this host.

    Every submission recorded in jobs.json, not only the latest per shard: after two
    concurrent resumes, or a resume of a half-failed submission, older copies may run too."""
    actions = []
    subs = load_jobs(rd).submissions
    ids: set[str] = set()
    for sub in subs:  # a whole array by its id: its pending range included
        ids.update([str(sub["array_id"])] if sub.get("array_id")
                   else [str(j) for j in sub["jobs"].values()])
    if ids:
        scancel_jobs(rd, sorted(ids))
        actions.append(f"scancel {len(ids)} job(s) of {len(subs)} submission(s)")
    host = socket.gethostname()
    holder = read_holder(rd.run_lock)
    if holder.get("phase") == RUNNING_LOCALLY and holder.get("host") == host and \
            is_locked(rd.run_lock) and holder.get("pid"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(holder["pid"]), signal.SIGTERM)
            actions.append(f"SIGTERM local launch (pid {holder['pid']})")
    state: RunState = run_state(rd, live=False)
    for col in state.shards.values():
        for s in col:
            if s.state != "running" or s.job:
                continue
            try:
                a = read_json(rd.attempt(s.stage, s.shard))
            except (OSError, ValueError):
                continue
            if a.get("host") == host and a.get("pid"):
                try:
                    os.kill(int(a["pid"]), signal.SIGTERM)
                    actions.append(f"SIGTERM local shard {s.stage}/{s.shard} (pid {a['pid']})")
                except ProcessLookupError:
                    pass
    return actions
