"""The scale drill (bench/drill.py) small, as CI runs it: the card's command over a sample of
InvBench's training split on the multi-node cluster, every fault of the cluster once —
a node killed, a node drained, slurmctld and slurmdbd stopped and started, the run folder's
file system full, two resumes at once — and the run's invariants afterwards.

CI has 2 cores and ~60 minutes in all: the instance count is a flag
(VERIBATCH_DRILL_INSTANCES, default 80), the faults come back to back.  The drill puts
nodes and daemons back in a finally; this test checks that it did.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.support import cluster_faults as cf

pytestmark = [pytest.mark.multinode, pytest.mark.slurm, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("losetup"),
                    reason="the drill needs root (loop file system, nsenter, daemons)")
def test_drill_small_every_fault_once(slurm_multi_cluster, shared_data, tmp_path, capsys):
    sys.path.insert(0, str(REPO))
    from bench import drill

    n = int(os.environ.get("VERIBATCH_DRILL_INSTANCES", "80"))
    argv = ["--instances", str(n), "--shards", "8", "--outage-s", "6", "--spread", "0",
            "--data", str(shared_data / "invbench"), "--work-dir", str(tmp_path / "drill")]
    a = drill.parse(argv)
    fig = drill.Drill(a, tmp_path / "drill").run()
    table = drill.table(fig)
    with capsys.disabled():
        print("\n" + table)
    assert sorted(fig.faults_injected) == sorted(drill.FAULTS), table
    assert fig.complete, table
    assert not sum(fig.lost.values()) and not sum(fig.duplicated.values()), table
    assert fig.stale == 0 and fig.bad_ledger_lines == 0, table
    assert fig.resumes <= 1, table
    assert fig.jobs_left == 0 and fig.processes_left == 0, table
    # the outage was ridden out: status during it answered once the daemon was back
    assert all(v.startswith(("exit 0", "exit 1", "exit 4")) for v in fig.status_during.values()), table
    # and the cluster is as the drill found it
    assert cf.daemon_up("slurmctld") and cf.daemon_up("slurmdbd")
    for node in cf.NODES:
        assert cf.node_state(node).rstrip("*~#") in cf.IN_SERVICE, node
