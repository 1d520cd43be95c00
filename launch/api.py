"""The small public API behind the CLI: launch, resume, cancel.

`launch_run` plans, writes (or reuses) the run directory and hands the shards
still to do to an executor; `resume_run` recomputes that set from the run
directory alone.  Launching an identical configuration again is therefore the
same as resuming it, and resuming a complete run does nothing.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from tasks.base import get_task

from .executors.base import SubmitResult, make_executor, shards_to_run
from .finalize import AggregateOutcome, aggregate_run
from .jobs import latest_jobs, read_jobs
from .manifest import create_or_reuse, load_manifest
from .plan import Plan, make_config, make_plan
from .profiles import Profile, apply_overrides, load_profile
from .rundir import RunDir, atomic_write_json, default_runs_dir, read_json
from .status import RunState, run_state


@dataclass
class ExecChoice:
    """How to run (not part of the run identity): executor, profile, overrides."""

    executor: str = "local"
    profile: str | None = None
    partitions: Sequence[str] = ()
    account: str | None = None
    qos: str | None = None
    workers: int | None = None

    def profile_obj(self) -> Profile:
        return apply_overrides(load_profile(self.profile), partitions=list(self.partitions),
                               account=self.account, qos=self.qos)

    def to_json(self) -> dict[str, Any]:
        return {"executor": self.executor, "profile": self.profile,
                "partitions": list(self.partitions), "account": self.account, "qos": self.qos}


@dataclass
class LaunchOutcome:
    rd: RunDir
    run_id: str
    created: bool
    todo: dict[str, list[int]]
    submit: SubmitResult | None = None
    aggregate: AggregateOutcome | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        if self.submit is not None and self.submit.failed:
            return False
        return self.aggregate is None or self.aggregate.complete


def plan_run(task_name: str, *, dataset: str | None = None, model: str | None = None,
             sampling: Mapping[str, Any] | None = None, options: Sequence[str] = (),
             shards: int = 1, limit: int | None = None, strategy: str | None = None,
             verifier: str | None = None) -> Plan:
    task = get_task(task_name)
    config = make_config(task, dataset=dataset, model=model, sampling=sampling, options=options,
                         shards=shards, limit=limit, strategy=strategy, verifier=verifier)
    return make_plan(task, config)


def run_directory(plan: Plan, runs_dir: Path | None, run_name: str | None) -> Path:
    base = runs_dir if runs_dir is not None else default_runs_dir()
    return base / (run_name or plan.run_id)


def launch_run(plan: Plan, root: Path, choice: ExecChoice, *, progress: bool = True,
               console: Console | None = None,
               on_ready: Callable[[RunDir, bool], None] | None = None) -> LaunchOutcome:
    """Write (or reuse) the run directory, then run or submit what is incomplete.

    `on_ready(run_dir, created)` is called once the directory exists, before any work."""
    profile = choice.profile_obj() if choice.executor == "slurm" else None
    if choice.executor not in ("local", "slurm"):
        raise ValueError(f"unknown executor {choice.executor!r}; known executors: local, slurm")
    if profile is not None:  # a stage without a partition must fail before anything is written
        for st in plan.stages:
            profile.for_resource(st.resource, st.name)
    rd, created = create_or_reuse(plan, root)
    if on_ready is not None:
        on_ready(rd, created)
    return _execute(rd, choice, created=created, progress=progress, console=console)


def resume_run(rd: RunDir, choice: ExecChoice | None = None, *, progress: bool = True,
               console: Console | None = None) -> LaunchOutcome:
    if choice is None:
        last = read_jobs(rd).get("last_launch") or {}
        choice = ExecChoice(executor=last.get("executor", "local"), profile=last.get("profile"),
                            partitions=last.get("partitions") or (), account=last.get("account"),
                            qos=last.get("qos"))
    return _execute(rd, choice, created=False, progress=progress, console=console)


def _execute(rd: RunDir, choice: ExecChoice, *, created: bool, progress: bool,
             console: Console | None) -> LaunchOutcome:
    manifest = load_manifest(rd)
    state = run_state(rd, deep=True)  # bit rot must be redone, not skipped
    todo = shards_to_run(state)
    out = LaunchOutcome(rd, manifest["run_id"], created, todo)
    busy = [f"{s.stage}/{s.shard}" for col in state.shards.values() for s in col
            if s.state == "running" or (s.state == "pending" and s.job_state)]
    if busy:
        out.notes.append(f"{len(busy)} shard(s) still running or queued, not resubmitted: "
                         + ", ".join(busy[:8]) + (" ..." if len(busy) > 8 else ""))
    nothing = not any(todo.values())
    agg_done = (read_json(rd.aggregate_status).get("status") == "complete"
                if rd.aggregate_status.exists() else False)
    if nothing and (agg_done or busy):
        out.notes.append("nothing to do: every shard is complete" if not busy else
                         "nothing resubmitted")
        return out
    _remember(rd, choice)
    if choice.executor == "local":
        ex = make_executor("local", workers=choice.workers, progress=progress, console=console)
        out.submit = ex.submit(rd, manifest, todo, aggregate=False)
        out.aggregate = aggregate_run(rd)
    else:
        ex = make_executor("slurm", profile=choice.profile_obj())
        out.submit = ex.submit(rd, manifest, todo, aggregate=True)
    return out


def _remember(rd: RunDir, choice: ExecChoice) -> None:
    data = read_jobs(rd)
    data["last_launch"] = {**choice.to_json(), "host": socket.gethostname()}
    atomic_write_json(rd.jobs, data)


def cancel_run(rd: RunDir) -> list[str]:
    """scancel the latest jobs of incomplete shards; TERM local shard processes on this host."""
    state: RunState = run_state(rd, live=False)
    done = {(s.stage, s.shard) for col in state.shards.values() for s in col if s.state == "done"}
    jobs = [j for key, j in latest_jobs(rd).items() if key not in done]
    actions = []
    if jobs:
        subprocess.run(["scancel", *sorted(set(jobs))], capture_output=True, timeout=30)
        actions.append(f"scancel {len(set(jobs))} job(s)")
    host = socket.gethostname()
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
