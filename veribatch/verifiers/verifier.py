"""A `Verifier` = one `Tool` + a runtime (native or apptainer) + an optional result cache.

This is what tasks call.  `run` blocks; `start` returns a `RunningQuery` at once, so
InvBench can run d_a and d_b (and up to 16 Best-of-N candidates) side by side and
`kill` (or `kill_all`) the rest when one decides.  Every path ends in a `VerifierResult`:

    cache hit (verifiers.cache rule) ───────────────────────────────────────────┐
    support_files + cmdline + environment → [apptainer exec …] → LimitedProcess → FinishedRun
        → tool.determine_result → runner overrides → cache (if cacheable) ─────┴→ VerifierResult

Runner overrides, in order: a wall/CPU limit → TIMEOUT, memory → OOM (whatever
the tool printed before it was killed); `kill()` → UNKNOWN with termination
reason "cancelled" (never cached); a tool dead of a signal without a verdict,
an exception in `determine_result`, a tool that could not be started → ERROR
with the reason.  The raw output is in `log_path`, inside a fresh work directory
``<log_dir>/<tool>-<key[:12]>-<random>/`` that also holds the tool's own files (its
`Tool.scratch_dirs`, the state a tool keeps while it runs, are removed when it ends).

What raises instead of returning a result: a missing query file, a tool that is
not installed (`ToolNotFoundError`) or whose version cannot be read, a query the
tool cannot express (`UnsupportedQueryError` from `support_files` or `cmdline`) — the
query could not be asked at all, which is the caller's (or the node's) problem, not a
verdict.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from veribatch.verifiers import apptainer
from veribatch.verifiers.base import (
    FinishedRun,
    Query,
    Tool,
    ToolNotFoundError,
    ToolVerdict,
    read_version,
)
from veribatch.verifiers.cache import ResultCache, query_key
from veribatch.verifiers.result import Limits, Status, VerifierResult
from veribatch.verifiers.runner import Execution, LimitedProcess

RUNTIMES = ("native", "apptainer")

_VERSIONS: dict[tuple[str, str, str], str] = {}
_VERSIONS_LOCK = threading.Lock()

_OVERRIDES = {
    "walltime": (Status.TIMEOUT, "wall-time limit of {wall}s reached"),
    "cputime": (Status.TIMEOUT, "CPU-time limit of {cpu}s reached"),
    "memory": (Status.OOM, "memory limit of {mem} MB reached"),
    "processes": (Status.ERROR, "too many processes"),
    "output": (Status.ERROR, "output limit exceeded"),
    "cancelled": (Status.UNKNOWN, "cancelled before the tool finished"),
}


class Verifier:
    """A tool bound to a runtime.  Thread-safe; one instance may serve many parallel queries."""

    def __init__(
        self,
        tool: Tool,
        *,
        runtime: str = "native",
        image: Path | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        if runtime not in RUNTIMES:
            raise ValueError(f"unknown runtime {runtime!r}; known: {', '.join(RUNTIMES)}")
        if runtime == "apptainer":
            if image is None:
                raise ValueError(f"{tool.name}: the apptainer runtime needs an image (--image)")
            if not Path(image).is_file():
                raise FileNotFoundError(f"{tool.name}: apptainer image not found: {image}")
            if tool.container_executable is None:
                raise ValueError(f"{tool.name}: this tool has no apptainer image definition")
        self.tool = tool
        self.runtime = runtime
        self.image = Path(image) if image is not None else None
        self.cache = ResultCache(cache_dir) if cache_dir is not None else None
        self._executable: str | None = None

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def executable(self) -> str:
        """The tool's entry point: resolved on the host, or the path inside the image."""
        if self._executable is None:
            if self.runtime == "apptainer":
                assert self.tool.container_executable is not None
                self._executable = self.tool.container_executable
            else:
                self._executable = self.tool.executable()
        return self._executable

    @property
    def image_digest(self) -> str | None:
        return apptainer.image_digest(self.image) if self.image is not None else None

    @property
    def version(self) -> str:
        """The tool's own version; under apptainer suffixed with ``+sha256:<image digest>``."""
        digest = self.image_digest or ""
        k = (self.tool.name, self.runtime, digest or self.executable)
        with _VERSIONS_LOCK:
            if k in _VERSIONS:
                return _VERSIONS[k]
        executable = self.executable
        try:
            if self.runtime == "apptainer":
                assert self.image is not None
                with tempfile.TemporaryDirectory(prefix=f"{self.tool.name}-version-") as scratch:
                    argv = apptainer.exec_argv(
                        self.image, self.tool.version_argv(executable, Path(scratch)),
                        writable=[Path(scratch)], pwd=Path(scratch),
                        binary=apptainer.apptainer_binary(),
                    )
                    version = self.tool.parse_version(read_version(argv, timeout_s=self.tool.version_timeout_s))
                    version = f"{version}+sha256:{digest}"
            else:
                version = self.tool.version(executable)
        except ToolNotFoundError:
            raise
        except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as e:
            # A tool whose version cannot be read cannot be trusted to answer queries either.
            raise ToolNotFoundError(f"{self.tool.name}: cannot read the version of {executable} "
                                    f"({self.runtime}): {e}") from e
        with _VERSIONS_LOCK:
            _VERSIONS[k] = version
        return version

    def key(self, query: Query) -> str:
        return query_key(self.tool.name, self.version, self.runtime, query)

    def run(self, query: Query, limits: Limits, log_dir: Path) -> VerifierResult:
        """Verify `query` under `limits` and block until there is a result."""
        result = self.start(query, limits, log_dir).wait()
        assert result is not None
        return result

    def start(self, query: Query, limits: Limits, log_dir: Path) -> RunningQuery:
        """Start verifying `query`; returns at once (a cache hit is already finished)."""
        for f in query.files:
            if not Path(f).is_file():
                raise FileNotFoundError(f"{self.tool.name}: query file not found: {f}")
        version = self.version  # raises ToolNotFoundError before anything is started
        key = self.key(query)
        if self.cache is not None:
            hit = self.cache.get(key, limits)
            if hit is not None:
                return RunningQuery.finished(hit)
        log_dir = Path(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix=f"{self.tool.name}-{key[:12]}-", dir=log_dir))
        for name, text in self.tool.support_files(query).items():
            (workdir / name).write_text(text)
        for name in self.tool.scratch_dirs:
            (workdir / name).mkdir()
        argv = self.tool.cmdline(self.executable, query, limits, workdir)
        tool_env = self.tool.environment(self.executable, limits)
        env = tool_env.applied_to(os.environ) if tool_env else None  # None: inherited as is
        if self.runtime == "apptainer":
            assert self.image is not None
            argv = apptainer.exec_argv(
                self.image,
                argv,
                read_only=[Path(f).resolve().parent for f in query.files],
                writable=[workdir],
                pwd=workdir,
                network=self.tool.container_network,
                binary=apptainer.apptainer_binary(),
            )
            env = apptainer.exec_env(tool_env, os.environ) if tool_env else None
        process = LimitedProcess(argv, limits, workdir / "output.log", cwd=workdir, env=env,
                                 warm=self._warm(argv))
        return RunningQuery(self, process.start(), limits, version, key, workdir)

    def _warm(self, argv: list[str]) -> tuple[str, list[str]] | None:
        """(module, args) when `argv` may run in a warm fork (see `Tool.warm_module`)."""
        module = self.tool.warm_module
        if self.runtime != "native" or module is None:
            return None
        if argv[:3] != [sys.executable, "-m", module]:
            return None
        return f"{module}.__main__", argv[3:]

    def __repr__(self) -> str:
        return f"Verifier({self.tool.name!r}, runtime={self.runtime!r}, image={self.image})"


class RunningQuery:
    """A query in flight.  `poll`/`wait`/`kill` may be called from any thread, any number of times."""

    def __init__(
        self,
        verifier: Verifier | None,
        process: LimitedProcess | None,
        limits: Limits,
        version: str,
        key: str,
        workdir: Path | None,
    ) -> None:
        self._verifier = verifier
        self._process = process
        self._limits = limits
        self._version = version
        self._key = key
        self._workdir = workdir
        self._result: VerifierResult | None = None
        self._lock = threading.Lock()

    @classmethod
    def finished(cls, result: VerifierResult) -> RunningQuery:
        rq = cls(None, None, Limits(), result.tool_version, "", None)
        rq._result = result
        return rq

    @property
    def workdir(self) -> Path | None:
        return self._workdir

    def poll(self) -> VerifierResult | None:
        if self._result is not None:
            return self._result
        assert self._process is not None
        ex = self._process.poll()
        return self._finish(ex) if ex is not None else None

    def wait(self, timeout: float | None = None) -> VerifierResult | None:
        if self._result is not None:
            return self._result
        assert self._process is not None
        ex = self._process.wait(timeout)
        return self._finish(ex) if ex is not None else None

    def cancel(self) -> None:
        """Start killing the tool's process tree and return at once; `kill`/`wait` collect it."""
        if self._result is None and self._process is not None:
            self._process.cancel()

    def kill(self) -> VerifierResult:
        """Kill the tool's whole process tree; the result says "cancelled" unless it had finished."""
        if self._result is not None:
            return self._result
        assert self._process is not None
        return self._finish(self._process.kill())

    def _finish(self, ex: Execution) -> VerifierResult:
        with self._lock:
            if self._result is None:
                assert self._verifier is not None
                self._result = _to_result(self._verifier.tool, self._version, ex, self._limits,
                                          self._workdir)
                if self._workdir is not None:  # the tool's own state: not evidence, not kept
                    for name in self._verifier.tool.scratch_dirs:
                        shutil.rmtree(self._workdir / name, ignore_errors=True)
                if self._verifier.cache is not None:
                    self._verifier.cache.put(self._key, self._limits, self._result)
            return self._result


def kill_all(queries: list[RunningQuery]) -> list[VerifierResult]:
    """Kill many queries at once (all signalled first, then collected): InvBench's "kill the rest"."""
    for q in queries:
        q.cancel()
    return [q.kill() for q in queries]


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _to_result(
    tool: Tool, version: str, ex: Execution, limits: Limits, workdir: Path | None
) -> VerifierResult:
    """Tool verdict first, then the runner's overrides (limits beat whatever the tool printed)."""
    if ex.termination_reason == "error":
        verdict = ToolVerdict(Status.ERROR, ex.error or "could not start the tool")
    else:
        run = FinishedRun(
            returncode=ex.returncode,
            signal=ex.signal,
            output=ex.read_output(),
            termination_reason=ex.termination_reason,
            workdir=workdir,
        )
        try:
            verdict = tool.determine_result(run)
        except Exception as e:  # an adapter bug must not kill the worker
            verdict = ToolVerdict(Status.ERROR, f"determine_result failed: {type(e).__name__}: {e}")
    status, reason = verdict.status, verdict.reason
    override = _OVERRIDES.get(ex.termination_reason)
    if override is not None:
        status = override[0]
        cpu = limits.cpu_cap
        reason = override[1].format(wall=limits.wall_s, cpu=cpu, mem=limits.memory_mb)
    elif ex.termination_reason == "signal" and not status.decided:
        status = Status.ERROR
        reason = f"tool killed by {_signal_name(ex.signal or 0)}" + (f": {reason}" if reason else "")
    extras = dict(verdict.extras)
    if ex.output_truncated:
        extras["output_truncated"] = True
    return VerifierResult(
        status=status,
        wall_s=round(ex.wall_s, 4),
        cpu_s=round(ex.cpu_s, 4),
        peak_mem_mb=round(ex.peak_mem_mb, 2),
        termination_reason=ex.termination_reason,
        tool=tool.name,
        tool_version=version,
        log_path=os.fspath(ex.output_path),
        reason=reason,
        extras=extras,
        limits_enforced_by=ex.enforcement,
    )


__all__ = ["RUNTIMES", "RunningQuery", "ToolNotFoundError", "Verifier", "kill_all"]
