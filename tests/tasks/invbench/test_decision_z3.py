"""The decision procedure on the embedded z3 verifier: real queries, real kills."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from veribatch.tasks.invbench.decision import CandidateRun, run_candidates
from veribatch.tasks.invbench.instrument import instrument
from veribatch.verifiers import cfront
from veribatch.verifiers.base import Query
from veribatch.verifiers.registry import get_verifier
from veribatch.verifiers.result import Limits, Status

SAMPLE = Path(__file__).resolve().parents[3] / "veribatch" / "tasks" / "invbench" / "sample"


@pytest.fixture(scope="module")
def z3():
    return get_verifier("z3")


def _query(path: Path) -> Query:
    return Query(files=(path,))


def _candidate(tmp_path: Path, name: str, index: int, psi: str, label: int = 1) -> CandidateRun:
    progs = instrument((SAMPLE / name).read_text(), label, psi, filename=name)
    a, b = tmp_path / f"c{index}_a.c", tmp_path / f"c{index}_b.c"
    a.write_text(progs.check_invariant)
    b.write_text(progs.use_invariant)
    return CandidateRun(index=index, program_a=a, program_b=b)


def _decide(z3, tmp_path: Path, cands: list[CandidateRun], wall_s: float = 20.0) -> list[CandidateRun]:
    return run_candidates(z3, cands, Limits(wall_s=wall_s), tmp_path / "logs", make_query=_query)


def test_true_invariant_proves_and_false_one_is_refuted(z3, tmp_path: Path) -> None:
    good, bad = _decide(z3, tmp_path, [_candidate(tmp_path, "count_up.c", 0, "x <= n")])[0], None
    assert good.status_a == Status.TRUE and good.status_b == Status.TRUE
    assert (good.decision, good.rule) == ("TRUE", "DEC-PROP")
    bad = _decide(z3, tmp_path, [_candidate(tmp_path, "count_up.c", 1, "x < n")])[0]
    assert bad.status_a == Status.FALSE  # x == n at the last loop head
    assert (bad.decision, bad.rule) == ("UNKNOWN", "DEC-U")


def test_dec_false_on_an_unsafe_program(z3, tmp_path: Path) -> None:
    run = _decide(z3, tmp_path, [_candidate(tmp_path, "off_by_one.c", 0, "s == i")])[0]
    assert run.status_b == Status.FALSE
    assert (run.decision, run.rule) == ("FALSE", "DEC-FALSE")
    assert run.decision_time_s == run.d_b.wall_s
    # s == i is an invariant: DEC-FALSE does not stop d_a from proving it (% correct, §4)
    assert run.status_a == Status.TRUE
    unsettled = run_candidates(z3, [_candidate(tmp_path, "off_by_one.c", 1, "s == i")], Limits(wall_s=20.0),
                               tmp_path / "logs2", make_query=_query, settle_invariants=False)[0]
    assert unsettled.decision == "FALSE"
    assert unsettled.status_a in (Status.TRUE, Status.UNKNOWN)  # TRUE only if d_a beat d_b
    assert unsettled.status_a == Status.TRUE or unsettled.d_a.termination_reason == "cancelled"


def test_strong_invariant_speeds_up_the_use_query(z3, tmp_path: Path) -> None:
    name = "counter_cond.c"
    plain = tmp_path / "plain.c"
    plain.write_text(cfront.to_source(cfront.parse((SAMPLE / name).read_text())))
    base = z3.run(_query(plain), Limits(wall_s=30), tmp_path / "base")
    assert base.status == Status.TRUE
    run = _decide(z3, tmp_path, [_candidate(tmp_path, name, 0, "counter <= 20 && x == 2 * (counter / 2)")])[0]
    assert (run.decision, run.rule) == ("TRUE", "DEC-PROP")
    assert run.d_b.wall_s < base.wall_s / 2, (run.d_b.wall_s, base.wall_s)


def test_best_of_n_first_decisive_wins_and_the_rest_are_killed(z3, tmp_path: Path) -> None:
    # parity_split takes z3 several seconds without help (complete unrolling of 100
    # iterations); with the weak ψ d_b is as slow, with the strong one it is quick.
    weak = _candidate(tmp_path, "parity_split.c", 0, "i >= 0")
    strong = _candidate(tmp_path, "parity_split.c", 1, "e + o == i && i <= 100")
    # what already ran under this pytest (other tests' fixtures, e.g. a session's `sh`/`cat`)
    # is not this decision's to reap
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    runs = _decide(z3, tmp_path, [weak, strong], wall_s=60.0)
    assert strong.decision == "TRUE" and not strong.killed
    # not awaited: the weak d_b (~20 s alone) was cancelled, not run out -- said by its
    # termination reason, not by a wall time (which depends on the machine's load)
    assert weak.killed and weak.decision is None
    assert weak.d_b is not None and weak.d_b.termination_reason == "cancelled"
    assert runs == [weak, strong]
    from veribatch.verifiers.forkserver import (
        IDLE_NAMES,  # the worker's fork server and spares stay
    )
    from veribatch.verifiers.judge import scratch

    def janitor() -> set[int]:  # the process's scratch janitor (and its `cat`) lives on by design
        j = scratch._STATE.get("janitor")
        if j is None:
            return set()
        return {j.pid} | {c.pid for c in psutil.Process(j.pid).children()} if psutil.pid_exists(j.pid) else set()

    def left() -> list[psutil.Process]:
        keep = before | janitor()
        return [p for p in psutil.Process().children(recursive=True)
                if p.pid not in keep and p.name() not in IDLE_NAMES]

    deadline = time.monotonic() + 10.0  # a killed tree takes a moment to be reaped under load
    while left() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left()


class _Counting:
    """The real z3 verifier, counting the queries the scheduler has running at once (started,
    and not yet seen finished by its poll)."""

    def __init__(self, inner) -> None:
        self.inner, self.live, self.most, self.started = inner, 0, 0, 0

    def start(self, query, limits, log_dir):
        self.live += 1
        self.started += 1
        self.most = max(self.most, self.live)
        running, outer = self.inner.start(query, limits, log_dir), self

        class _Watched:
            def poll(self):
                res = running.poll()
                if res is not None:
                    outer.live -= 1
                return res

            def kill(self):
                return running.kill()

        return _Watched()


@pytest.mark.parametrize("slots", [1, 2])
def test_the_sequential_schedule_runs_a_query_per_baseline_core_set(z3, tmp_path: Path, slots: int) -> None:
    """Too few CPUs for d_a ∥ d_b of every candidate: at most `slots` (the shard's CPUs / the
    baseline's) queries at once, not all 2N, and each candidate still decided as in parallel."""
    cands = [_candidate(tmp_path, "count_up.c", i, psi) for i, psi in enumerate(("x <= n", "x < n", "x >= 0"))]
    counting = _Counting(z3)
    run_candidates(counting, cands, Limits(wall_s=20.0), tmp_path / "logs", make_query=_query,
                   sequential=True, slots=slots)
    assert counting.started == 6 and counting.most == slots
    assert [(c.decision, c.rule) for c in cands] == [("TRUE", "DEC-PROP"), ("UNKNOWN", "DEC-U"), ("TRUE", "DEC-PROP")]
