"""The executor interface: run or submit a run's (stage, shard) pairs, then its aggregation.

What a shard does, when it counts as done and what survives a crash are decided in
`shard_loop.py` and `rundir/completeness.py`; an executor only decides *where* and
*when* `run_shard` is called.  So a local run and a SLURM run of the same plan produce the
same records.

Every backend is driven by the same call with the same meaning, `Executor.submit`, whose
sequence the base owns: read the work once (the task's stages upstream first, the shards
of each to run, the instance spans, the upstream shards still in other jobs' hands), run or
submit the stages, then the aggregation — after every shard of this submission and every
live job of earlier ones.  A backend implements the two steps that differ:

| step | `local` | `slurm` |
|---|---|---|
| `run_stages` | worker processes on this machine, in the foreground, in dependency order | one job array per stage and dependency group, recorded in jobs.json as sbatch accepts it |
| `aggregate` | in this process, the shards being done | a job ``afterany`` those arrays and live jobs |

and says how it is built from the user's choice (`check_choice`, `from_choice`), what it
tells about a plan before it runs (`describe_plan`), what the run lock says while it
works (`lock_phase`) and which jobs of earlier submissions it replaces (`superseded`).
The names are looked up in `executors/__init__.py`, the one table of them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from veribatch.rundir.manifest import Manifest, StageEntry
from veribatch.rundir.paths import RunDir
from veribatch.rundir.shards import ShardSpan, read_spans

if TYPE_CHECKING:
    from rich.console import Console

    from ..finalize import AggregateOutcome
    from ..plan import Plan
    from ..profiles import Profile

Key = tuple[str, int]  # (stage, shard)


class Choice(Protocol):
    """What an executor reads of the user's choice (`run_control.ExecChoice`), declared
    here so that the executors need not import the module that looks them up."""

    profile: str | None
    workers: int | None
    gpu_shards: int | None

    def profile_obj(self, resources: Sequence[str] | None = None) -> Profile: ...


@dataclass
class SubmitResult:
    submitted: dict[str, list[int]]      # stage → shards run or submitted
    finished: bool                       # True when the executor ran everything in the foreground
    failed: list[Key] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)  # jobs.json entries, as submitted
    message: str = ""
    aggregate: AggregateOutcome | None = None  # the tables, when aggregation ran in this process


@dataclass(frozen=True)
class Work:
    """What one submission must do, read once from the run directory for every backend."""

    rd: RunDir
    manifest: Manifest
    stages: tuple[StageEntry, ...]       # the task's stages, upstream first (no aggregate)
    shards: dict[str, list[int]]         # stage → its shards to run, sorted (stages with some)
    spans: list[ShardSpan]               # per shard: its instances in instances.jsonl
    waiting_on: dict[Key, str]           # upstream shards not in `shards` that a live job
                                         # still runs or queues → that job

    @classmethod
    def read(cls, rd: RunDir, manifest: Manifest, todo: dict[str, list[int]],
             waiting_on: dict[Key, str]) -> Work:
        stages = manifest.task_stages
        shards = {s.name: sorted(todo[s.name]) for s in stages if todo.get(s.name)}
        return cls(rd, manifest, stages, shards, read_spans(rd), dict(waiting_on))

    @property
    def order(self) -> list[str]:
        return [s.name for s in self.stages]


class Executor(ABC):
    name: ClassVar[str]
    foreground: ClassVar[bool]   # True: `submit` returns when every shard has run
    lock_phase: ClassVar[str]    # what launch.lock's holder says while this executor works

    # --- built from the user's choice -------------------------------------------------
    @classmethod
    def check_choice(cls, choice: Choice, stages: list[tuple[str, str]]) -> Profile | None:
        """Everything about *how* to run that can be wrong, checked before anything is
        written; `stages`: (name, resource) of the task's stages.  A backend without profiles
        still loads a named one: a misspelt name must not pass silently."""
        if choice.profile is not None:
            choice.profile_obj()
        return None

    @classmethod
    @abstractmethod
    def from_choice(cls, choice: Choice, resources: Sequence[str], *, progress: bool = True,
                    console: Console | None = None) -> Executor:
        """The executor for a checked choice; `resources`: the task's stage resources."""

    @classmethod
    @abstractmethod
    def describe_plan(cls, choice: Choice, plan: Plan) -> list[str]:
        """What `launch --dry-run` says below the plan: what this backend would use."""

    def superseded(self, rd: RunDir) -> list[str]:
        """Jobs of earlier submissions that a new submission replaces (scancelled first)."""
        return []

    # --- the submission -----------------------------------------------------------------
    def submit(self, rd: RunDir, manifest: Manifest, todo: dict[str, list[int]],
               *, aggregate: bool = True, waiting_on: dict[Key, str] | None = None,
               also_after: Sequence[str] = ()) -> SubmitResult:
        """Run or submit the shards in `todo` (stage → shards; stages upstream first), then,
        with `aggregate`, the run's aggregation.

        `waiting_on`: upstream shards not in `todo` that a job already runs or queues
        (shard → job id); a downstream shard in `todo` must start only after them.
        `also_after`: other live jobs of the run the aggregation must wait for."""
        work = Work.read(rd, manifest, todo, waiting_on or {})
        result = SubmitResult(submitted=dict(work.shards), finished=self.foreground)
        self.run_stages(work, result)
        if aggregate:
            after = [str(j["array_id"]) for j in result.jobs] + list(also_after)
            self.aggregate(work, result, after)
        return result

    @abstractmethod
    def run_stages(self, work: Work, result: SubmitResult) -> None:
        """Run or submit `work.shards`, each after the upstream shards it reads; record in
        `result` what failed (foreground) or what was submitted (`jobs`)."""

    @abstractmethod
    def aggregate(self, work: Work, result: SubmitResult, after: list[str]) -> None:
        """Build the run's tables once the shards are done: `after` lists the jobs (of this
        submission and live earlier ones) that a queued aggregation must wait for."""
