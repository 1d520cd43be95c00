"""The extension point for verifiers, after BenchExec's tool-info modules.

A tool adapter is one small class with a handful of verbs; everything shared
(limits, process-group killing, caching, apptainer wrapping, log files) lives in
`verifiers.runner` and `verifiers.cache`, so adding a verifier is one file.

Call order, and what may not be assumed:

1. `executable()` is resolved once per process; it raises `ToolNotFoundError`
   naming every place it looked.  Under the apptainer runtime it is not called:
   `container_executable` (where the image's definition file installs the tool)
   is used instead.
2. `version(executable)` is read from the tool itself, never hard-coded, and is
   part of every cache key and of the run id.  Tools that print their version
   on `[executable, *version_args]` only override `parse_version`; the apptainer
   runtime then runs the same argv inside the image (and appends its sha256).
3. `support_files(query)` names small files (e.g. an SV-COMP property file) that
   the runner writes into the run's work directory before the run, so they are
   visible inside the container too.  `cmdline(executable, query, limits,
   workdir)` then builds the argv.  It must be a
   pure function of its arguments (tests pin the argv it builds).  It runs
   inside the container when the runtime is apptainer, so paths in `query` are
   bound read-only at the same location.
4. The runner executes the argv under hard limits, kills the whole process
   group on any limit, and writes the raw output to a log file.
5. `determine_result(run)` maps the finished run to a `(Status, reason, extras)`.
   It may be called on a recorded log without `cmdline` ever having been called
   (tests replay recorded real output), so it must read only `run`: its output
   and the files the tool left in `run.workdir` (witnesses, error paths).
   The runner overrides the status with TIMEOUT/OOM when a limit was hit, with
   ERROR when the tool died of a signal without a verdict, and turns an
   exception raised here into ERROR naming it.

Writing the next adapter: subclass `Tool` in `verifiers/<name>.py`, add one line
to `verifiers.registry._TOOLS`, record real outputs of the tool under
`tests/verifiers/recorded/<name>/` and test `cmdline` and `determine_result` on
them (`verifiers/uautomizer.py` and `verifiers/dafny.py` are worked examples).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from veribatch.verifiers.result import Limits, Status


class ToolNotFoundError(FileNotFoundError):
    """The tool's executable is missing; the message lists where we looked."""


@dataclass(frozen=True)
class Query:
    """One verification task: files to check, the property, and tool options."""

    files: tuple[Path, ...]
    property: str = "unreach-call"  # SV-COMP property name; "dafny-verify"/"dafny-resolve" for Dafny
    options: tuple[str, ...] = ()
    data_model: str = "ILP32"  # ILP32 → --architecture 32bit, LP64 → 64bit


@dataclass(frozen=True)
class FinishedRun:
    """What `determine_result` sees: exit status and the tool's combined output."""

    returncode: int | None  # None when killed by a signal
    signal: int | None
    output: str
    termination_reason: str  # "exit" | "walltime" | "cputime" | "memory" | "signal" | ...
    workdir: Path | None = None  # where witness/log files of the tool were written


@dataclass(frozen=True)
class ToolVerdict:
    status: Status
    reason: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)


class Tool(ABC):
    """Base of every verifier adapter (uautomizer, dafny, judge, z3)."""

    name: str
    # Where the tool lives inside its apptainer image (None: no image for this tool).
    container_executable: ClassVar[str | None] = None
    # Whether the tool may use the network inside its container (False: --net --network none).
    container_network: ClassVar[bool] = True
    # Arguments that make the tool print its version (used by `version` and by apptainer).
    version_args: ClassVar[tuple[str, ...]] = ("--version",)
    # A tool written in Python whose argv is `[sys.executable, "-m", warm_module, ...]`
    # and whose `<warm_module>.__main__` has `main(args)` (and optionally `warm_up()`):
    # natively, the runner runs it in a fork of a warm interpreter, skipping the start-up.
    warm_module: ClassVar[str | None] = None

    def parse_version(self, output: str) -> str:
        """The version from the output of `[executable, *version_args]` (default: first line)."""
        for line in output.splitlines():
            if line.strip():
                return line.strip()
        raise ValueError(f"{self.name}: empty version output")

    def support_files(self, query: Query) -> dict[str, str]:
        """File name → text, written into the work directory before `cmdline` runs (default none)."""
        return {}

    @abstractmethod
    def executable(self) -> str:
        """Absolute path of the tool's entry point (or raise `ToolNotFoundError`)."""

    @abstractmethod
    def version(self, executable: str) -> str:
        """The tool's version, as the tool reports it."""

    @abstractmethod
    def cmdline(self, executable: str, query: Query, limits: Limits, workdir: Path) -> list[str]:
        """The argv to run `query`; pure function of its arguments."""

    @abstractmethod
    def determine_result(self, run: FinishedRun) -> ToolVerdict:
        """The verdict from a finished run's output."""


def read_version(argv: list[str], timeout_s: float = 60.0) -> str:
    """Run a version command and return its combined output (raises if it fails or hangs)."""
    proc = subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} exited with {proc.returncode}: {(proc.stderr or proc.stdout)[-500:]}"
        )
    return proc.stdout + proc.stderr


def find_executable(name: str, env_var: str, *, extra_dirs: tuple[str, ...] = ()) -> str:
    """`$env_var` (a file, or a directory holding `name`), else `name` on PATH, else `extra_dirs`.

    Raises `ToolNotFoundError` listing every place it looked, so a user on a new
    cluster sees at once what to set.
    """
    tried: list[str] = []
    env = os.environ.get(env_var)
    if env:
        cand = os.path.join(env, name) if os.path.isdir(env) else env
        if os.access(cand, os.X_OK):
            return os.path.abspath(cand)
        tried.append(f"${env_var}={env}")
    found = shutil.which(name)
    if found:
        return os.path.abspath(found)
    tried.append(f"{name} on PATH")
    for d in extra_dirs:
        cand = os.path.join(d, name)
        if os.access(cand, os.X_OK):
            return cand
        tried.append(cand)
    raise ToolNotFoundError(f"{name} not found; looked at: {'; '.join(tried)} "
                            f"(set ${env_var} to the executable or its directory)")
