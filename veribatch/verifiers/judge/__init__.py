"""The REFUTE judge: sandboxed compilation and runs of C++/Python programs, REFUTE's output
comparison, the counterexample judgement and the random search.

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
- `counterexample`: validator → correct → wrong ×5 → a `Judgement` with a named reason;
- `search`: RandSearch (generator × wrong × brute force until they differ).

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
from veribatch.verifiers.judge.counterexample import (
    REASONS,
    JudgeLimits,
    Judgement,
    Solutions,
    judge_generator,
    judge_input,
)
from veribatch.verifiers.judge.run import Program, ProgramRun, Verdict, run_program
from veribatch.verifiers.judge.sandbox import (
    Sandbox,
    SandboxUnavailable,
    detect_sandbox,
    run_sandboxed,
)
from veribatch.verifiers.judge.search import SearchResult, random_search

__all__ = [
    "CPP_FLAGS",
    "REASONS",
    "STATS",
    "CompileError",
    "JudgeLimits",
    "Judgement",
    "Program",
    "ProgramRun",
    "Sandbox",
    "SandboxUnavailable",
    "SearchResult",
    "Solutions",
    "Verdict",
    "compile_cpp",
    "detect_sandbox",
    "effective_flags",
    "first_difference",
    "judge_generator",
    "judge_input",
    "outputs_match",
    "random_search",
    "run_program",
    "run_sandboxed",
    "tokens",
]
