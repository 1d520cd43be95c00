"""The run folder's file system full while ledgers are written (ENOSPC), on a real small
ext4 file system (loop device) mounted at the runs directory.

What must hold: the shards that met ENOSPC are failed shards that say why (error.json,
written from the space each shard sets aside — not a guess of SIGKILL/OOM), no torn
ledger line is counted or kept as a record, and once space is back one `launch resume`
finishes the run with every instance recorded exactly once.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from tests.support.cli import launch, stage_records
from tests.support.cluster_faults import RunFolderDisk
from veribatch.launch.ledger import count_records, read_ledger

pytestmark = pytest.mark.slow

N = 12


def _root_with_loop() -> bool:
    return os.geteuid() == 0 and all(shutil.which(c) for c in ("losetup", "mkfs.ext4", "mount"))


@pytest.mark.skipif(not _root_with_loop(), reason="needs root, losetup and mkfs.ext4")
def test_enospc_mid_run_is_a_failed_shard_that_one_resume_finishes(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with RunFolderDisk(runs, 16, tmp_path / "runs.img", nodes=False) as disk:
        rd = runs / "full"
        filled = threading.Event()

        def fill_when_recording() -> None:
            end = time.monotonic() + 120
            while time.monotonic() < end:
                if any(count_records(p) >= 1 for p in rd.glob("shards/work/*/ledger.jsonl")):
                    disk.fill(leave_bytes=0)
                    filled.set()
                    return
                time.sleep(0.05)

        t = threading.Thread(target=fill_when_recording, daemon=True)
        t.start()
        r = launch("selftest", "--limit", str(N), "--shards", "3", "-o", "sleep_s=0.4",
                   "--workers", "2", "--runs-dir", str(runs), "--run-name", "full", "-q")
        t.join()
        assert filled.is_set()
        assert r.returncode == 1, r.stdout + r.stderr  # incomplete, not a crash
        assert "Traceback" not in r.stderr, r.stderr[-3000:]
        # still full (the failed shards gave back the space they set aside: fill it too):
        # a command that must write says so, in one line, and exits 1 (run incomplete)
        disk.fill(leave_bytes=0)
        ag = launch("aggregate", str(rd))
        assert ag.returncode == 1, ag.stdout + ag.stderr
        assert "file system is full" in ag.stderr and "Traceback" not in ag.stderr, ag.stderr
        disk.free()
        st = launch("status", str(rd), "--json")
        failed = json.loads(st.stdout)["failed"]
        assert failed, st.stdout
        assert all("No space left on device" in f["reason"] for f in failed), failed
        ids = [json.loads(ln)["id"] for ln in (rd / "instances.jsonl").read_text().splitlines()]
        for f in failed:  # a torn last line is never a record
            ledger = rd / "shards" / f["stage"] / str(f["shard"]) / "ledger.jsonl"
            assert count_records(ledger) == len(read_ledger(ledger, ids, repair=False).results)
        rs = launch("resume", str(rd), "-q")
        assert rs.returncode == 0, rs.stdout + rs.stderr
        for stage in ("work", "check"):
            recs = stage_records(rd, stage)
            assert len(recs) == N and recs["instance_id"].is_unique, stage
