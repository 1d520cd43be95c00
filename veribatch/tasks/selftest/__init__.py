"""`launch selftest`: a cluster smoke test with no data, no model and no verifier.

Two stages — `work` (CPU: a deterministic computation plus an optional sleep per
instance) and `check` (re-does the computation and compares with `work`'s record
read through `ctx.upstream`) — exercise everything a real task relies on:
sharding, the ledger, upstream records, SLURM arrays with `aftercorr`, resume
and aggregation.  Options make chosen instances fail (a recorded error status),
crash (an exception: the shard fails) or hang (for kill/timeout drills):

    launch selftest --executor slurm --profile my-cluster --shards 8 -o sleep_s=2

Records are deterministic (no host names, pids or timings), so two runs of the
same plan, on any executor, must produce identical records.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from typing import Any

from veribatch.tasks.base import (
    Instance,
    InstanceResult,
    RunConfig,
    Stage,
    StageContext,
    Task,
    UnknownNameError,
)

SIZES = {"smoke": 12, "small": 100, "large": 1000, "huge": 10000}


def _indices(spec: str) -> set[int]:
    return {int(x) for x in spec.replace(" ", "").split(",") if x}


def compute(n: int, iterations: int) -> int:
    """The 'work': cheap, deterministic, and different for every instance."""
    acc = n
    for i in range(iterations):
        acc = (acc * 6364136223846793005 + i + n) % 2**61
    return acc


class SelfTest(Task):
    name = "selftest"
    tables_module = "veribatch.tasks.selftest.tables"
    default_dataset = "smoke"
    strategies = ("default", "alternate")  # the second changes nothing but the run id
    verifiers = ("none", "alternate")      # selftest runs no verifier; recorded only

    def datasets(self) -> dict[str, str]:
        return {k: f"{v} generated instances" for k, v in SIZES.items()}

    def _size(self, dataset: str) -> int:
        if dataset not in SIZES:
            known = ", ".join(SIZES)
            raise UnknownNameError(f"unknown dataset {dataset!r} for selftest; known: {known}")
        return SIZES[dataset]

    def load(self, dataset: str, *, limit: int | None = None) -> list[Instance]:
        n = self._size(dataset)
        if limit is not None:
            n = min(n, limit)
        return [Instance(id=f"selftest/{dataset}/{k:05d}", task=self.name, split=dataset,
                         payload={"n": k}) for k in range(n)]

    def dataset_hash(self, dataset: str) -> str:
        return hashlib.sha256(f"selftest:{dataset}:{self._size(dataset)}".encode()).hexdigest()

    def default_options(self) -> dict[str, Any]:
        return {
            "iterations": 1000,    # work per instance (loop iterations)
            "sleep_s": 0.0,        # extra wall time per instance in `work`
            "check_sleep_s": 0.0,  # extra wall time per instance in `check`
            "fail": "",            # instance numbers whose work is recorded as status=error
            "crash": "",           # instance numbers whose work raises (the shard fails)
            "hang": "",            # instance numbers whose work never returns
            # Fault drills for the process machinery (bench/faults.py): instance numbers
            # whose work runs a "verifier" child under verifiers.runner that hangs (killed
            # at verifier_wall_s, recorded as such) or that forks a daemon and exits.
            "hang_verifier": "",
            "fork_verifier": "",
            "verifier_wall_s": 2.0,
        }

    def stages(self, config: RunConfig) -> list[Stage]:
        opts = config.options
        spi = float(opts.get("sleep_s", 0.0)) + 1.0
        return [
            Stage("work", "cpu", _work, seconds_per_instance=spi, mem_gb=1,
                  verdict_column="status", time_column="work_time_s"),
            Stage("check", "cpu", _check, needs=("work",), mem_gb=1,
                  seconds_per_instance=float(opts.get("check_sleep_s", 0.0)) + 1.0,
                  verdict_column="verdict"),
        ]


# A verifier that hangs, and one that leaves a daemon behind and exits at once: what the
# runner must contain (limits, whole process tree) without the shard losing the instance.
HUNG_VERIFIER = ("sleep", "3600")
FORKING_VERIFIER = ("sh", "-c", "(setsid sleep 600 > /dev/null 2>&1 &); exit 0")


def _verifier(ctx: StageContext, n: int, argv: tuple[str, ...], wall_s: float) -> str:
    """Run `argv` as the instance's verifier; its outcome is part of the record."""
    from veribatch.verifiers.result import Limits
    from veribatch.verifiers.runner import execute

    env = {**os.environ, "VERIBATCH_RUN_DIR": str(ctx.run_dir)}  # marks its processes
    done = execute(argv, Limits(wall_s=wall_s, memory_mb=256),
                   ctx.scratch_dir() / f"verifier-{n}.log", env=env)
    return f"{done.termination_reason}:{done.returncode}"


def _work(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    o = ctx.config.options
    fail, crash, hang = _indices(o["fail"]), _indices(o["crash"]), _indices(o["hang"])
    hung = _indices(str(o.get("hang_verifier", "")))
    forking = _indices(str(o.get("fork_verifier", "")))
    for inst in instances:
        n = int(inst.payload["n"])
        if n in crash:
            raise RuntimeError(f"selftest: instance {inst.id} crashes on purpose (option crash)")
        while n in hang:
            time.sleep(60)
        t0 = time.monotonic()
        if o["sleep_s"]:
            time.sleep(float(o["sleep_s"]))
        rec: dict[str, Any]
        if n in fail:
            rec = {"status": "error", "value": None, "error": "failed on purpose (option fail)"}
        else:
            rec = {"status": "ok", "value": compute(n, int(o["iterations"])), "error": None}
        if n in hung or n in forking:
            wall = float(o.get("verifier_wall_s", 2.0))
            rec["verifier"] = _verifier(ctx, n, HUNG_VERIFIER if n in hung else FORKING_VERIFIER,
                                        wall)
        rec["work_time_s"] = round(time.monotonic() - t0, 4)  # the time rules of `launch regress`
        yield InstanceResult(inst.id, [rec])


def _check(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    o = ctx.config.options
    upstream = ctx.upstream("work")
    for inst in instances:
        if o["check_sleep_s"]:
            time.sleep(float(o["check_sleep_s"]))
        recs = upstream.get(inst.id, [])
        if not recs or recs[0]["status"] != "ok":
            verdict = "no-value"
        elif recs[0]["value"] == compute(int(inst.payload["n"]), int(o["iterations"])):
            verdict = "agree"
        else:
            verdict = "disagree"
        yield InstanceResult(inst.id, [{"verdict": verdict}])
