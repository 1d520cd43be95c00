"""The judge: sandboxed compilation and runs of C++/Python programs under limits, and
token-wise output comparison.

Library first — REFUTE's stages call these thousands of times per RandSearch:

- `sandbox`: rootless isolation for untrusted code (bubblewrap; apptainer; refuse);
  `run_sandboxed` is the one entry point, reusable by any task that runs model code;
- `seccomp`: the box's seccomp filter (keyring, memfd), assembled in classic BPF;
- `scratch`: one temp parent per process, removed even after SIGKILL;
- `toolchain`: where g++ and the Python for solutions are, and their versions (a leaf: the
  sandbox binds their prefixes without depending on `compile`/`run`, which depend on it);
- `compile`: C++ with the harness's flags, sandboxed, cached by content;
- `run`: one program on one input under limits → a `ProgramRun` with a judge verdict;
- `compare`: token-wise comparison (YES/NO case-insensitive);

REFUTE's rules on top of these — what makes an input a counterexample, and RandSearch — are
the benchmark's, in `veribatch.tasks.refute` (`counterexample`, `search`).

`JudgeTool` wraps one run as a verifier query for `launch verify` and the registry.

This module's names are the judge's public interface: a benchmark (REFUTE) imports them
from here, never from the submodules (an import-linter contract), so the internals can
change behind it.
"""

from veribatch.verifiers.judge.compare import first_difference, outputs_match, tokens
from veribatch.verifiers.judge.compile import (
    CPP_FLAGS,
    STATS,
    CompileError,
    compile_cpp,
    effective_flags,
)
from veribatch.verifiers.judge.reading import two_readings
from veribatch.verifiers.judge.run import Program, ProgramRun, Verdict, run_program
from veribatch.verifiers.judge.sandbox import (
    Sandbox,
    SandboxUnavailable,
    detect_sandbox,
    run_sandboxed,
)
from veribatch.verifiers.judge.toolchain import compiler, compiler_version, judge_python


def toolchain_version() -> str:
    """Compiler, interpreter and C++ flags the judge uses (what a run's identity records)."""
    from veribatch.verifiers.base import read_version

    try:
        cxx = compiler_version(compiler())
    except (FileNotFoundError, OSError) as e:
        cxx = f"g++ unavailable ({e})"
    py = read_version([str(judge_python()), "--version"]).strip()
    return f"{cxx}; {py}; {' '.join(CPP_FLAGS)}"


def probe(sandbox: str = "auto") -> int:
    """Print which sandbox this node offers for untrusted code; 1 when none
    (``python -m veribatch.verifiers.judge --probe``)."""
    from veribatch.verifiers.judge.__main__ import main

    return main(["--probe", "--sandbox", sandbox])


__all__ = [
    "CPP_FLAGS",
    "STATS",
    "CompileError",
    "Program",
    "ProgramRun",
    "Sandbox",
    "SandboxUnavailable",
    "Verdict",
    "compile_cpp",
    "compiler",
    "compiler_version",
    "detect_sandbox",
    "effective_flags",
    "first_difference",
    "judge_python",
    "outputs_match",
    "probe",
    "run_program",
    "run_sandboxed",
    "tokens",
    "toolchain_version",
    "two_readings",
]
