"""Run one argv under hard limits enforced from outside the process.

A verifier (or an LLM-written program) is never trusted to stop by itself.  This
module is a small cousin of BenchExec's `runexecutor.py` that needs nothing but
the standard library and psutil, so it works on any login or compute node:

- the tool is started by the worker's fork server (`verifiers.forkserver`): in its
  own session, below a per-query reaper that is a *child subreaper* and, where a
  cgroup v2 directory is ours to use, in a cgroup of its own.  No process of the
  tool can leave that subtree (a double fork re-parents to the reaper, not to
  init), and whatever is left when the tool's root exits is killed;
- the fork server and every reaper die with the worker (EOF on the server's socket,
  parent-death signals), taking their trees along — also when the worker is
  SIGKILLed;
- RLIMIT_CPU is set in the child as a backstop, and an optional RLIMIT_AS for
  programs that tolerate it (C++/Python under the judge; *not* Java or .NET,
  which reserve far more address space than they use);
- a monitor thread polls the whole process tree with psutil every few tens of
  milliseconds and kills it (``killpg`` plus every descendant it has ever seen)
  when the wall time, the summed CPU time or the summed resident memory passes its
  limit; memory is left to the kernel instead where the query's cgroup has
  ``memory.max`` (`Execution.memory_limit_by` says which);
- stdout/stderr go through a pump that writes at most `output_cap` bytes to the
  log and discards the rest, so a flooding tool fills neither disk nor RAM;
- whatever happens, the call returns an `Execution` saying why the process
  ended (`termination_reason`), how long it ran, how much memory it used, and
  which mechanism contained it (`containment`).

Fallback (``VERIBATCH_FORKSERVER=0``, or no fork server could be started): the tool is
a direct child of the worker in its own session with a parent-death SIGKILL, an
``atexit`` hook kills live trees, and leftovers are found by polling — a process that
double-forks *and* calls ``setsid`` between two polls escapes that; `containment` is
then ``"process-group"``.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import resource
import select
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from veribatch.verifiers import forkserver
from veribatch.verifiers.proctable import PROCESS_TABLE
from veribatch.verifiers.result import Limits

OUTPUT_CAP_BYTES = 16 * 2**20
"""Default cap on the bytes of output kept per stream (16 MiB)."""

_POLL_FIRST_S = 0.005
_POLL_MAX_S = 0.05
_REAP_TIMEOUT_S = 10.0

_PR_SET_PDEATHSIG = 1
_LIVE: weakref.WeakSet[LimitedProcess] = weakref.WeakSet()


@atexit.register
def _kill_all_live() -> None:
    """Interpreter exit: no tool outlives the worker that started it."""
    for proc in list(_LIVE):
        proc._kill_tree()


TERMINATION_REASONS = (
    "exit",       # the process ended by itself (any exit code)
    "signal",     # killed by a signal we did not send (crash, SIGSEGV, ...)
    "walltime",   # wall-clock limit
    "cputime",    # CPU-time limit (summed over the process tree)
    "memory",     # resident memory of the process tree over the limit
    "output",     # output over the cap and the caller asked to kill on it
    "processes",  # more live processes than allowed (fork bomb)
    "cancelled",  # the caller killed it (e.g. a parallel query decided first)
    "error",      # could not be started, or its exit status could not be collected
)

CONTAINMENTS = (
    "cgroup2+subreaper",  # own cgroup (cgroup.kill) below a subreaper reaper: nothing escapes
    "subreaper",          # below a subreaper reaper: nothing escapes while the reaper lives
    "process-group",      # direct child, killpg + polled descendants (fallback)
)


@dataclass(frozen=True)
class Execution:
    """What happened to one process tree.  `returncode`/`signal` are None when not known."""

    argv: tuple[str, ...]
    returncode: int | None
    signal: int | None
    termination_reason: str
    wall_s: float
    cpu_s: float
    peak_mem_mb: float
    output_path: Path
    output_truncated: bool = False
    stderr_path: Path | None = None
    error: str | None = None  # why it could not be started (termination_reason "error")
    containment: str = "process-group"  # one of CONTAINMENTS
    memory_limit_by: str = "polling"    # "cgroup" (memory.max), "cgroup-v1", or "polling" (RSS)
    peak_processes: int = 0             # most live processes of the tree seen at one poll

    @property
    def limit_hit(self) -> bool:
        return self.termination_reason in ("walltime", "cputime", "memory", "output", "processes")

    @property
    def enforcement(self) -> str:
        """One line for results: how the tree was contained and who enforced memory."""
        return f"{self.containment}; memory by {self.memory_limit_by}"

    def read_output(self) -> str:
        return _read_text(self.output_path)

    def read_stderr(self) -> str:
        return _read_text(self.stderr_path) if self.stderr_path else ""


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


class _Pump(threading.Thread):
    """Copies a pipe to a file, keeping at most `cap` bytes; never blocks the child."""

    def __init__(self, fd: int, path: Path, cap: int, on_overflow: threading.Event) -> None:
        super().__init__(daemon=True, name=f"pump-{path.name}")
        self.fd, self.path, self.cap = fd, path, cap
        self.on_overflow = on_overflow
        self.truncated = False
        self.written = 0
        self.counted = True  # False: stderr capped on its own (``stderr_cap``), never a limit

    def run(self) -> None:
        with open(self.path, "wb") as out:
            try:
                while chunk := os.read(self.fd, 1 << 16):
                    room = self.cap - self.written
                    if room > 0:
                        out.write(chunk[:room])
                        self.written += min(room, len(chunk))
                    if len(chunk) > room and not self.truncated:
                        self.truncated = True
                        self.on_overflow.set()
            except OSError:
                pass
            finally:
                os.close(self.fd)
                if self.truncated:
                    out.write(f"\n[veribatch: output truncated at {self.cap} bytes]\n".encode())


def _setrlimit(which: int, soft: int, hard: int) -> None:
    """Lower a limit, never raise it: an outer runner's limit still binds a nested one."""
    _, cur_hard = resource.getrlimit(which)
    if cur_hard != resource.RLIM_INFINITY:
        hard = min(hard, cur_hard)
    resource.setrlimit(which, (min(soft, hard), hard))


def rlimit_list(
    cpu_s: float | None,
    address_space_mb: int | None,
    extra: Mapping[int, tuple[int, int]],
) -> list[tuple[int, int, int]]:
    """(resource, soft, hard) to set in the tool's process, in order (only ever lowered)."""
    out = [(which, soft, hard) for which, (soft, hard) in extra.items()]
    if cpu_s is not None and math.isfinite(cpu_s):  # inf: no CPU-time limit at all
        soft = max(1, math.ceil(cpu_s))
        # SIGXCPU at the soft limit, SIGKILL one second later if it is ignored.
        out.append((resource.RLIMIT_CPU, soft, soft + 1))
    if address_space_mb is not None:
        n = address_space_mb * 2**20
        out.append((resource.RLIMIT_AS, n, n))
    out.append((resource.RLIMIT_CORE, 0, 0))
    return out


def _preexec(limits: list[tuple[int, int, int]]) -> Callable[[], None]:
    """Limits set in the child between fork and exec (only plain setrlimit calls)."""

    def apply() -> None:
        # not Linux (no libc prctl): no parent-death signal, atexit still applies
        forkserver.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        for which, soft, hard in limits:
            _setrlimit(which, soft, hard)

    return apply


class LimitedProcess:
    """One argv running under `limits`; a monitor thread enforces them.

    `start()` returns at once; `poll()`, `wait()` and `kill()` may be called from
    any thread.  The result is computed exactly once.

    `extra_memory(live pids)` adds bytes the tree holds outside its resident sets (the
    judge's box: files in its tmpfs) to the polled memory.

    `warm=(module, args)` says that `argv` is ``python -m <package> args`` whose
    `module` (already importable here) has ``main(args)``: the fork server then runs
    it in a fork of its warm interpreter instead of exec-ing a fresh Python — same
    process isolation and limits, without the interpreter's start-up.
    """

    def __init__(
        self,
        argv: Sequence[str],
        limits: Limits,
        output_path: Path,
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        stdin_path: Path | None = None,
        stderr_path: Path | None = None,
        output_cap: int = OUTPUT_CAP_BYTES,
        kill_on_output_cap: bool = False,
        stderr_cap: int | None = None,
        address_space: bool = False,
        max_processes: int | None = None,
        rlimits: Mapping[int, tuple[int, int]] | None = None,
        warm: tuple[str, Sequence[str]] | None = None,
        extra_memory: Callable[[Sequence[int]], int] | None = None,
    ) -> None:
        self.argv = tuple(str(a) for a in argv)
        self.limits = limits
        self.output_path = Path(output_path)
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.stdin_path = stdin_path
        self.stderr_path = Path(stderr_path) if stderr_path else None
        self.output_cap = output_cap
        self.kill_on_output_cap = kill_on_output_cap
        self.stderr_cap = stderr_cap
        self.address_space = address_space
        self.max_processes = max_processes
        self.rlimits = dict(rlimits or {})
        self.warm = (warm[0], tuple(str(a) for a in warm[1])) if warm else None
        self.extra_memory = extra_memory
        self._cancel = threading.Event()
        self._overflow = threading.Event()
        self._done = threading.Event()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._result: Execution | None = None
        self._thread: threading.Thread | None = None
        self._seen: dict[int, psutil.Process] = {}
        self._cpu_seen: dict[int, float] = {}
        self._peak_rss = 0
        self._peak_procs = 0
        self._root = -1   # the tool's root process (its pid is also its process group)
        self._tree = -1   # whose descendants are the tool's: the reaper, or the root itself

    # -- public -----------------------------------------------------------------
    def start(self) -> LimitedProcess:
        self._thread = threading.Thread(target=self._monitor, daemon=True, name="limited-process")
        self._thread.start()
        return self

    def poll(self) -> Execution | None:
        return self._result if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> Execution | None:
        self._done.wait(timeout)
        return self.poll()

    def cancel(self) -> None:
        """Ask the monitor to kill the tree, without waiting (see `kill`)."""
        self._cancel.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def kill(self) -> Execution:
        """Kill the whole tree now (termination reason "cancelled" unless it already ended)."""
        self.cancel()
        self._done.wait()
        assert self._result is not None
        return self._result

    # -- monitor ----------------------------------------------------------------
    def _monitor(self) -> None:
        try:
            server = forkserver.get()
            self._result = self._run_forkserver(server) if server is not None else self._run_direct()
        except BaseException as e:  # never leave a waiter hanging
            self._result = Execution(
                self.argv, None, None, "error", 0.0, 0.0, 0.0, self.output_path,
                error=f"runner failed: {type(e).__name__}: {e}",
            )
        finally:
            for fd in (self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._done.set()

    def _rlimits(self) -> list[tuple[int, int, int]]:
        cpu = self.limits.cpu_cap
        return rlimit_list(
            cpu + 1.0,  # the poller decides "cputime"; the rlimit is a backstop
            self.limits.memory_mb if self.address_space else None,
            self.rlimits,
        )

    def _pipes(self) -> tuple[list[_Pump], int, int, list[int]]:
        """Output pipes: (pumps, stdout write end, stderr write end, fds to close on failure)."""
        self.output_path.parent.mkdir(parents=True, exist_ok=True)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = out_r, out_w
        fds = [out_r, out_w]
        if self.stderr_path is not None:
            err_r, err_w = os.pipe2(os.O_CLOEXEC)
            fds += [err_r, err_w]
        pumps = [_Pump(out_r, self.output_path, self.output_cap, self._overflow)]
        if self.stderr_path is not None and self.stderr_cap is not None:
            # capped on its own: what a program writes to stderr is never its output, so it
            # neither fills the output cap nor makes the output count as truncated
            err = _Pump(err_r, self.stderr_path, self.stderr_cap, threading.Event())
            err.counted = False
            pumps.append(err)
        elif self.stderr_path is not None:
            pumps.append(_Pump(err_r, self.stderr_path, self.output_cap, self._overflow))
        return pumps, out_w, err_w, fds

    def _error(self, message: str, containment: str = "process-group") -> Execution:
        return Execution(
            self.argv, None, None, "error", 0.0, 0.0, 0.0, self.output_path,
            stderr_path=self.stderr_path, error=message, containment=containment,
        )

    # -- through the fork server ------------------------------------------------
    def _run_forkserver(self, server: forkserver.ForkServer) -> Execution:
        t0 = time.monotonic()
        if self.warm is not None:
            server.preload(self.warm[0])
        pumps, out_w, err_w, fds = self._pipes()
        try:
            stdin = os.open(self.stdin_path or os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            for fd in fds:
                os.close(fd)
            return self._error(f"cannot open stdin {self.stdin_path}: {e}", "subreaper")
        try:
            spawned = server.spawn(
                self.argv, stdin=stdin, stdout=out_w, stderr=err_w, env=self.env,
                # the server's own cwd is the worker's at the server's start: always say which
                cwd=os.path.abspath(self.cwd if self.cwd is not None else os.getcwd()),
                rlimits=self._rlimits(),
                warm=self.warm, memory_mb=self.limits.memory_mb,
                max_processes=self.max_processes,
            )
        except forkserver.ForkServerError:
            for fd in fds:
                os.close(fd)
            return self._run_direct()
        finally:
            os.close(stdin)
        os.close(out_w)
        if err_w != out_w:
            os.close(err_w)
        for p in pumps:
            p.start()
        try:
            return self._watch_forkserver(spawned, pumps, t0)
        finally:
            spawned.close()

    def _watch_forkserver(self, spawned: forkserver.Spawned, pumps: list[_Pump],
                          t0: float) -> Execution:
        spawned.wait_started()
        if spawned.tool < 0:
            for p in pumps:
                p.join(timeout=5.0)
            return self._error(spawned.error or "could not start the tool", spawned.containment)
        self._root, self._tree = spawned.tool, spawned.reaper
        _LIVE.add(self)
        with contextlib.suppress(psutil.Error):
            self._seen[self._root] = psutil.Process(self._root)
        reason = self._enforce(lambda timeout: self._wait_report(spawned, timeout), t0,
                               memory_polled=spawned.memory_by != "cgroup")
        if reason is not None:
            self._kill_tree()
        deadline = time.monotonic() + _REAP_TIMEOUT_S
        while not spawned.poll(max(0.0, deadline - time.monotonic())):
            if time.monotonic() >= deadline:
                break
        wall = time.monotonic() - t0
        _LIVE.discard(self)
        for p in pumps:
            p.join(timeout=5.0)
        if spawned.oom and reason is None:
            reason = "memory"
        return self._execution(reason, spawned.status if spawned.finished else None,
                               spawned.cpu_s, spawned.maxrss_kb / 1024.0, wall, pumps,
                               spawned.containment, spawned.memory_by)

    def _wait_report(self, spawned: forkserver.Spawned, timeout: float) -> bool:
        """Sleep until the reaper reports, a cancel arrives, or `timeout`; True once finished."""
        ready, _, _ = select.select([spawned.report_fd, self._wake_r], [], [], timeout)
        if self._wake_r in ready:
            with contextlib.suppress(OSError):
                os.read(self._wake_r, 64)
        return spawned.poll(0.0) if spawned.report_fd in ready else spawned.finished

    # -- directly from this process (fallback) ----------------------------------
    def _run_direct(self) -> Execution:
        t0 = time.monotonic()
        try:
            pumps, out_w, err_w, fds = self._pipes()
            try:
                with contextlib.ExitStack() as stack:
                    stdin = (
                        stack.enter_context(open(self.stdin_path, "rb"))
                        if self.stdin_path
                        else subprocess.DEVNULL
                    )
                    proc = subprocess.Popen(
                        self.argv,
                        stdin=stdin,
                        stdout=out_w,
                        stderr=err_w,
                        cwd=self.cwd,
                        env=self.env,
                        start_new_session=True,
                        close_fds=True,
                        preexec_fn=_preexec(self._rlimits()),
                    )
            except BaseException:
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
                raise
        except OSError as e:
            return self._error(f"cannot start {self.argv[0]}: {e}")
        os.close(out_w)
        if err_w != out_w:
            os.close(err_w)
        for p in pumps:
            p.start()
        pid = self._root = self._tree = proc.pid
        _LIVE.add(self)
        with contextlib.suppress(psutil.Error):
            self._seen[pid] = psutil.Process(pid)

        def exited(timeout: float) -> bool:
            # WNOWAIT: notice the exit but leave the zombie, so its pid (= the process
            # group id) cannot be recycled before the stragglers of its group are killed.
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
            ready, _, _ = select.select([self._wake_r], [], [], timeout)
            if ready:
                with contextlib.suppress(OSError):
                    os.read(self._wake_r, 64)
            return False

        reason = self._enforce(exited, t0, memory_polled=True)
        # Kill the tree on a limit, or the stragglers (background children) of a finished
        # tool, while the root (alive or a zombie) still holds the group id; then reap.
        self._kill_tree()
        status, rusage = self._reap(pid)
        wall = time.monotonic() - t0
        proc.returncode = -1  # reaped by us; keep Popen from trying again
        _LIVE.discard(self)
        for p in pumps:
            p.join(timeout=5.0)
        rusage_cpu = (rusage.ru_utime + rusage.ru_stime) if rusage else 0.0
        rusage_mb = (rusage.ru_maxrss / 1024.0) if rusage else 0.0
        return self._execution(reason, status, rusage_cpu, rusage_mb, wall, pumps,
                               "process-group", "polling")

    # -- shared -----------------------------------------------------------------
    def _enforce(self, exited: Callable[[float], bool], t0: float, *,
                 memory_polled: bool) -> str | None:
        """Poll until the tool exits (None) or a limit is hit (its reason)."""
        cpu_limit = self.limits.cpu_cap
        interval = _POLL_FIRST_S
        if exited(0.0):
            return None
        while True:
            elapsed = time.monotonic() - t0
            rss, cpu, nprocs = self._measure()
            self._peak_rss = max(self._peak_rss, rss)
            self._peak_procs = max(self._peak_procs, nprocs)
            if self._cancel.is_set():
                return "cancelled"
            if elapsed >= self.limits.wall_s:
                return "walltime"
            if cpu >= cpu_limit:
                return "cputime"
            if memory_polled and rss > self.limits.memory_mb * 2**20:
                return "memory"
            if self.kill_on_output_cap and self._overflow.is_set():
                return "output"
            if self.max_processes is not None and nprocs > self.max_processes:
                return "processes"
            if exited(min(interval, max(0.0, self.limits.wall_s - elapsed))):
                return None
            interval = min(interval * 2, _POLL_MAX_S)

    def _execution(self, reason: str | None, status: int | None, rusage_cpu: float,
                   rusage_mb: float, wall: float, pumps: list[_Pump], containment: str,
                   memory_by: str) -> Execution:
        cpu_limit = self.limits.cpu_cap
        cpu_s = max(rusage_cpu, sum(self._cpu_seen.values()))
        returncode: int | None = None
        sig: int | None = None
        error = None
        if status is None:
            error = f"exit status of pid {self._root} unavailable (not reaped within {_REAP_TIMEOUT_S}s)"
            reason = reason or "error"
        elif os.WIFEXITED(status):
            returncode = os.WEXITSTATUS(status)
        elif os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
        if reason is None:
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_s >= cpu_limit):
                reason = "cputime"
            elif sig is not None:
                reason = "signal"
            else:
                reason = "exit"
        return Execution(
            argv=self.argv,
            returncode=returncode,
            signal=sig,
            termination_reason=reason,
            wall_s=wall,
            cpu_s=cpu_s,
            peak_mem_mb=max(self._peak_rss / 2**20, rusage_mb),
            output_path=self.output_path,
            # a pump still reading after its join timeout has not seen the end either
            output_truncated=any(p.truncated or p.is_alive() for p in pumps if p.counted),
            stderr_path=self.stderr_path,
            error=error,
            containment=containment,
            memory_limit_by=memory_by,
            peak_processes=self._peak_procs,
        )

    def _measure(self) -> tuple[int, float, int]:
        """Summed RSS (bytes, plus `extra_memory`) and CPU seconds of every live process."""
        self._track(fresh=False)
        rss = 0
        live = 0
        pids: list[int] = []
        for pid, p in list(self._seen.items()):
            try:
                with p.oneshot():
                    # a zombie's CPU time counts too: children shorter than a poll are
                    # often seen only as zombies; the reaped ones reach the root's rusage
                    t = p.cpu_times()
                    self._cpu_seen[pid] = t.user + t.system
                    if p.status() == psutil.STATUS_ZOMBIE:
                        continue
                    rss += p.memory_info().rss
                    live += 1
                    pids.append(pid)
            except psutil.NoSuchProcess:
                if pid != self._root:
                    del self._seen[pid]  # gone for good; its last CPU reading is kept
            except psutil.Error:
                continue
        if self.extra_memory is not None and pids:
            with contextlib.suppress(OSError):
                rss += self.extra_memory(pids)
        return rss, sum(self._cpu_seen.values()), live

    def _track(self, fresh: bool) -> None:
        """Remember every current descendant (psutil.Process pins its identity)."""
        if self._tree < 0:
            return
        for pid in PROCESS_TABLE.descendants(self._tree, fresh=fresh):
            if pid not in self._seen:
                with contextlib.suppress(psutil.Error):
                    self._seen[pid] = psutil.Process(pid)

    def _kill_tree(self) -> None:
        if self._root < 0:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._root, signal.SIGKILL)
        self._track(fresh=True)
        for p in list(self._seen.values()):
            with contextlib.suppress(psutil.Error):
                p.kill()  # psutil checks create_time, so a recycled pid is never hit

    def _reap(self, pid: int) -> tuple[int | None, resource.struct_rusage | None]:
        """Exit status and rusage of the (killed or exited) root; None if it cannot be had."""
        deadline = time.monotonic() + _REAP_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                done, status, rusage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): status unknown
                return None, None
            if done:
                return status, rusage
            time.sleep(0.002)
        return None, None


def execute(argv: Sequence[str], limits: Limits, output_path: Path, **kwargs: Any) -> Execution:
    """Run `argv` to completion under `limits` (blocking).  See `LimitedProcess` for options."""
    return LimitedProcess(argv, limits, output_path, **kwargs).start().wait()  # type: ignore[return-value]
