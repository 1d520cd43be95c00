"""The SLURM executor: one job array per stage (and dependency group), submitted through submitit.

What goes where:

- the array elements of a stage and their shards: `launch.sizing.stage_units` (a sized GPU
  stage runs several contiguous shards per element with one model load; its jobs.json
  entry lists them in ``elements``; a CPU stage gets at most `array_parallelism` elements);
- which array an element goes into and what it waits for (``aftercorr``/``afterok``,
  chunks of MaxArraySize): `executors.array_dependencies`; dependencies that can never
  be met cancel the element (``--kill-on-invalid-dep=yes``);
- what sbatch receives: `executors.sbatch.sbatch_parameters` (also what `--dry-run` shows);
- what runs in an element — its shards, those it takes from the rest of the array, its
  Ray pool: `executors.element.ShardJob`; USR2 before the time limit as a requeue:
  `executors.requeue`.  SIGTERM (scancel) fails the shard, recorded in error.json.

This module submits: each array is recorded in jobs.json as soon as sbatch accepts it,
with its job name (``vb-<run directory name>-<stage>``), which `cancel` uses to never
touch a job id SLURM has reused for someone else.  The aggregate job runs ``afterany``
every array and checks completeness itself; a partial run is recorded in aggregate.json,
not as a FAILED job.  Job ids go to jobs.json; submitit's own job objects are never
consulted again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from veribatch.rundir.manifest import Manifest, StageEntry
from veribatch.rundir.paths import RunDir

from ..jobs import add_submissions, live_states, load_jobs
from ..profiles import PartitionSpec, Profile
from ..sizing import is_sized, job_time, stage_units
from ..slurm_calls import SubmitError, unreachable, with_backoff
from ..status import QUEUED
from .array_dependencies import Arrays, dependency_groups
from .base import Choice, Executor, SubmitResult, Work
from .element import ShardJob
from .sbatch import (
    AGGREGATE_JOB_MINUTES,
    AGGREGATE_JOB_RESOURCES,
    cluster_partitions,
    max_array_size,
    sbatch_parameters,
)

if TYPE_CHECKING:
    from rich.console import Console

    from ..plan import Plan

__all__ = ["ShardJob", "SlurmExecutor", "SubmitError", "aggregate_job"]

T = TypeVar("T")

def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _job_minutes(spec: PartitionSpec, count: int, stage: dict[str, Any],
                 config: dict[str, Any] | None, profile: Profile) -> int:
    """See `launch.sizing.job_time` (a stage that runs the model: the sizing's estimate)."""
    return job_time(spec, stage, count, config, profile.generation).minutes


def aggregate_job(run_dir: str) -> dict[str, Any]:
    """The aggregate job ends COMPLETED when it built the tables, partial or not: an
    incomplete run is recorded where the run's state lives (aggregate.json `partial`,
    `launch status` exit 1), not as a FAILED job that monitoring would read as the job's
    own failure after every recovery.  It fails only when aggregation itself fails."""
    from ..finalize import aggregate_run

    result = aggregate_run(RunDir(run_dir))
    if not result.complete:
        print(f"run incomplete, tables are partial: {result.message}", flush=True)
    return {"complete": result.complete, "tables": [str(p) for p in result.paths]}


class SlurmExecutor(Executor):
    name = "slurm"
    foreground = False
    lock_phase = "submitting to SLURM"

    def __init__(self, profile: Profile, gpu_shards: int | None = None) -> None:
        self.profile = profile
        self.gpu_shards = gpu_shards

    @classmethod
    def check_choice(cls, choice: Choice, stages: list[tuple[str, str]]) -> Profile:
        """The profile with the overrides, and a partition for every stage resource."""
        profile = choice.profile_obj([resource for _, resource in stages])
        for name, resource in stages:
            profile.for_resource(resource, name)
        return profile

    @classmethod
    def from_choice(cls, choice: Choice, resources: Sequence[str], *, progress: bool = True,
                    console: Console | None = None) -> SlurmExecutor:
        return cls(choice.profile_obj(resources), gpu_shards=choice.gpu_shards)

    @classmethod
    def describe_plan(cls, choice: Choice, plan: Plan) -> list[str]:
        """What sbatch would receive per stage and roughly cost (`executors.cost`)."""
        from ..manifest import build_manifest
        from .cost import describe, estimate

        prof = choice.profile_obj([s.resource for s in plan.stages])
        manifest = build_manifest(plan)
        sizes = [b - a for a, b in plan.shard_bounds()]
        return describe(estimate(manifest, prof, sizes, choice.gpu_shards), manifest, prof)

    def superseded(self, rd: RunDir) -> list[str]:
        """Aggregate jobs of earlier submissions still queued: the new one's replaces them."""
        ids = [str(j) for sub in load_jobs(rd).submissions if sub["stage"] == "aggregate"
               for j in sub["jobs"].values()]
        if not ids:
            return []
        states = live_states(ids)
        return [j for j in ids if states.get(j) in QUEUED]

    def check_partitions(self, manifest: Manifest) -> None:
        known = cluster_partitions()
        if known is None:
            raise SubmitError("SLURM is not reachable: `sinfo` failed (is SLURM_CONF set and "
                              "slurmctld up?)")
        for st in manifest.stages:
            spec = self.profile.for_resource(st.resource, st.name)
            if spec.partition and spec.partition not in known:
                raise SubmitError(
                    f"profile {self.profile.name!r}: partition {spec.partition!r} (resource "
                    f"{st.resource}, stage {st.name}) does not exist on this cluster; "
                    f"partitions: {', '.join(sorted(known))}")

    def run_stages(self, work: Work, result: SubmitResult) -> None:
        """One array (chunked by MaxArraySize) per stage and dependency group, each recorded
        in jobs.json the moment sbatch accepts it: a failure half-way leaves every job that
        was submitted visible to `status`, `cancel` and the next `resume`.

        A downstream stage's shards fall in three groups: those whose upstream shard is in
        this submission (element-wise `aftercorr` when the arrays line up), those whose
        upstream is still running or queued in an earlier job (`afterok` on exactly those
        elements), and those free to start at once (no dependency) — so resuming a few
        shards never makes the downstream wait for a whole upstream array."""
        self.check_partitions(work.manifest)
        limit = self.profile.max_array_size or max_array_size()
        arrays: Arrays = {}  # stage → [(elements, job id)]
        for st in work.stages:
            if st.name in work.shards:
                arrays[st.name] = self._submit_stage(work, st, arrays, limit, result)

    def _submit_stage(self, work: Work, entry: StageEntry, arrays: Arrays, limit: int,
                      result: SubmitResult) -> list[tuple[list[list[int]], str]]:
        """The arrays of one stage, each recorded as sbatch accepts it.  Sizing reads the
        stage's declared resources from its manifest entry as written (`raw`), as the cost
        estimate does from a plan before the manifest exists."""
        rd, manifest, name, st = work.rd, work.manifest, entry.name, dict(entry.raw)
        config = dict(manifest.config)
        spec = self.profile.for_resource(entry.resource, name)
        units = stage_units(self.profile, dict(manifest.raw), st, work.shards[name],
                            self.gpu_shards)
        per_element = max(sum(work.spans[k].count for k in u) for u in units)
        minutes = _job_minutes(spec, per_element, st, config, self.profile)
        job_name = f"vb-{rd.root.name}-{name}"
        submitted: list[tuple[list[list[int]], str]] = []
        arrays[name] = submitted  # elements of one stage never wait for each other
        for part, dep in dependency_groups(units, list(entry.needs), arrays, work.waiting_on, limit):
            several = any(len(u) > 1 for u in part)
            ex = self._executor(rd, job_name, spec, minutes, st, dep,
                                self.profile.array_parallelism)
            # A grouped CPU stage's elements take each other's free shards at the end.
            steal = [k for u in part for k in u] if several and not is_sized(
                st, config) else None
            try:
                args = part if several else [u[0] for u in part]
                jobs = _sbatch(lambda ex=ex, args=args, steal=steal: ex.map_array(
                    ShardJob(steal, minutes * 30.0), [_root(rd)] * len(args),
                    [name] * len(args), args), f"sbatch of stage {name}")
            except SubmitError:
                raise
            except Exception as e:  # noqa: BLE001  (submitit wraps sbatch errors variously)
                done = ", ".join(f"{x['stage']}:{x['array_id']}" for x in result.jobs) or "none"
                raise SubmitError(f"sbatch refused stage {name} "
                                  f"(shards {[k for u in part for k in u][:5]}...): {e}; "
                                  "already submitted and "
                                  f"recorded in jobs.json: {done}") from e
            array_id = str(jobs[0].job_id).split("_")[0]
            submitted.append((part, array_id))
            record = {"stage": name, "array_id": array_id, "submitted": _now(),
                     "job_name": job_name, "dependency": dep, "partition": spec.partition,
                     "time_min": minutes, "profile": self.profile.name,
                     "jobs": {str(k): str(j.job_id) for u, j in zip(part, jobs, strict=True)
                              for k in u}}
            if several:  # element → its shards (`jobs` maps every shard to its element)
                record["elements"] = [list(u) for u in part]
            self._record(rd, record, result)
        return submitted

    def aggregate(self, work: Work, result: SubmitResult, after: list[str]) -> None:
        """A job ``afterany`` every array of this submission and every live earlier job."""
        rd = work.rd
        spec = self.profile.for_resource("cpu", "aggregate")
        job_name = f"vb-{rd.root.name}-aggregate"
        ex = self._executor(rd, job_name, spec, spec.time_min or AGGREGATE_JOB_MINUTES,
                            AGGREGATE_JOB_RESOURCES,
                            "afterany:" + ":".join(after) if after else None, 1)
        ex.update_parameters(additional_parameters={**self.profile.sbatch})
        try:
            job = _sbatch(lambda: ex.submit(aggregate_job, _root(rd)), "sbatch of the aggregate job")
        except SubmitError:
            raise
        except Exception as e:  # noqa: BLE001
            raise SubmitError(f"sbatch refused the aggregate job: {e}; the stages' jobs "
                              "are submitted (jobs.json); `launch resume` submits it "
                              "again") from e
        self._record(rd, {"stage": "aggregate", "array_id": str(job.job_id), "submitted": _now(),
                          "job_name": job_name, "dependency": "afterany",
                          "jobs": {"0": str(job.job_id)}}, result)

    @staticmethod
    def _record(rd: RunDir, entry: dict[str, Any], result: SubmitResult) -> None:
        add_submissions(rd, [entry])
        result.jobs.append(entry)

    def _executor(self, rd: RunDir, job_name: str, spec: PartitionSpec, minutes: int,
                  stage: dict[str, Any], dependency: str | None, parallelism: int) -> Any:
        import submitit

        ex = submitit.SlurmExecutor(folder=rd.slurm_logs, max_num_timeout=3)
        ex.update_parameters(**sbatch_parameters(
            self.profile, spec, stage, minutes, job_name=job_name, dependency=dependency,
            parallelism=parallelism, run_root=_root(rd)))
        return ex


def _sbatch(submit: Callable[[], T], what: str) -> T:
    """`submit`, retried while sbatch could not connect to the controller (nothing was
    submitted then: `slurm_calls`); any other error is raised as it came."""
    def attempt() -> tuple[bool, Any, str]:
        try:
            return False, submit(), ""
        except Exception as e:  # noqa: BLE001  (submitit's FailedJobError carries sbatch's stderr)
            if unreachable(str(e), read_only=False):
                return True, None, str(e)
            raise

    return with_backoff(attempt, what)


def _root(rd: RunDir) -> str:
    return str(rd.root.resolve())
