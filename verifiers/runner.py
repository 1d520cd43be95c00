"""Run one argv under hard limits enforced from outside the process.

A verifier (or an LLM-written program) is never trusted to stop by itself.  This
module is a small cousin of BenchExec's `runexecutor.py` that needs nothing but
the standard library and psutil, so it works on any login or compute node:

- the process starts in its own session (``setsid``), so the whole tree shares
  one process group that can be killed at once;
- RLIMIT_CPU is set in the child as a backstop, and an optional RLIMIT_AS for
  programs that tolerate it (C++/Python under the judge; *not* Java or .NET,
  which reserve far more address space than they use);
- a monitor thread polls the whole process tree with psutil every few tens of
  milliseconds and kills it (``killpg`` plus every descendant it has ever seen,
  so a child that called ``setsid`` itself is not lost) when the wall time, the
  summed CPU time or the summed resident memory passes its limit;
- stdout/stderr go through a pump that writes at most `output_cap` bytes to the
  log and discards the rest, so a flooding tool fills neither disk nor RAM;
- whatever happens, the call returns an `Execution` saying why the process
  ended (`termination_reason`), how long it ran and how much memory it used.
  Leftover members of the process group are killed even after a normal exit;
- when the worker itself goes away, its tools go too: an ``atexit`` hook kills
  every tree still running, and the direct child carries PR_SET_PDEATHSIG so it
  is SIGKILLed even when the worker is (a preempted SLURM task).

Known limit (documented, not hidden): a process that double-forks *and* calls
``setsid`` between two polls escapes tracking; only cgroups (BenchExec's
container mode) close that hole.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import math
import os
import resource
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

from verifiers.proctable import PROCESS_TABLE
from verifiers.result import Limits

OUTPUT_CAP_BYTES = 16 * 2**20
"""Default cap on the bytes of output kept per stream (16 MiB)."""

_POLL_FIRST_S = 0.005
_POLL_MAX_S = 0.05
_REAP_TIMEOUT_S = 10.0

_PR_SET_PDEATHSIG = 1
try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                                            use_errno=True)
except OSError:  # not glibc/Linux: no parent-death signal, atexit still applies
    _LIBC = None
_LIVE: weakref.WeakSet[LimitedProcess] = weakref.WeakSet()




@atexit.register
def _kill_all_live() -> None:
    """Interpreter exit: no tool outlives the worker that started it."""
    for proc in list(_LIVE):
        proc._kill_tree(proc._root)


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

    @property
    def limit_hit(self) -> bool:
        return self.termination_reason in ("walltime", "cputime", "memory", "output", "processes")

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


def _preexec(
    cpu_s: float | None,
    address_space_mb: int | None,
    extra: Mapping[int, tuple[int, int]],
) -> Callable[[], None]:
    """Limits set in the child between fork and exec (only plain setrlimit calls)."""

    def apply() -> None:
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        for which, (soft, hard) in extra.items():
            _setrlimit(which, soft, hard)
        if cpu_s is not None and math.isfinite(cpu_s):  # inf: no CPU-time limit at all
            soft = max(1, math.ceil(cpu_s))
            # SIGXCPU at the soft limit, SIGKILL one second later if it is ignored.
            _setrlimit(resource.RLIMIT_CPU, soft, soft + 1)
        if address_space_mb is not None:
            n = address_space_mb * 2**20
            _setrlimit(resource.RLIMIT_AS, n, n)
        _setrlimit(resource.RLIMIT_CORE, 0, 0)

    return apply


class LimitedProcess:
    """One argv running under `limits`; a monitor thread enforces them.

    `start()` returns at once; `poll()`, `wait()` and `kill()` may be called from
    any thread.  The result is computed exactly once.
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
        address_space: bool = False,
        max_processes: int | None = None,
        rlimits: Mapping[int, tuple[int, int]] | None = None,
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
        self.address_space = address_space
        self.max_processes = max_processes
        self.rlimits = dict(rlimits or {})
        self._cancel = threading.Event()
        self._overflow = threading.Event()
        self._wake = threading.Event()
        self._done = threading.Event()
        self._result: Execution | None = None
        self._thread: threading.Thread | None = None
        self._seen: dict[int, psutil.Process] = {}
        self._cpu_seen: dict[int, float] = {}
        self._root = -1

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
        self._wake.set()

    def kill(self) -> Execution:
        """Kill the whole tree now (termination reason "cancelled" unless it already ended)."""
        self.cancel()
        self._done.wait()
        assert self._result is not None
        return self._result

    # -- monitor ----------------------------------------------------------------
    def _monitor(self) -> None:
        try:
            self._result = self._run()
        except BaseException as e:  # never leave a waiter hanging
            self._result = Execution(
                self.argv, None, None, "error", 0.0, 0.0, 0.0, self.output_path,
                error=f"runner failed: {type(e).__name__}: {e}",
            )
        finally:
            self._done.set()

    def _spawn(self) -> tuple[subprocess.Popen[bytes], list[_Pump]]:
        self.output_path.parent.mkdir(parents=True, exist_ok=True)
        out_r, out_w = os.pipe()
        fds = [out_r, out_w]
        err_r, err_w = out_r, out_w
        if self.stderr_path is not None:
            err_r, err_w = os.pipe()
            fds += [err_r, err_w]
        cpu = self.limits.cpu_s if self.limits.cpu_s is not None else self.limits.wall_s
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
                    preexec_fn=_preexec(
                        cpu + 1.0,  # the poller decides "cputime"; the rlimit is a backstop
                        self.limits.memory_mb if self.address_space else None,
                        self.rlimits,
                    ),
                )
        except BaseException:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            raise
        os.close(out_w)
        pumps = [_Pump(out_r, self.output_path, self.output_cap, self._overflow)]
        if self.stderr_path is not None:
            os.close(err_w)
            pumps.append(_Pump(err_r, self.stderr_path, self.output_cap, self._overflow))
        for p in pumps:
            p.start()
        return proc, pumps

    def _run(self) -> Execution:
        t0 = time.monotonic()
        try:
            proc, pumps = self._spawn()
        except OSError as e:
            return Execution(
                self.argv, None, None, "error", 0.0, 0.0, 0.0, self.output_path,
                stderr_path=self.stderr_path, error=f"cannot start {self.argv[0]}: {e}",
            )
        pid = self._root = proc.pid
        _LIVE.add(self)
        with contextlib.suppress(psutil.Error):
            self._seen[pid] = psutil.Process(pid)
        cpu_limit = self.limits.cpu_s if self.limits.cpu_s is not None else self.limits.wall_s
        peak_rss = 0
        reason: str | None = None
        interval = _POLL_FIRST_S
        while True:
            # WNOWAIT: notice the exit but leave the zombie, so its pid (= the process
            # group id) cannot be recycled before the stragglers of its group are killed.
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                break
            elapsed = time.monotonic() - t0
            rss, cpu, nprocs = self._measure()
            peak_rss = max(peak_rss, rss)
            if self._cancel.is_set():
                reason = "cancelled"
            elif elapsed >= self.limits.wall_s:
                reason = "walltime"
            elif cpu >= cpu_limit:
                reason = "cputime"
            elif rss > self.limits.memory_mb * 2**20:
                reason = "memory"
            elif self.kill_on_output_cap and self._overflow.is_set():
                reason = "output"
            elif self.max_processes is not None and nprocs > self.max_processes:
                reason = "processes"
            if reason:
                break
            self._wake.wait(min(interval, max(0.0, self.limits.wall_s - elapsed)))
            interval = min(interval * 2, _POLL_MAX_S)
        # Kill the tree on a limit, or the stragglers (background children) of a finished
        # tool, while the root (alive or a zombie) still holds the group id; then reap.
        self._kill_tree(pid)
        status, rusage = self._reap(pid)
        wall = time.monotonic() - t0
        proc.returncode = -1  # reaped by us; keep Popen from trying again
        _LIVE.discard(self)
        for p in pumps:
            p.join(timeout=5.0)
        rusage_cpu = (rusage.ru_utime + rusage.ru_stime) if rusage else 0.0
        rusage_mb = (rusage.ru_maxrss / 1024.0) if rusage else 0.0
        cpu_s = max(rusage_cpu, sum(self._cpu_seen.values()))
        returncode: int | None = None
        sig: int | None = None
        error = None
        if status is None:
            error = f"exit status of pid {pid} unavailable (not reaped within {_REAP_TIMEOUT_S}s)"
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
            peak_mem_mb=max(peak_rss / 2**20, rusage_mb),
            output_path=self.output_path,
            output_truncated=any(p.truncated for p in pumps),
            stderr_path=self.stderr_path,
            error=error,
        )

    def _measure(self) -> tuple[int, float, int]:
        """Summed RSS (bytes) and CPU seconds of every live process of the tree."""
        self._track(fresh=False)
        rss = 0
        live = 0
        for pid, p in list(self._seen.items()):
            try:
                with p.oneshot():
                    if p.status() == psutil.STATUS_ZOMBIE:
                        continue
                    rss += p.memory_info().rss
                    t = p.cpu_times()
                    self._cpu_seen[pid] = t.user + t.system
                    live += 1
            except psutil.NoSuchProcess:
                if pid != self._root:
                    del self._seen[pid]  # gone for good; its last CPU reading is kept
            except psutil.Error:
                continue
        return rss, sum(self._cpu_seen.values()), live

    def _track(self, fresh: bool) -> None:
        """Remember every current descendant (psutil.Process pins its identity)."""
        if self._root < 0:
            return
        for pid in PROCESS_TABLE.descendants(self._root, fresh=fresh):
            if pid not in self._seen:
                with contextlib.suppress(psutil.Error):
                    self._seen[pid] = psutil.Process(pid)

    def _kill_tree(self, pid: int) -> None:
        if pid < 0:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
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
