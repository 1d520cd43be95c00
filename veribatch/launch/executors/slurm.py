"""The SLURM executor: one job array per stage, submitted through submitit.

- Arrays are *dense*: array index i runs shard ``shards[i]`` (a resume submits
  only the incomplete shards, as indices 0..m-1).
- A sized GPU stage (`launch.sizing`) runs several contiguous shards per element, with
  one model load; its jobs.json entry lists them in ``elements``.
- A stage that needs another depends on it element-wise (``aftercorr``) when both
  arrays hold the same shards, else (``afterok``) on exactly the upstream elements that
  run its shards: a verify array per generate element, not one behind the whole stage.  A shard whose upstream
  is not resubmitted but still queued/running in an earlier job waits on exactly those
  elements (``afterok``); one with a complete upstream starts at once.  Dependencies
  that can never be met cancel the element (``--kill-on-invalid-dep=yes``).
- Arrays longer than the cluster's MaxArraySize are split into chunks.
- The aggregate job runs ``afterany`` every array and checks completeness itself; a
  partial run is recorded in aggregate.json, not as a FAILED job.
- Each array is recorded in jobs.json as soon as sbatch accepts it, with its job name
  (``vb-<run directory name>-<stage>``), which `cancel` uses to never touch a job id
  SLURM has reused for someone else.
- USR2 (``signal_delay_s`` before the time limit): submitit checkpoints
  `ShardJob` — the ledger is already durable, so the checkpoint is the job
  itself — and requeues (`scontrol requeue`: the same job id, so the next stage's
  dependency still holds); the shard ends as *requeued* (attempt.json), never as
  failed, and the SIGTERM SLURM sends the old instance for the requeue is not a
  cancel.  SIGTERM (scancel) fails the shard, recorded in error.json; so does a
  requeue that submitit refuses (timed out too often) or that `scontrol` rejects.

Job ids go to jobs.json; submitit's own job objects are never consulted again.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..jobs import add_submissions
from ..profiles import PartitionSpec, Profile
from ..rundir import RunDir
from ..sizing import job_time
from .base import Executor, SubmitResult

DEFAULT_MAX_ARRAY_SIZE = 1001
ENGINE_REPLICAS_ENV = "VERIBATCH_ENGINE_REPLICAS"
"""Set in a GPU stage's jobs from the profile's ``generation.replicas``: the element's
engines are a Ray pool of that many replicas over the nodes of its allocation."""


class SubmitError(RuntimeError):
    """sbatch refused a job, or SLURM is not reachable."""


def max_array_size() -> int:
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True,
                             timeout=15)
        m = re.search(r"^MaxArraySize\s*=\s*(\d+)", out.stdout, re.M)
        if m:
            return int(m.group(1))
    except (OSError, subprocess.SubprocessError):
        pass
    return DEFAULT_MAX_ARRAY_SIZE


def cluster_partitions() -> set[str] | None:
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True,
                             timeout=15)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return {line.strip() for line in out.stdout.splitlines() if line.strip()}


Unit = list[int]  # the shards one array element runs (one, or a sized stage's group)
Arrays = dict[str, list[tuple[list[Unit], str]]]  # stage → [(units of the array, array id)]


def _units(part: list[int] | list[Unit]) -> list[Unit]:
    return [u if isinstance(u, list) else [u] for u in part]


def dependency_groups(shards: list[int] | list[Unit], needs: list[str],
                      arrays: dict[str, list[tuple[list[int] | list[Unit], str]]],
                      waiting_on: dict[tuple[str, int], str],
                      limit: int) -> list[tuple[list[int] | list[Unit], str | None]]:
    """Split a stage's array elements into arrays by what they must wait for: (elements,
    dependency).  An element is a shard, or a list of shards (a sized GPU stage's element,
    `launch.sizing`); `arrays` holds the upstream arrays of this submission in the same form.

    Elements whose upstream is in this submission wait for exactly the upstream elements
    that run their shards: element-wise (`aftercorr`) when the array lines up with an
    upstream array, else `afterok` on those elements — a generate element covering verify
    shards 0-15 releases those sixteen, not the whole verify stage.  Elements whose upstream
    is still queued or running in an earlier job (`waiting_on`) wait for exactly those
    elements; the rest start at once."""
    plain = bool(shards) and not isinstance(shards[0], list)
    units = _units(list(shards))
    ups = {need: [(_units(list(part)), jid) for part, jid in arrays.get(need, [])]
           for need in needs}
    where: dict[tuple[str, int], tuple[int, int]] = {}  # (need, shard) → (array, element)
    for need, lst in ups.items():
        for a, (us, _) in enumerate(lst):
            for e, u in enumerate(us):
                for k in u:
                    where[(need, k)] = (a, e)

    def old_jobs(unit: Unit) -> list[str]:
        return sorted({waiting_on[(need, k)] for need in needs for k in unit
                       if (need, k) in waiting_on})

    def signature(unit: Unit) -> tuple[Any, ...]:
        sig = []
        for need in needs:
            hits = sorted({where[(need, k)] for k in unit if (need, k) in where})
            if not hits:
                continue
            a, e = hits[0]
            # an element with the same shards as its upstream element (one shard each, or
            # the same group of a grouped stage) may line up array-wise (aftercorr)
            same = len(hits) == 1 and ups[need][a][0][e] == unit
            sig.append((need, a) if same else (need, tuple(hits)))
        return tuple(sig)

    def deps(part: list[Unit]) -> str | None:
        out = []
        for need in needs:
            hit = [where[(need, k)] for u in part for k in u if (need, k) in where]
            if not hit:
                continue
            arrs = sorted({a for a, _ in hit})
            if len(arrs) == 1 and ups[need][arrs[0]][0] == part:
                jid = ups[need][arrs[0]][1]
                out.append(f"{'afterok' if len(part) == 1 else 'aftercorr'}:{jid}")
                continue
            ids = []
            for a in arrs:
                us, jid = ups[need][a]
                elems = sorted({e for aa, e in hit if aa == a})
                ids += [jid] if len(elems) == len(us) else [f"{jid}_{e}" for e in elems]
            out.append("afterok:" + ":".join(ids))
        old = sorted({j for u in part for j in old_jobs(u)})
        if old:
            out.append("afterok:" + ":".join(old))
        return ",".join(out) or None

    linked: dict[tuple[Any, ...], list[Unit]] = {}
    waiting, free = [], []
    for u in units:
        sig = signature(u)
        if sig:
            linked.setdefault(sig, []).append(u)
        elif old_jobs(u):
            waiting.append(u)
        else:
            free.append(u)
    groups: list[tuple[list[Unit], str | None]] = []
    for part in linked.values():
        groups += [(c, deps(c)) for c in chunks(part, limit)]
    groups += [(c, deps(c)) for c in chunks(waiting, limit)]
    groups += [(c, None) for c in chunks(free, limit)]
    if plain:
        return [([u[0] for u in part], dep) for part, dep in groups]
    return [(part, dep) for part, dep in groups]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _job_minutes(spec: PartitionSpec, count: int, stage: dict[str, Any],
                 config: dict[str, Any] | None, profile: Profile) -> int:
    """See `launch.sizing.job_time` (a stage that runs the model: the sizing's estimate)."""
    return job_time(spec, stage, count, config, profile.generation).minutes


def sbatch_parameters(profile: Profile, spec: PartitionSpec, stage: dict[str, Any],
                      minutes: int, *, job_name: str, dependency: str | None = None,
                      parallelism: int | None = None, run_root: str | None = None
                      ) -> dict[str, Any]:
    """The submitit `SlurmExecutor` parameters of one array: what sbatch receives.

    The one place they are computed: submission (`SlurmExecutor._executor`) and
    `--dry-run` (`launch.cost`) both call it."""
    extra: dict[str, Any] = {"kill-on-invalid-dep": "yes"}
    extra.update(profile.sbatch)
    extra.update(spec.sbatch)
    params: dict[str, Any] = {
        "job_name": job_name, "time": minutes,
        # The profile's cpus/mem are floors: a stage that declares more gets more.
        "cpus_per_task": max(spec.cpus_per_task or 1, int(stage["cpus_per_task"])),
        "mem": f"{int(max(spec.mem_gb or 0, float(stage['mem_gb'])) * 1024)}M",
        "signal_delay_s": profile.signal_delay_s,
        "array_parallelism": profile.array_parallelism if parallelism is None else parallelism,
        "setup": list(profile.setup)
        + ([f"export VERIBATCH_RUN_DIR={shlex.quote(run_root)}"] if run_root else [])
        + ([f"export VERIBATCH_IMAGES={shlex.quote(profile.image_dir)}"]
           if profile.image_dir else []),
        "additional_parameters": extra,
    }
    for key, value in (("partition", spec.partition), ("gres", spec.gres),
                       ("account", spec.account or profile.account),
                       ("qos", spec.qos or profile.qos),
                       ("constraint", spec.constraint), ("dependency", dependency)):
        if value:
            params[key] = value
    # The profile has the last word on GPUs: `gpus_per_task: 0` on a partition without
    # GPUs (a CPU-only test cluster) runs GPU stages there on CPU; unset → the stage's need.
    gpus = spec.gpus_per_task if spec.gpus_per_task is not None else (
        0 if spec.gres else int(stage["gpus_per_task"]))
    if gpus:
        params["gpus_per_task"] = gpus
    if spec.nodes and spec.nodes > 1:
        # One copy of the shard process, on the first node; the others are for the Ray pool
        # it starts (`inference.ray_cluster.job_pool`: srun --overlap steps).
        params["nodes"] = spec.nodes
        params["srun_args"] = ["--nodes=1", "--ntasks=1"]
    if stage.get("resource") == "gpu" and profile.generation.replicas:
        params["setup"].append(f"export {ENGINE_REPLICAS_ENV}={int(profile.generation.replicas)}")
    return params


def stage_units(profile: Profile, manifest: dict[str, Any], stage: dict[str, Any],
                shards: list[int], gpu_shards: int | None = None) -> list[Unit]:
    """The array elements of `stage` for the shards to run: one per shard, or for a sized
    GPU stage (`launch.sizing`) the shards of each element that still has work."""
    from ..sizing import element_groups, size_stage

    total = int(manifest["shards"])
    size = size_stage(stage, manifest["config"], int(manifest["instance_count"]), total,
                      profile, gpu_shards)
    if size.elements >= total:
        return [[k] for k in sorted(shards)]
    todo = set(shards)
    return [[k for k in g if k in todo] for g in element_groups(total, size.elements)
            if todo.intersection(g)]


class ShardJob:
    """The callable submitit pickles: runs one shard — or, for a grouped stage
    (`launch.sizing`), a list of shards one after the other (a GPU stage with the model
    loaded once, `inference.shared_engines`); checkpointable for USR2 requeue.

    `steal`: the shards of the whole array (a grouped CPU stage).  An element that has
    finished its own shards then runs those of the others that nobody has started and
    whose upstream is done (`shard_loop.run_shard_if_free`), from the end of the array
    (the elements that start last) while owners work from the front of their groups — the
    balance SLURM gives an array of one shard per element, without a start-up per shard."""

    # Class defaults: a job pickled by an older version (queued across an upgrade) has
    # neither attribute, and still runs.
    steal: list[int] = []
    steal_until_s: float | None = None

    def __init__(self, steal: list[int] | None = None, steal_until_s: float | None = None) -> None:
        self.steal = list(steal or [])
        # Taken shards make an element run past what its time limit was sized for: take
        # none after this many seconds (half the limit), so USR2 seldom finds one running.
        self.steal_until_s = steal_until_s

    def __call__(self, run_dir: str, stage: str, shard: int | list[int]) -> dict[str, Any]:
        with _engine_scope():
            if isinstance(shard, list):
                return self._several(run_dir, stage, shard)
            o = self._one(run_dir, stage, shard)
            return {"stage": o.stage, "shard": o.shard, "records": o.records,
                    "skipped": o.skipped}

    def _several(self, run_dir: str, stage: str, shards: list[int]) -> dict[str, Any]:
        """Every shard is attempted (each records its own failure in its error.json); the
        element fails afterwards if any did, so its dependants are not released.

        An own shard that another element is running (it took it, `steal`) is left for
        last, and left to that element if it still runs it then: an element whose group
        was taken works, or ends and frees its slot, instead of idling on a lock.  Should
        the taker die, the shard is failed (no DONE, no lock) and `launch resume` reruns
        it; an `aftercorr` dependant that starts early waits for it like for any running
        upstream (`shard_loop`)."""
        from veribatch.inference import shared_engines

        from ..locks import is_locked
        from ..rundir import RunDir

        rd = RunDir(run_dir)
        done, failed = [], []

        def own(k: int) -> None:
            try:
                o = self._one(run_dir, stage, k)
            except Exception as e:  # noqa: BLE001  (already recorded by run_shard)
                failed.append((k, e))
            else:
                done.append({"shard": o.shard, "records": o.records, "skipped": o.skipped})

        with shared_engines() as engines:
            busy = []
            for k in shards:
                if self.steal and is_locked(rd.lock(stage, k)):
                    busy.append(k)
                else:
                    own(k)
            taken = self._take_free(run_dir, stage, shards)
            left = [k for k in busy if is_locked(rd.lock(stage, k))]
            for k in busy:
                if k not in left:
                    own(k)
            loads = len(engines)
        # In the element's SLURM log: what the sizing was meant to buy, as it happened.
        print(f"{stage}: shards {shards} ran with {loads} engine load(s)"
              + (f"; also ran shards {taken} of other elements" if taken else "")
              + (f"; left shards {left} to the elements running them" if left else ""),
              flush=True)
        if failed:
            raise RuntimeError(f"{stage}: shard(s) {', '.join(str(k) for k, _ in failed)} of "
                               f"this element failed (first: {failed[0][1]})") from failed[0][1]
        return {"stage": stage, "shards": done, "engine_loads": loads, "taken": taken,
                "left": left}

    def _take_free(self, run_dir: str, stage: str, own: list[int]) -> list[int]:
        """Run the array's free shards (see the class docstring); a failure there is the
        owner's to redo (error.json records it), not this element's."""
        from ..shard_loop import run_shard_if_free

        taken: list[int] = []
        for k in reversed(self.steal):
            if k in own:
                continue
            if self.steal_until_s is not None and _element_age_s() > self.steal_until_s:
                break
            # (a requeue leaves as SystemExit, like from an own shard)
            try:
                if self._guarded(run_shard_if_free, run_dir, stage, k) is not None:
                    taken.append(k)
            except Exception:  # noqa: BLE001,S112  (recorded in the shard's error.json)
                continue
        return taken

    @classmethod
    def _one(cls, run_dir: str, stage: str, shard: int) -> Any:
        from ..shard_loop import run_shard

        # wait=True: a second job of the same shard (submitted twice) waits for the first and
        # then finds the shard done, instead of failing and cancelling its dependants.
        return cls._guarded(run_shard, run_dir, stage, shard, wait=True)

    @staticmethod
    def _guarded(run: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """`run` with USR2 (before the time limit) as a requeue of this job."""
        import signal

        from ..shard_loop import ShardRequeued, requeue_on_signal

        usr = _preempt_signal()
        submitit_handler = signal.getsignal(usr)
        if not callable(submitit_handler):  # not started by submitit: no requeue to ask for
            return run(*args, **kw)
        try:
            with requeue_on_signal(usr, _submitit_requeue(submitit_handler)):
                return run(*args, **kw)
        except ShardRequeued:
            # What submitit's handler does after requeueing; BaseException, so no result
            # pickle is written and the job is not "finished" for submitit either.
            raise SystemExit(-1) from None

    def checkpoint(self, run_dir: str, stage: str, shard: int | list[int]) -> Any:
        import submitit

        # Nothing to save: every finished instance is already fsynced in the ledger.
        return submitit.helpers.DelayedSubmission(ShardJob(self.steal, self.steal_until_s),
                                                  run_dir, stage, shard)


def _element_age_s() -> float:
    """Seconds since this process started (the element's start, give or take the import)."""
    import psutil

    return time.time() - psutil.Process().create_time()


@contextlib.contextmanager
def _engine_scope() -> Iterator[None]:
    """With `ENGINE_REPLICAS_ENV` set (the profile's ``generation.replicas``), the element's
    hf:/vllm: engines are a Ray pool over its allocation's nodes
    (`inference.ray_cluster.job_pool`); a lost Ray head fails the element's shards that
    were not done (each in its error.json), and `launch resume` runs them again.

    After a lost head the element ends at once, exit code 1 (FAILED for SLURM, so its
    dependants are not released): Ray's client would otherwise hold the process 60 s
    waiting for the dead GCS and then kill it, and the failures are already recorded."""
    replicas = int(os.environ.get(ENGINE_REPLICAS_ENV) or 0)
    if not replicas:
        yield
        return
    import traceback

    from veribatch.inference.ray_cluster import job_pool

    cluster = None
    try:
        with job_pool(replicas) as cluster:
            yield
    finally:
        if cluster is not None and cluster.head_lost:
            failed = sys.exc_info()[0] is not None
            if failed:
                traceback.print_exc()
            print("the Ray head was lost: this element ends now"
                  + (", its shards' failures are recorded (launch status; launch resume runs "
                     "them again)" if failed else ""), flush=True)
            sys.stderr.flush()
            os._exit(1 if failed else 0)


def _preempt_signal() -> int:
    from submitit.core.job_environment import JobEnvironment

    return int(JobEnvironment._usr_sig())  # USR2 unless SUBMITIT_PREEMPT_SIGNAL says otherwise


def _submitit_requeue(handler: Callable[[int, Any], Any]) -> Callable[[int, Any], bool]:
    """submitit's USR2 handler as a requeue request for `requeue_on_signal`.

    The handler checkpoints, runs `scontrol requeue` and then calls sys.exit(-1): that
    SystemExit is the only sign the job really is back in the queue.  It raises
    UncompletedJobError when it will not requeue (timed out too many times) and
    CalledProcessError when scontrol refused — genuine failures, left to propagate.
    Returning normally means it did nothing (not rank 0).
    """
    def request(signum: int, frame: Any) -> bool:
        try:
            handler(signum, frame)
        except SystemExit:
            return True
        return False

    return request


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

    def __init__(self, profile: Profile, progress: bool = True, gpu_shards: int | None = None,
                 **_: Any) -> None:
        self.profile = profile
        self.gpu_shards = gpu_shards

    def _executor(self, rd: RunDir, job_name: str, spec: PartitionSpec, minutes: int,
                  stage: dict[str, Any], dependency: str | None, parallelism: int) -> Any:
        import submitit

        ex = submitit.SlurmExecutor(folder=rd.slurm_logs, max_num_timeout=3)
        ex.update_parameters(**sbatch_parameters(
            self.profile, spec, stage, minutes, job_name=job_name, dependency=dependency,
            parallelism=parallelism, run_root=str(rd.root.resolve())))
        return ex

    def check_partitions(self, manifest: dict[str, Any]) -> None:
        known = cluster_partitions()
        if known is None:
            raise SubmitError("SLURM is not reachable: `sinfo` failed (is SLURM_CONF set and "
                              "slurmctld up?)")
        for st in manifest["stages"]:
            spec = self.profile.for_resource(st["resource"], st["name"])
            if spec.partition and spec.partition not in known:
                raise SubmitError(
                    f"profile {self.profile.name!r}: partition {spec.partition!r} (resource "
                    f"{st['resource']}, stage {st['name']}) does not exist on this cluster; "
                    f"partitions: {', '.join(sorted(known))}")

    def submit(self, rd: RunDir, manifest: dict[str, Any], todo: dict[str, list[int]],
               *, aggregate: bool, waiting_on: dict[tuple[str, int], str] | None = None,
               also_after: Sequence[str] = ()) -> SubmitResult:
        """One array (chunked by MaxArraySize) per stage and dependency group, each recorded
        in jobs.json the moment sbatch accepts it: a failure half-way leaves every job that
        was submitted visible to `status`, `cancel` and the next `resume`.

        A downstream stage's shards fall in three groups: those whose upstream shard is in
        this submission (element-wise `aftercorr` when the arrays line up), those whose
        upstream is still running or queued in an earlier job (`afterok` on exactly those
        elements), and those free to start at once (no dependency) — so resuming a few
        shards never makes the downstream wait for a whole upstream array."""
        from ..instances import read_spans
        from ..sizing import is_sized

        self.check_partitions(manifest)
        spans = read_spans(rd)
        limit = self.profile.max_array_size or max_array_size()
        waiting_on = waiting_on or {}
        stages = [s for s in manifest["stages"] if s.get("added_by") != "launch"]
        arrays: Arrays = {}  # stage → [(elements, job id)]
        entries: list[dict[str, Any]] = []
        root = str(rd.root.resolve())
        for st in stages:
            shards = sorted(todo.get(st["name"], []))
            if not shards:
                continue
            spec = self.profile.for_resource(st["resource"], st["name"])
            units = stage_units(self.profile, manifest, st, shards, self.gpu_shards)
            per_element = max(sum(spans[k].count for k in u) for u in units)
            minutes = _job_minutes(spec, per_element, st, manifest["config"], self.profile)
            arrays[st["name"]] = []
            groups = dependency_groups(units, st["needs"], arrays, waiting_on, limit)
            for part, dep in groups:
                several = any(len(u) > 1 for u in part)
                job_name = f"vb-{rd.root.name}-{st['name']}"
                ex = self._executor(rd, job_name, spec, minutes, st, dep,
                                    self.profile.array_parallelism)
                # A grouped CPU stage's elements take each other's free shards at the end.
                steal = [k for u in part for k in u] if several and not is_sized(
                    st, manifest["config"]) else None
                try:
                    jobs = ex.map_array(ShardJob(steal, minutes * 30.0), [root] * len(part),
                                        [st["name"]] * len(part),
                                        part if several else [u[0] for u in part])
                except Exception as e:  # noqa: BLE001  (submitit wraps sbatch errors variously)
                    done = ", ".join(f"{x['stage']}:{x['array_id']}" for x in entries) or "none"
                    raise SubmitError(f"sbatch refused stage {st['name']} "
                                      f"(shards {[k for u in part for k in u][:5]}...): {e}; "
                                      "already submitted and "
                                      f"recorded in jobs.json: {done}") from e
                array_id = str(jobs[0].job_id).split("_")[0]
                arrays[st["name"]].append((part, array_id))
                entry = {"stage": st["name"], "array_id": array_id, "submitted": _now(),
                         "job_name": job_name, "dependency": dep, "partition": spec.partition,
                         "time_min": minutes, "profile": self.profile.name,
                         "jobs": {str(k): str(j.job_id) for u, j in zip(part, jobs, strict=True)
                                  for k in u}}
                if several:  # element → its shards (`jobs` maps every shard to its element)
                    entry["elements"] = [list(u) for u in part]
                add_submissions(rd, [entry])
                entries.append(entry)
        if aggregate:
            ids = [jid for parts in arrays.values() for _, jid in parts] + list(also_after)
            spec = self.profile.for_resource("cpu", "aggregate")
            job_name = f"vb-{rd.root.name}-aggregate"
            ex = self._executor(rd, job_name, spec, spec.time_min or 30,
                                {"cpus_per_task": 1, "mem_gb": 4, "gpus_per_task": 0},
                                "afterany:" + ":".join(ids) if ids else None, 1)
            ex.update_parameters(additional_parameters={**self.profile.sbatch})
            try:
                job = ex.submit(aggregate_job, root)
            except Exception as e:  # noqa: BLE001
                raise SubmitError(f"sbatch refused the aggregate job: {e}; the stages' jobs "
                                  "are submitted (jobs.json); `launch resume` submits it "
                                  "again") from e
            entry = {"stage": "aggregate", "array_id": str(job.job_id), "submitted": _now(),
                     "job_name": job_name, "dependency": "afterany",
                     "jobs": {"0": str(job.job_id)}}
            add_submissions(rd, [entry])
            entries.append(entry)
        return SubmitResult(submitted={st: sorted(v) for st, v in todo.items() if v},
                            finished=False, jobs=entries)
