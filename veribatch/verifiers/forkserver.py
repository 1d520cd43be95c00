"""The fork server: every tool process of a worker is started, watched and reaped from here.

Two problems, one process.  A verifier tree must die with its worker even when the
worker is SIGKILLed (a preempted SLURM task, ``kill -9``, the OOM killer) and even when
the tool's own children left its session (UAutomizer's JVM, a double fork); and the
embedded verifier should not pay a fresh Python and a z3 import for every query.

::

    worker ──socket──▶ fork server (own session, PR_SET_CHILD_SUBREAPER, modules preloaded)
                           └─ reaper, one per query (own session, subreaper, cgroup)
                                 └─ tool (own session; exec(argv), or a warm module's main())

- The **fork server** is one single-threaded Python per worker process, started on
  first use.  It never runs a tool itself; it forks.  Because it is single-threaded, a
  fork of it is safe to keep running Python (a fork of the multi-threaded worker is
  not), so a tool with a ``warm_module`` (the embedded z3 verifier) runs that module's
  ``main(argv)`` in the forked child with z3 and the C front end already imported.
- A **reaper** per query is forked from it.  It is a child subreaper: any process of
  the query whose parent dies is re-parented to the reaper, not to init, so nothing
  of the query can leave its subtree.  Where a cgroup v2 directory is ours to use
  (`verifiers.cgroup`), the tool also runs in a cgroup of its own and ``cgroup.kill``
  ends it.  When the tool's root process exits (or is killed by the runner), the
  reaper kills whatever is left of the query, collects the exit status and resource
  usage, reports them on the query's report pipe and exits.
- **Deaths**: the worker dies → the server sees EOF on its socket (or a new parent)
  and kills every process below it.  The server dies → each reaper receives SIGTERM
  (parent-death signal) and kills its query first.  A reaper dies → its processes
  are re-parented to the server (also a subreaper), which kills them.  The tool's
  root carries a parent-death SIGKILL as well.

The runner (`verifiers.runner.LimitedProcess`) keeps doing what only it can: limits
(wall, CPU, memory by polling where no cgroup enforces it), output caps, cancellation.

Protocol (``SOCK_SEQPACKET``, one JSON message per request, file descriptors alongside):
``{"op": "spawn", ...}`` with fds [stdin, stdout, stderr, report]; ``{"op": "preload",
"module": M}``.  The reaper writes lines to the report pipe: ``started REAPER TOOL
CONTAINMENT MEMORY``, then ``exit STATUS CPU_S MAXRSS_KB OOM`` — or ``error MESSAGE``
when the tool could not be started.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from veribatch.verifiers import cgroup

ENV = "VERIBATCH_FORKSERVER"
"""``0``/``off`` starts tools directly from the worker (process groups and polling only)."""

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_START_TIMEOUT_S = 60.0

try:
    # The C library this interpreter is linked with (CDLL(None)): no `find_library`, which
    # runs ldconfig/gcc and costs tens of milliseconds in every fresh process.
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
    _LIBC.prctl  # noqa: B018 - fail here, not in a child, where prctl is missing
except (OSError, AttributeError):  # not Linux: no fork server
    _LIBC = None


def prctl(option: int, arg: int) -> bool:
    return _LIBC is not None and _LIBC.prctl(option, arg, 0, 0, 0) == 0


_PR_SET_NAME = 15
IDLE_NAMES = ("vb-forkserver", "vb-spare", "vb-stub")
"""Process names (``comm``, what ps and psutil show) of the fork server and of reapers and
tool stubs prepared ahead of a query: helpers of a worker, not tools.  A reaper that has a
query is named ``vb-reaper``; its tool carries the tool's own name (or ``vb-warm``)."""


def set_name(name: str) -> None:
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def set_parent_death_signal(sig: int, expected_parent: int) -> None:
    """Die (or get `sig`) when the parent dies; exit at once if it already has."""
    prctl(_PR_SET_PDEATHSIG, int(sig))
    if os.getppid() != expected_parent:
        os._exit(1)


def _children(pid: int) -> list[int]:
    """Direct children of `pid` (``/proc/PID/task/*/children``, else a /proc scan)."""
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
        return out
    except FileNotFoundError:
        from veribatch.verifiers.proctable import PROCESS_TABLE

        return [c for c in PROCESS_TABLE.descendants(pid, fresh=True)
                if _ppid(c) == pid]
    except OSError:
        return out


def _ppid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2:].split(maxsplit=2)[1])
    except (OSError, ValueError):
        return -1


def kill_children(keep: Sequence[int] = (), timeout_s: float = 10.0) -> None:
    """SIGKILL every child of this process but `keep`, and reap it; repeat until none is left.

    This process is a subreaper, so the children of a killed child come back to it as
    new children: the loop ends when the whole subtree is gone.
    """
    me = os.getpid()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        victims = [c for c in _children(me) if c not in keep]
        if not victims:
            break
        for c in victims:
            with contextlib.suppress(OSError):
                os.kill(c, signal.SIGKILL)
        for c in victims:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(c, 0)


# --------------------------------------------------------------------------- server side

class _Terminated(Exception):
    pass


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated


def _write_line(fd: int, line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, (line.rstrip("\n") + "\n").encode())


def _apply_rlimits(rlimits: Sequence[Sequence[int]]) -> None:
    """Lower (never raise) each limit: an outer runner's limit still binds a nested one."""
    for which, soft, hard in rlimits:
        _, cur_hard = resource.getrlimit(which)
        if cur_hard != resource.RLIM_INFINITY:
            hard = min(hard, cur_hard)
        resource.setrlimit(which, (min(soft, hard), hard))


def _recv(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
    if not data:
        return None, fds
    try:
        return json.loads(data), fds
    except ValueError:
        return {}, fds


def _stub(sock: socket.socket, reaper: int, cg: Path | None) -> None:
    """The tool's process before it knows its tool: set up ahead of time, then wait.

    It is forked, moved into its cgroup and given its parent-death signal while no
    query waits for it (moving a process between cgroups waits for an RCU grace
    period, tens of milliseconds on a busy node); the request only adds the fds,
    limits and the exec (or the warm module's ``main``).
    """
    try:
        set_name("vb-stub")
        os.setsid()
        set_parent_death_signal(signal.SIGKILL, reaper)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT,
                    signal.SIGCHLD, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        if cg is not None:
            cgroup.enter(cg)
        keep = sock.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 16)
        req, fds = _recv(sock)
        if not req or len(fds) != 3:
            os._exit(0)  # not needed after all (spare discarded, or the server went away)
        os.dup2(fds[0], 0)
        os.dup2(fds[1], 1)
        os.dup2(fds[2], 2)
        for fd in fds:
            os.close(fd)
        if req.get("cwd"):
            os.chdir(req["cwd"])
        _apply_rlimits(req.get("rlimits") or [])
        env = req.get("env")
        warm = req.get("warm")
        if warm:
            module, args = warm
            if env is not None:
                os.environ.clear()
                os.environ.update(env)
            main = importlib.import_module(module).main
            set_name("vb-warm")
            sock.close()  # "started": from here on the tool's own output tells what happened
            rc = 1
            try:
                rc = int(main(list(args)) or 0)
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:  # noqa: BLE001 - a crash is the tool's outcome, not ours
                traceback.print_exc()
                rc = 1
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                with contextlib.suppress(Exception):
                    sys.stderr.flush()
            os._exit(rc)
        argv = list(req["argv"])
        os.execvpe(argv[0], argv, env if env is not None else os.environ)
    except BaseException as e:  # noqa: BLE001 - tell the reaper why, then die
        with contextlib.suppress(Exception):
            name = req["argv"][0] if isinstance(req, dict) and req.get("argv") else "the tool"
            sock.send(f"cannot start {name}: {type(e).__name__}: {e}".encode())
    os._exit(127)


def _reaper(sock: socket.socket, server: int, base: Path | None) -> None:
    """One query: prepare a stub, wait for the request, then watch the tool, clean up, report."""
    set_name("vb-spare")
    os.setsid()
    prctl(_PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGTERM, _raise_terminated)
    signal.signal(signal.SIGHUP, _raise_terminated)
    set_parent_death_signal(signal.SIGTERM, server)
    me = os.getpid()
    cg = cgroup.make_query(base, f"q{me}") if base is not None else None
    containment = "cgroup2+subreaper" if cg is not None else "subreaper"
    tool = -1
    report = -1
    status: int | None = None
    try:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        tool = os.fork()
        if tool == 0:
            ours.close()
            _stub(theirs, me, cg)
        theirs.close()
        req, fds = _recv(sock)  # the server hands us a query (or closes: spare not needed)
        if not req or len(fds) != 4:
            for fd in fds:
                os.close(fd)
            return
        report = fds[3]
        set_name("vb-reaper")
        memory_by = "polling"
        if cg is not None:
            memory_by = "cgroup" if cgroup.limit(cg, req.get("memory_mb"),
                                                 req.get("max_processes")) else "polling"
        socket.send_fds(ours, [json.dumps(req).encode()], fds[:3])
        for fd in fds[:3]:
            os.close(fd)
        err = b""
        while chunk := ours.recv(4096):
            err += chunk
        ours.close()
        if err:
            os.waitpid(tool, 0)
            tool = -1
            _write_line(report, "error " + err.decode(errors="replace").replace("\n", " "))
            return
        _write_line(report, f"started {me} {tool} {containment} {memory_by}")
        # WNOWAIT: the root stays a zombie, so its pid (= its process group id) cannot be
        # reused while the rest of its group is being killed.
        os.waitid(os.P_PID, tool, os.WEXITED | os.WNOWAIT)
    except _Terminated:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        if tool > 0:
            with contextlib.suppress(OSError):
                os.killpg(tool, signal.SIGKILL)
            if cg is not None:
                cgroup.kill(cg)
            kill_children(keep=(tool,))
            with contextlib.suppress(ChildProcessError, OSError):
                _, status = os.waitpid(tool, 0)
            kill_children()
            if report >= 0:
                oom = cg is not None and cgroup.oom_killed(cg)
                ru = resource.getrusage(resource.RUSAGE_CHILDREN)
                # the cgroup also counts children no one waited for (their rusage is lost)
                cpu = max(ru.ru_utime + ru.ru_stime, cgroup.cpu_seconds(cg) if cg else 0.0)
                _write_line(report, f"exit {status if status is not None else -1} "
                                    f"{cpu:.6f} {ru.ru_maxrss} {int(oom)}")
        if cg is not None:
            cgroup.remove(cg)
        os._exit(0)


class _Server:
    """The server loop: requests in, reapers out; keeps `spares` reapers ready in advance."""

    def __init__(self, sock: socket.socket, spares: int) -> None:
        self.sock = sock
        self.parent = os.getppid()
        self.me = os.getpid()
        self.reapers: set[int] = set()
        self.spares: list[tuple[int, socket.socket]] = []
        self.n_spares = spares
        self.base = cgroup.make_base()
        self.stop = False
        self.can_fork = True

    def run(self) -> None:
        set_name("vb-forkserver")
        prctl(_PR_SET_CHILD_SUBREAPER, 1)
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._wake = (wake_r, wake_w)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda s, f: None)
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGHUP, self._on_term)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the worker; we follow it
        try:
            while not self.stop:
                try:
                    want_spare = len(self.spares) < self.n_spares and self.can_fork
                    ready, _, _ = select.select([self.sock, wake_r], [], [],
                                                0.0 if want_spare else 1.0)
                except InterruptedError:
                    ready = []
                if wake_r in ready:
                    with contextlib.suppress(OSError):
                        os.read(wake_r, 4096)
                if not ready:
                    self.can_fork = True
                if self.sock in ready:
                    try:
                        req, fds = _recv(self.sock)
                    except OSError:
                        break
                    if req is None:
                        break  # the worker is gone
                    self._handle(req, fds)
                elif want_spare:
                    self._add_spare()  # idle: prepare the next query's processes
                self._reap()
                if os.getppid() != self.parent:
                    break  # the worker is gone (its socket end may live on in a fork of it)
        finally:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for _, ctl in self.spares:
                ctl.close()
            kill_children()
            if self.base is not None:
                cgroup.remove(self.base)

    def _on_term(self, signum: int, frame: Any) -> None:
        self.stop = True

    def _new_reaper(self) -> tuple[int, socket.socket] | None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError:
            ours.close()
            theirs.close()
            return None
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in self._wake:
                    os.close(fd)
                self.sock.close()
                ours.close()
                for _, ctl in self.spares:
                    ctl.close()
                _reaper(theirs, self.me, self.base)
            finally:
                os._exit(70)
        theirs.close()
        self.reapers.add(pid)
        return pid, ours

    def _add_spare(self) -> None:
        spare = self._new_reaper()
        if spare is not None:
            self.spares.append(spare)
        self.can_fork = spare is not None  # retried after the next request (or a second)

    def _drop_spares(self) -> None:
        for _, ctl in self.spares:
            ctl.close()  # the reaper reads EOF: not needed, it and its stub exit
        self.spares.clear()

    def _handle(self, req: dict[str, Any], fds: list[int]) -> None:
        try:
            if req.get("op") == "preload":
                self._drop_spares()  # forked before the module was loaded: not warm
                self._preload(str(req.get("module")))
            elif req.get("op") == "spawn" and len(fds) == 4:
                spare = self.spares.pop(0) if self.spares else self._new_reaper()
                if spare is None:
                    _write_line(fds[3], "error the fork server cannot fork")
                else:
                    try:
                        socket.send_fds(spare[1], [json.dumps(req).encode()], fds)
                    except OSError as e:
                        _write_line(fds[3], f"error reaper unreachable: {e}")
                    spare[1].close()
            elif fds:
                _write_line(fds[-1], "error bad request to the fork server")
        finally:
            for fd in fds:
                os.close(fd)

    def _preload(self, module: str) -> None:
        try:
            mod = importlib.import_module(module)
            warm_up = getattr(mod, "warm_up", None)
            if callable(warm_up):
                warm_up()
        except Exception:  # noqa: BLE001 - the fork then imports it itself and reports
            traceback.print_exc()

    def _reap(self) -> None:
        lost_reaper = False
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in self.reapers:
                self.reapers.discard(pid)
                self.spares = [s for s in self.spares if s[0] != pid]
                lost_reaper = True
        if lost_reaper:
            # Whatever is a child of ours now and is not a live reaper was orphaned by a
            # reaper that died before cleaning up: its query is over.
            for c in _children(self.me):
                if c not in self.reapers:
                    with contextlib.suppress(OSError):
                        os.kill(c, signal.SIGKILL)
            if self.base is not None:
                for stale in self.base.glob("q*"):
                    if stale.name[1:].isdigit() and int(stale.name[1:]) not in self.reapers:
                        cgroup.remove(stale)


SPARES = 2
"""Reapers (with their stubs) kept ready: enough for one InvBench candidate's d_a and d_b."""


def serve(fd: int) -> None:
    """Entry point of the server process (``python -m veribatch.verifiers.forkserver FD``)."""
    sock = socket.socket(fileno=fd)
    _Server(sock, SPARES).run()


# --------------------------------------------------------------------------- client side

class ForkServerError(RuntimeError):
    """The fork server could not be started or has gone away."""


class Spawned:
    """A query started by the fork server: its report pipe, and once known its pids."""

    def __init__(self, report_fd: int) -> None:
        self.report_fd = report_fd
        self._buf = b""
        self.reaper = -1
        self.tool = -1
        self.containment = "subreaper"
        self.memory_by = "polling"
        self.error: str | None = None
        self.status: int | None = None
        self.cpu_s = 0.0
        self.maxrss_kb = 0
        self.oom = False
        self.finished = False

    def _lines(self, timeout: float | None) -> list[str]:
        if timeout is not None:
            ready, _, _ = select.select([self.report_fd], [], [], max(0.0, timeout))
            if not ready:
                return []
        try:
            chunk = os.read(self.report_fd, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            self.finished = True  # the reaper is gone, with or without its report
            lines = [self._buf.decode(errors="replace")] if self._buf else []
            self._buf = b""
            return lines
        self._buf += chunk
        *lines, rest = self._buf.split(b"\n")
        self._buf = rest
        return [ln.decode(errors="replace") for ln in lines]

    def _apply(self, line: str) -> None:
        kind, _, rest = line.partition(" ")
        if kind == "started":
            parts = rest.split()
            self.reaper, self.tool = int(parts[0]), int(parts[1])
            self.containment, self.memory_by = parts[2], parts[3]
        elif kind == "error":
            self.error = rest
            self.finished = True
        elif kind == "exit":
            status, cpu, rss, oom = rest.split()
            self.status = int(status) if int(status) >= 0 else None
            self.cpu_s, self.maxrss_kb, self.oom = float(cpu), int(rss), oom == "1"
            self.finished = True

    def wait_started(self, timeout: float = _START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while self.tool < 0 and not self.finished:
            left = deadline - time.monotonic()
            if left <= 0:
                self.error = f"the fork server did not start the tool within {timeout:g}s"
                self.finished = True
                break
            for line in self._lines(left):
                self._apply(line)
        if self.tool < 0 and self.error is None:
            self.error = "the fork server went away before starting the tool"

    def poll(self, timeout: float) -> bool:
        """Read what the reaper reported within `timeout` seconds; True once it has finished."""
        if not self.finished:
            for line in self._lines(timeout):
                self._apply(line)
        return self.finished

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.report_fd)


class ForkServer:
    """The client end, in the worker.  Thread-safe; one per worker process (see `get`)."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid_of_owner = os.getpid()
        self._lock = threading.Lock()
        self._preloaded: set[str] = set()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "veribatch.verifiers.forkserver", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, start_new_session=True,
            )
        finally:
            theirs.close()
        self.sock = ours

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _send(self, msg: dict[str, Any], fds: Sequence[int] = ()) -> None:
        data = json.dumps(msg).encode()
        with self._lock:
            try:
                socket.send_fds(self.sock, [data], list(fds))
            except OSError as e:
                raise ForkServerError(f"fork server (pid {self.proc.pid}) unreachable: {e}") from e

    def preload(self, module: str) -> None:
        """Have `module` imported (and its ``warm_up()`` run) in the server, once."""
        with self._lock:
            if module in self._preloaded:
                return
            self._preloaded.add(module)
        self._send({"op": "preload", "module": module})

    def spawn(
        self,
        argv: Sequence[str],
        *,
        stdin: int,
        stdout: int,
        stderr: int,
        env: Mapping[str, str] | None,
        cwd: str | None,
        rlimits: Sequence[tuple[int, int, int]],
        warm: tuple[str, Sequence[str]] | None = None,
        memory_mb: int | None = None,
        max_processes: int | None = None,
    ) -> Spawned:
        """Start one tool; the caller keeps its fds (they are duplicated into the server)."""
        report_r, report_w = os.pipe2(os.O_CLOEXEC)
        msg = {
            "op": "spawn", "argv": list(argv), "cwd": cwd,
            "env": dict(env if env is not None else os.environ),
            "rlimits": [list(r) for r in rlimits],
            "warm": [warm[0], list(warm[1])] if warm else None,
            "memory_mb": memory_mb, "max_processes": max_processes,
        }
        try:
            self._send(msg, [stdin, stdout, stderr, report_w])
        except BaseException:
            os.close(report_r)
            raise
        finally:
            os.close(report_w)
        return Spawned(report_r)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)


_SERVER: ForkServer | None = None
_SERVER_LOCK = threading.Lock()


@atexit.register
def _shutdown() -> None:
    """Worker exit: the server sees EOF and kills its processes; wait until it has."""
    server = _SERVER
    if server is not None and server.pid_of_owner == os.getpid():
        server.close()


def enabled() -> bool:
    return sys.platform.startswith("linux") and _LIBC is not None and \
        os.environ.get(ENV, "").lower() not in ("0", "off", "no", "false")


def get() -> ForkServer | None:
    """This process's fork server, started on first use; None where it cannot be used."""
    global _SERVER
    if not enabled():
        return None
    with _SERVER_LOCK:
        if _SERVER is not None and (_SERVER.pid_of_owner != os.getpid() or not _SERVER.alive()):
            _SERVER = None  # a fork of the worker, or a server that died: start a new one
        if _SERVER is None:
            try:
                _SERVER = ForkServer()
            except OSError:
                return None
        return _SERVER


if __name__ == "__main__":
    # Run the server from the imported module, not from this `__main__` copy: modules
    # preloaded later that import `verifiers.forkserver` must find it already loaded.
    from veribatch.verifiers.forkserver import serve as _serve

    _serve(int(sys.argv[1]))
