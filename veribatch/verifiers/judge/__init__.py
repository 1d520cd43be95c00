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
"""

from veribatch.verifiers.judge.compare import first_difference, outputs_match, tokens
from veribatch.verifiers.judge.compile import (
    CPP_FLAGS,
    STATS,
    CompileError,
    compile_cpp,
    effective_flags,
)
from veribatch.verifiers.judge.run import Program, ProgramRun, Verdict, run_program
from veribatch.verifiers.judge.sandbox import (
    Sandbox,
    SandboxUnavailable,
    detect_sandbox,
    run_sandboxed,
)

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
    "detect_sandbox",
    "effective_flags",
    "first_difference",
    "outputs_match",
    "run_program",
    "run_sandboxed",
    "tokens",
]
