"""The SLURM executor on a real cluster (`.ci/cluster.sh start`): kill, scancel, resume, compare.

One scenario, because every step depends on the previous one and cluster time is
the expensive part: a 4-shard run split into arrays of at most 3 (MaxArraySize
chunking), one running shard killed with SIGKILL and another scancelled; the run
directory alone must report both as failed; `launch resume` must finish the run
from a new process; the records must equal those of a local run of the same plan.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from pandas.testing import assert_frame_equal
from submitit.core.job_environment import SignalHandler
from submitit.core.utils import DelayedSubmission, JobPaths
from submitit.slurm.slurm import SlurmJobEnvironment

from tests.support.cli import launch, only_run_dir, stage_records, status_json, wait_until
from veribatch.launch.executors.array_dependencies import chunks, dependency_groups
from veribatch.launch.executors.element import ShardJob
from veribatch.launch.jobs import _expand
from veribatch.launch.ledger import count_records
from veribatch.launch.manifest import create_or_reuse
from veribatch.launch.run_control import plan_run
from veribatch.launch.shard_loop import is_locked
from veribatch.rundir.paths import RunDir

# Waits that include time in the queue: generous, since a shared cluster may be busy.
QUEUE_WAIT = 300


def _job_ids(rd):
    subs = json.loads((rd / "jobs.json").read_text())["submissions"]
    return sorted({s["array_id"] for s in subs})


def _active(rd) -> bool:
    out = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(_job_ids(rd))],
                         capture_output=True, text=True)
    # squeue failing (slurmctld busy) is "don't know", not "nothing left"
    return out.returncode != 0 or bool(out.stdout.strip())


def _running_pid(rd, stage, shard):
    a = rd / "shards" / stage / str(shard) / "attempt.json"
    led = rd / "shards" / stage / str(shard) / "ledger.jsonl"
    if a.exists() and count_records(led) >= 1:
        return json.loads(a.read_text())["pid"]
    return None


def test_dependency_strings_and_chunking():
    arrays = {"work": [([0, 1, 2], "10"), ([3], "11")]}
    # downstream arrays line up with the upstream chunks: element-wise
    assert dependency_groups([0, 1, 2, 3], ["work"], arrays, {}, 3) == \
        [([0, 1, 2], "aftercorr:10"), ([3], "afterok:11")]
    # a resume where the downstream set differs: exactly the upstream elements it needs
    assert dependency_groups([1, 2], ["work"], arrays, {}, 3) == [([1, 2], "afterok:10_1:10_2")]
    assert dependency_groups([0], ["work"], {}, {}, 3) == [([0], None)]
    assert chunks(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    # squeue/sacct spell pending array ranges compactly
    assert _expand("12_[0-2,5%4]") == ["12_0", "12_1", "12_2", "12_5"]
    assert _expand("12_3") == ["12_3"] and _expand("13") == ["13"]


class _RequeueKilledMidway(SlurmJobEnvironment):
    """submitit's SLURM job environment, except `scontrol requeue` is replaced by what the
    old instance sees of it: SLURM's SIGCONT + SIGTERM, arriving before the command returns.
    On the real cluster that ordering happens only sometimes; here it happens every time."""

    requeued = 0

    def _requeue(self, countdown: int) -> None:
        type(self).requeued += 1
        os.kill(os.getpid(), signal.SIGCONT)
        os.kill(os.getpid(), signal.SIGTERM)


def _run_with_submitit_handlers(tmp_path, root: str, timeout_min: int, max_num_timeout: int):
    """ShardJob under submitit's own USR2/SIGTERM handlers, sent USR2 after two more instances."""
    delayed = DelayedSubmission(ShardJob(), root, "work", 0)
    delayed.set_timeout(timeout_min, max_num_timeout)
    paths = JobPaths(tmp_path / "logs", job_id="1")
    paths.folder.mkdir(exist_ok=True)  # submitit made it at submission
    handler = SignalHandler(_RequeueKilledMidway(), paths, delayed)
    ledger = RunDir(root).ledger("work", 0)
    before = count_records(ledger)

    def usr2_after_two() -> None:
        wait_until(lambda: count_records(ledger) >= before + 2, 30, "two more recorded instances")
        os.kill(os.getpid(), signal.SIGUSR2)

    old = {s: signal.getsignal(s) for s in (signal.SIGUSR2, signal.SIGTERM, signal.SIGCONT)}
    signal.signal(signal.SIGTERM, handler.bypass)
    signal.signal(signal.SIGCONT, handler.bypass)
    signal.signal(signal.SIGUSR2, handler.checkpoint_and_try_requeue)
    sender = threading.Thread(target=usr2_after_two)
    sender.start()
    try:
        with pytest.raises(BaseException) as info:
            delayed.result()
    finally:
        sender.join()
        for sig, h in old.items():
            signal.signal(sig, h)
    return info.value


def test_usr2_requeue_is_not_a_failure_even_when_the_requeue_kill_comes_first(tmp_path):
    plan = plan_run("selftest", limit=6, options=["sleep_s=0.2"])
    rd, _ = create_or_reuse(plan, tmp_path / "run")
    root, shard = str(rd.root), rd.shard_dir("work", 0)

    # requeued: submitit's exit, no error.json, the requeue noted on the attempt
    exc = _run_with_submitit_handlers(tmp_path, root, timeout_min=30, max_num_timeout=3)
    assert isinstance(exc, SystemExit) and exc.code == -1, repr(exc)
    assert _RequeueKilledMidway.requeued == 1
    assert not (shard / "error.json").exists(), (shard / "error.json").read_text()
    attempt = json.loads((shard / "attempt.json").read_text())
    assert attempt["attempt"] == 1 and "requeued" in attempt and not (shard / "DONE").exists()

    # submitit refuses to requeue (timed out too often): a genuine failure, in error.json
    exc = _run_with_submitit_handlers(tmp_path, root, timeout_min=0, max_num_timeout=0)
    assert type(exc).__name__ == "UncompletedJobError" and _RequeueKilledMidway.requeued == 1
    err = json.loads((shard / "error.json").read_text())
    assert err["type"] == "UncompletedJobError" and "timed-out too many times" in err["message"]

    # the requeued job resumes from the ledger
    out = ShardJob()(root, "work", 0)
    stats = json.loads((shard / "stats.json").read_text())
    assert out["records"] == 6 and stats["attempt"] == 3 and stats["resumed_from_ledger"] >= 4, stats
    assert not (shard / "error.json").exists()


@pytest.mark.slurm
@pytest.mark.slow
def test_kill_scancel_resume_on_real_slurm(slurm_cluster, tmp_path):
    profile = tmp_path / "tiny-arrays.yaml"
    profile.write_text("partitions:\n  cpu: {partition: cpu, time: 10, mem_gb: 0.5}\n"
                       "  gpu: {partition: gpu, time: 10}\nmax_array_size: 3\n"
                       "signal_delay_s: 30\n")
    runs = tmp_path / "runs"
    plan = ["selftest", "--shards", "4", "-o", "sleep_s=1.5"]
    r = launch(*plan, "--executor", "slurm", "--profile", str(profile), "--runs-dir", str(runs))
    assert r.returncode == 0, r.stderr
    rd = only_run_dir(runs)
    subs = json.loads((rd / "jobs.json").read_text())["submissions"]
    work = [s for s in subs if s["stage"] == "work"]
    check = [s for s in subs if s["stage"] == "check"]
    assert [sorted(map(int, s["jobs"])) for s in work] == [[0, 1, 2], [3]]  # MaxArraySize 3
    assert [s["dependency"] for s in check] == [f"aftercorr:{work[0]['array_id']}",
                                                f"afterok:{work[1]['array_id']}"]
    assert [s["stage"] for s in subs][-1] == "aggregate"

    # kill -9 one running shard, scancel another
    pid0 = wait_until(lambda: _running_pid(rd, "work", 0), QUEUE_WAIT, "work/0 running")
    code, st = status_json(rd)
    assert code == 4 and st["stages"]["work"]["running"] >= 1
    os.kill(pid0, signal.SIGKILL)
    wait_until(lambda: _running_pid(rd, "work", 1), QUEUE_WAIT, "work/1 running")
    cancelled = work[0]["jobs"]["1"]
    subprocess.run(["scancel", cancelled], check=True)
    wait_until(lambda: not _active(rd), QUEUE_WAIT, "all jobs of the run to end")

    code, st = status_json(rd)
    assert code == 1, st
    failed = {(f["stage"], f["shard"]): f for f in st["failed"]}
    assert {("work", 0), ("work", 1)} <= set(failed)
    assert "killed" in failed[("work", 0)]["reason"]
    assert failed[("work", 1)]["job"] == cancelled
    assert st["stages"]["work"]["done"] == 2 and st["stages"]["check"]["done"] == 2
    assert st["aggregate"] == "partial"  # the afterany aggregate ran and saw the gap
    # the run directory is the truth: without squeue/sacct on PATH the verdict is the same
    (tmp_path / "empty").mkdir()
    bare = launch("status", str(rd), "--json", env={"PATH": str(tmp_path / "empty")})
    assert bare.returncode == 1, bare.stderr
    assert {(f["stage"], f["shard"]) for f in json.loads(bare.stdout)["failed"]} >= \
        {("work", 0), ("work", 1)}
    logs = launch("logs", str(rd), "--failed")
    assert "work/0" in logs.stdout and "work/1" in logs.stdout

    r = launch("resume", str(rd))
    assert r.returncode == 0, r.stderr
    resub = json.loads((rd / "jobs.json").read_text())["submissions"][len(subs):]
    assert [(s["stage"], sorted(map(int, s["jobs"]))) for s in resub] == \
        [("work", [0, 1]), ("check", [0, 1]), ("aggregate", [0])]
    wait_until(lambda: not _active(rd), QUEUE_WAIT, "resumed jobs to end")
    code, st = status_json(rd)
    assert code == 0 and st["complete"] and st["aggregate"] == "complete", st
    assert json.loads((rd / "shards/work/0/stats.json").read_text())["resumed_from_ledger"] >= 1

    ref = tmp_path / "ref"
    assert launch(*plan, "--runs-dir", str(ref), "-q").returncode == 0
    ref_rd = only_run_dir(ref)
    assert ref_rd.name == rd.name
    for stage in ("work", "check"):
        assert_frame_equal(stage_records(rd, stage), stage_records(ref_rd, stage))


@pytest.mark.slurm
@pytest.mark.slow
def test_usr2_before_time_limit_requeues_and_keeps_the_ledger(slurm_cluster, tmp_path):
    """USR2 is what SLURM sends `signal_delay_s` before the time limit (and on preemption)."""
    runs = tmp_path / "runs"
    r = launch("selftest", "--limit", "6", "-o", "sleep_s=1", "--executor", "slurm",
               "--profile", "local-test", "--runs-dir", str(runs))
    assert r.returncode == 0, r.stderr
    rd = only_run_dir(runs)
    job = json.loads((rd / "jobs.json").read_text())["submissions"][0]["jobs"]["0"]
    shard = rd / "shards/work/0"
    ledger = shard / "ledger.jsonl"
    wait_until(lambda: count_records(ledger) >= 2, QUEUE_WAIT, "two recorded instances")
    subprocess.run(["scancel", "--signal=USR2", job], check=True)

    def requeued() -> str | None:
        attempt = json.loads((shard / "attempt.json").read_text())["attempt"]
        if attempt >= 2:
            return "restarted"
        out = subprocess.run(["squeue", "-h", "-o", "%r", "-j", job], capture_output=True,
                             text=True).stdout
        return "held" if "BeginTime" in out else None

    # SLURM holds a requeued job ~2 minutes (BeginTime); skip that wait, not the requeue.
    if wait_until(requeued, QUEUE_WAIT, "submitit to requeue the job") == "held":
        seen = time.time()  # the requeue (and slurmd's credential revocation) happened before
        # The old instance is gone (its lock is free) and ended as requeued, not failed.
        wait_until(lambda: not is_locked(shard / "lock"), QUEUE_WAIT, "the old instance to exit")
        assert not (shard / "error.json").exists(), (shard / "error.json").read_text()
        assert "requeued" in json.loads((shard / "attempt.json").read_text())
        code, st = status_json(rd)
        assert st["stages"]["work"]["failed"] == 0 and code == 4, st
        # slurmd revoked the job's credential at the requeue, to the second, and refuses a
        # relaunch whose credential is from that same second ("Job credential revoked": the
        # job ends FAILED and the next stage's dependency can never be met) — the race SLURM's
        # BeginTime hold exists to avoid.  So release the hold only in a later second.
        time.sleep(max(0.0, math.floor(seen) + 1.1 - time.time()))
        subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)
    watched = launch("status", str(rd), "--watch", "1", timeout=QUEUE_WAIT)  # returns when all ran
    assert watched.returncode == 0, watched.stdout + watched.stderr
    wait_until(lambda: not _active(rd), QUEUE_WAIT, "the aggregate job")
    stats = json.loads((shard / "stats.json").read_text())
    assert stats["attempt"] == 2 and stats["resumed_from_ledger"] >= 2
    assert stats["slurm_job"] == job  # the same job, requeued — not a new submission
    code, st = status_json(rd)
    assert code == 0 and st["complete"], st
    assert len(json.loads((rd / "jobs.json").read_text())["submissions"]) == 3


@pytest.mark.slurm
@pytest.mark.slow
def test_cancel_from_a_new_shell_stops_every_job_of_the_run(slurm_cluster, tmp_path):
    runs = tmp_path / "runs"
    r = launch("selftest", "--shards", "2", "-o", "sleep_s=2", "--executor", "slurm",
               "--profile", "local-test", "--runs-dir", str(runs))
    assert r.returncode == 0, r.stderr
    rd = only_run_dir(runs)
    wait_until(lambda: _running_pid(rd, "work", 0), QUEUE_WAIT, "work/0 running")
    c = launch("cancel", rd.name, "--runs-dir", str(runs))
    assert c.returncode == 0 and "scancel" in c.stdout
    wait_until(lambda: not _active(rd), QUEUE_WAIT, "all jobs of the run to end")
    code, st = status_json(rd)
    assert code == 1 and st["stages"]["check"]["done"] == 0
    assert ("work", 0) in {(f["stage"], f["shard"]) for f in st["failed"]}
    assert not (rd / "aggregate.json").exists()  # the aggregate job was cancelled too


@pytest.mark.slurm
@pytest.mark.slow
def test_half_failed_submission_concurrent_resumes_and_cancel_reach_every_job(slurm_cluster,
                                                                               tmp_path):
    """Before: a failing second sbatch left the first array out of jobs.json (resume then
    submitted it again); two resumes at once submitted duplicate arrays; cancel reached only
    the latest copies."""
    shim = tmp_path / "bin"
    shim.mkdir()
    real = shutil.which("sbatch")
    (shim / "sbatch").write_text(
        "#!/bin/sh\n"
        f"n=$(cat {tmp_path}/calls 2>/dev/null || echo 0); n=$((n+1)); echo $n > {tmp_path}/calls\n"
        'if [ "$n" = "2" ]; then echo "sbatch: error: Batch job submission failed: injected" >&2;'
        " exit 1; fi\n"
        f'exec {real} "$@"\n')
    (shim / "sbatch").chmod(0o755)
    runs = tmp_path / "runs"
    plan = ["selftest", "--shards", "2", "-o", "sleep_s=3", "--executor", "slurm", "--profile",
            "local-test", "--runs-dir", str(runs), "--run-name", "i8a-halfsubmit"]
    r = launch(*plan, env={"PATH": f"{shim}:{os.environ['PATH']}"})
    assert r.returncode == 3, r.stderr
    assert "already submitted and recorded in jobs.json: work:" in r.stderr
    rd = only_run_dir(runs)
    subs = json.loads((rd / "jobs.json").read_text())["submissions"]
    assert [s["stage"] for s in subs] == ["work"]
    assert subs[0]["job_name"] == "vb-i8a-halfsubmit-work"

    both = [subprocess.Popen([sys.executable, "-m", "veribatch", "resume", str(rd)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    outs = [p.communicate(timeout=QUEUE_WAIT) for p in both]
    assert [p.returncode for p in both] == [0, 0], outs
    subs = json.loads((rd / "jobs.json").read_text())["submissions"]
    assert [s["stage"] for s in subs] == ["work", "check", "aggregate"], outs
    work_jobs = sorted(subs[0]["jobs"].values())
    assert subs[1]["dependency"] == "afterok:" + ":".join(work_jobs)  # the old elements
    assert sum("nothing resubmitted" in err for _, err in outs) == 1, outs

    c = launch("cancel", str(rd))
    assert c.returncode == 0 and "scancel 3 job(s) of 3 submission(s)" in c.stdout
    wait_until(lambda: not _active(rd), QUEUE_WAIT, "every job of every submission to end")


@pytest.mark.slurm
def test_status_is_not_complete_while_the_aggregate_job_waits(slurm_cluster, tmp_path):
    """Every shard done is not "complete" while the run's aggregate job is still in the queue:
    a script waiting on `launch status` must not read tables that are not written yet."""
    runs = tmp_path / "runs"
    r = launch("selftest", "--shards", "2", "--runs-dir", str(runs))
    assert r.returncode == 0, r.stderr
    rd = only_run_dir(runs)
    (rd / "aggregate.json").unlink()
    held = subprocess.run(["sbatch", "--hold", "--parsable", "-p", "cpu", "--wrap", "true"],
                          capture_output=True, text=True, check=True).stdout.strip().split(";")[0]
    try:
        jobs = {"submissions": [{"stage": "aggregate", "array_id": held, "jobs": {"0": held},
                                 "submitted": "2026-11-30T00:00:00Z"}]}
        (rd / "jobs.json").write_text(json.dumps(jobs))
        code, st = status_json(rd)
        assert code == 4 and st["aggregate"] == "not run" and st["aggregate_job"] == "PENDING", st
        assert all(s["done"] == 2 for s in st["stages"].values())
    finally:
        subprocess.run(["scancel", held], check=False)
    wait_until(lambda: status_json(rd)[0] == 0, QUEUE_WAIT, "status complete once the job is gone")
