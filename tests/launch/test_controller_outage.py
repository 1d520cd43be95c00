"""A SLURM controller that does not answer, met by `launch`, `status` and `resume`.

The controller here is "down" for the clients the way a stopped slurmctld is: the real
SLURM commands, given a copy of the multi-node cluster's slurm.conf whose SlurmctldPort
nobody listens on, fail after their own connect retries with "Unable to contact slurm
controller (connect failure)".  Swapping the real port back into that file mid-wait is
the controller coming back.  The shared cluster's daemons are not touched (other tests
run on it); bench/drill.py stops and restarts the real slurmctld.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

import pytest

from tests.support.cli import launch, only_run_dir, stage_records, wait_until

pytestmark = [pytest.mark.multinode, pytest.mark.slurm, pytest.mark.slow]

DEAD_PORT = "6997"


def _confs(env: dict[str, str], tmp_path: Path) -> tuple[Path, str, str]:
    """A slurm.conf of our own (with gres.conf beside it): its live and its dead text."""
    real = Path(env["SLURM_CONF"])
    etc = tmp_path / "etc"
    etc.mkdir()
    gres = real.with_name("gres.conf")
    if gres.exists():
        (etc / "gres.conf").write_text(gres.read_text())
    live = real.read_text()
    dead, n = re.subn(r"^SlurmctldPort=\d+$", f"SlurmctldPort={DEAD_PORT}", live, flags=re.M)
    assert n == 1, "the multi-node cluster's slurm.conf names its SlurmctldPort"
    conf = etc / "slurm.conf"
    conf.write_text(dead)
    return conf, live, dead


def _swap_later(conf: Path, text: str, after_s: float) -> threading.Thread:
    def swap() -> None:
        time.sleep(after_s)
        tmp = conf.with_suffix(".new")
        tmp.write_text(text)
        os.replace(tmp, conf)

    t = threading.Thread(target=swap, daemon=True)
    t.start()
    return t


def _active(env: dict[str, str], rd: Path) -> bool:
    r = launch("status", str(rd), "--json", env=env)
    return r.returncode == 4


PLAN = ["selftest", "--limit", "8", "--shards", "2", "--executor", "slurm", "--profile",
        "multinode-test", "-q"]


def test_launch_rides_out_a_controller_that_comes_back(slurm_multi_cluster, tmp_path):
    conf, live, _ = _confs(slurm_multi_cluster, tmp_path)
    env = {"SLURM_CONF": str(conf), "VERIBATCH_SLURM_RETRY_S": "90"}
    swap = _swap_later(conf, live, 12.0)  # sinfo's first tries fail (~9 s each), then it answers
    t0 = time.monotonic()
    r = launch(*PLAN, "-o", "sleep_s=0.1", "--runs-dir", str(tmp_path / "runs"), env=env)
    swap.join()
    assert r.returncode == 0, r.stdout + r.stderr
    assert time.monotonic() - t0 > 12.0  # it did wait for the controller
    rd = only_run_dir(tmp_path / "runs")
    wait_until(lambda: launch("status", str(rd), env=env).returncode == 0, 300, "run complete")
    for stage in ("work", "check"):
        recs = stage_records(rd, stage)
        assert len(recs) == 8 and recs["instance_id"].is_unique


def test_unreachable_controller_is_exit_3_with_nothing_submitted(slurm_multi_cluster, tmp_path):
    conf, _, _ = _confs(slurm_multi_cluster, tmp_path)
    env = {"SLURM_CONF": str(conf), "VERIBATCH_SLURM_RETRY_S": "5"}
    r = launch(*PLAN, "--runs-dir", str(tmp_path / "runs"), env=env)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "controller did not answer" in r.stderr and "Unable to contact slurm controller" in r.stderr
    assert "Traceback" not in r.stderr
    rd = only_run_dir(tmp_path / "runs")
    jobs = rd / "jobs.json"
    subs = json.loads(jobs.read_text())["submissions"] if jobs.exists() else []
    assert subs == []


def test_status_and_resume_wait_out_an_outage_mid_run(slurm_multi_cluster, tmp_path):
    """Mid-run, the controller unreachable: `status` and `resume` exit 3 naming the outage —
    never "failed" for shards whose jobs still run, never a second submission of them — and
    once it answers again the run finishes with every record once."""
    conf, live, dead = _confs(slurm_multi_cluster, tmp_path)
    conf.write_text(live)
    env = {"SLURM_CONF": str(conf), "VERIBATCH_SLURM_RETRY_S": "5"}
    r = launch(*PLAN, "-o", "sleep_s=5", "--runs-dir", str(tmp_path / "runs"), env=env)
    assert r.returncode == 0, r.stderr
    rd = only_run_dir(tmp_path / "runs")
    before = (rd / "jobs.json").read_bytes()
    conf.write_text(dead)
    try:
        st = launch("status", str(rd), env=env)
        assert st.returncode == 3, st.stdout + st.stderr
        assert "controller did not answer" in st.stderr
        rs = launch("resume", str(rd), env=env)
        assert rs.returncode == 3, rs.stdout + rs.stderr
        assert (rd / "jobs.json").read_bytes() == before  # nothing submitted, nothing half-written
    finally:
        conf.write_text(live)
    wait_until(lambda: not _active(env, rd), 300, "every job of the run to end")
    st = launch("status", str(rd), env=env)
    assert st.returncode == 0, st.stdout + st.stderr
    for stage in ("work", "check"):
        recs = stage_records(rd, stage)
        assert len(recs) == 8 and recs["instance_id"].is_unique
