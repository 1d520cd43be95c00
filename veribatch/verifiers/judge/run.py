"""Run one C++ or Python program on one input under judge limits, and say how it went.

Verdicts use the judge vocabulary REFUTE reports (OK, TLE, MLE, RE, OLE), so a
record says *why* a solution's output differs, not just that it does.  ERROR is
reserved for the judge failing to run the program at all (never the program's
fault).  Verdicts come only from what the kernel and the limits say (exit status, signal,
which limit the monitor or the memory cgroup enforced), never from the program's text:
stderr is kept (capped at `STDERR_CAP` on its own, not counted toward the output cap) for
people to read and never compared.  A failed allocation under RLIMIT_AS is the program's
own exit (``std::bad_alloc`` aborts, ``MemoryError`` exits 1): RE, like any crash — a
program could print those words itself.  A wall-clock kill of a run that used less CPU
than its limit is TLE with ``inconclusive`` set: load on the node, not the program, may
have made it slow, so callers retry it once `alone` and never count it.  A run that
filled the box's process cap (a fork bomb: forks fail, and the processes it has then run
into the memory or CPU limit) is an RE with the reason "too many processes", whatever
limit finally stopped it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import IO

from veribatch.verifiers.judge import scratch
from veribatch.verifiers.judge.compile import compile_cpp
from veribatch.verifiers.judge.sandbox import (
    MAX_PROCESSES,
    Sandbox,
    detect_sandbox,
    memory_mechanism,
    run_sandboxed,
)
from veribatch.verifiers.judge.toolchain import judge_python
from veribatch.verifiers.result import Limits

OUTPUT_CAP = 32 * 2**20
STDERR_CAP = 64 * 2**10
"""What is kept of a run's stderr (the rest is read and dropped; never a limit)."""
LANGS = {".cpp": "cpp", ".cc": "cpp", ".cxx": "cpp", ".c++": "cpp", ".py": "python"}


class Verdict(StrEnum):
    OK = "OK"        # exited 0 within limits
    TLE = "TLE"      # CPU or wall time limit
    MLE = "MLE"      # memory limit
    RE = "RE"        # non-zero exit, crash signal, too many processes
    OLE = "OLE"      # output over the cap
    ERROR = "ERROR"  # the judge could not run it


@dataclass(frozen=True)
class Program:
    """A program to judge; `lang` is "cpp" or "python" (inferred from the suffix by `of`)."""

    source: Path
    lang: str

    @classmethod
    def of(cls, source: Path, lang: str | None = None) -> Program:
        lang = lang or LANGS.get(Path(source).suffix.lower())
        if lang not in ("cpp", "python"):
            raise ValueError(f"{source}: cannot tell the language (suffixes: {', '.join(LANGS)})")
        return cls(Path(source), lang)


@dataclass(frozen=True)
class ProgramRun:
    verdict: Verdict
    output: str
    stderr: str  # the last 4000 characters
    returncode: int | None
    signal: int | None
    wall_s: float
    cpu_s: float
    peak_mem_mb: float
    termination_reason: str
    network_isolated: bool
    reason: str | None = None
    sandbox: str = "bwrap"      # the sandbox kind it ran in (verifiers.judge.sandbox)
    unsafe: bool = False        # True: ran without isolation, on explicit request
    memory_limit_by: str = ""   # what enforced memory_mb, and what it did not count
    inconclusive: bool = False  # TLE by the wall clock under the CPU limit: retry, never count


def run_program(
    program: Program,
    stdin: Path | str | bytes | None,
    *,
    time_s: float = 2.0,
    memory_mb: int = 256,
    wall_s: float | None = None,
    cache_dir: Path | None = None,
    output_cap: int = OUTPUT_CAP,
    sandbox: Sandbox | None = None,
    alone: bool = False,
) -> ProgramRun:
    """Run `program` on `stdin` (a file, or the input text) in the sandbox.

    `time_s` is CPU time; the wall limit defaults to 2*time_s + 1 so a program
    that sleeps or blocks is still stopped.  C++ is compiled first (cached); a
    compile failure raises `CompileError` — the caller decides what it means.
    `alone` waits until no other judged run of this user on this node is running and keeps
    new ones out meanwhile (the retry of an inconclusive run).
    """
    box = sandbox or detect_sandbox()
    files: dict[str, Path | bytes]
    if program.lang == "cpp":
        files = {"prog": compile_cpp(program.source, cache_dir, sandbox=box)}
        argv = ["./prog"]
    else:
        files = {"prog.py": program.source}
        python = "python3" if box.kind == "apptainer" and box.image else judge_python()
        argv = [str(python), "-I", "-S", "prog.py"]
    limits = Limits(wall_s=wall_s or 2 * time_s + 1, cpu_s=time_s, memory_mb=memory_mb)
    t = scratch.mkdtemp("veribatch-judge-")
    lock = _run_lock(exclusive=alone)
    try:
        data = stdin.encode() if isinstance(stdin, str) else stdin
        # run_sandboxed gives the program a private copy of either, never the file itself
        ex = run_sandboxed(argv, files, limits,
                           stdin_path=None if isinstance(data, bytes) else data,
                           stdin_data=data if isinstance(data, bytes) else None,
                           stdout_path=t / "stdout", stderr_path=t / "stderr",
                           output_cap=output_cap, sandbox=box, stderr_cap=STDERR_CAP,
                           syscalls=program.lang)
        output, stderr = ex.read_output(), ex.read_stderr()
    finally:
        lock.close()
        shutil.rmtree(t, ignore_errors=True)
    returncode, sig = ex.returncode, ex.signal
    if box.kind != "none" and sig is None and returncode is not None and 128 < returncode <= 192:
        # bwrap/apptainer's init reports a child killed by signal N as exit status 128+N
        returncode, sig = None, returncode - 128
    termination = ex.termination_reason
    if ex.output_truncated and termination in ("exit", "signal"):
        # over the cap, whatever the timing of its exit: the monitor may have seen the
        # exit before the pump saw the overflow; a cut output is never a complete one
        termination = "output"
    verdict, reason = _verdict(termination, returncode, sig, ex.error)
    inconclusive = termination == "walltime" and ex.cpu_s < limits.cpu_cap
    if inconclusive:
        reason = (f"wall-clock limit ({limits.wall_s:g} s) after {ex.cpu_s:.2f} s of CPU, under "
                  f"the {limits.cpu_cap:g} s CPU limit: inconclusive (waiting, or load)")
    if verdict in (Verdict.TLE, Verdict.MLE, Verdict.RE) and ex.peak_processes >= MAX_PROCESSES:
        # a fork bomb: forks failed at the box's cap, then memory or CPU ran out
        verdict, reason = Verdict.RE, (f"too many processes ({ex.peak_processes} alive at once, "
                                       f"cap {MAX_PROCESSES}; then {reason})")
    if verdict is Verdict.OLE:
        output = ""  # a truncated output must never be compared as if complete
    return ProgramRun(verdict, output, stderr[-4000:], returncode, sig, ex.wall_s,
                      ex.cpu_s, ex.peak_mem_mb, termination, box.network_isolated,
                      reason, box.kind, box.unsafe,
                      memory_mechanism(ex, box, memory_mb, syscalls=program.lang), inconclusive)


def _lock_paths() -> list[Path]:
    """Where the node-wide lock file may live: the user's runtime dir, /dev/shm (both
    per node, neither a job's $TMPDIR, which a batch system may clean or share), and this
    process's scratch folder as the last resort (threads of this judge only)."""
    name = f"veribatch-judge-runs-{os.geteuid()}.lock"
    dirs = [os.environ.get("XDG_RUNTIME_DIR", ""), "/dev/shm"]
    return [Path(d) / name for d in dirs if d and os.path.isdir(d)] + [scratch.scratch_dir() / name]


def _run_lock(exclusive: bool) -> IO[bytes]:
    """A shared lock for every run, an exclusive one for a run that must be `alone`: flock
    on one file per user and node, so runs of other threads and processes count too."""
    for path in _lock_paths():
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            continue  # not ours (another user's file of that name) or not writable: next
        if os.fstat(fd).st_uid == os.geteuid():
            break
        os.close(fd)
    else:
        raise OSError(f"no place for the judge's run lock among {_lock_paths()}")
    f = os.fdopen(fd, "rb")
    fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    return f


def _verdict(
    termination: str, returncode: int | None, sig: int | None, error: str | None
) -> tuple[Verdict, str | None]:
    match termination:
        case "walltime" | "cputime":
            return Verdict.TLE, f"{termination} limit"
        case "memory":
            return Verdict.MLE, "memory limit"
        case "output":
            return Verdict.OLE, "output limit"
        case "processes":
            return Verdict.RE, "too many processes"
        case "error":
            return Verdict.ERROR, error
        case "cancelled":
            return Verdict.ERROR, "cancelled"
    if sig is not None:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return Verdict.RE, f"killed by signal {sig} ({name})"
    if returncode != 0:
        return Verdict.RE, f"exit code {returncode}"
    return Verdict.OK, None
