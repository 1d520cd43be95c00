"""Faults of the multi-node CI cluster itself, shared by bench/drill.py and the tests.

Each injector has its undo, and every undo is safe to call twice: a drill or a test
calls them in a ``finally`` (or uses `Faults` as a context manager, whose exit undoes
whatever is still injected), so no fault outlives the code that made it — other tests
run on the same cluster.

- node kill: every process in the node's namespace SIGKILLed (slurmd and its jobs), the
  node set DOWN — `kill_node` / `restore_node` (slurmd started again, node RESUMEd);
- node drain: ``scontrol update state=drain`` — `drain_node` / `resume_node`;
- slurmctld and slurmdbd stopped (SIGTERM, as an admin would) and started again on the
  state they saved — `stop_daemon` / `start_daemon` (.ci/cluster.sh stop-/start-daemon);
- a full disk under the run folder: `RunFolderDisk`, a small ext4 file system on a loop
  device mounted at the runs directory in the login namespace *and* in every node's
  mount namespace (the nodes' slurmd run in private mount namespaces, so a mount made
  after they started is invisible to them; the same block device mounted twice is one
  file system).  `fill` leaves a few bytes free, `free` gives the space back;
- two `launch resume` of one run started at once — `concurrent_resumes`.

Needs root (mount, losetup, nsenter) and the cluster of `.ci/cluster.sh start-multi`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SH = REPO / ".ci" / "cluster.sh"
MULTI_DIR = Path(os.environ.get("VERIBATCH_SLURM_MULTI_DIR", "/tmp/veribatch-slurm-multi"))
NODES = ("vbm-cpu1", "vbm-cpu2", "vbm-gpu1", "vbm-gpu2")
IN_SERVICE = ("idle", "mix", "alloc", "comp")


def multi_env() -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(MULTI_DIR / "etc" / "slurm.conf")}


def slurm(*argv: str, check: bool = True, timeout: float = 60) -> str:
    return subprocess.run(list(argv), env=multi_env(), capture_output=True, text=True,
                          check=check, timeout=timeout).stdout


def cluster_sh(*argv: str, timeout: float = 120) -> None:
    """A daemon started again runs at the priority it had, not at a `nice` drill's."""
    subprocess.run(["nice", "-n", str(-os.nice(0)), "bash", str(CLUSTER_SH), *argv],
                   env=multi_env(), check=True, timeout=timeout, capture_output=True, text=True)


def wait_until(predicate, timeout: float, what: str, interval: float = 0.5):  # noqa: ANN001
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with contextlib.suppress(subprocess.SubprocessError, OSError, IndexError):
            value = predicate()
            if value:
                return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def node_state(node: str) -> str:
    return slurm("sinfo", "-h", "-N", "-n", node, "-o", "%t", timeout=20).split()[0]


def slurmd_pid(node: str) -> int | None:
    try:
        pid = int((MULTI_DIR / "run" / f"slurmd-{node}.pid").read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


# -- nodes -------------------------------------------------------------------------------
def kill_node(node: str, reason: str = "lost-by-drill") -> None:
    cluster_sh("kill-node", node)
    slurm("scontrol", "update", f"NodeName={node}", "State=DOWN", f"Reason={reason}")


def restore_node(node: str, on_started: Callable[[], None] | None = None) -> None:
    """slurmd running again in its namespace, the node back in service.  `on_started` runs
    as soon as the new slurmd exists, before it can take a job (with ReturnToService=2 a
    DOWN node takes jobs again once its slurmd registers): e.g. a mount its jobs need."""
    cluster_sh("start-node", node)
    if on_started is not None:
        wait_until(lambda: slurmd_pid(node), 30, f"{node}'s new slurmd", interval=0.05)
        on_started()
    wait_until(lambda: slurmd_pid(node) and not node_state(node).endswith("*"), 90,
               f"{node}'s slurmd to answer")
    slurm("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
    wait_until(lambda: node_state(node).rstrip("*~#") in IN_SERVICE, 90, f"{node} in service")


def drain_node(node: str, reason: str = "drained-by-drill") -> None:
    slurm("scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}")


def resume_node(node: str) -> None:
    if node_state(node).startswith(("drain", "drng", "drai")):
        slurm("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
    wait_until(lambda: node_state(node).rstrip("*~#") in IN_SERVICE, 90, f"{node} in service")


# -- daemons -----------------------------------------------------------------------------
def stop_daemon(name: str) -> None:
    cluster_sh("stop-daemon", name)


def start_daemon(name: str) -> None:
    cluster_sh("start-daemon", name)
    if name == "slurmctld":  # every node registered again before anything else is judged
        wait_until(lambda: all(not node_state(n).endswith("*") for n in NODES), 120,
                   "every slurmd to re-register with slurmctld")


def daemon_up(name: str) -> bool:
    try:
        pid = int((MULTI_DIR / "run" / f"{name}.pid").read_text().strip())
        os.kill(pid, 0)
        return True
    except (OSError, ValueError):
        return False


# -- a full disk under the run folder ------------------------------------------------------
@dataclass
class RunFolderDisk:
    """`size_mb` of ext4 (no blocks reserved for root) mounted at `path` for the login
    namespace and every node; `path` must be empty or absent."""

    path: Path
    size_mb: int
    image: Path
    device: str = ""
    node_mounts: dict[str, int] = field(default_factory=dict)  # node → slurmd pid it was mounted for
    fillers: list[Path] = field(default_factory=list)
    nodes: bool = True   # also mount it for the multi-node cluster's nodes

    def __enter__(self) -> RunFolderDisk:
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["truncate", "-s", f"{self.size_mb}M", str(self.image)], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(self.image)], check=True)
        self.device = subprocess.run(["losetup", "-f", "--show", str(self.image)], check=True,
                                     capture_output=True, text=True).stdout.strip()
        subprocess.run(["mount", self.device, str(self.path)], check=True)
        self.mount_nodes()
        return self

    def mount_nodes(self) -> None:
        """Mount in each node's namespace (again after a node was restarted: a new slurmd
        is a new mount namespace)."""
        for node in NODES if self.nodes else ():
            pid = slurmd_pid(node)
            if pid is None or self.node_mounts.get(node) == pid:
                continue
            self.node_mounts[node] = pid
            if self._mounted_in(pid):
                continue  # a slurmd started while it was mounted here copied the mount
            subprocess.run(["nsenter", "-t", str(pid), "-m", "sh", "-c",
                            f"mkdir -p '{self.path}' && mount {self.device} '{self.path}'"],
                           check=True, capture_output=True, text=True)

    def _mounted_in(self, pid: int) -> bool:
        try:
            lines = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
        except OSError:
            return False
        return any(line.split()[4] == str(self.path) for line in lines if len(line.split()) > 4)

    def fill(self, leave_bytes: int = 2048) -> None:
        """Leave `leave_bytes` free: the next ledger lines, parquet files and JSON fail ENOSPC.
        Called again, it fills what was freed since (a new filler file each time)."""
        st = os.statvfs(self.path)
        free = st.f_bavail * st.f_frsize
        self.fillers.append(self.path / f".drill-filler-{len(self.fillers)}")
        with open(self.fillers[-1], "wb") as f, contextlib.suppress(OSError):
            os.posix_fallocate(f.fileno(), 0, max(0, free - leave_bytes))

    def free(self) -> None:
        for p in self.fillers:
            p.unlink(missing_ok=True)
        self.fillers = []

    def __exit__(self, *exc: object) -> None:
        self.free()
        for pid in self.node_mounts.values():
            with contextlib.suppress(OSError):
                os.kill(pid, 0)
                subprocess.run(["nsenter", "-t", str(pid), "-m", "umount", "-l", str(self.path)],
                               capture_output=True)
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
        if self.device:
            subprocess.run(["losetup", "-d", self.device], capture_output=True)
        self.image.unlink(missing_ok=True)


# -- concurrent resumes ------------------------------------------------------------------
def concurrent_resumes(run_dir: Path, env: dict[str, str] | None = None,
                       timeout: float = 600) -> list[subprocess.CompletedProcess[str]]:
    """Two `launch resume RUN` started at the same moment (two login shells)."""
    full = {**multi_env(), "COLUMNS": "200", **(env or {})}
    cmd = [sys.executable, "-m", "veribatch", "resume", str(run_dir), "-q"]
    procs = [subprocess.Popen(cmd, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    out = []
    for p in procs:
        so, se = p.communicate(timeout=timeout)
        out.append(subprocess.CompletedProcess(cmd, p.returncode, so, se))
    return out


# -- everything undone on exit -----------------------------------------------------------
class Faults:
    """Injected faults, each with its undo; leaving the block undoes what is still injected
    (nodes restored and resumed, daemons started), in the reverse order."""

    def __init__(self) -> None:
        self.undo: list[tuple[str, object]] = []
        self.log: list[tuple[float, str]] = []
        self.t0 = time.monotonic()

    def note(self, what: str) -> None:
        self.log.append((round(time.monotonic() - self.t0, 1), what))
        print(f"[drill +{time.monotonic() - self.t0:6.1f}s] {what}", flush=True)

    def kill_node(self, node: str, on_started: Callable[[], None] | None = None) -> None:
        kill_node(node)
        self.undo.append((f"restore {node}", lambda: restore_node(node, on_started)))
        self.note(f"node {node} killed")

    def drain_node(self, node: str) -> None:
        drain_node(node)
        self.undo.append((f"resume {node}", lambda: resume_node(node)))
        self.note(f"node {node} drained")

    def stop_daemon(self, name: str) -> None:
        stop_daemon(name)
        self.undo.append((f"start {name}", lambda: start_daemon(name)))
        self.note(f"{name} stopped")

    def undo_last(self, prefix: str) -> None:
        for i in range(len(self.undo) - 1, -1, -1):
            what, fn = self.undo[i]
            if what.startswith(prefix):
                del self.undo[i]
                fn()  # type: ignore[operator]
                self.note(what)
                return

    def __enter__(self) -> Faults:
        return self

    def __exit__(self, *exc: object) -> None:
        errors = []
        while self.undo:
            what, fn = self.undo.pop()
            try:
                fn()  # type: ignore[operator]
                self.note(f"{what} (cleanup)")
            except Exception as e:  # noqa: BLE001  (undo the rest whatever one undo did)
                errors.append(f"{what}: {e}")
        if errors:
            raise RuntimeError("could not undo: " + "; ".join(errors))


@contextlib.contextmanager
def cluster_restored() -> Iterator[None]:
    """On the way out, whatever happened: slurmdbd and slurmctld running, every node up."""
    try:
        yield
    finally:
        for d in ("slurmdbd", "slurmctld"):
            if not daemon_up(d):
                start_daemon(d)
        for node in NODES:
            if slurmd_pid(node) is None:
                restore_node(node)
            else:
                with contextlib.suppress(Exception):
                    resume_node(node)
