"""Ray actor pools on the tiny model, and the per-job Ray cluster (ports, argv, a real local head)."""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from veribatch.inference import EngineError, open_engine
from veribatch.inference.ray_cluster import (
    PORT_SPAN,
    RayCluster,
    ephemeral_range,
    free_port_block,
    port_is_free,
    ports_from,
)
from veribatch.inference.ray_pool import replica_bundles

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_pool_of_two_hf_replicas_matches_direct(local_ray, tiny_model: Path, hf_engine, tiny_pairs,
                                                chat_request) -> None:
    reqs = [chat_request(p, f"r{i}") for i, (p, _) in enumerate(tiny_pairs * 3)]
    direct = hf_engine.generate(reqs)
    with open_engine(f"hf:{tiny_model}", replicas=2, threads=1, chunk_size=2) as pool:
        assert len(set(pool.actor_pids)) == 2 and os.getpid() not in pool.actor_pids
        assert pool.revision == hf_engine.revision
        out = pool.generate(reqs)
        assert [c[0].text for c in out] == [c[0].text for c in direct]
        assert [c[0].request_id for c in out] == [r.id for r in reqs]
        assert all(c[0].engine == "hf" for c in out)  # the real engine, not "ray"
        # a replica dies: its work goes to the survivor, nothing is lost
        ray.kill(pool.actors[0])
        again = pool.generate(reqs)
        assert [c[0].text for c in again] == [c[0].text for c in direct]
        ray.kill(pool.actors[1])
        with pytest.raises(EngineError, match="every replica"):
            pool.generate(reqs)


def test_pool_reports_unplaceable_replicas(local_ray, tiny_model: Path) -> None:
    with pytest.raises(EngineError, match=r"0 of 1 replicas could be placed.*GPU"):
        open_engine(f"hf:{tiny_model}", replicas=1, gpus_per_worker=1, ready_timeout_s=2)


def test_replica_bundles_keep_tp_workers_on_one_node() -> None:
    bundles, strategy = replica_bundles(tp=4, pp=1, cpus=2, gpus=1)
    assert bundles == [{"CPU": 2, "GPU": 1}] * 4 and strategy == "STRICT_PACK"
    bundles, strategy = replica_bundles(tp=8, pp=2, cpus=1, gpus=1)
    assert len(bundles) == 16 and strategy == "PACK"  # pipeline stages may span nodes
    assert replica_bundles(1, 1, 1, 0) == ([{"CPU": 1}], "STRICT_PACK")


def test_port_blocks_are_free_and_outside_the_ephemeral_range() -> None:
    lo, hi = ephemeral_range()
    assert (lo, hi) == tuple(int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range")
                             .read_text().split())
    for seed in range(20):
        first = free_port_block(rng=random.Random(seed))
        block = range(first, first + PORT_SPAN)
        assert first >= 10000 and block[-1] <= 65535
        assert block[-1] < lo or first > hi, (first, lo, hi)
        assert all(port_is_free(p) for p in block)
        p = ports_from(first)
        ports = list(vars(p).values())
        assert len(set(ports)) == len(ports) and all(x in block for x in ports)
        assert p.min_worker < p.max_worker


def test_a_block_with_a_port_in_use_is_skipped() -> None:
    first = free_port_block(rng=random.Random(7))
    with socket.socket() as taken:  # someone else's server inside that block
        taken.bind(("", first + 42))
        taken.listen()
        assert not port_is_free(first + 42)
        again = free_port_block(rng=random.Random(7))  # same order of blocks: that one is first
        assert again != first and not (again <= first + 42 < again + PORT_SPAN)


def test_head_and_worker_command_lines() -> None:
    c = RayCluster(nodes=["gpu01", "gpu02", "gpu03"], job_id="777", head_ip="10.0.0.1",
                   cpus_per_node=32, gpus_per_node=4)
    p = c.ports
    assert p is not None and port_is_free(p.gcs)  # verified free on this node
    head = c.head_command()
    assert head[:5] == ["srun", "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=gpu01"]
    # `ray` from PATH, else the one beside this interpreter (a job run as venv/bin/python)
    assert Path(head[5]).name == "ray" and head[6:9] == ["start", "--head", "--block"]
    for arg in (f"--port={p.gcs}", "--node-ip-address=10.0.0.1", f"--node-manager-port={p.node_manager}",
                f"--min-worker-port={p.min_worker}", f"--max-worker-port={p.max_worker}",
                "--num-cpus=32", "--num-gpus=4", "--temp-dir=/tmp/ray-777", "--include-dashboard=false"):
        assert arg in head
    worker = c.worker_command()
    assert worker is not None
    assert worker[:6] == ["srun", "--overlap", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1",
                          "--nodelist=gpu02,gpu03"]
    assert f"--address=10.0.0.1:{p.gcs}" in worker and "--head" not in worker
    assert RayCluster(nodes=["a"], job_id="1").worker_command() is None
    # the auth token travels in the environment only, never on a command line
    assert c.env["RAY_AUTH_MODE"] == "token"
    assert all(c.env["RAY_AUTH_TOKEN"] not in a for a in head + worker)


def test_from_slurm_env_needs_a_job() -> None:
    with pytest.raises(EngineError, match="SLURM_JOB_ID"):
        RayCluster.from_slurm_env(env={})


@pytest.mark.slow
def test_local_head_starts_serves_and_leaves_nothing_behind(tiny_model: Path, chat_request) -> None:
    """A real one-node head (after losing its first port block), a model served through it,
    and no Ray process left when it stops."""
    if ray.is_initialized():
        ray.shutdown()
    ray_bin = str(Path(os.sys.executable).parent / "ray")
    cluster = RayCluster(nodes=[socket.gethostname()], job_id=str(os.getpid()), launcher="local",
                         cpus_per_node=2, ray_bin=ray_bin, ready_timeout_s=90)
    assert cluster.ports is not None
    checked = cluster.ports.gcs
    # The race between checking a port block and `ray start`: another job takes the GCS port
    # meanwhile.  The head fails, and the start is retried on a new, verified block.
    thief = socket.socket()
    thief.bind(("", checked))
    thief.listen()
    with cluster, thief:
        assert cluster.ports.gcs != checked
        assert cluster.alive_nodes() == 1
        group = os.getpgid(cluster.procs[0].pid)
        with open_engine(f"hf:{tiny_model}", replicas=1, threads=1, address=cluster.address) as pool:
            assert pool.generate([chat_request("Say hello.")])[0][0].text == "hello"
        ray.shutdown()
    left = [p for p in psutil.process_iter(["pid"]) if _pgid(p.pid) == group]
    assert left == []


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None
