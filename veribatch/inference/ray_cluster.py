"""A private Ray cluster on the nodes of one SLURM job: start, wait until ready, tear down.

A generate task (or a multi-node `launch serve` job) that needs more than one GPU node
starts Ray itself: the head on the first allocated node, one worker per other node,
each as an ``srun`` step running ``ray start --block`` so that SLURM owns the processes
and cancelling the job kills them.  Several jobs may share a node, so every port Ray
opens comes from one block of `PORT_SPAN` ports that is *verified* free on the head's
node (`free_port_block`): chosen at random outside the kernel's ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``, where outgoing connections take their
ports), every port of it bound once to check.  A block taken between the check and
``ray start`` (another job, same moment) makes the head fail at once; the start is
then retried with a new block.  Worker nodes bind the same node ports; a clash there
fails ``ray start`` on that node with a clear error.  Readiness is polled (GCS port
open, then the expected number of alive nodes), never assumed after a fixed sleep.

Without SLURM (``launcher="local"``) the same class starts a one-node head directly,
which is how it is tested on a machine without a cluster.

    with RayCluster.from_slurm_env() as cluster:
        pool = open_engine("vllm:Qwen/Qwen2.5-72B-Instruct", replicas=2, tp=4,
                           address=cluster.address)
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from veribatch.inference.errors import EngineError

PORT_SPAN = 100  # ports per job: Ray's fixed ports and its worker port range
LOWEST_PORT = 10000  # below: well-known and registered services
EPHEMERAL_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
START_ATTEMPTS = 3  # head starts with a fresh port block after a lost race


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


def ephemeral_range(path: Path = EPHEMERAL_FILE) -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux default 32768–60999 when unreadable)."""
    try:
        lo, hi = (int(x) for x in path.read_text().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def port_is_free(port: int, host: str = "") -> bool:
    """True when a TCP socket can bind `port` on `host` right now (no SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port_block(span: int = PORT_SPAN, host: str = "", rng: random.Random | None = None,
                    tries: int = 200) -> int:
    """The first port of `span` consecutive ports, all free on `host`, outside the ephemeral range.

    Blocks start at multiples of `span` between `LOWEST_PORT` and 65535 and lie wholly
    below or above the ephemeral range; they are tried in random order (two jobs
    starting at once rarely try the same block first) and each port is bound once.
    """
    lo, hi = ephemeral_range()
    firsts = [f for f in range(LOWEST_PORT - LOWEST_PORT % span + span, 65536 - span + 1, span)
              if f + span - 1 < lo or f > hi]
    if not firsts:
        raise EngineError(f"no port block of {span} outside the ephemeral range {lo}-{hi}")
    (rng or random.Random(secrets.randbits(64))).shuffle(firsts)
    for first in firsts[:tries]:
        if all(port_is_free(p, host) for p in range(first, first + span)):
            return first
    raise EngineError(f"no free block of {span} ports on {host or 'this node'} after {tries} tries "
                      f"(outside the ephemeral range {lo}-{hi})")


def ports_from(first: int) -> RayPorts:
    """Ray's ports laid out in the block starting at `first` (see `free_port_block`)."""
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


def default_ray_bin() -> str:
    """`ray` on PATH, else the one installed beside this interpreter: a job started as
    ``/path/venv/bin/python driver.py`` (no activated venv) finds the `ray` of its own venv,
    and so do its srun steps on the other nodes (the same path on a shared file system)."""
    import shutil
    import sys

    beside = Path(sys.executable).with_name("ray")
    return "ray" if shutil.which("ray") else (str(beside) if beside.exists() else "ray")


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
    ray_bin: str = field(default_factory=lambda: default_ray_bin())
    ready_timeout_s: float = 300.0
    ports: RayPorts | None = None  # None: a block verified free on this node at start
    procs: list[subprocess.Popen] = field(default_factory=list)
    head_lost: bool = False  # set by `job_pool` when its scope ends: the GCS was gone
    _saved_env: dict[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.nodes:
            raise EngineError("ray cluster: no nodes")
        self._fixed_ports = self.ports is not None
        if self.ports is None:
            self.ports = ports_from(free_port_block(host=self._bind_host()))
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

    def _bind_host(self) -> str:
        return "" if self.launcher == "srun" else self.head_ip

    @property
    def address(self) -> str:
        assert self.ports is not None
        return f"{self.head_ip}:{self.ports.gcs}"

    def _resources(self) -> list[str]:
        args = []
        if self.cpus_per_node is not None:
            args.append(f"--num-cpus={self.cpus_per_node}")
        if self.gpus_per_node is not None:
            args.append(f"--num-gpus={self.gpus_per_node}")
        return args

    def head_command(self) -> list[str]:
        assert self.ports is not None
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
        assert self.ports is not None
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
        for attempt in range(START_ATTEMPTS):
            # Ray caches its auth mode per process: the environment stays set between tries.
            self._keep_env = attempt < START_ATTEMPTS - 1 and not self._fixed_ports
            head = subprocess.Popen(self.head_command(), start_new_session=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self.procs.append(head)
            try:
                self._wait_port(head)  # on failure everything is stopped
                self._wait_nodes(1)  # the GCS answers: a port opened by someone else never does
                break
            except EngineError as e:
                if not (self._keep_env and "exited with" in str(e)):  # not a lost race
                    self._keep_env = False
                    self.stop()
                    raise
                # Most likely a port of the block was taken since it was checked: a new block.
                self.ports = ports_from(free_port_block(host=self._bind_host()))
        self._keep_env = False
        worker = self.worker_command()
        if worker:
            self.procs.append(subprocess.Popen(worker, start_new_session=True,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        self._wait_nodes(len(self.nodes))
        return self

    def _check_alive(self) -> None:
        for p in self.procs:
            if p.poll() is not None:
                err = (p.stderr.read().decode(errors="replace") if p.stderr else "")[-2000:]
                self.stop()
                raise EngineError(f"ray cluster: `{shlex.join(cast(list[str], p.args))}` exited with {p.returncode}: {err}")

    def _wait_port(self, head: subprocess.Popen) -> None:
        assert self.ports is not None
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            self._check_alive()
            with contextlib.suppress(OSError), socket.create_connection((self.head_ip, self.ports.gcs), 1):
                if self.launcher != "local" or _listens(head.pid, self.ports.gcs):
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

    def _wait_nodes(self, count: int) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                if self.alive_nodes() >= count:
                    return
            except Exception as exc:  # noqa: BLE001 (not up yet)
                last = exc
            time.sleep(0.5)
        self.stop()
        raise EngineError(f"ray cluster: fewer than {count} nodes joined {self.address} "
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
        if getattr(self, "_keep_env", False):
            return
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


@contextlib.contextmanager
def job_pool(replicas: int, env: dict[str, str] | None = None, **cluster: Any
             ) -> Iterator[RayCluster]:
    """A private Ray cluster over the nodes of this SLURM job, and within it every hf:/vllm:
    engine opened as a pool of `replicas` data-parallel replicas joining it
    (`registry.pooled_engines`).  The cluster is stopped when the scope ends.

    Why here: a task's stage opens its engine knowing nothing of the allocation; the SLURM
    element that runs the stage's shards (``launch``'s ShardJob, for a profile with
    ``generation.replicas``) wraps them in this scope, so one allocation of several GPU
    nodes serves one pool.  A lost head fails the shards being run (`ray_pool`) and is
    noted in ``head_lost``: Ray's client then ends this process 60 s on, whatever it does,
    so the caller should end it itself once its failures are recorded."""
    from veribatch.inference.ray_pool import gcs_reachable
    from veribatch.inference.registry import pooled_engines

    with RayCluster.from_slurm_env(env, **cluster) as rc:
        print(f"ray cluster {rc.address} on {', '.join(rc.nodes)}; engines as {replicas} "
              "replica(s)", file=sys.stderr, flush=True)
        try:
            with pooled_engines(replicas, address=rc.address):
                yield rc
        finally:
            rc.head_lost = not gcs_reachable(rc.address)


def _listens(pid: int, port: int) -> bool:
    """Whether `pid` or one of its descendants listens on TCP `port` (the local launcher's check
    that an open port is our head's, not another job's that took the block meanwhile)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return False
    for p in procs:
        with contextlib.suppress(psutil.Error):
            if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
                   for c in p.net_connections(kind="tcp")):
                return True
    return False


def _reload_ray_token() -> None:
    """Ray caches its auth config and token per process: make it re-read the environment.

    The config first (it holds the auth mode, read when ray was imported — in a process
    that imported ray before the cluster existed it still says "disabled"), then the
    token cache, in the order Ray's own test helpers use.
    """
    with contextlib.suppress(Exception):  # a private API; absent in older Ray (no auth)
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()
