"""What runs inside one SLURM array element: its shards, the shards it takes from the
rest of the array, and the Ray pool its engines form.

submitit pickles a `ShardJob` and the element's arguments at submission; on the node
it calls it.  Each shard goes through `shard_loop.run_shard` with the preemption signal
as a requeue (`executors.requeue`), exactly as the local executor's worker process runs
it (`launch.worker`), so both produce the same records.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from veribatch.rundir.paths import RunDir

from ..locks import is_locked
from .requeue import resubmission, run_requeueable
from .sbatch import ENGINE_REPLICAS_ENV


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
    # neither attribute, and still runs; one pickled as `executors.slurm.ShardJob` finds
    # this class there too.
    steal: list[int] = []
    steal_until_s: float | None = None

    def __init__(self, steal: list[int] | None = None, steal_until_s: float | None = None) -> None:
        self.steal = list(steal or [])
        # Taken shards make an element run past what its time limit was sized for: take
        # none after this many seconds (half the limit), so USR2 seldom finds one running.
        self.steal_until_s = steal_until_s

    def __call__(self, run_dir: str, stage: str, shard: int | list[int]) -> dict[str, Any]:
        with engine_scope():
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
            if self.steal_until_s is not None and element_age_s() > self.steal_until_s:
                break
            # (a requeue leaves as SystemExit, like from an own shard)
            try:
                if run_requeueable(run_shard_if_free, run_dir, stage, k) is not None:
                    taken.append(k)
            except Exception:  # noqa: BLE001,S112  (recorded in the shard's error.json)
                continue
        return taken

    @classmethod
    def _one(cls, run_dir: str, stage: str, shard: int) -> Any:
        from ..shard_loop import run_shard

        # wait=True: a second job of the same shard (submitted twice) waits for the first and
        # then finds the shard done, instead of failing and cancelling its dependants.
        return run_requeueable(run_shard, run_dir, stage, shard, wait=True)

    def checkpoint(self, run_dir: str, stage: str, shard: int | list[int]) -> Any:
        # Nothing to save: every finished instance is already fsynced in the ledger.
        return resubmission(ShardJob(self.steal, self.steal_until_s), run_dir, stage, shard)


def element_age_s() -> float:
    """Seconds since this process started (the element's start, give or take the import)."""
    import psutil

    return time.time() - psutil.Process().create_time()


@contextlib.contextmanager
def engine_scope() -> Iterator[None]:
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
