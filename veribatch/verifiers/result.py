"""The one result type every verifier adapter returns (BenchExec's vocabulary).

Tool verdicts (TRUE/FALSE/UNKNOWN) are kept apart from resource outcomes
(TIMEOUT/OOM) and from failures to run the tool at all (ERROR): a task may
count an UNKNOWN as "not decided", but must never count an ERROR as a verdict.

One rule for every adapter: an input the tool cannot read — a file that does not parse
as a program of the tool's language (a C parse error for z3 and UAutomizer alike, a
Dafny parse error) — is ERROR with the parser's message as the reason, never UNKNOWN or
FALSE; UNKNOWN is for inputs the tool read but could not decide (including constructs
outside what it supports).  A program that was read but is ill-typed is a verdict
(Dafny's resolution errors: FALSE), as is a contest compile error for the judge (CE:
Codeforces' verdict on the program, not a failure to read the judge's input).
`launch verify` exits 1 on ERROR (`launch/commands/verify.py`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

# The default verification budget, in seconds, of one query: InvBench's (the paper's 600 s
# UAutomizer budget), and a `Limits` that names no wall limit.
DEFAULT_WALL_S = 600.0


class Status(StrEnum):
    TRUE = "TRUE"        # property holds (program safe / all obligations proved)
    FALSE = "FALSE"      # property violated (a counterexample exists)
    UNKNOWN = "UNKNOWN"  # the tool gave up or the input is outside what it supports
    TIMEOUT = "TIMEOUT"  # wall or CPU limit hit
    OOM = "OOM"          # memory limit hit
    ERROR = "ERROR"      # the tool crashed, could not be run or could not read the input; not a verdict

    @property
    def decided(self) -> bool:
        return self in (Status.TRUE, Status.FALSE)


@dataclass(frozen=True)
class Limits:
    """Hard limits, enforced from outside the tool.

    A CPU-time cap only when asked for: `cpu_s` None (the default) or ``math.inf`` means no
    CPU-time limit, only the wall limit.  The benchmarks are wall-clock, and a multi-threaded
    tool (UAutomizer's JVM uses 1.0-2.3x as much CPU as wall time) capped at its wall limit
    in CPU seconds is stopped at ~50-70 % of the wall budget it was given.  Whoever needs a
    CPU cap — the judge running untrusted programs — passes `cpu_s` explicitly."""

    wall_s: float = DEFAULT_WALL_S
    cpu_s: float | None = None
    memory_mb: int = 8192

    @property
    def cpu_cap(self) -> float:
        """The CPU-time limit in seconds; ``math.inf`` when none was asked for."""
        return math.inf if self.cpu_s is None else float(self.cpu_s)

    def key(self) -> dict[str, Any]:
        # None and inf are one limit (none), keyed as inf: an uncapped query is answered only
        # by a record made without a CPU cap, never by one whose cap was a number.
        return {"wall_s": self.wall_s, "cpu_s": self.cpu_cap, "memory_mb": self.memory_mb}


@dataclass
class VerifierResult:
    status: Status
    wall_s: float
    cpu_s: float
    peak_mem_mb: float
    termination_reason: str   # "exit", "walltime", "cputime", "memory", "signal", "error", "cancelled"
    tool: str
    tool_version: str
    log_path: str | None = None
    reason: str | None = None  # human-readable why (UNKNOWN/ERROR reasons, e.g. "arrays unsupported")
    extras: dict[str, Any] = field(default_factory=dict)  # invariants, counterexample, dafny errors...
    # How the limits were enforced, e.g. "cgroup2+subreaper; memory by polling"
    # (`verifiers.runner.Execution.enforcement`); None for results made without the runner.
    limits_enforced_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = str(self.status)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> VerifierResult:
        d = dict(d)
        d["status"] = Status(d["status"])
        return cls(**d)
