"""The locks that keep one run from being worked on twice: run, shard and jobs.json locks.

All are `flock`s on small files in the run directory, so they die with their holder
(even on kill -9 or node loss) and need no cleanup:

- `launch.lock` (run lock): held while a process plans, submits or — local executor —
  runs the run.  Two `launch`/`launch resume` of one run at once would otherwise both
  see the same shards as missing and submit them twice.  The holder writes who it is
  into the file, so the other can say whom it waited for.
- `shards/<stage>/<k>/lock` (shard lock): held while a process runs the shard.
- `jobs.json.lock`: held for each read-modify-write of jobs.json.

A file system where `flock` fails, or silently grants two exclusive locks (some
network file systems), cannot keep those promises.  `check_locking` finds out at plan
time, before anything is written, and launch refuses such a runs directory unless the
user accepts the risk with VERIBATCH_ALLOW_NO_LOCKS=1.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger("launch.locks")

ALLOW_NO_LOCKS_ENV = "VERIBATCH_ALLOW_NO_LOCKS"
RUN_LOCK = "launch.lock"
RUNNING_LOCALLY = "running locally"


class LockUnsupportedError(OSError):
    """flock does not work on this file system (and the user did not opt out)."""


class RunBusyError(RuntimeError):
    """Another process plans, submits or runs this run right now."""

    def __init__(self, message: str, holder: dict[str, Any]) -> None:
        super().__init__(message)
        self.holder = holder


def locks_optional() -> bool:
    return os.environ.get(ALLOW_NO_LOCKS_ENV, "").strip().lower() in {"1", "true", "yes"}


def _unsupported(path: Path | str, e: OSError) -> LockUnsupportedError:
    return LockUnsupportedError(
        e.errno or errno.ENOLCK,
        f"cannot lock {path} ({e.strerror or e}): this file system has no working locks, so "
        f"two processes could run the same shard; use another --runs-dir, or set "
        f"{ALLOW_NO_LOCKS_ENV}=1 to run without that guard")


def try_lock(fd: int, path: Path | str, *, shared: bool = False) -> bool:
    """Non-blocking flock: True when taken, False when another holder has it.

    Raises LockUnsupportedError where the file system cannot lock, unless the user opted out
    (then it returns True: unguarded, as asked)."""
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError as e:
        if locks_optional():
            log.warning("cannot lock %s (%s); running without the guard (%s=1)", path, e,
                        ALLOW_NO_LOCKS_ENV)
            return True
        raise _unsupported(path, e) from None


def check_locking(directory: Path) -> str | None:
    """None when flock excludes a second holder in `directory`, else what is wrong.

    Two opens of one probe file are two holders to flock, even in one process."""
    directory.mkdir(parents=True, exist_ok=True)
    probe = directory / f".lockprobe-{socket.gethostname()}-{os.getpid()}"
    fd1 = os.open(probe, os.O_RDWR | os.O_CREAT, 0o666)
    fd2 = os.open(probe, os.O_RDWR)
    try:
        try:
            fcntl.flock(fd1, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            return f"flock fails in {directory} ({e.strerror or e})"
        try:
            fcntl.flock(fd2, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        except OSError as e:
            return f"flock fails in {directory} ({e.strerror or e})"
        return f"flock in {directory} grants two exclusive locks at once (locks are not enforced)"
    finally:
        os.close(fd2)
        os.close(fd1)
        probe.unlink(missing_ok=True)


def require_locking(directory: Path) -> None:
    """Refuse a runs directory without working locks, unless the user opted out."""
    problem = check_locking(directory)
    if problem and not locks_optional():
        raise LockUnsupportedError(
            errno.ENOLCK, f"{problem}: two launches or two copies of a shard could then run "
            f"at once; use another --runs-dir, or set {ALLOW_NO_LOCKS_ENV}=1 to accept that")
    if problem:
        log.warning("%s; continuing without the guard (%s=1)", problem, ALLOW_NO_LOCKS_ENV)


def is_locked(path: Path | str) -> bool:
    """True while some process holds the lock (the flock dies with its holder, even on kill -9)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:  # no locks on this file system: SLURM's view decides
        return False
    finally:
        os.close(fd)


def read_holder(path: Path) -> dict[str, Any]:
    """Who holds (or last held) a run lock, as its holder wrote it; {} when unknown."""
    try:
        data = json.loads(path.read_text() or "{}")
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def describe_holder(holder: dict[str, Any]) -> str:
    if not holder:
        return "another process"
    return (f"pid {holder.get('pid')} on {holder.get('host')} ({holder.get('phase')}"
            f" since {holder.get('since')}: {holder.get('command')})")


class RunLock:
    """The run lock while held: `phase(...)` tells waiting processes what the holder does."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd, self.path = fd, path

    def phase(self, phase: str) -> None:
        info = {"pid": os.getpid(), "host": socket.gethostname(), "phase": phase,
                "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "command": " ".join(["launch", *sys.argv[1:]])[:300]}
        data = (json.dumps(info) + "\n").encode()
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, data, 0)


@contextlib.contextmanager
def run_lock(root: Path, phase: str, *, wait_s: float = 300.0) -> Iterator[RunLock]:
    """Hold the run lock of `root` (created if need be).

    A holder that is planning or submitting is waited for (up to `wait_s`): it finishes in
    seconds, and what it submitted is then seen as queued.  A holder running the run with
    the local executor is not: that may take hours, so RunBusyError comes at once."""
    path = root / RUN_LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = time.monotonic() + wait_s
        while not try_lock(fd, path):
            holder = read_holder(path)
            if holder.get("phase") == RUNNING_LOCALLY or time.monotonic() > deadline:
                raise RunBusyError(f"run {root} is busy: {describe_holder(holder)}; "
                                   f"follow it with: launch status {root}", holder)
            time.sleep(0.2)
        lock = RunLock(fd, path)
        lock.phase(phase)
        try:
            yield lock
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """A blocking exclusive lock for a short read-modify-write (jobs.json)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as e:
            if not locks_optional():
                raise _unsupported(path, e) from None
        yield
    finally:
        os.close(fd)
