"""The extension point for verifiers, after BenchExec's tool-info modules.

A tool adapter is one small class with a handful of verbs; everything shared
(limits, process-group killing, caching, apptainer wrapping, log files) lives in
`verifiers.runner` and `verifiers.cache`, so adding a verifier is one file.

Call order, and what may not be assumed:

1. `executable()` is resolved once per process; it raises `ToolNotFoundError`
   naming every place it looked.
2. `version(executable)` is read from the tool itself, never hard-coded, and is
   part of every cache key and of the run id.
3. `cmdline(executable, query, limits, workdir)` builds the argv.  It must be a
   pure function of its arguments (tests pin the argv it builds).  It runs
   inside the container when the runtime is apptainer, so paths in `query` are
   bound read-only at the same location.
4. The runner executes the argv under hard limits, kills the whole process
   group on any limit, and writes the raw output to a log file.
5. `determine_result(run)` maps the finished run to a `(Status, reason, extras)`.
   It may be called on a recorded log without `cmdline` ever having been called
   (tests replay recorded real output), so it must read only `run`.
   The runner overrides the status with TIMEOUT/OOM when a limit was hit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifiers.result import Limits, Status


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
