"""The apptainer runtime: run a tool's argv inside a pinned image, and name the image by digest.

The argv is built here directly (no spython client, no shell) so tests can pin it:

    apptainer exec --containall --cleanenv --no-home [--net --network none]
        --bind <dir>:<dir>:ro ...  --bind <workdir>:<workdir>  --pwd <workdir>
        IMAGE <tool argv>

- ``--containall`` gives the tool its own PID/IPC namespaces and an empty /tmp and
  $HOME, so killing the ``apptainer`` process (which the runner does by process
  group) ends everything inside the container too;
- every directory holding a query file is bound read-only at the *same* path, so
  the adapter's `cmdline` can use host paths unchanged; only the run's own work
  directory is writable;
- the image is identified by the sha256 of the SIF file, recorded in every
  result's tool version and in every cache key: a rebuilt image is a new verifier;
- ``--cleanenv`` keeps the host's environment out; what the tool needs
  (`Tool.environment`) reaches it as ``APPTAINERENV_<NAME>`` variables of the
  ``apptainer`` process and ``APPTAINERENV_PREPEND_PATH`` (`exec_env`), which apptainer
  applies inside the container after the image's own environment — the argv stays as
  pinned.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from veribatch.verifiers.base import ToolEnvironment, ToolNotFoundError

ENV_PREFIX = "APPTAINERENV_"

_DIGESTS: dict[tuple[str, int, int], str] = {}
_LOCK = threading.Lock()


def apptainer_binary() -> str:
    """`apptainer` (or its older name `singularity`) from $VERIBATCH_APPTAINER or PATH."""
    env = os.environ.get("VERIBATCH_APPTAINER")
    if env and os.access(env, os.X_OK):
        return env
    for name in ("apptainer", "singularity"):
        found = shutil.which(name)
        if found:
            return found
    where = f"$VERIBATCH_APPTAINER={env!r} (not executable)" if env else "$VERIBATCH_APPTAINER (unset)"
    raise ToolNotFoundError(f"apptainer not found; looked at: {where}; apptainer and singularity "
                            f"on PATH ({os.environ.get('PATH', '')})")


def image_digest(image: Path) -> str:
    """sha256 of the image file, computed once per (path, size, mtime) in this process."""
    st = Path(image).stat()
    k = (str(Path(image).resolve()), st.st_size, st.st_mtime_ns)
    with _LOCK:
        if k in _DIGESTS:
            return _DIGESTS[k]
    with open(image, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    with _LOCK:
        _DIGESTS[k] = digest
    return digest


def _unique(paths: Iterable[Path]) -> list[Path]:
    """Resolved directories, dropping those already covered by a bound parent."""
    out: list[Path] = []
    for p in sorted({Path(p).resolve() for p in paths}):
        if not any(p == q or q in p.parents for q in out):
            out.append(p)
    return out


def exec_argv(
    image: Path,
    argv: list[str],
    *,
    read_only: Iterable[Path] = (),
    writable: Iterable[Path] = (),
    pwd: Path | None = None,
    network: bool = True,
    binary: str = "apptainer",
) -> list[str]:
    """The full argv running `argv` inside `image` (a pure function; see the module docstring)."""
    rw = _unique(writable)
    ro = [d for d in _unique(read_only) if not any(d == w or w in d.parents for w in rw)]
    cmd = [binary, "exec", "--containall", "--cleanenv", "--no-home"]
    if not network:
        cmd += ["--net", "--network", "none"]
    for d in ro:
        cmd += ["--bind", f"{d}:{d}:ro"]
    for d in rw:
        cmd += ["--bind", f"{d}:{d}"]
    if pwd is not None:
        cmd += ["--pwd", str(Path(pwd).resolve())]
    cmd.append(str(Path(image).resolve()))
    return cmd + list(argv)


def exec_env(tool_env: ToolEnvironment, inherited: Mapping[str, str]) -> dict[str, str]:
    """The environment of the ``apptainer`` process that gives the tool inside `tool_env`:
    each variable as ``APPTAINERENV_<NAME>``, the PATH directories as
    ``APPTAINERENV_PREPEND_PATH`` (before any the caller had set)."""
    env = dict(inherited)
    for name, value in tool_env.variables.items():
        env[ENV_PREFIX + name] = value
    if tool_env.path_prepend:
        key = ENV_PREFIX + "PREPEND_PATH"
        rest = [env[key]] if env.get(key) else []
        env[key] = os.pathsep.join([*tool_env.path_prepend, *rest])
    return env
