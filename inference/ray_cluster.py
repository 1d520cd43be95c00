"""A private Ray cluster on the nodes of one SLURM job: start, wait until ready, tear down.

A generate task (or a multi-node `launch serve` job) that needs more than one GPU node
starts Ray itself: the head on the first allocated node, one worker per other node,
each as an ``srun`` step running ``ray start --block`` so that SLURM owns the processes
and cancelling the job kills them.  Several jobs may share a node, so every port Ray
opens comes from a range derived from ``SLURM_JOB_ID`` (`ports_for_job`) — two jobs
never collide on the default 6379.  Readiness is polled (GCS port open, then the
expected number of alive nodes), never assumed after a fixed sleep.

Without SLURM (``launcher="local"``) the same class starts a one-node head directly,
which is how it is tested on a machine without a cluster.

    with RayCluster.from_slurm_env() as cluster:
        pool = open_engine("vllm:Qwen/Qwen2.5-72B-Instruct", replicas=2, tp=4,
                           address=cluster.address)
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from inference.errors import EngineError

PORT_BASE = 20000
PORT_SPAN = 100  # ports per job
PORT_SLOTS = 440  # 20000 + 440 * 100 = 64000 < 65535


@dataclass(frozen=True)
class RayPorts:
    """Every port a Ray node of one job binds; all within [first, first + PORT_SPAN)."""

    gcs: int
    dashboard: int
    client_server: int
    node_manager: int
    object_manager: int
    metrics_export: int
    dashboard_agent_grpc: int
    dashboard_agent_listen: int
    runtime_env_agent: int
    min_worker: int
    max_worker: int

    def node_args(self) -> list[str]:
        """Ports every node (head or worker) passes to ``ray start``."""
        return [
            f"--node-manager-port={self.node_manager}",
            f"--object-manager-port={self.object_manager}",
            f"--metrics-export-port={self.metrics_export}",
            f"--dashboard-agent-grpc-port={self.dashboard_agent_grpc}",
            f"--dashboard-agent-listen-port={self.dashboard_agent_listen}",
            f"--runtime-env-agent-port={self.runtime_env_agent}",
            f"--min-worker-port={self.min_worker}",
            f"--max-worker-port={self.max_worker}",
        ]


def ports_for_job(job_id: int | str, base: int = PORT_BASE) -> RayPorts:
    """Ports for SLURM job `job_id`: jobs whose ids differ modulo `PORT_SLOTS` never share one.

    Array tasks have their own ``SLURM_JOB_ID``, so two array elements on one node differ too.
    """
    first = base + (int(job_id) % PORT_SLOTS) * PORT_SPAN
    return RayPorts(
        gcs=first,
        dashboard=first + 1,
        client_server=first + 2,
        node_manager=first + 3,
        object_manager=first + 4,
        metrics_export=first + 5,
        dashboard_agent_grpc=first + 6,
        dashboard_agent_listen=first + 7,
        runtime_env_agent=first + 8,
        min_worker=first + 20,
        max_worker=first + PORT_SPAN - 1,
    )


def expand_nodelist(nodelist: str) -> list[str]:
    """SLURM's compressed node list (``gpu[01-03],big7``) → host names, via scontrol."""
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                         text=True, check=True)
    return out.stdout.split()


@dataclass
class RayCluster:
    nodes: list[str]
    job_id: str
    head_ip: str = "127.0.0.1"
    cpus_per_node: int | None = None
    gpus_per_node: int | None = None
    launcher: str = "srun"  # "srun" inside a SLURM job, "local" for one node without SLURM
    temp_dir: Path | None = None
    ray_bin: str = "ray"
    ready_timeout_s: float = 300.0
    procs: list[subprocess.Popen] = field(default_factory=list)
    _saved_env: dict[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.nodes:
            raise EngineError("ray cluster: no nodes")
        self.ports = ports_for_job(self.job_id)
        # Ray's socket paths must stay under ~107 bytes: keep the temp dir short.
        self.temp_dir = Path(self.temp_dir or f"/tmp/ray-{self.job_id}")
        # Ray >= 2.5x authenticates every RPC with a token.  Each cluster gets its own,
        # handed to head, workers (srun passes the environment on) and this driver through
        # the environment only — never written to a file or a log.
        # The whole cluster goes down at once, so Ray's 30 s node drain on SIGTERM is moot.
        self.env = {
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": secrets.token_hex(32),
            "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
        }

    @classmethod
    def from_slurm_env(cls, env: dict[str, str] | None = None, **kw: Any) -> RayCluster:
        env = dict(os.environ if env is None else env)
        try:
            job_id = env["SLURM_JOB_ID"]
            nodelist = env["SLURM_JOB_NODELIST"]
        except KeyError as exc:
            raise EngineError(f"ray cluster: {exc.args[0]} is not set; not inside a SLURM job") from None
        nodes = expand_nodelist(nodelist)
        gpus = env.get("SLURM_GPUS_ON_NODE")
        cpus = env.get("SLURM_CPUS_ON_NODE")
        kw.setdefault("head_ip", socket.gethostbyname(nodes[0]))
        return cls(nodes=nodes, job_id=job_id, gpus_per_node=int(gpus) if gpus else None,
                   cpus_per_node=int(cpus) if cpus else None, **kw)

    @property
    def address(self) -> str:
        return f"{self.head_ip}:{self.ports.gcs}"

    def _resources(self) -> list[str]:
        args = []
        if self.cpus_per_node is not None:
            args.append(f"--num-cpus={self.cpus_per_node}")
        if self.gpus_per_node is not None:
            args.append(f"--num-gpus={self.gpus_per_node}")
        return args

    def head_command(self) -> list[str]:
        ray = [
            self.ray_bin, "start", "--head", "--block",
            f"--node-ip-address={self.head_ip}",
            f"--port={self.ports.gcs}",
            f"--ray-client-server-port={self.ports.client_server}",
            f"--dashboard-port={self.ports.dashboard}",
            "--include-dashboard=false",
            f"--temp-dir={self.temp_dir}",
            *self.ports.node_args(),
            *self._resources(),
        ]
        if self.launcher == "local":
            return ray
        return ["srun", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={self.nodes[0]}", *ray]

    def worker_command(self) -> list[str] | None:
        """One srun step starting a worker on every node but the head (None for one node)."""
        workers = self.nodes[1:]
        if not workers:
            return None
        ray = [
            self.ray_bin, "start", "--block", f"--address={self.address}",
            f"--temp-dir={self.temp_dir}", *self.ports.node_args(), *self._resources(),
        ]
        return [
            "srun", "--overlap", f"--nodes={len(workers)}", f"--ntasks={len(workers)}",
            "--ntasks-per-node=1", f"--nodelist={','.join(workers)}", *ray,
        ]

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> RayCluster:
        if self.launcher not in ("srun", "local"):
            raise EngineError(f"ray cluster: launcher must be 'srun' or 'local', not {self.launcher!r}")
        if self.launcher == "local" and len(self.nodes) > 1:
            raise EngineError("ray cluster: the local launcher starts one node only")
        for k, v in self.env.items():
            self._saved_env[k] = os.environ.get(k)
            os.environ[k] = v  # the driver (ray.init, state API) must present the same token
        _reload_ray_token()
        self.procs.append(subprocess.Popen(self.head_command(), start_new_session=True,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        self._wait_port()
        worker = self.worker_command()
        if worker:
            self.procs.append(subprocess.Popen(worker, start_new_session=True,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        self._wait_nodes()
        return self

    def _check_alive(self) -> None:
        for p in self.procs:
            if p.poll() is not None:
                err = (p.stderr.read().decode(errors="replace") if p.stderr else "")[-2000:]
                self.stop()
                raise EngineError(f"ray cluster: `{shlex.join(cast(list[str], p.args))}` exited with {p.returncode}: {err}")

    def _wait_port(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            self._check_alive()
            with contextlib.suppress(OSError), socket.create_connection((self.head_ip, self.ports.gcs), 1):
                return
            time.sleep(0.2)
        self.stop()
        raise EngineError(f"ray cluster: head did not open {self.address} within {self.ready_timeout_s:g} s")

    def alive_nodes(self) -> int:
        """Alive nodes as the GCS reports them (a GCS client; no dashboard, no driver needed)."""
        from ray._raylet import GcsClient  # type: ignore[attr-defined]
        from ray.core.generated.gcs_pb2 import GcsNodeInfo  # type: ignore[attr-defined]

        client = GcsClient(address=self.address)
        return len(client.get_all_node_info(timeout=5,
                                            state_filter=GcsNodeInfo.GcsNodeState.ALIVE))

    def _wait_nodes(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                if self.alive_nodes() >= len(self.nodes):
                    return
            except Exception as exc:  # noqa: BLE001 (not up yet)
                last = exc
            time.sleep(0.5)
        self.stop()
        raise EngineError(f"ray cluster: fewer than {len(self.nodes)} nodes joined {self.address} "
                          f"within {self.ready_timeout_s:g} s ({last})")

    def stop(self, grace_s: float = 15.0) -> None:
        """Stop workers, then the head; SIGKILL to the whole process group after `grace_s`.

        SIGTERM goes to the launcher process only (``ray start --block`` or its ``srun``):
        ``ray start`` then stops its own daemons in order within about two seconds,
        whereas terminating the whole group at once leaves it waiting on a GCS that is gone.
        """
        for p in reversed(self.procs):
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for p in reversed(self.procs):
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            # Sweep the group whether or not the launcher exited: no daemon outlives us.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        self.procs.clear()
        for k, old in self._saved_env.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old
        self._saved_env.clear()
        _reload_ray_token()

    def __enter__(self) -> RayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _reload_ray_token() -> None:
    """Ray caches the auth token per process; make it re-read the environment."""
    with contextlib.suppress(Exception):  # a private API; absent in older Ray (no auth)
        from ray._raylet import AuthenticationTokenLoader  # type: ignore[attr-defined]

        AuthenticationTokenLoader.instance().reset_cache()
