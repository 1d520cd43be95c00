"""The extension point for verifiers, after BenchExec's tool-info modules (`tools/template.py`).

A tool adapter is one class in one module: the facts it declares (class attributes) and a
handful of verbs.  Everything shared — limits, process-tree killing, the fork server,
caching, the apptainer runtime, log files — lives in `verifiers.runner`,
`verifiers.verifier`, `verifiers.cache` and `verifiers.apptainer`, and everything a task or
`launch verify` needs to know about a tool is read from these facts, so adding a verifier is
one module and one registry line (`docs/adding-a-verifier.md`).

Call order, and what may not be assumed:

1. `executable()` is resolved once per process; it raises `ToolNotFoundError`
   naming every place it looked.  Under the apptainer runtime it is not called:
   `container_executable` (where the image's definition file installs the tool)
   is used instead.
2. `version(executable)` is read from the tool itself, never hard-coded, and is
   part of every cache key and of the run id.  The default runs
   `[executable, *version_args]` and hands its output to `parse_version`, which is
   what a tool overrides; the apptainer runtime runs the same argv inside the image
   (and appends the image's sha256).  Override `version` only where the version is
   more than the tool's own answer (UAutomizer adds the z3 it will run).
3. `support_files(query)` names small files (e.g. an SV-COMP property file) that
   the runner writes into the run's work directory before the run, so they are
   visible inside the container too.  `cmdline(executable, query, limits,
   workdir)` then builds the argv and `environment(executable, limits)` what the
   process needs in its environment beyond what it inherits.  Both must be pure
   functions of their arguments (tests pin them).  They describe a process that runs
   inside the container when the runtime is apptainer, so paths in `query` are
   bound read-only at the same location, and the runtime carries the environment in.
   A query the tool cannot express (a property it does not check, a data model or a
   number of files it does not take) raises `UnsupportedQueryError` from either, before
   anything runs.
4. The runner executes the argv under hard limits, kills the whole process
   group on any limit, and writes the raw output to a log file.
5. `determine_result(run)` maps the finished run to a `(Status, reason, extras)`.
   It may be called on a recorded log without `cmdline` ever having been called
   (tests replay recorded real output), so it must read only `run`: its output
   and the files the tool left in `run.workdir` (witnesses, error paths).
   The runner overrides the status with TIMEOUT/OOM when a limit was hit, with
   ERROR when the tool died of a signal without a verdict, and turns an
   exception raised here into ERROR naming it.

Writing the next adapter: subclass `Tool` in `verifiers/<name>.py` (or inside the
tool's own package, as `verifiers/z3c/tool.py`, or in a package of its own), declare every
fact in `FACTS`, declare it as an entry point (group ``veribatch.tools``), keep real outputs of the tool under
`../shared/data/recorded/<name>/` (with a README saying how they were captured) and test
`cmdline` and `determine_result` on them; `tests/verifiers/test_conformance.py`
checks every registered tool against this contract (`verifiers/uautomizer.py` and
`verifiers/dafny.py` are worked examples).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from veribatch.verifiers.result import Limits, Status


class ToolNotFoundError(FileNotFoundError):
    """The tool's executable is missing; the message lists where we looked."""


class UnsupportedQueryError(ValueError):
    """The tool cannot express the query (BenchExec's `UnsupportedFeatureException`): a
    property, data model or number of files it does not take.  Raised by `support_files` or
    `cmdline` before anything runs: the query could not be asked, which is the caller's
    problem, not a verdict (`launch verify` exits 2).  A `ValueError`, as a wrong argument."""


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
class ToolEnvironment:
    """What a tool's process needs in its environment beyond what it inherits (BenchExec's
    `environment()`): `variables` set (replacing an inherited value) and directories put in
    front of ``PATH``.  The runtime applies it — natively to the environment the tool
    inherits (`applied_to`), under apptainer as the variables the container's environment
    is built from (`verifiers.apptainer.exec_env`) — so a tool needs no shell prologue."""

    variables: Mapping[str, str] = field(default_factory=dict)
    path_prepend: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.variables or self.path_prepend)

    def applied_to(self, inherited: Mapping[str, str]) -> dict[str, str]:
        """`inherited` with the variables set and the directories first on PATH."""
        env = {**inherited, **self.variables}
        if self.path_prepend:
            rest = [env["PATH"]] if env.get("PATH") else []
            env["PATH"] = os.pathsep.join([*self.path_prepend, *rest])
        return env


@dataclass(frozen=True)
class ToolVerdict:
    status: Status
    reason: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)


class Tool(ABC):
    """Base of every verifier adapter.  A subclass declares every fact in `FACTS` as a class
    attribute (the base gives none of them a default, so a forgotten one fails the
    conformance test and `registry.tool_class`), and implements the three abstract verbs."""

    # -- facts: what tasks, `launch verify` and the docs read instead of tables of their own
    name: ClassVar[str]
    """The registry name: ``--tool``/``--verifier``, part of every run id and record."""
    description: ClassVar[str]
    """One line for people: what the tool is (what a reader of the registry is told)."""
    properties: ClassVar[tuple[str, ...]]
    """The properties its queries may ask (`Query.property`); the first is the default
    (``launch verify`` without ``--property``).  A task accepts the tools that declare the
    property and language it needs (`tasks.verifier.AcceptedVerifiers`)."""
    languages: ClassVar[tuple[str, ...]]
    """The languages of the programs it reads ("C", "Dafny", "C++", "Python")."""
    memory_mb: ClassVar[int]
    """Memory a query gets unless the task is told otherwise (``-o memory_mb``)."""
    query_cores: ClassVar[int]
    """Cores one query keeps busy (a JVM and its solvers use more than one): tasks reserve
    this many per query, so it is not slowed below the times it is compared with."""
    certified_verdicts: ClassVar[bool]
    """True: a verdict comes with a certificate the tool checked itself — a FALSE with the
    counterexample it replayed (``extras["counterexample"]`` holding ``replay`` and
    ``inputs``), a TRUE with a re-checked proof (``extras["proof"]``,
    ``extras["proof_checked"] is True``) — and a verdict without one is not to be trusted
    (CE-Bench's labels, `tasks.cebench.label`).  False: a verdict is the tool's word,
    trusted as the papers trust it."""

    FACTS: ClassVar[dict[str, type]] = {
        "name": str, "description": str, "properties": tuple, "languages": tuple,
        "memory_mb": int, "query_cores": int, "certified_verdicts": bool,
    }

    # -- how the runtime starts it (defaults fit most tools)
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
    # How many of a query's files, from the first, are program text (`launch verify` refuses
    # a binary or non-UTF-8 one before running anything); None: all of them.
    text_files: ClassVar[int | None] = None
    # Folders, relative to a run's work directory, where the tool keeps state of its own
    # (settings, caches) instead of beside its executable: created empty before the run and
    # removed after it.  A tool installed read-only (a shared software folder, an apptainer
    # image) then runs, each query's state is its own, and none of it is left behind.
    scratch_dirs: ClassVar[tuple[str, ...]] = ()
    # Wall limit of the version command (a tool that must start a JVM to answer needs more
    # on a loaded node; a hung one is still bounded).
    version_timeout_s: ClassVar[float] = 60.0

    @classmethod
    def missing_facts(cls) -> list[str]:
        """The facts this class does not declare, or declares with the wrong type."""
        out = []
        for fact, kind in cls.FACTS.items():
            value: Any = getattr(cls, fact, None)
            ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
            if ok and kind is tuple:
                ok = bool(value) and all(isinstance(v, str) and v for v in value)
            elif ok and kind is str:
                ok = bool(value.strip())
            elif ok and kind is int:
                ok = value > 0
            if not ok:
                out.append(fact)
        return out

    def parse_version(self, output: str) -> str:
        """The version from the output of `[executable, *version_args]` (default: first line)."""
        for line in output.splitlines():
            if line.strip():
                return line.strip()
        raise ValueError(f"{self.name}: empty version output")

    def version_argv(self, executable: str, scratch: Path) -> list[str]:
        """The argv whose output `parse_version` reads (default `[executable, *version_args]`).
        `scratch` is an empty writable folder, the command's working directory, removed
        afterwards (bound writable under apptainer): for a tool that must write somewhere
        even to say its version, as one installed read-only cannot write beside itself."""
        return [executable, *self.version_args]

    def version(self, executable: str) -> str:
        """The tool's version, as the tool reports it on `version_argv`."""
        with tempfile.TemporaryDirectory(prefix=f"{self.name}-version-") as scratch:
            return self.parse_version(read_version(self.version_argv(executable, Path(scratch)),
                                                   timeout_s=self.version_timeout_s, cwd=scratch))

    def support_files(self, query: Query) -> dict[str, str]:
        """File name → text, written into the work directory before `cmdline` runs (default none)."""
        return {}

    def environment(self, executable: str, limits: Limits) -> ToolEnvironment:
        """What the process needs in its environment beyond what it inherits (default:
        nothing); pure function of its arguments, like `cmdline`."""
        return ToolEnvironment()

    @abstractmethod
    def executable(self) -> str:
        """Absolute path of the tool's entry point (or raise `ToolNotFoundError`)."""

    @abstractmethod
    def cmdline(self, executable: str, query: Query, limits: Limits, workdir: Path) -> list[str]:
        """The argv to run `query`; pure function of its arguments."""

    @abstractmethod
    def determine_result(self, run: FinishedRun) -> ToolVerdict:
        """The verdict from a finished run's output."""


def read_version(argv: list[str], timeout_s: float = 60.0, cwd: str | Path | None = None) -> str:
    """Run a version command and return its combined output (raises if it fails or hangs).
    On a timeout its whole process group is killed: a JVM it started must not outlive it."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=cwd, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} exited with {proc.returncode}: {(stderr or stdout)[-500:]}"
        )
    return stdout + stderr


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
