"""Per-query cgroups (v2) where this process may create them: the kernel's own process tracking.

A cgroup is the one container a process cannot leave by forking, double-forking or
calling ``setsid``; ``cgroup.kill`` (Linux 5.14) SIGKILLs every member at once.  We
use them only where they are ours to use, and never require them:

- the cgroup2 hierarchy is found in ``/proc/self/mountinfo`` (a hybrid v1/v2 host
  such as a Debian 12 node with cgroups v1 still mounts it at
  ``/sys/fs/cgroup/unified``);
- our own cgroup is the ``0::PATH`` line of ``/proc/self/cgroup``; it is usable
  when we can create a child directory there — root, or a user whose cgroup was
  delegated (``systemd-run --user --scope -p Delegate=yes``, a delegating batch
  system);
- no controller is enabled by us (that would force the "no internal processes"
  rule on the caller's own cgroup): kill and membership work without one.  A
  memory limit (``memory.max``) and a process cap (``pids.max``) are set only when
  the parent already hands those controllers down; otherwise memory stays with
  the runner's polling, and the result says which one enforced it.

``VERIBATCH_CGROUP=off`` disables all of it (the runner then relies on the child
subreaper alone, see `verifiers.forkserver`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import time
from pathlib import Path

import psutil

ENV = "VERIBATCH_CGROUP"
PREFIX = "veribatch-"


def _cgroup2_mount() -> Path | None:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, sep, right = line.partition(" - ")
        if sep and right.split()[0] == "cgroup2":
            return Path(left.split()[4])
    return None


def own_cgroup() -> Path | None:
    """The directory of this process's cgroup in the v2 hierarchy (None when there is none)."""
    mount = _cgroup2_mount()
    if mount is None:
        return None
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                d = mount / line[3:].strip().lstrip("/")
                return d if d.is_dir() else None
    except OSError:
        return None
    return None


def kill(cg: Path, timeout_s: float = 5.0) -> bool:
    """SIGKILL every process in `cg` and its children; True once the cgroup is empty."""
    with contextlib.suppress(OSError):
        (cg / "cgroup.kill").write_text("1")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not populated(cg):
            return True
        time.sleep(0.002)
    return not populated(cg)


def populated(cg: Path) -> bool:
    try:
        for line in (cg / "cgroup.events").read_text().splitlines():
            if line.startswith("populated "):
                return line.split()[1] != "0"
    except OSError:
        return False
    return False


def remove(cg: Path) -> None:
    """Remove `cg` and its sub-cgroups (deepest first); members are killed first."""
    if not cg.is_dir():
        return
    for sub in sorted((p for p in cg.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        kill(sub, 1.0)
        with contextlib.suppress(OSError):
            sub.rmdir()
    kill(cg, 1.0)
    with contextlib.suppress(OSError):
        cg.rmdir()


def oom_killed(cg: Path) -> bool:
    try:
        for line in (cg / "memory.events").read_text().splitlines():
            if line.startswith("oom_kill "):
                return line.split()[1] != "0"
    except OSError:
        pass
    return False


def make_base() -> Path | None:
    """A cgroup of our own for the queries of this process, or None where we may not have one.

    Stale ``veribatch-PID`` siblings whose owner is dead (a forkserver SIGKILLed together
    with everything else) are emptied and removed on the way: nothing they held survives.
    """
    if os.environ.get(ENV, "").lower() in ("off", "0", "no", "false"):
        return None
    own = own_cgroup()
    if own is None:
        return None
    base = own / f"{PREFIX}{os.getpid()}"
    try:
        base.mkdir()
    except FileExistsError:
        pass
    except OSError:
        return None
    if not (base / "cgroup.kill").exists():  # kernel < 5.14: no atomic kill, not worth it
        with contextlib.suppress(OSError):
            base.rmdir()
        return None
    with contextlib.suppress(OSError):
        for stale in own.iterdir():
            name = stale.name
            owner = name[len(PREFIX):]
            if stale.is_dir() and name.startswith(PREFIX) and owner.isdigit() \
                    and not psutil.pid_exists(int(owner)):
                remove(stale)
    return base


def make_query(base: Path, name: str) -> Path | None:
    """A cgroup for one query below `base`; None when it cannot be made."""
    cg = base / name
    try:
        cg.mkdir()
    except FileExistsError:
        remove(cg)  # a leftover of a dead process whose pid we now have
        try:
            cg.mkdir()
        except OSError:
            return None
    except OSError:
        return None
    return cg


def limit(cg: Path, memory_mb: int | None, max_processes: int | None) -> bool:
    """Set the limits the controllers handed down allow; True when memory is enforced here."""
    memory = False
    if memory_mb is not None and (cg / "memory.max").exists():
        try:
            (cg / "memory.max").write_text(str(memory_mb * 2**20))
            with contextlib.suppress(OSError):
                (cg / "memory.swap.max").write_text("0")
            with contextlib.suppress(OSError):
                (cg / "memory.oom.group").write_text("1")
            memory = True
        except OSError:
            memory = False
    if max_processes is not None and (cg / "pids.max").exists():
        with contextlib.suppress(OSError):
            (cg / "pids.max").write_text(str(max_processes))
    return memory


def enter(cg: Path) -> None:
    """Move the calling process into `cg` (raises OSError when not allowed)."""
    with open(cg / "cgroup.procs", "w") as f:
        f.write("0")


# -- cgroup v1 memory controller (hosts that still mount cgroups v1, e.g. Debian 12 nodes) ----
#
# The v2 path above limits memory only where a delegated parent hands the controller down.
# On a v1 host the memory controller is its own hierarchy; where this process may create a
# child there (root; a batch system that delegates it), a query's ``memory.limit_in_bytes``
# charges everything the query's processes bring into memory: anonymous pages, page cache,
# tmpfs and /dev/shm files, memfd pages — not only the resident set the runner can poll.
# A normal user on a cluster may not create one (the hierarchy belongs to root or to the
# batch system's own job cgroup): then `memory_v1_base` is None and memory stays polled.

V1_NAME = "veribatch-judge-"


def _v1_memory_dir() -> Path | None:
    """This process's directory in a mounted cgroup-v1 memory hierarchy (None: none)."""
    return _v1_dir("memory", "memory.limit_in_bytes")


def _v1_dir(controller: str, marker: str) -> Path | None:
    """This process's directory in the mounted cgroup-v1 hierarchy of `controller`."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        own = next((ln.split(":", 2)[2] for ln in Path("/proc/self/cgroup").read_text().splitlines()
                    if controller in ln.split(":", 2)[1].split(",")), None)
    except (OSError, IndexError):
        return None
    if own is None:
        return None
    for line in mounts:
        left, sep, right = line.partition(" - ")
        fields = right.split()
        if sep and len(fields) >= 3 and fields[0] == "cgroup" and controller in fields[2].split(","):
            root, point = left.split()[3], Path(left.split()[4])
            rel = own.strip()
            if root != "/" and rel.startswith(root):
                rel = rel[len(root):]
            d = point / rel.lstrip("/")
            if (d / marker).exists() or (rel.strip("/") == "" and (d / "cgroup.procs").exists()):
                return d
            return None
    return None


_V1_BASE: dict[tuple[int, str], Path | None] = {}


def memory_v1_base() -> Path | None:
    """A cgroup-v1 memory directory of this process for its queries, or None where there is
    none or it is not ours to create (stale ones of dead processes are removed on the way)."""
    return _v1_base("memory", "memory.limit_in_bytes")


def pids_v1_base() -> Path | None:
    """The same in the cgroup-v1 pids hierarchy: a box's process count seen by the kernel
    (``pids.peak``, ``pids.events``), which polling cannot see when memory runs out first."""
    return _v1_base("pids", "pids.max")


def _v1_base(controller: str, marker: str) -> Path | None:
    pid = os.getpid()
    if (pid, controller) in _V1_BASE:
        return _V1_BASE[pid, controller]
    base: Path | None = None
    if os.environ.get(ENV, "").lower() not in ("off", "0", "no", "false"):
        own = _v1_dir(controller, marker)
        if own is not None:
            base = own / f"{V1_NAME}{pid}"
            try:
                base.mkdir(exist_ok=True)
            except OSError:
                base = None
            if base is not None:
                with contextlib.suppress(OSError):
                    for stale in own.iterdir():
                        owner = stale.name[len(V1_NAME):]
                        if stale.name.startswith(V1_NAME) and owner.isdigit() \
                                and not psutil.pid_exists(int(owner)):
                            remove_v1(stale)
    _V1_BASE[pid, controller] = base
    if base is not None:
        atexit.register(_remove_own_v1, pid, base)
    return base


def _remove_own_v1(pid: int, base: Path) -> None:
    if os.getpid() == pid:  # not in a forked child that inherited the hook
        remove_v1(base, 0.5)


def memory_v1_query(base: Path, name: str, memory_mb: int) -> Path | None:
    """A child of `base` limited to `memory_mb` (memory and swap together); None on failure."""
    cg = base / name
    try:
        cg.mkdir()
        (cg / "memory.limit_in_bytes").write_text(str(memory_mb * 2**20))
        with contextlib.suppress(OSError):  # no swap accounting: swap use stays possible
            (cg / "memory.memsw.limit_in_bytes").write_text(str(memory_mb * 2**20))
        with contextlib.suppress(OSError):
            (cg / "memory.swappiness").write_text("0")
    except OSError:
        remove_v1(cg)
        return None
    return cg


def pids_v1_query(base: Path, name: str, max_processes: int) -> Path | None:
    """A child of `base` allowing at most `max_processes` tasks; None on failure."""
    cg = base / name
    try:
        cg.mkdir()
        (cg / "pids.max").write_text(str(max_processes))
    except OSError:
        remove_v1(cg)
        return None
    return cg


def pids_v1_outcome(cg: Path) -> tuple[int, int]:
    """(most tasks alive at once, forks the kernel refused at ``pids.max``)."""
    peak = refused = 0
    with contextlib.suppress(OSError, ValueError):
        peak = int((cg / "pids.peak").read_text())
    with contextlib.suppress(OSError, ValueError):
        for line in (cg / "pids.events").read_text().splitlines():
            if line.startswith("max "):
                refused = int(line.split()[1])
    return peak, refused


def cpu_seconds(cg: Path) -> float:
    """CPU seconds of every task that ever ran in the v2 cgroup `cg` (``cpu.stat``'s
    ``usage_usec``, present whether or not the cpu controller is enabled); 0.0 unreadable."""
    with contextlib.suppress(OSError, ValueError):
        for line in (cg / "cpu.stat").read_text().splitlines():
            if line.startswith("usage_usec "):
                return int(line.split()[1]) / 1e6
    return 0.0


def cpuacct_v1_base() -> Path | None:
    """The same in the cgroup-v1 cpuacct hierarchy: the CPU time of every task that ever
    ran in a query, also of children too short-lived for any poll to see."""
    return _v1_base("cpuacct", "cpuacct.usage")


def cpuacct_v1_query(base: Path, name: str) -> Path | None:
    """A child of `base` counting its tasks' CPU time; None on failure."""
    cg = base / name
    try:
        cg.mkdir()
    except OSError:
        return None
    return cg


def cpuacct_v1_seconds(cg: Path) -> float:
    """CPU seconds (user and system) of every task that ran in `cg`; 0.0 when unreadable."""
    with contextlib.suppress(OSError, ValueError):
        return int((cg / "cpuacct.usage").read_text()) / 1e9
    return 0.0


def memory_v1_outcome(cg: Path) -> tuple[float, bool]:
    """(peak usage in MB, True when the kernel OOM-killed a process of the query)."""
    peak = 0.0
    with contextlib.suppress(OSError, ValueError):
        peak = int((cg / "memory.max_usage_in_bytes").read_text()) / 2**20
    oom = False
    with contextlib.suppress(OSError, ValueError):
        for line in (cg / "memory.oom_control").read_text().splitlines():
            if line.startswith("oom_kill "):
                oom = int(line.split()[1]) > 0
    return peak, oom


def remove_v1(cg: Path, timeout_s: float = 2.0) -> None:
    """Remove a v1 cgroup (children first); its processes are already dead or dying."""
    if not cg.is_dir():
        return
    for sub in sorted((p for p in cg.iterdir() if p.is_dir()), key=lambda p: p.name):
        remove_v1(sub, timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            cg.rmdir()
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.01)
