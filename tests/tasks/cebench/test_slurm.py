"""The CE-Bench build on the real SLURM cluster: 4 shards, one labelling shard killed with
SIGKILL mid-run, `launch resume` finishes it; the records and the built dataset equal those
of a local run of the same plan."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.support import cli
from tests.support.cli import wait_until
from veribatch.tasks.cebench import dataset as ds

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

WAIT_S = 900
# What may differ between two runs of the same plan: timings, paths, which proof the
# portfolio found first (its Spacer seed depends on the round a member won in), and how deep
# BMC got before a timeout (the reason text of an UNKNOWN).
VOLATILE = {"verifier_time_s", "verifier_cpu_s", "collect_time_s", "log_path", "evidence_json", "verifier_reason",
            "shard", "stage"}


_launch = functools.partial(cli.launch, timeout=600)  # `launch ...` in a fresh process


def _records(rd: Path, stage: str) -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in sorted((rd / "shards" / stage).glob("*/records.parquet"))]
    df = pd.concat(frames, ignore_index=True)
    df = df.drop(columns=[c for c in df.columns if c in VOLATILE])
    if "evidence" in df:  # the kind of evidence must agree, not which proof won the race
        df["evidence"] = df["evidence"].str.split(":").str[0]
    return df.sort_values(["instance_id", "kind", "ce_id"]).reset_index(drop=True)


def _active(rd: Path) -> bool:
    subs = json.loads((rd / "jobs.json").read_text())["submissions"]
    ids = ",".join(sorted({s["array_id"] for s in subs}))
    out = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ids], capture_output=True, text=True)
    return out.returncode != 0 or bool(out.stdout.strip())


def _running_label_pid(rd: Path, shard: int) -> int | None:
    d = rd / "shards" / "label" / str(shard)
    if (d / "attempt.json").is_file() and (d / "ledger.jsonl").exists() and not (d / "DONE").exists():
        return int(json.loads((d / "attempt.json").read_text())["pid"])
    return None


def test_build_on_slurm_killed_shard_resumed_equals_local(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    common = ["cebench", "build", "--source", "sample", "--shards", "4"]
    r = _launch(*common, "--executor", "slurm", "--profile", "local-test", "--runs-dir", str(tmp_path / "slurm"))
    assert r.returncode == 0, r.stdout + r.stderr
    (rd,) = [p for p in (tmp_path / "slurm").iterdir() if (p / "manifest.json").is_file()]
    victim = 0  # shard 0 holds 1.c and 2.c: several counterexamples, so it runs for a while
    pid = wait_until(lambda: _running_label_pid(rd, victim), WAIT_S, "label/0 to run", interval=1)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not _active(rd), WAIT_S, "the run's jobs to end", interval=1)
    st = json.loads(_launch("status", str(rd), "--json").stdout)
    assert ("label", victim) in {(f["stage"], f["shard"]) for f in st["failed"]}, st
    assert st["aggregate"] == "partial"
    with pytest.raises(Exception, match="incomplete"):
        ds.read_card(rd / "dataset")  # a partial build's dataset cannot be evaluated

    r = _launch("resume", str(rd))
    assert r.returncode == 0, r.stdout + r.stderr
    wait_until(lambda: not _active(rd), WAIT_S, "the resumed jobs to end", interval=1)
    st = json.loads(_launch("status", str(rd), "--json").stdout)
    assert st["complete"] and st["aggregate"] == "complete", st
    attempt = json.loads((rd / "shards" / "label" / str(victim) / "attempt.json").read_text())
    assert attempt["attempt"] == 2

    r = _launch(*common, "--runs-dir", str(tmp_path / "local"), "-q", "--out", str(tmp_path / "exported"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert ds.read_card(tmp_path / "exported") == ds.read_card(tmp_path / "local" / rd.name / "dataset")
    local = tmp_path / "local" / rd.name  # the same plan: the same run id
    for stage in ("collect", "label"):
        pd.testing.assert_frame_equal(_records(rd, stage), _records(local, stage))
    assert ds.read_card(rd / "dataset")["content_sha256"] == ds.read_card(local / "dataset")["content_sha256"]
