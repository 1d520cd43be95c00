"""Local executor end to end, through the real CLI in fresh processes (as a user would)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pandas as pd
from pandas.testing import assert_frame_equal

from tests.support.cli import launch, only_run_dir, stage_records, status_json, wait_until
from veribatch.launch.ledger import count_records


def test_multi_shard_run_completes_with_every_instance_once(tmp_path):
    r = launch("selftest", "--shards", "4", "--runs-dir", str(tmp_path), "-q")
    assert r.returncode == 0, r.stderr
    rd = only_run_dir(tmp_path)
    for stage in ("work", "check"):
        df = stage_records(rd, stage)
        assert len(df) == 12 and df["instance_id"].is_unique
        assert sorted(df["shard"].unique()) == [0, 1, 2, 3]
    assert set(stage_records(rd, "check")["verdict"]) == {"agree"}
    code, st = status_json(rd)
    assert code == 0 and st["complete"] and st["aggregate"] == "complete"
    assert st["stages"]["work"] == {"done": 4, "running": 0, "pending": 0, "failed": 0,
                                   "instances": 12, "instances_done": 12}
    merged = json.loads((rd / "aggregate.json").read_text())["stages"]
    assert merged["work"]["shards_with_stats"] == 4 and merged["check"]["records"] == 12
    table = (rd / "tables" / "selftest.csv").read_text()
    assert "agree" in table and ",12," in table
    again = launch("resume", str(rd))
    assert again.returncode == 0 and "nothing to do" in again.stderr


def _records(rd):
    return {s: stage_records(rd, s) for s in ("work", "check")}


def test_kill9_of_a_running_shard_then_resume_loses_and_duplicates_nothing(tmp_path):
    runs = tmp_path / "runs"
    args = ["selftest", "--shards", "2", "--workers", "2", "-o", "sleep_s=0.5", "-q"]
    proc = subprocess.Popen([sys.executable, "-m", "veribatch", *args, "--runs-dir", str(runs)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rd = wait_until(lambda: next(iter(runs.glob("selftest-*")), None), 120, "run dir")
    ledger = rd / "shards/work/0/ledger.jsonl"
    wait_until(lambda: count_records(ledger) >= 2, 120, "two recorded instances")
    pid = json.loads((rd / "shards/work/0/attempt.json").read_text())["pid"]
    os.kill(pid, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stderr
    assert "work/0" in stderr

    kept = count_records(ledger)
    with open(ledger, "ab") as f:  # and a torn line, as if killed mid-write
        f.write(b'{"instance_id": "selftest/smoke/0000')
    code, st = status_json(rd)
    assert code == 1 and not st["complete"]
    failed = {(f["stage"], f["shard"]): f["reason"] for f in st["failed"]}
    assert list(failed) == [("work", 0)] and "killed" in failed[("work", 0)]
    assert st["stages"]["work"]["done"] == 1 and st["stages"]["check"]["pending"] == 1

    r = launch("resume", str(rd), "-q")
    assert r.returncode == 0, r.stderr
    stats = json.loads((rd / "shards/work/0/stats.json").read_text())
    assert stats["resumed_from_ledger"] == kept and stats["ran"] == 6 - kept
    assert stats["attempt"] == 2
    assert status_json(rd)[0] == 0

    ref = tmp_path / "ref"
    assert launch(*args, "--runs-dir", str(ref)).returncode == 0
    ref_rd = only_run_dir(ref)
    assert ref_rd.name == rd.name  # same plan, same run id
    for stage, df in _records(rd).items():
        assert_frame_equal(df, _records(ref_rd)[stage])


def test_stage_exception_fails_the_shard_not_the_instances(tmp_path):
    r = launch("selftest", "--shards", "2", "-o", "crash=3", "--runs-dir", str(tmp_path), "-q")
    assert r.returncode == 1
    rd = only_run_dir(tmp_path)
    code, st = status_json(rd)
    assert code == 1
    assert [(f["stage"], f["shard"]) for f in st["failed"]] == [("work", 0)]
    assert "crashes on purpose" in st["failed"][0]["reason"]
    # instances before the crash are recorded; nothing was recorded for the crashing one
    header, *lines = (rd / "shards/work/0/ledger.jsonl").read_text().splitlines()
    assert "input_hash" in json.loads(header)  # the ledger is tied to the shard's inputs
    assert [json.loads(x)["instance_id"] for x in lines] == [f"selftest/smoke/{i:05d}" for i in range(3)]
    assert not (rd / "shards/work/0/DONE").exists()
    assert st["stages"]["check"] == {"done": 1, "running": 0, "pending": 1, "failed": 0,
                                    "instances": 12, "instances_done": 6}
    logs = launch("logs", str(rd), "--failed")
    assert "Traceback" in logs.stdout and "crashes on purpose" in logs.stdout
    assert "work/1" not in logs.stdout
    agg = json.loads((rd / "aggregate.json").read_text())
    assert agg["status"] == "partial" and "work/0" in agg["missing_shards"]


def test_corrupted_and_half_written_outputs_are_detected_and_redone(tmp_path):
    assert launch("selftest", "--shards", "3", "--runs-dir", str(tmp_path), "-q").returncode == 0
    rd = only_run_dir(tmp_path)
    before = _records(rd)
    # 1. bit rot inside work/1's parquet (size and magic bytes intact)
    p = rd / "shards/work/1/records.parquet"
    data = bytearray(p.read_bytes())
    mid = len(data) // 2
    data[mid:mid + 8] = bytes(b ^ 0xFF for b in data[mid:mid + 8])
    p.write_bytes(bytes(data))
    # 2. check/2 half-written: records truncated, DONE never written
    q = rd / "shards/check/2/records.parquet"
    q.write_bytes(q.read_bytes()[:100])
    (rd / "shards/check/2/DONE").unlink()
    # 3. check/0 records replaced by garbage of another size
    (rd / "shards/check/0/records.parquet").write_bytes(b"garbage")

    code, st = status_json(rd)
    assert code == 1
    failed = {(f["stage"], f["shard"]): f["reason"] for f in st["failed"]}
    # bit rot of the same size is seen too: the file changed after its DONE (mtime), so
    # status checks its digest; check/1, built on it, waits for it (not "killed")
    assert set(failed) == {("work", 1), ("check", 0), ("check", 2)}
    assert "does not match the DONE digest" in failed[("work", 1)]
    assert "bytes" in failed[("check", 0)]
    assert [(b["stage"], b["shard"]) for b in st["blocked"]] == [("check", 1)]
    # aggregation never reads damaged data: all three count as missing
    agg = launch("aggregate", str(rd))
    assert agg.returncode == 1 and "work/1" in agg.stderr

    r = launch("resume", str(rd), "-q")
    assert r.returncode == 0, r.stderr
    after = _records(rd)
    for stage in before:
        assert_frame_equal(before[stage], after[stage])
    redone = json.loads((rd / "shards/check/2/stats.json").read_text())
    assert redone["resumed_from_ledger"] == 4 and redone["ran"] == 0
    assert json.loads((rd / "shards/work/1/stats.json").read_text())["attempt"] == 2
    assert json.loads((rd / "shards/work/0/stats.json").read_text())["attempt"] == 1
    assert status_json(rd)[0] == 0


def test_failing_instance_is_a_record_with_a_status(tmp_path):
    r = launch("selftest", "-o", "fail=2,5", "--runs-dir", str(tmp_path), "-q")
    assert r.returncode == 0, r.stderr
    rd = only_run_dir(tmp_path)
    work = stage_records(rd, "work")
    assert work.set_index("instance_id").loc["selftest/smoke/00002", "status"] == "error"
    assert (work["status"] == "ok").sum() == 10
    check = stage_records(rd, "check")
    assert (check["verdict"] == "no-value").sum() == 2
    assert isinstance(pd.read_csv(rd / "tables/summary_selftest.csv"), pd.DataFrame)
