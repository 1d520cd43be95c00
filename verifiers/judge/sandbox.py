"""The sandbox for untrusted (LLM-written) programs: no network, own temp dir, limits, no root.

Built from what a Linux node has, with no daemon and no image:

- `unshare --net` puts the program in a fresh network namespace whose only
  interface (loopback) is down: no connection to anything, not even localhost.
  It needs root or CAP_SYS_ADMIN; otherwise `unshare --net --map-root-user`
  (unprivileged user namespaces) is tried; if neither works the sandbox says so
  (`network_isolated=False`) and every `ProgramRun` records it, instead of
  pretending;
- when started as root, `setpriv` drops to uid/gid 65534 (nobody) with no
  supplementary groups and no-new-privs, so the program can read only
  world-readable files and write only its own temp dir, and RLIMIT_NPROC bounds
  a fork bomb;
- the program runs in a fresh temp dir (its cwd, $HOME and $TMPDIR) holding only a
  copy of the program, with a minimal environment; the dir is removed afterwards;
- `verifiers.runner.LimitedProcess` enforces CPU/wall time, RLIMIT_AS memory
  (plus resident-memory polling), RLIMIT_FSIZE for files it writes, an output
  cap, a live-process cap, and kills the whole process tree at the end.

Not covered: the file system is not hidden (no mount namespace); under apptainer
(`judge.def`) the image supplies that.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from verifiers.result import Limits
from verifiers.runner import Execution, LimitedProcess

NOBODY = 65534
MAX_PROCESSES = 64
"""Live processes one sandboxed run may have (polled); RLIMIT_NPROC for uid nobody is 8x that."""
FILE_SIZE_MB = 64
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class Sandbox:
    prefix: tuple[str, ...]  # argv put before the program's argv
    network_isolated: bool
    uid: int | None  # the uid the program runs as, when we switch it
    notes: tuple[str, ...] = ()


def _works(argv: Sequence[str]) -> bool:
    try:
        return subprocess.run(list(argv), capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@functools.cache
def detect_sandbox() -> Sandbox:
    """Probe once per process which isolation this node allows (see the module docstring)."""
    prefix: list[str] = []
    notes: list[str] = []
    isolated = False
    uid: int | None = None
    unshare = shutil.which("unshare", path=SAFE_PATH)
    as_root = os.geteuid() == 0
    if unshare and _works([unshare, "--net", "--", "true"]):
        prefix += [unshare, "--net", "--"]
        isolated = True
    elif unshare and _works([unshare, "--net", "--map-root-user", "--", "true"]):
        prefix += [unshare, "--net", "--map-root-user", "--"]
        isolated = True
        as_root = False  # root only inside the user namespace; nothing to drop
    else:
        notes.append("no network namespace available (unshare --net failed): network NOT isolated")
    setpriv = shutil.which("setpriv", path=SAFE_PATH)
    if as_root and setpriv:
        prefix += [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                   "--no-new-privs", "--"]
        uid = NOBODY
    elif as_root:
        notes.append("running as root and setpriv is missing: program runs as root")
    return Sandbox(tuple(prefix), isolated, uid, tuple(notes))


def run_sandboxed(
    argv: Sequence[str],
    files: Mapping[str, Path],
    limits: Limits,
    *,
    stdin_path: Path | None,
    stdout_path: Path,
    stderr_path: Path,
    output_cap: int,
    sandbox: Sandbox | None = None,
    max_processes: int = MAX_PROCESSES,
) -> Execution:
    """Run `argv` (relative to the box) with `files` copied into a fresh box directory."""
    box = sandbox or detect_sandbox()
    root = Path(tempfile.mkdtemp(prefix="veribatch-box-"))
    try:
        for name, src in files.items():
            dst = root / name
            shutil.copyfile(src, dst)
            dst.chmod(0o755)
        if box.uid is not None:
            os.chown(root, box.uid, box.uid)
        root.chmod(0o755 if box.uid is None else 0o700)
        env = {"PATH": SAFE_PATH, "HOME": str(root), "TMPDIR": str(root), "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}
        mem = limits.memory_mb * 2**20
        rlimits = {
            resource.RLIMIT_STACK: (mem, mem),  # deep recursion is normal in contest code
            resource.RLIMIT_FSIZE: (FILE_SIZE_MB * 2**20, FILE_SIZE_MB * 2**20),
        }
        if box.uid is not None:
            rlimits[resource.RLIMIT_NPROC] = (8 * max_processes, 8 * max_processes)
        return LimitedProcess(
            [*box.prefix, *argv],
            limits,
            stdout_path,
            cwd=root,
            env=env,
            stdin_path=stdin_path,
            stderr_path=stderr_path,
            output_cap=output_cap,
            kill_on_output_cap=True,
            address_space=True,
            max_processes=max_processes,
            rlimits=rlimits,
        ).start().wait()  # type: ignore[return-value]
    finally:
        shutil.rmtree(root, ignore_errors=True)
