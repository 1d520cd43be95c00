"""What the rest of the toolkit imports from the embedded Z3 verifier.

* `verify(text, timeout_s)` — a verdict as a `VerifierResult`.  By default the
  portfolio runs its members as killable subprocesses (the production path is
  still the `EmbeddedZ3Tool` adapter under `verifiers.runner`'s limits); `in_process=True`
  runs them in this process, relying on Z3's own timeouts (fine for tests).
* `extract_invariants(text, timeout_s)` — the loop invariants of a proof, as C
  expressions per loop label, each re-parsed and re-checked.
* `check_candidate(text, loop, expr, timeout_ms)` — initiation / consecution /
  safety of a candidate with an ICE example (see `candidate`).
* `omt_bounds(text, loop, formula)` — min/max per variable (CE-Bench).
"""

from __future__ import annotations

import resource
import time
from typing import Any

from veribatch.verifiers.result import Status, VerifierResult
from veribatch.verifiers.z3c import portfolio
from veribatch.verifiers.z3c.candidate import (
    Bounds,
    CandidateCheck,
    check_candidate,
    omt_boundaries,
    omt_bounds,
)
from veribatch.verifiers.z3c.cexpr import CandidateError
from veribatch.verifiers.z3c.encode import Unsupported

__all__ = [
    "Bounds", "CandidateCheck", "CandidateError", "Unsupported", "check_candidate",
    "extract_invariants", "omt_boundaries", "omt_bounds", "verify",
]


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def verify(
    text: str,
    timeout_s: float = 60.0,
    *,
    data_model: str = "ILP32",
    in_process: bool = False,
    filename: str = "<program>",
) -> VerifierResult:
    """Verify reach_error-unreachability of the C program `text`."""
    t0, c0 = time.monotonic(), _cpu()
    out = portfolio.verify_text(
        text, timeout_s, data_model=data_model, in_process=in_process, filename=filename
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return VerifierResult(
        status=Status(out.status),
        wall_s=time.monotonic() - t0,
        cpu_s=_cpu() - c0,
        peak_mem_mb=peak,
        termination_reason="exit",
        tool="z3",
        tool_version=portfolio.tool_version(),
        reason=out.reason,
        extras=dict(out.extras),
    )


def extract_invariants(
    text: str, timeout_s: float = 60.0, *, data_model: str = "ILP32", in_process: bool = False
) -> list[dict[str, Any]]:
    """`[{"loop": k, "line": N, "invariant": "<C expr>"}]` from a proof; [] when none was found."""
    res = verify(text, timeout_s, data_model=data_model, in_process=in_process)
    if res.status is not Status.TRUE:
        return []
    return list(res.extras.get("invariants") or [])
