"""`launch` as a user runs it — a new process every time, no state shared in memory — and
readers of the run directory it leaves, for every test that drives the CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd


def launch(*args: str, env: dict[str, str] | None = None, timeout: float = 300,
           cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `launch ...` as a user would: a new process every time (no state shared in memory)."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run([sys.executable, "-m", "veribatch", *args], capture_output=True,
                          text=True, timeout=timeout, env=full_env, cwd=cwd)


def only_run_dir(runs_dir: Path) -> Path:
    dirs = [p for p in runs_dir.iterdir() if (p / "manifest.json").exists()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def run_id_of(result: subprocess.CompletedProcess[str]) -> str:
    m = re.search(r"run (\S+-[0-9a-f]{12})", result.stdout)
    assert m, result.stdout + result.stderr
    return m.group(1)


def stage_records(run_dir: Path, stage: str) -> pd.DataFrame:
    """All records of a stage, from the shards' parquet files, in a canonical order —
    without selftest's `work_time_s` (a measured time: two runs of one plan differ in it
    and in nothing else)."""
    frames = [pd.read_parquet(p) for p in sorted((run_dir / "shards" / stage).glob("*/records.parquet"))]
    df = pd.concat(frames, ignore_index=True).drop(columns=["work_time_s"], errors="ignore")
    return df.sort_values("instance_id").reset_index(drop=True)


def status_json(run_dir: Path) -> tuple[int, dict]:
    r = launch("status", str(run_dir), "--json")
    return r.returncode, json.loads(r.stdout)


def wait_until(predicate, timeout: float, what: str, interval: float = 0.3):  # noqa: ANN001
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
