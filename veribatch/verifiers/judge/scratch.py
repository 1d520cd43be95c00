"""The judge's temporary folders live below one parent per process, removed even after SIGKILL.

Every box (``veribatch-box-*``), judged run (``veribatch-judge-*``) and compiler output
folder (``veribatch-out-*``) is made inside ``$TMPDIR/veribatch-scratch-PID-XXXX``.  The
folders are removed as usual when a call ends; what a killed process cannot remove is
handled twice over:

- a *janitor* (``sh``, started once per process in its own session) waits for EOF on a
  pipe whose only writer is this process; the kernel closes it when the process dies,
  whatever the signal, and the janitor removes the parent a moment later (once the box's
  processes, which die with their parent, are gone);
- where the janitor died too (a batch system's sweep kills every process of the job), the
  next judge to start removes parents whose process no longer exists.

The parent is mode 0711: the sandbox user (nobody, when started as root) must reach the
box folders inside it, and nobody may list them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import psutil

PREFIX = "veribatch-scratch-"
_LOCK = threading.Lock()
_STATE: dict[str, object] = {}  # pid, dir, janitor (Popen, kept alive: its pipe is the signal)
_JANITOR = 'cat >/dev/null; sleep 1; rm -rf -- "$0"'


def scratch_dir() -> Path:
    """This process's parent for temporary judge folders (made, and guarded, on first use)."""
    with _LOCK:
        d = _STATE.get("dir")
        if _STATE.get("pid") == os.getpid() and isinstance(d, Path) and d.is_dir():
            return d
        sweep()
        d = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
        d.chmod(0o711)
        with contextlib.suppress(OSError):
            _STATE["janitor"] = subprocess.Popen(
                ["/bin/sh", "-c", _JANITOR, str(d)], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                close_fds=True)
        _STATE.update(pid=os.getpid(), dir=d)
        return d


@atexit.register
def _remove_at_exit() -> None:
    """A normal exit removes the parent at once (the janitor would, a second later)."""
    d = _STATE.get("dir")
    if _STATE.get("pid") == os.getpid() and isinstance(d, Path):
        shutil.rmtree(d, ignore_errors=True)


def sweep(tmp: Path | None = None) -> list[Path]:
    """Remove scratch parents of processes that no longer exist (ours only); what was removed."""
    base = Path(tmp or tempfile.gettempdir())
    gone: list[Path] = []
    with contextlib.suppress(OSError):
        for p in base.iterdir():
            if not p.name.startswith(PREFIX):
                continue
            owner = p.name[len(PREFIX):].split("-", 1)[0]
            try:
                mine = p.stat().st_uid == os.geteuid()
            except OSError:
                continue
            if mine and owner.isdigit() and not psutil.pid_exists(int(owner)):
                shutil.rmtree(p, ignore_errors=True)
                gone.append(p)
    return gone


def mkdtemp(prefix: str) -> Path:
    """A fresh folder below this process's scratch parent."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_dir()))
