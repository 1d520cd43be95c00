"""The verifier-based decision procedure of InvBench §3.2, and its parallel evaluation.

For a program P, target p* and candidate q = ⟨ψ, ℓ⟩ two verifier queries run at once:

    d_a = V(P, ∅, q)      is ψ an invariant at ℓ?   (ψ asserted, p* not asserted)
    d_b = V(P, {q}, p*)   does p* hold assuming q?  (ψ assumed,  p* asserted)

and the outcome follows exactly one rule:

    DEC-FALSE  d_b = F                       ⇒ F
    DEC-PROP   d_a = T and d_b ∈ {T, U}      ⇒ d_b
    DEC-U      d_a ≠ T and d_b ≠ F           ⇒ U

A verifier answer other than TRUE/FALSE (UNKNOWN, TIMEOUT, OOM, ERROR) is U for the
calculus; the raw statuses are still recorded so an ERROR is never mistaken for a
verdict.  `decide` also works on partial information, which is what lets the runner
stop early: d_b = F decides at once (d_a is killed), and nothing else decides before
both answers are in.

`run_candidates` evaluates N candidates in parallel (Best-of-N): all 2N queries start
together; the first candidate to reach a conclusive outcome (T or F) wins and every
d_b query still running is killed, not awaited (InvBench §5.6).

"% correct invariant" (Tables 2/3, §4) counts instances with a *verified-correct*
invariant: some candidate's d_a = T within the instance's decision timeout.  Whether ψ is
an invariant does not depend on which rule decided or which candidate won, so killing
d_a at the decision (after DEC-FALSE, or when another candidate wins) would undercount
it.  With ``settle_invariants`` (the default) the d_a queries of all candidates keep
running after the decision, under the same limits, until one of them proves its ψ (the
instance is then counted, and the rest are killed) or all have ended.  The decision and
its time — what speedups are computed from — are fixed at the moment the rules fire.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from veribatch.verifiers.result import Limits, Status, VerifierResult

T, F, U = "TRUE", "FALSE", "UNKNOWN"


def decide(d_a: Status | None, d_b: Status | None) -> tuple[str, str] | None:
    """(decision, rule) once the statuses known so far fix the outcome; None while open.

    `None` for a query means "still running"."""
    if d_b == Status.FALSE:
        return F, "DEC-FALSE"
    if d_a is None or d_b is None:
        return None
    if d_a == Status.TRUE:
        return (T if d_b == Status.TRUE else U), "DEC-PROP"
    return U, "DEC-U"


class RunningQuery(Protocol):
    """What `verifiers` hands back for a started query (see `verifiers.registry`)."""

    def poll(self) -> VerifierResult | None: ...

    def kill(self) -> VerifierResult | None: ...


class Verifier(Protocol):
    version: str

    def start(self, query: Any, limits: Limits, log_dir: Path) -> RunningQuery: ...


@dataclass
class CandidateRun:
    """Both queries of one candidate and, once known, its decision."""

    index: int
    program_a: Path  # ψ asserted at ℓ, target not asserted
    program_b: Path  # ψ assumed at ℓ, target asserted
    d_a: VerifierResult | None = None
    d_b: VerifierResult | None = None
    decision: str | None = None
    rule: str | None = None
    decision_time_s: float | None = None
    killed: bool = False  # its d_b was stopped because another candidate decided first
    d_a_after_decision: bool = False  # d_a ended after the decision (kept running to settle it)
    queries: dict[str, RunningQuery] = field(default_factory=dict)

    @property
    def status_a(self) -> Status | None:
        return self.d_a.status if self.d_a else None

    @property
    def status_b(self) -> Status | None:
        return self.d_b.status if self.d_b else None


def _decision_time(run: CandidateRun) -> float:
    """Wall time the deciding queries took (they ran in parallel, so the slower one counts)."""
    if run.rule == "DEC-FALSE":
        assert run.d_b is not None
        return run.d_b.wall_s
    return max(r.wall_s for r in (run.d_a, run.d_b) if r is not None)


def _stop(run: CandidateRun, which: str) -> None:
    q = run.queries.pop(which, None)
    if q is None:
        return
    res = q.kill()
    if res is not None:
        setattr(run, which, res)


def run_candidates(
    verifier: Verifier,
    candidates: list[CandidateRun],
    limits: Limits,
    log_dir: Path,
    *,
    make_query: Callable[[Path], Any],
    first_decisive_wins: bool = True,
    settle_invariants: bool = True,
    sequential: bool = False,
    slots: int = 1,
    poll_s: float = 0.01,
) -> list[CandidateRun]:
    """Run d_a ∥ d_b for every candidate and apply `decide`; return the candidates, decided.

    `make_query(path)` builds the verifier query for one instrumented program.  With
    `sequential` (a node with fewer CPUs than the parallel queries need) at most `slots`
    queries run at once, see `_run_sequentially`."""
    if sequential:
        return _run_sequentially(verifier, candidates, limits, log_dir, make_query, poll_s, slots)
    for run in candidates:
        for which, path in (("d_a", run.program_a), ("d_b", run.program_b)):
            qdir = log_dir / f"cand{run.index}_{which}"
            qdir.mkdir(parents=True, exist_ok=True)
            run.queries[which] = verifier.start(make_query(path), limits, qdir)
    keep = ("d_a",) if settle_invariants else ()
    open_runs = list(candidates)
    while open_runs:
        progressed = False
        newly_decisive: list[CandidateRun] = []
        for run in list(open_runs):
            for which in list(run.queries):
                res = run.queries[which].poll()
                if res is not None:
                    setattr(run, which, res)
                    run.queries.pop(which)
                    progressed = True
            outcome = decide(run.status_a, run.status_b)
            if outcome is None:
                continue
            run.decision, run.rule = outcome
            run.decision_time_s = _decision_time(run)
            for which in list(run.queries):  # d_a after DEC-FALSE: kept to settle ψ, unless asked
                if which not in keep:
                    _stop(run, which)
            open_runs.remove(run)
            if run.decision in (T, F):
                newly_decisive.append(run)
        if first_decisive_wins and newly_decisive:
            # Several may finish within one poll: the fastest is the winner, the others
            # keep their (also decisive) outcome; every other d_b is killed.
            for other in open_runs:
                for which in list(other.queries):
                    if which not in keep:
                        _stop(other, which)
                other.killed = True
            break
        if open_runs and not progressed:
            time.sleep(poll_s)
    _settle(candidates, poll_s)
    return candidates


def _settle(candidates: list[CandidateRun], poll_s: float) -> None:
    """Let the d_a queries still running end (or one of them prove its ψ; then stop the rest)."""
    running = [r for r in candidates if "d_a" in r.queries]
    proved = any(r.status_a == Status.TRUE for r in candidates)
    while running and not proved:
        progressed = False
        for run in list(running):
            res = run.queries["d_a"].poll()
            if res is None:
                continue
            run.queries.pop("d_a")
            run.d_a, run.d_a_after_decision = res, True
            running.remove(run)
            progressed = True
            proved = proved or res.status == Status.TRUE
        if running and not progressed:
            time.sleep(poll_s)
    for run in running:
        _stop(run, "d_a")


def _run_sequentially(verifier: Verifier, candidates: list[CandidateRun], limits: Limits, log_dir: Path,
                      make_query: Callable[[Path], Any], poll_s: float, slots: int = 1) -> list[CandidateRun]:
    """At most `slots` queries at a time — the shard's CPUs divided by what one query (the
    baseline) had — each with the whole decision timeout, instead of 2N multi-core queries
    starving each other on too few CPUs (UAutomizer's two JVMs on two cores: each cut at the
    solo baseline's time).  A query so gets about the CPUs the baseline had, not every CPU
    of the shard (one JVM alone on 32 CPUs against a baseline on 2 would be faster than the
    baseline for want of competition, not for its invariant).

    Per candidate d_b is queued first (DEC-FALSE needs only it), then d_a (DEC-PROP needs
    it; after DEC-FALSE it settles "% correct invariant" as in the parallel run).  The
    decision time is computed from each query's own wall time exactly as for the parallel
    run (`_decision_time`: d_b for DEC-FALSE, the slower of the two otherwise) — what
    d_a ∥ d_b takes on a node with a core set for each, as in the paper.  Every candidate
    runs to its end (no kill); the caller picks the fastest conclusive one, as the parallel
    run's first to decide."""
    queue = [(run, which, path) for run in candidates
             for which, path in (("d_b", run.program_b), ("d_a", run.program_a))]
    running: list[tuple[CandidateRun, str, RunningQuery]] = []
    while queue or running:
        while queue and len(running) < max(1, slots):
            run, which, path = queue.pop(0)
            qdir = log_dir / f"cand{run.index}_{which}"
            qdir.mkdir(parents=True, exist_ok=True)
            running.append((run, which, verifier.start(make_query(path), limits, qdir)))
        progressed = False
        for item in list(running):
            run, which, query = item
            res = query.poll()
            if res is None:
                continue
            setattr(run, which, res)
            running.remove(item)
            progressed = True
        if running and not progressed:
            time.sleep(poll_s)
    for run in candidates:
        outcome = decide(run.status_a, run.status_b)
        assert outcome is not None  # both answers are in
        run.decision, run.rule = outcome
        run.decision_time_s = _decision_time(run)
        run.d_a_after_decision = run.rule == "DEC-FALSE"
    return candidates
