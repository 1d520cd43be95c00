"""The SLURM executor on the multi-node CI cluster (`.ci/cluster.sh start-multi`).

Four slurmd "nodes", each in its own network + UTS namespace (vbm-cpu1/2 in partition
`cpu`, vbm-gpu1/2 in `gpu` with GRES gpu:2).  Where a job ran is read from SLURM's own
accounting (`sacct` NodeList), never from our files: the point is what the scheduler did.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from veribatch.launch.ledger import count_records

from .conftest import launch, only_run_dir, stage_records, wait_until

pytestmark = [pytest.mark.multinode, pytest.mark.slurm]

REPO = Path(__file__).resolve().parents[2]
QUEUE_WAIT = 300
CPU_NODES = {"vbm-cpu1", "vbm-cpu2"}
GPU_NODES = {"vbm-gpu1", "vbm-gpu2"}


def _slurm(env: dict[str, str], *argv: str, check: bool = True) -> str:
    import os

    return subprocess.run(list(argv), env={**os.environ, **env}, capture_output=True, text=True,
                          check=check, timeout=60).stdout


def sacct_nodes(env: dict[str, str], rd: Path) -> dict[str, set[str]]:
    """Stage → the set of nodes its jobs ran on, from `sacct` (array elements, not steps)."""
    subs = json.loads((rd / "jobs.json").read_text())["submissions"]
    ids = ",".join(sorted({s["array_id"] for s in subs}))
    out = _slurm(env, "sacct", "-X", "-n", "-P", "-j", ids, "-o", "JobName,NodeList,State")
    nodes: dict[str, set[str]] = {}
    for line in out.splitlines():
        name, nodelist, _state = line.split("|")
        stage = name.rsplit("-", 1)[1]
        if nodelist and nodelist != "None assigned":
            hosts = _slurm(env, "scontrol", "show", "hostnames", nodelist).split()
            nodes.setdefault(stage, set()).update(hosts)
    return nodes


def _active(env: dict[str, str], rd: Path) -> bool:
    subs = json.loads((rd / "jobs.json").read_text())["submissions"]
    ids = ",".join(sorted({s["array_id"] for s in subs}))
    r = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ids], capture_output=True, text=True,
                       env={**__import__("os").environ, **env})
    return r.returncode != 0 or bool(r.stdout.strip())


def _status(env: dict[str, str], rd: Path) -> tuple[int, dict]:
    r = launch("status", str(rd), "--json", env=env)
    return r.returncode, json.loads(r.stdout)


def _node_state(env: dict[str, str], node: str) -> str:
    return _slurm(env, "sinfo", "-h", "-N", "-n", node, "-o", "%t").split()[0]


def _restore(env: dict[str, str], node: str) -> None:
    """Put a node back as the fixture expects it (slurmd running, state idle)."""
    subprocess.run(["bash", str(REPO / ".ci/cluster.sh"), "start-node", node], check=True,
                   env={**__import__("os").environ, **env}, timeout=60)
    wait_until(lambda: not _node_state(env, node).endswith("*"), 90, f"{node}'s slurmd to answer")
    _slurm(env, "scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
    wait_until(lambda: _node_state(env, node) in ("idle", "mix", "alloc"), 90, f"{node} back in service")


@pytest.fixture(scope="module")
def tiny_model() -> Path:
    """The tiny Qwen2 model of the inference tests (built once per machine and cached).  Any
    real model will do: these tests assert where generation ran, not what it said."""
    from veribatch.inference.tiny_model import cached_tiny_qwen2

    return cached_tiny_qwen2()


def test_card_command_generates_on_gpu_nodes_and_verifies_on_cpu_nodes(slurm_multi_cluster,
                                                                       tiny_model, shared_data,
                                                                       tmp_path):
    """`--partition gpu` (a bare name) is the card's command: it moves the GPU stages to the gpu
    partition and leaves every verifier stage on the cpu partition (docs/configuration.md)."""
    env = slurm_multi_cluster
    runs = tmp_path / "runs"
    r = launch("invbench", "--dataset", f"easy:{shared_data / 'invbench'}", "--limit", "4",
               "--executor", "slurm", "--profile", "multinode-test", "--partition", "gpu",
               "--shards", "2", "--model", f"hf:{tiny_model}", "--max-tokens", "8",
               "-o", "budget_s=5", "--runs-dir", str(runs), env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    rd = only_run_dir(runs)
    wait_until(lambda: not _active(env, rd), QUEUE_WAIT, "every job of the run to end")
    code, st = _status(env, rd)
    assert code == 0 and st["complete"], st
    nodes = sacct_nodes(env, rd)
    assert set(nodes) == {"baseline", "generate", "verify", "aggregate"}, nodes
    assert nodes["generate"] <= GPU_NODES, nodes
    for stage in ("baseline", "verify", "aggregate"):
        assert nodes[stage] <= CPU_NODES, (stage, nodes)
    print("sacct NodeList per stage:", {k: sorted(v) for k, v in nodes.items()})


def test_node_lost_mid_run_status_agrees_with_slurm_and_one_resume_completes(
        slurm_multi_cluster, tmp_path):
    """SLURM requeues a batch job whose node fails unless the site or job says otherwise
    (JobRequeue / --no-requeue); this test takes the case where it does not, so that the
    recovery is ours: the elements end NODE_FAIL and `launch resume` finishes the run.  (With
    SLURM's requeue the element is rerun on another node and resumes from its ledger.)"""
    env = slurm_multi_cluster
    runs = tmp_path / "runs"
    profile = tmp_path / "no-requeue.yaml"
    profile.write_text("partitions:\n"
                       "  cpu: {partition: cpu, time: 10, mem_gb: 0.5, sbatch: {no-requeue: true}}\n"
                       "  gpu: {partition: gpu, time: 10, gres: 'gpu:1'}\n")
    plan = ["selftest", "--limit", "12", "--shards", "4", "-o", "sleep_s=1"]
    r = launch(*plan, "--executor", "slurm", "--profile", str(profile),
               "--runs-dir", str(runs), env=env)
    assert r.returncode == 0, r.stderr
    rd = only_run_dir(runs)
    work = {int(k): v for s in json.loads((rd / "jobs.json").read_text())["submissions"]
            if s["stage"] == "work" for k, v in s["jobs"].items()}

    def running_on_cpu2() -> list[int]:
        out = _slurm(env, "squeue", "-h", "-t", "R", "-w", "vbm-cpu2", "-o", "%i")
        ids = set(out.split())
        return [k for k, j in work.items() if j in ids
                and count_records(rd / "shards" / "work" / str(k) / "ledger.jsonl") >= 1]

    victims = wait_until(running_on_cpu2, QUEUE_WAIT, "a work shard running on vbm-cpu2")
    lost = [j for k, j in work.items() if k in victims]
    try:
        subprocess.run(["bash", str(REPO / ".ci/cluster.sh"), "kill-node", "vbm-cpu2"], check=True,
                       timeout=60)
        _slurm(env, "scontrol", "update", "NodeName=vbm-cpu2", "State=DOWN", "Reason=lost-by-test")
        wait_until(lambda: not _active(env, rd), QUEUE_WAIT, "every job of the run to end")
        # SLURM's own view of the lost elements ...
        states = dict(line.split("|") for line in _slurm(
            env, "sacct", "-X", "-n", "-P", "-j", ",".join(lost), "-o", "JobID,State").splitlines())
        assert set(states.values()) == {"NODE_FAIL"}, states
        # ... and ours agree: those shards failed, nothing else did, the run is not complete
        code, st = _status(env, rd)
        assert code == 1, st
        failed = {(f["stage"], f["shard"]) for f in st["failed"]}
        assert {("work", k) for k in victims} <= failed, (victims, st["failed"])
        assert {s for s, _ in failed} <= {"work", "check"}
        r = launch("resume", str(rd), env=env)
        assert r.returncode == 0, r.stderr
        wait_until(lambda: not _active(env, rd), QUEUE_WAIT, "the resumed jobs to end")
    finally:
        _restore(env, "vbm-cpu2")
    code, st = _status(env, rd)
    assert code == 0 and st["complete"], st
    for stage in ("work", "check"):
        recs = stage_records(rd, stage)
        assert len(recs) == 12 and recs["instance_id"].is_unique, stage  # 0 lost, 0 duplicated
    nodes = sacct_nodes(env, rd)
    assert nodes["work"] <= CPU_NODES


def test_drained_node_gets_no_new_elements_and_nothing_waits_forever(slurm_multi_cluster, tmp_path):
    env = slurm_multi_cluster
    runs = tmp_path / "runs"
    _slurm(env, "scontrol", "update", "NodeName=vbm-cpu1", "State=DRAIN", "Reason=drained-by-test")
    drained_at = time.time()
    try:
        r = launch("selftest", "--limit", "8", "--shards", "4", "-o", "sleep_s=0.2",
                   "--executor", "slurm", "--profile", "multinode-test", "--runs-dir", str(runs),
                   env=env)
        assert r.returncode == 0, r.stderr
        rd = only_run_dir(runs)
        wait_until(lambda: not _active(env, rd), QUEUE_WAIT, "every job of the run to end")
    finally:
        _slurm(env, "scontrol", "update", "NodeName=vbm-cpu1", "State=RESUME")
    code, st = _status(env, rd)
    assert code == 0 and st["complete"], st
    nodes = sacct_nodes(env, rd)
    assert set().union(*nodes.values()) == {"vbm-cpu2"}, nodes
    assert time.time() - drained_at < QUEUE_WAIT


RAY_DRIVER = '''
import json, sys
from veribatch.inference import EngineError, open_engine
from veribatch.inference.ray_cluster import RayCluster
from veribatch.inference.types import Message, Request, Sampling

model, out = sys.argv[1], sys.argv[2]
reqs = [Request(id=f"r{i}", messages=(Message("user", "int x = 0;"),),
                sampling=Sampling(max_tokens=4)) for i in range(4)]
with RayCluster.from_slurm_env(ready_timeout_s=240) as cluster:
    with open_engine(f"hf:{model}", replicas=2, address=cluster.address, gpus_per_worker=1,
                     ready_timeout_s=240) as pool:
        answered = len(pool.generate(reqs))
        json.dump({"nodes": cluster.nodes, "hosts": pool.actor_hosts, "answered": answered},
                  open(out + ".tmp", "w"))
        __import__("os").replace(out + ".tmp", out)
        try:
            while True:  # serve until the head is lost
                pool.generate(reqs)
        except EngineError as e:
            print(f"ENGINE-ERROR: {e}", flush=True)
            sys.exit(3)
'''


def test_ray_pool_spans_two_gpu_nodes_and_a_lost_head_is_a_clear_failure(slurm_multi_cluster,
                                                                          tiny_model, tmp_path):
    """One 2-node allocation on the gpu partition (GRES gpu:1 per node): `RayCluster` starts
    the head on the first node and a worker on the second (srun steps), and a pool of two
    1-GPU replicas must put one replica on each node.  Then the head's step is SIGKILLed:
    the pool raises its EngineError naming the head (not Ray's 60 s process termination),
    and SLURM records the job as FAILED — the failure a generate shard records and resumes."""
    import sys

    env = slurm_multi_cluster
    driver = tmp_path / "driver.py"
    driver.write_text(RAY_DRIVER)
    placed = tmp_path / "placed.json"
    log = tmp_path / "ray-%j.out"
    job = _slurm(env, "sbatch", "--parsable", "-p", "gpu", "-N2", "--ntasks-per-node=1",
                 "--gres=gpu:1", "-t", "10", "-o", str(log), f"--chdir={tmp_path}",
                 f"--export=ALL,PYTHONPATH={REPO}",
                 "--wrap", f"{sys.executable} {driver} {tiny_model} {placed}").strip()
    try:
        info = wait_until(lambda: placed.exists() and json.loads(placed.read_text()), QUEUE_WAIT,
                          "the pool's two replicas to answer")
        assert info["nodes"] == sorted(GPU_NODES) and sorted(info["hosts"]) == sorted(GPU_NODES), info
        assert info["answered"] == 4
        print("Ray replicas on:", info["hosts"])
        _slurm(env, "scancel", "--signal=KILL", f"{job}.0")  # step 0: `ray start --head`
        wait_until(lambda: _slurm(env, "squeue", "-h", "-j", job, check=False).strip() == "", 120,
                   "the driver to end after its head was lost")
    finally:
        _slurm(env, "scancel", job, check=False)
    state = _slurm(env, "sacct", "-X", "-n", "-P", "-j", job, "-o", "State,ExitCode,NodeList")
    assert state.strip().startswith("FAILED|3:0|vbm-gpu[1-2]"), state
    out = Path(str(log).replace("%j", job)).read_text()
    assert "ENGINE-ERROR: ray pool: the Ray head at 10.77.0.21:" in out, out[-2000:]
    assert "unreachable (head node lost?)" in out
