"""The REFUTE judge: compile C++ with pinned flags, run C++/Python programs on an input in a
sandbox under time/memory limits, and compare outputs token-wise (case-insensitive).

Library first (`compile_cpp`, `run_program`, `outputs_match`): REFUTE's harness calls
these thousands of times per RandSearch; `JudgeTool` wraps one run as a verifier query
for `launch verify` and the registry.
"""

from verifiers.judge.compare import outputs_match, tokens
from verifiers.judge.compile import CPP_FLAGS, CompileError, compile_cpp
from verifiers.judge.run import Program, ProgramRun, Verdict, run_program
from verifiers.judge.sandbox import Sandbox, detect_sandbox

__all__ = [
    "CPP_FLAGS",
    "CompileError",
    "Program",
    "ProgramRun",
    "Sandbox",
    "Verdict",
    "compile_cpp",
    "detect_sandbox",
    "outputs_match",
    "run_program",
    "tokens",
]
