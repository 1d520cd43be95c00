"""Run integrity (issue 8): stale downstream work, one definition of "complete", locks,
jobs.json, the resume set — each reproduced as it failed before it was fixed."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import subprocess
import sys
import time
from dataclasses import replace

import pandas as pd
import pytest

import veribatch.launch.locks as locks
from tests.support.cli import launch, only_run_dir, stage_records, status_json
from veribatch.aggregate.records import load_stage
from veribatch.launch.executors.array_dependencies import dependency_groups
from veribatch.launch.executors.local import LocalExecutor
from veribatch.launch.executors.slurm import aggregate_job
from veribatch.launch.jobs import load_jobs, parse_states
from veribatch.launch.locks import LockUnsupportedError, RunBusyError, run_lock
from veribatch.launch.manifest import create_or_reuse, load_manifest
from veribatch.launch.resume_set import resume_set_for
from veribatch.launch.run_control import ExecChoice, launch_run, plan_run, resume_run
from veribatch.launch.shard_loop import run_shard
from veribatch.launch.status import ShardState, run_state
from veribatch.rundir.paths import RunDir


def _edit_ledger_value(ledger, index: int, value: int) -> str:
    """Change the recorded `value` of the index-th instance line (after the header)."""
    header, *lines = ledger.read_text().splitlines()
    obj = json.loads(lines[index])
    obj["records"][0]["value"] = value
    lines[index] = json.dumps(obj)
    ledger.write_text("\n".join([header, *lines]) + "\n")
    return obj["instance_id"]


def test_a_redone_upstream_redoes_what_was_built_on_it(tmp_path):
    """Before: the downstream shard was 'redone' by replaying every record of its stale
    ledger, so `check` still agreed with a `work` value that no longer existed."""
    assert launch("selftest", "--shards", "2", "--runs-dir", str(tmp_path), "-q").returncode == 0
    rd = only_run_dir(tmp_path)
    changed = _edit_ledger_value(rd / "shards/work/0/ledger.jsonl", 1, 12345)
    (rd / "shards/work/0/records.parquet").unlink()

    code, st = status_json(rd)
    assert code == 1 and st["aggregate"] == "stale"
    assert [(f["stage"], f["shard"]) for f in st["failed"]] == [("work", 0)]
    blocked = {(b["stage"], b["shard"]): b["reason"] for b in st["blocked"]}
    assert list(blocked) == [("check", 0)] and "waiting for upstream (work/0 failed)" in \
        blocked[("check", 0)]  # not "killed"

    r = launch("resume", str(rd), "-q")
    assert r.returncode == 0, r.stderr
    work = stage_records(rd, "work").set_index("instance_id")
    check = stage_records(rd, "check").set_index("instance_id")
    assert work.loc[changed, "value"] == 12345  # the upstream's output did change
    assert check.loc[changed, "verdict"] == "disagree"  # and the downstream saw it
    assert (check.drop(index=changed)["verdict"] == "agree").all()
    stats = json.loads((rd / "shards/check/0/stats.json").read_text())
    assert stats["resumed_from_ledger"] == 0 and stats["ran"] == 6
    assert "other inputs" in stats["ledger_discarded"]
    assert (rd / "shards/check/0/ledger.jsonl.stale").exists()  # kept for post-mortems
    assert json.loads((rd / "shards/check/1/stats.json").read_text())["attempt"] == 1
    assert status_json(rd)[1]["aggregate"] == "complete"


def test_one_definition_of_complete_for_status_resume_and_aggregate(tmp_path):
    """Before: aggregation read a shard whose DONE was for other inputs (its parquet digest
    matched), while status counted it missing."""
    plan = plan_run("selftest", shards=2)
    rd, _ = create_or_reuse(plan, tmp_path / "run")
    for stage in ("work", "check"):
        for k in (0, 1):
            run_shard(rd.root, stage, k, fsync=False)
    done = rd.done("work", 1)
    marker = json.loads(done.read_text())
    done.write_text(json.dumps({**marker, "input_hash": "0" * 64}))  # digest still matches

    st = run_state(rd, live=False)
    assert st.shards["work"][1].state == "failed" and "other inputs" in st.shards["work"][1].reason
    assert st.shards["check"][1].state == "pending" and st.shards["check"][1].blocked
    assert load_stage(rd.root, "work").missing_shards == [1]
    assert load_stage(rd.root, "check").missing_shards == [1]  # transitively
    assert resume_set_for(st).shards == {"work": [1], "check": [1]}


def test_emptied_instance_list_is_an_error_not_a_complete_run(tmp_path):
    assert launch("selftest", "--runs-dir", str(tmp_path), "-q").returncode == 0
    rd = only_run_dir(tmp_path)
    (rd / "instances.jsonl").write_text("")
    for cmd in (("status", str(rd)), ("aggregate", str(rd)), ("resume", str(rd))):
        r = launch(*cmd)
        assert r.returncode == 2, (cmd, r.stdout, r.stderr)
        assert "instances.jsonl has 0 bytes but shards.json says" in r.stderr


def test_resume_across_code_versions_warns_and_each_shard_records_its_version(tmp_path,
                                                                             monkeypatch):
    plan = plan_run("selftest", shards=2)
    rd, _ = create_or_reuse(plan, tmp_path / "run")
    monkeypatch.setattr("veribatch.launch.shard_loop.code_version", lambda: "git:old")
    run_shard(rd.root, "work", 0, fsync=False)
    assert json.loads(rd.done("work", 0).read_text())["code_version"] == "git:old"
    assert json.loads(rd.ledger("work", 0).read_text().splitlines()[0])["code_version"] == \
        "git:old"
    monkeypatch.setattr("veribatch.launch.shard_loop.code_version", lambda: "git:new")
    run_shard(rd.root, "work", 1, fsync=False)
    st = run_state(rd, live=False)
    assert st.code_versions == {"git:old": 1, "git:new": 1}
    out = resume_run(rd, dry_run=True)
    assert any("differs from the one that planned this run" in n and "git:old (1 shard(s))" in n
               for n in out.notes), out.notes


def test_sacct_range_line_does_not_hide_a_cancelled_element():
    """Before: `49_[0-3%4]|PENDING` (the array's not-yet-started range) overwrote
    `49_1|CANCELLED by 0`, so resume skipped the cancelled element."""
    lines = "49_1|CANCELLED by 0\n49_[0-3%4]|PENDING\n50_2|RUNNING\n"
    assert parse_states(lines) == {"49_0": "PENDING", "49_1": "CANCELLED", "49_2": "PENDING",
                                   "49_3": "PENDING", "50_2": "RUNNING"}
    assert parse_states("49_[0-3%4]|PENDING\n49_1|CANCELLED by 0\n")["49_1"] == "CANCELLED"


def _shard(stage, k, state, job=None, js=None, blocked=False):
    return ShardState(stage, k, state, "why", 6, 0, job, js, blocked)


def test_one_resume_takes_in_queued_downstream_of_resubmitted_upstream(tmp_path):
    """Before: the downstream element of a cancelled upstream element still looked pending
    (SLURM cancels it only later), so one resume left it and a second was needed."""
    rd, _ = create_or_reuse(plan_run("selftest", shards=3), tmp_path / "run")
    st = run_state(rd, live=False)
    st.shards = {
        "work": [_shard("work", 0, "done"), _shard("work", 1, "failed", "49_1", "CANCELLED"),
                 _shard("work", 2, "running", "49_2", "RUNNING")],
        "check": [_shard("check", 0, "done"), _shard("check", 1, "pending", "50_1", "PENDING"),
                  _shard("check", 2, "pending", "50_2", "PENDING")],
    }
    todo = resume_set_for(st)
    assert todo.shards == {"work": [1], "check": [1]}
    assert todo.supersede == {("check", 1): "50_1"}
    assert [(s.stage, s.shard) for s in todo.busy] == [("work", 2), ("check", 2)]
    # a never-started downstream of a running upstream is run after it, not beside it
    st.shards["check"][2] = _shard("check", 2, "pending", blocked=True)
    todo = resume_set_for(st)
    assert todo.shards["check"] == [1, 2] and todo.waiting_on == {("work", 2): "49_2"}


def test_dependency_groups_wait_only_for_what_each_shard_needs():
    """Before: resuming a few shards made the downstream wait for the whole upstream array."""
    arrays = {"work": [([3, 7], "60")]}
    groups = dependency_groups([1, 3, 5, 7], ["work"], arrays, {("work", 5): "49_5"}, 1000)
    assert groups == [([3, 7], "aftercorr:60"), ([5], "afterok:49_5"), ([1], None)]


def test_the_aggregate_job_of_an_incomplete_run_does_not_fail(tmp_path):
    """Before: every recovery left a FAILED aggregate job in SLURM accounting."""
    rd, _ = create_or_reuse(plan_run("selftest", shards=2), tmp_path / "run")
    run_shard(rd.root, "work", 0, fsync=False)
    out = aggregate_job(str(rd.root))
    assert out["complete"] is False
    assert json.loads(rd.aggregate_status.read_text())["status"] == "partial"


ADD_MANY = """
import sys
from veribatch.launch.jobs import add_submissions
from veribatch.rundir.paths import RunDir
for i in range(40):
    add_submissions(RunDir(sys.argv[1]), [{"stage": "work", "array_id": sys.argv[2] + str(i),
                                          "jobs": {"0": "1"}}])
"""


def test_jobs_json_updates_do_not_lose_each_other(tmp_path):
    # Plain processes, not multiprocessing: its resource tracker would outlive the test.
    procs = [subprocess.Popen([sys.executable, "-c", ADD_MANY, str(tmp_path), str(n)])
             for n in (1, 2, 3)]
    assert [p.wait(120) for p in procs] == [0, 0, 0]
    assert len(load_jobs(RunDir(tmp_path)).submissions) == 120


def test_damaged_jobs_json_is_a_warning_in_status_not_a_traceback(tmp_path):
    assert launch("selftest", "--runs-dir", str(tmp_path), "-q").returncode == 0
    rd = only_run_dir(tmp_path)
    (rd / "jobs.json").write_text(json.dumps({"submissions": [
        {"array_id": "1", "jobs": {"0": "1_0"}},
        {"stage": "work", "array_id": "2", "jobs": {"0": "2_0"}}]}))
    r = launch("status", str(rd))
    assert r.returncode == 0, r.stderr
    assert "jobs.json: submission #1 has no 'stage'" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_second_launch_of_a_running_local_run_is_refused_not_duplicated(tmp_path):
    """Before: the same `launch` twice at once ran (or submitted) the whole run twice."""
    args = ["selftest", "--shards", "2", "-o", "sleep_s=0.4", "--runs-dir", str(tmp_path), "-q"]
    first = subprocess.Popen([sys.executable, "-m", "veribatch", *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("*/shards/work/*/ledger.jsonl")):
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.1)
    second = launch(*args)
    assert second.returncode == 4, second.stderr
    assert "is busy" in second.stderr and "running locally" in second.stderr
    resumed = launch("resume", str(only_run_dir(tmp_path)), "-q")
    assert resumed.returncode == 4
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    rd = only_run_dir(tmp_path)
    for stage in ("work", "check"):
        df = stage_records(rd, stage)
        assert len(df) == 12 and df["instance_id"].is_unique
        assert all(json.loads((rd / f"shards/{stage}/{k}/stats.json").read_text())["attempt"] == 1
                   for k in (0, 1))


def test_run_lock_waits_for_a_holder_that_is_only_submitting(tmp_path):
    import threading

    got = []

    def second() -> None:
        with run_lock(tmp_path, "planning a resume"):
            got.append(time.monotonic())

    with run_lock(tmp_path, "submitting to SLURM"):
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.6)
        released = time.monotonic()
        assert not got
    t.join(10)
    assert got and got[0] >= released
    with run_lock(tmp_path, locks.RUNNING_LOCALLY), pytest.raises(RunBusyError), \
            run_lock(tmp_path, "planning a resume", wait_s=5):
        pass


def test_busy_shard_is_waited_for_not_counted_as_failed(tmp_path):
    """Before: a second local resume's workers exited 75 ("busy") and were counted as failed
    shards (exit 1, "partial") while the first finished the run."""
    rd, _ = create_or_reuse(plan_run("selftest", shards=2, options=["sleep_s=0.3"]),
                            tmp_path / "run")
    other = subprocess.Popen([sys.executable, "-m", "veribatch.launch.worker", str(rd.root), "work", "0"])
    deadline = time.monotonic() + 60
    while not locks.is_locked(rd.lock("work", 0)):
        assert time.monotonic() < deadline and other.poll() is None
        time.sleep(0.05)
    res = LocalExecutor(workers=2, progress=False).submit(
        rd, load_manifest(rd), {"work": [0, 1], "check": [0, 1]}, aggregate=False)
    assert other.wait(60) == 0
    assert res.failed == [], res
    st = run_state(rd, live=False)
    assert st.complete
    assert json.loads(rd.stats("work", 0).read_text())["attempt"] == 1  # run once, by the other


def test_file_system_without_locks_is_refused_at_plan_time(tmp_path, monkeypatch):
    real = fcntl.flock

    def no_locks(fd, op):
        if op & (fcntl.LOCK_EX | fcntl.LOCK_SH):
            raise OSError(errno.ENOLCK, "No locks available")
        return real(fd, op)

    monkeypatch.setattr(fcntl, "flock", no_locks)
    plan = plan_run("selftest")
    runs = tmp_path / "runs"
    with pytest.raises(LockUnsupportedError, match="VERIBATCH_ALLOW_NO_LOCKS=1"):
        launch_run(plan, runs / "r", ExecChoice(workers=1), progress=False)
    assert not (runs / "r").exists()  # nothing written
    rd, _ = create_or_reuse(plan, tmp_path / "direct")
    with pytest.raises(LockUnsupportedError):
        run_shard(rd.root, "work", 0)
    monkeypatch.setenv("VERIBATCH_ALLOW_NO_LOCKS", "1")
    assert run_shard(rd.root, "work", 0, fsync=False).records == 12


def test_an_interrupted_plan_is_planned_again(tmp_path):
    """Before: instances written, no manifest yet → 'exists … holds no manifest.json'."""
    plan = plan_run("selftest")
    rd, _ = create_or_reuse(plan, tmp_path / "runs" / plan.run_id)
    rd.manifest.unlink()
    (rd.root / ".instances.jsonl.tmp123").write_text("half")
    r = launch("selftest", "--runs-dir", str(tmp_path / "runs"), "-q")
    assert r.returncode == 0, r.stderr
    assert load_manifest(rd).run_id == plan.run_id
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    r = launch("selftest", "--runs-dir", str(tmp_path), "--run-name", "foreign")
    assert r.returncode == 2 and "holds no manifest.json" in r.stderr


def test_run_files_are_private_whatever_the_umask(tmp_path):
    """Atomically written files take the mode any new file gets; the CLI makes that 0600
    (issue 37: records and logs can quote prompts, answers and endpoints), even under a
    group-sharing umask (tests/inference/test_secrets.py checks every file of a run)."""
    proc = subprocess.run([sys.executable, "-m", "veribatch", "selftest", "--runs-dir",
                           str(tmp_path), "-q"], preexec_fn=lambda: os.umask(0o027),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rd = only_run_dir(tmp_path)
    for f in ("manifest.json", "shards.json", "instances.jsonl", "jobs.json", "aggregate.json",
              "shards/work/0/DONE", "shards/work/0/records.parquet", "shards/work/0/stats.json",
              "shards/work/0/ledger.jsonl", "tables/selftest.csv"):
        assert oct((rd / f).stat().st_mode & 0o777) == oct(0o600), f


def test_resume_dry_run_says_what_and_why_and_changes_nothing(tmp_path):
    r = launch("selftest", "--shards", "2", "-o", "crash=8", "--runs-dir", str(tmp_path), "-q")
    assert r.returncode == 1
    rd = only_run_dir(tmp_path)
    before = {p: p.stat().st_mtime_ns for p in rd.rglob("*") if p.is_file()}
    dry = launch("resume", str(rd), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would run 2 shard(s)" in dry.stdout
    assert "work/1: RuntimeError: selftest: instance" in dry.stdout
    assert "check/1: after work/1, which is redone first" in dry.stdout
    assert {p: p.stat().st_mtime_ns for p in rd.rglob("*") if p.is_file()} == before


def test_cli_errors_name_file_and_key_and_never_write(tmp_path):
    prof = tmp_path / "bad.yaml"
    prof.write_text("partitions:\n  cpu: {partition: cpu, mem_gb: lots}\n  gpu: {}\n")
    runs = tmp_path / "runs"
    r = launch("selftest", "--executor", "slurm", "--profile", str(prof), "--runs-dir", str(runs))
    assert r.returncode == 2 and f"{prof}: partitions.cpu.mem_gb: 'lots' is not a number" in \
        r.stderr and "Traceback" not in r.stderr
    assert not runs.exists()
    prof.write_text("partitions:\n  cpu: {partition: cpu}\narray_parallelism: many\n")
    r = launch("selftest", "--executor", "slurm", "--profile", str(prof), "--dry-run")
    assert r.returncode == 2 and f"{prof}: array_parallelism: 'many' is not a whole number" in \
        r.stderr
    binary = tmp_path / "prog.c"
    binary.write_bytes(b"\x7fELF\x00\x01\x02 int main(){}")
    r = launch("verify", str(binary))
    assert r.returncode == 2 and "not a program text (a binary file" in r.stderr
    for args, msg in (
            (["--verifier", "uautomizer"], "Ultimate.py not found"),
            (["-o", "runtime=apptainer", "-o", f"image={tmp_path}/none.sif"],
             "apptainer image not found")):
        r = launch("invbench", *args, "--dry-run", env={"PATH": os.environ["PATH"],
                                                        "VERIBATCH_UAUTOMIZER": ""})
        assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_non_utf8_program_in_a_dataset_names_the_file(tmp_path):
    easy = tmp_path / "Dataset" / "Evaluation" / "Easy"
    easy.mkdir(parents=True)
    (easy / "ok.c").write_text("int main() { return 0; }\n")
    (easy / "bad.c").write_bytes(b"int main() {\n  /* caf\xe9 */ return 0;\n}\n")
    (tmp_path / "Dataset/Evaluation/timing.json").write_text(json.dumps(
        [{"file": f, "result": "TRUE", "time": 1.0} for f in ("ok.c", "bad.c")]))
    r = launch("invbench", "--dataset", f"easy:{tmp_path}", "--dry-run")
    assert r.returncode == 2, r.stderr
    assert f"{easy / 'bad.c'}: line 2: not UTF-8 text (byte 0xe9" in r.stderr


def test_task_help_lists_datasets_options_and_verifiers():
    r = launch("invbench", "--help")
    assert r.returncode == 0
    for word in ("sample", "easy", "hard", "budget_s=600.0", "timeout_source", "z3",
                 "uautomizer"):
        assert word in r.stdout, word


def test_ctrl_c_prints_the_hint_and_exits_130(tmp_path):
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "veribatch", "selftest", "-o", "sleep_s=1",
                             "--runs-dir", str(tmp_path), "-q"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("*/shards/work/0/ledger.jsonl")):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "launch resume RUN continues" in err, err


def test_run_config_identity_includes_the_verifier_encoding_version():
    from veribatch.launch.plan import make_config, run_id_for
    from veribatch.tasks.base import get_task

    cfg = make_config(get_task("invbench"))
    assert cfg.verifier_version.startswith("veribatch-z3c/")  # ENCODING_VERSION + z3 version
    assert run_id_for(replace(cfg, verifier_version="veribatch-z3c/2+z3-x")) != run_id_for(cfg)


def test_aggregate_of_a_copied_directory_still_checks_digests(tmp_path):
    """Status's fast path trusts a records file only while its mtime equals DONE's; a copy
    (new mtimes) pays one digest per shard and still says complete."""
    assert launch("selftest", "--shards", "2", "--runs-dir", str(tmp_path / "a"),
                  "-q").returncode == 0
    src = only_run_dir(tmp_path / "a")
    dst = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
    code, st = status_json(dst)
    assert code == 0 and st["complete"], st
    assert isinstance(pd.read_csv(dst / "tables/selftest.csv"), pd.DataFrame)
