"""One guard per soundness rule of the z3c README: each test fails when its rule is removed.

The rules are about what may become a verdict: TRUE only from a proof `chc.validate`
decided clause by clause (an undecided clause — forced here with a tiny Z3 resource
limit, `rlimit` — is no proof, and neither is a linear-first check that ran out), FALSE
only from a trace the compiled program replays into `reach_error` (BMC's own models and
Spacer's "unsafe" are hints).  Each guard has an unsafe twin that must never become TRUE.
Z3's `rlimit` counts solver steps, not seconds: the forced `unknown` does not depend on
the machine's load.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import z3

from tests.support.z3c_programs import prog
from veribatch.verifiers.result import Status
from veribatch.verifiers.z3c import api, chc, engines, portfolio, replay
from veribatch.verifiers.z3c.encode import encode
from veribatch.verifiers.z3c.ir import Clause

COUNTER = """int main() { int i = 0; int n = __VERIFIER_nondet_int();
  assume_abort_if_not(n >= 0 && n <= 1000);
  while (i < n) { i++; } __VERIFIER_assert(i == n); return 0; }"""
COUNTER_UNSAFE = COUNTER.replace("i < n", "i <= n")  # leaves the loop with i == n + 1
# An error reachable only through a division by zero (undefined: no counterexample).
DIV_BY_ZERO = """int main() { int d = __VERIFIER_nondet_int(); int q = 7 / d;
  if (d == 0 && q == 5) { reach_error(); } return 0; }"""
# Really unsafe, found at once by Spacer and BMC: d == 2 gives 7 / 2 == 3.
DIV_UNSAFE = """int main() { int d = __VERIFIER_nondet_int(); assume_abort_if_not(d > 0);
  int q = 7 / d; __VERIFIER_assert(q != 3); return 0; }"""


@pytest.fixture
def starved_z3() -> Iterator[None]:
    """Every Z3 check made while the test runs gives up at once ("max. resource limit
    exceeded"): a re-check that cannot decide, whatever the machine's load."""
    yield
    z3.set_param("rlimit", 0)


def starve() -> None:
    z3.set_param("rlimit", 1)


def _clauses(*clauses: Clause) -> SimpleNamespace:
    """A Horn system of hand-written clauses (`validate` reads only `clauses`)."""
    return SimpleNamespace(clauses=list(clauses))


# --- is_linear, on terms chosen by hand (not recomputed from the code) -----------------

def _xya() -> tuple[z3.ArithRef, z3.ArithRef, z3.ArrayRef]:
    return z3.Int("x"), z3.Int("y"), z3.Array("a", z3.IntSort(), z3.IntSort())


@pytest.mark.parametrize(("term", "linear"), [
    (lambda X, Y, A: X * Y > 0, False),
    (lambda X, Y, A: X * X >= 0, False),
    (lambda X, Y, A: X / Y == 1, False),  # quotient of two variables
    (lambda X, Y, A: X % Y == 0, False),
    (lambda X, Y, A: 2 * X + 3 > Y, True),
    (lambda X, Y, A: X * 3 - Y <= 7, True),
    (lambda X, Y, A: X / 3 >= Y, True),  # by a literal: linear integer arithmetic (div/mod by constants)
    (lambda X, Y, A: X % 4 == 1, True),
    (lambda X, Y, A: z3.If(X > 0, X, -X) >= Y, True),
    (lambda X, Y, A: z3.And(X >= 0, z3.Or(Y < 2, X == Y)), True),
    (lambda X, Y, A: z3.ForAll([X], X + Y >= Y), False),  # quantified
    (lambda X, Y, A: z3.Exists([X], X > Y), False),
    (lambda X, Y, A: A[X] > Y, False),  # arrays (the heap's $mem)
    (lambda X, Y, A: z3.Implies(X * Y > 0, X > 0), False),  # a product anywhere below
])
def test_is_linear_classifies_hand_picked_terms(term, linear: bool) -> None:  # noqa: ANN001
    # the terms are made here, not at collection: z3's main context may be reset in between
    X, Y, A = _xya()
    term = term(X, Y, A)
    assert chc.is_linear(term) is linear
    assert chc.is_linear(X >= 0, term) is linear  # several roots: linear only if all are


# --- validate: an undecided clause is no proof -----------------------------------------

def test_validate_on_an_undecided_clause_is_no_proof(starved_z3: None) -> None:
    """Spacer's real proof of a safe loop: valid; with every check starved, each clause is
    undecided and the answer is (None, the clause), never (True, None)."""
    enc = encode(engines.parsed(prog(COUNTER)), mode="chc")
    ans = chc.solve(enc, timeout_ms=20_000)
    assert ans.status == "safe" and ans.interps is not None
    assert chc.validate(enc, ans.interps, timeout_ms=10_000) == (True, None)
    starve()
    ok, why = chc.validate(enc, ans.interps, timeout_ms=10_000)
    assert ok is None, why
    assert why is not None and why.startswith("clause 0 (") and "resource limit" in why


def test_validate_undecided_on_one_clause_only_is_still_no_proof(starved_z3: None) -> None:
    """Only one clause undecided (the others valid): the whole proof is unchecked."""
    x = z3.Int("x")
    inv = z3.Function("inv", z3.IntSort(), z3.BoolSort())
    init = Clause((), x == 0, inv(x), 1, "init")
    # x**3 + y**3 == z**3 has no positive solution, but no arithmetic solver of Z3 shows it
    y, z = z3.Ints("y z")
    hard = Clause((inv(x),), z3.And(x > 0, y > 0, z > 0, x * x * x + y * y * y == z * z * z),
                  None, 2, "error")
    interps = {"inv": z3.Var(0, z3.IntSort()) >= 0}
    ok, why = chc.validate(_clauses(init, hard), interps, timeout_ms=300)
    assert ok is None and why is not None and why.startswith("clause 1 (error, line 2)"), why
    # its violated twin (3**2 + 4**2 == 5**2) is found violated, never proved
    squares = Clause((inv(x),), z3.And(x > 0, y > 0, z > 0, x * x + y * y == z * z),
                     None, 2, "error")
    ok, why = chc.validate(_clauses(init, squares), interps, timeout_ms=5000)
    assert ok is False and why == "clause 1 (error, line 2) is violated", why


def test_validate_without_time_left_is_no_proof() -> None:
    enc = encode(engines.parsed(prog(COUNTER)), mode="chc")
    ans = chc.solve(enc, timeout_ms=20_000)
    assert ans.interps is not None
    ok, why = chc.validate(enc, ans.interps, deadline=time.monotonic() - 1)
    assert ok is None and why == "re-check ran out of time"


# --- the linear-first check: running out is not unsat -----------------------------------

def _product_clause() -> Clause:
    """z == x*y with x, y >= 0 entails z >= 0, not z >= 1; the linear hypotheses alone
    (x, y >= 0) entail neither, so the linear-first check is tried (the non-linear
    hypothesis dropped) and cannot show it."""
    x, y, z = z3.Ints("x y z")
    inv = z3.Function("inv", z3.IntSort(), z3.BoolSort())
    return Clause((), z3.And(x >= 0, y >= 0, z == x * y), inv(z), 1, "init")


def test_linear_first_check_running_out_is_not_unsat(starved_z3: None) -> None:
    c = _product_clause()
    safe = {"inv": z3.Var(0, z3.IntSort()) >= 0}
    assert chc.validate(_clauses(c), safe) == (True, None)
    starve()  # the linear-first check and the full check both give up
    ok, why = chc.validate(_clauses(c), safe)
    assert ok is None and "resource limit" in (why or ""), why


def test_linear_first_check_running_out_keeps_a_violated_clause(starved_z3: None,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The unsafe twin: z >= 1 fails for x == 0.  Only the linear-first check starves; the
    full check then finds the violation (were 'unknown' taken as unsat, the head would
    have been skipped and the proof accepted)."""
    c = _product_clause()
    wrong = {"inv": z3.Var(0, z3.IntSort()) >= 1}
    real = chc._unsat_quickly

    def starved_first(assertions: list[z3.BoolRef], budget_ms) -> bool:  # noqa: ANN001
        starve()
        try:
            return real(assertions, budget_ms)
        finally:
            z3.set_param("rlimit", 0)

    monkeypatch.setattr(chc, "_unsat_quickly", starved_first)
    ok, why = chc.validate(_clauses(c), wrong)
    assert ok is False and why == "clause 0 (init, line 1) is violated", why


# --- Spacer's proof is re-checked before it is a TRUE ------------------------------------

def _claims_safe(enc: object, **_: object) -> chc.SpacerAnswer:
    """A Spacer that answers "safe" with every predicate true (a wrong proof on an unsafe
    program) — what a solver bug or a misread model would look like."""
    return chc.SpacerAnswer("safe", {p.decl.name(): z3.BoolVal(True) for p in enc.preds})  # type: ignore[attr-defined]


def test_a_wrong_spacer_proof_is_never_true(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chc, "solve", _claims_safe)
    got = engines.run_spacer(prog(COUNTER_UNSAFE), 5)
    assert got["answer"] == "unknown" and "did not re-check" in got["reason"], got
    out = portfolio.verify_text(prog(COUNTER_UNSAFE), 6, in_process=True, members=("spacer",))
    assert out.status != "TRUE", out


def test_an_unchecked_spacer_proof_is_never_true(monkeypatch: pytest.MonkeyPatch,
                                                 starved_z3: None) -> None:
    """The wrong proof again, its re-check starved: undecided, so no verdict either way."""
    def starving(enc: object, **kw: object) -> chc.SpacerAnswer:
        starve()
        return _claims_safe(enc)

    monkeypatch.setattr(chc, "solve", starving)
    got = engines.run_spacer(prog(COUNTER_UNSAFE), 5)
    assert got["answer"] == "unknown" and got.get("unchecked_proof") is True, got
    assert "could not be re-checked (clause" in got["reason"]


# --- FALSE only from a replayed trace ------------------------------------------------------

def test_bmc_trace_needing_undefined_behaviour_is_not_false() -> None:
    """BMC's model divides by zero (any quotient); gcc's UBSan replay rejects the trace."""
    got = engines.run_bmc(prog(DIV_BY_ZERO), 3)
    assert got["answer"] == "unknown", got
    assert "unconfirmed counterexample" in got["reason"] and "division by zero" in got["reason"]


def _refuse_every_replay(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The replay (say, gcc) confirming no trace at all; the list records each one offered."""
    calls: list[object] = []

    def refuse(*a: object, **k: object) -> replay.Replay:
        calls.append(a)
        return replay.Replay(False, "replay refused (test)")

    monkeypatch.setattr(replay, "replay", refuse)
    return calls


def test_bmc_without_a_confirming_replay_is_never_false(monkeypatch: pytest.MonkeyPatch) -> None:
    """A truly unsafe program whose replay (say, gcc) does not confirm the trace: no FALSE."""
    assert engines.run_bmc(prog(DIV_UNSAFE), 30)["answer"] == "false"  # at depth 0, at once
    calls = _refuse_every_replay(monkeypatch)
    got = engines.run_bmc(prog(DIV_UNSAFE), 6)
    assert calls and got["answer"] == "unknown" and "replay refused (test)" in got["reason"], got



XOR_UNSAFE = """int main() { int x = __VERIFIER_nondet_int(); int y = __VERIFIER_nondet_int();
  if ((x ^ y) == 12345) { reach_error(); } return 0; }"""  # `^` of two variables: bit by bit


@pytest.mark.parametrize("search", ["bit-vectors", "bit-blast"])
def test_a_bit_level_trace_without_a_confirming_replay_is_never_false(
        search: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both bit-level counterexample searches hand out candidate traces only: the
    bit-vector search (rule 23), which BMC runs first, and the bit-blasted one (rule 16),
    run here on its own by taking the first away.  Each one's first trace is confirmed by
    the replay on the unsafe program; with the replay refusing every trace, no FALSE (each
    rejected trace is blocked until the time runs out)."""
    if search == "bit-blast":
        monkeypatch.setattr(engines, "_exact_bits", lambda *a, **k: None)
    got = engines.run_bmc(prog(XOR_UNSAFE), 30)
    assert got["answer"] == "false" and got["counterexample"]["search"] == search, got
    calls = _refuse_every_replay(monkeypatch)
    got = engines.run_bmc(prog(XOR_UNSAFE), 2)
    assert calls and got["answer"] == "unknown" and "replay refused (test)" in got["reason"], got

def test_spacers_unsafe_without_a_trace_is_never_false() -> None:
    """Spacer finds the error of DIV_BY_ZERO reachable (the quotient by 0 is any value);
    no trace replays: UNKNOWN or TIMEOUT, the hint named, never FALSE (nor TRUE)."""
    assert engines.run_spacer(prog(DIV_BY_ZERO), 5)["answer"] == "unsafe"
    res = api.verify(prog(DIV_BY_ZERO), 5, in_process=True)
    assert res.status in (Status.UNKNOWN, Status.TIMEOUT), res
    assert "Spacer found the error reachable (no confirmed trace yet)" in (res.reason or "")


def test_spacers_unsafe_on_a_real_error_still_needs_the_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "replay", lambda *a, **k: replay.Replay(False, "replay refused (test)"))
    out = portfolio.verify_text(prog(DIV_UNSAFE), 5, in_process=True, members=("spacer", "bmc"))
    assert out.status in ("UNKNOWN", "TIMEOUT"), out
    assert "Spacer found the error reachable" in (out.reason or "")


# --- TRUE from a bounded unrolling only when it covers every execution --------------------

DEEP_ERROR = """int main() { int i = 0; while (i < 1000) { i++; }
  if (i == 1000) { reach_error(); } return 0; }"""  # unsafe, but only past 1000 iterations


def test_an_unrolling_that_cuts_paths_is_no_proof() -> None:
    """Shallow unrollings of DEEP_ERROR reach no error but cut the loop: not a proof; the
    bounded twin (5 iterations) is proved by the complete unrolling."""
    got = engines.run_bmc(prog(DEEP_ERROR), 2)
    assert got["answer"] in ("unknown", "false"), got
    safe = engines.run_bmc(prog(DEEP_ERROR.replace("i == 1000", "i != 1000")
                                .replace("1000", "5")), 20)
    assert safe == {"answer": "safe", "proof": "complete-unrolling", "invariants": []}, safe



def test_cut_paths_shown_infeasible_still_give_the_proof() -> None:
    """The other half of the rule: a loop bounded by an input (n <= 3) is cut at every depth,
    and its unrolling is a proof once no execution reaches the cut; the unsafe twin (n <= 4
    reaches i == 4) is never TRUE."""
    body = """int main() { int n = __VERIFIER_nondet_int(); assume_abort_if_not(n >= 0 && n <= N);
      int i = 0; while (i < n) { i++; } __VERIFIER_assert(i <= 3); return 0; }"""
    enc = encode(engines.parsed(prog(body.replace("N", "3"))), mode="unroll", depth=7)
    assert enc.cut and engines._cut_infeasible(enc, time.monotonic() + 10)
    got = engines.run_bmc(prog(body.replace("N", "3")), 10)
    assert got == {"answer": "safe", "proof": "complete-unrolling", "invariants": []}, got
    assert engines.run_bmc(prog(body.replace("N", "4")), 10)["answer"] == "false"

def test_cut_paths_undecided_are_not_infeasible(starved_z3: None) -> None:
    enc = encode(engines.parsed(prog(DEEP_ERROR)), mode="unroll", depth=3)
    assert enc.cut and not engines._cut_infeasible(enc, time.monotonic() + 10)
    starve()  # "unknown" must not count as "no execution goes deeper"
    assert not engines._cut_infeasible(enc, time.monotonic() + 10)


# --- TRUE from templates only through the same re-check ------------------------------------

TRIANGLE = """int main() { int x = 0, y = 0;
  while (__VERIFIER_nondet_int() && x < 100) { x++; y += x; }
  __VERIFIER_assert(2 * y == x * x + x); return 0; }"""  # an equality Spacer rarely finds


def test_templates_proof_is_true_only_when_validate_decides_it(monkeypatch: pytest.MonkeyPatch) -> None:
    got = engines.run_templates(prog(TRIANGLE), 15)
    assert got["answer"] == "safe" and got["proof"].startswith("templates"), got
    # unsafe twin (2y == x*x fails after one step): no template proof
    twin = engines.run_templates(prog(TRIANGLE.replace("x * x + x", "x * x")), 8)
    assert twin["answer"] != "safe", twin
    # the same proof with every re-check undecided: no verdict
    monkeypatch.setattr(chc, "validate", lambda *a, **k: (None, "clause 0 (init, line 1): starved"))
    got = engines.run_templates(prog(TRIANGLE.replace("x = 0, y = 0", "x = 0, y = 0, w = 0")), 15)
    assert got["answer"] != "safe", got


# --- the replay confirms reach_error itself, not its exit code or its text alone -------------

def test_replay_confirms_only_reach_error() -> None:
    """Exit code 99 without reach_error, or the replay's mark printed by the program itself:
    neither is the error (the replay needs both, which only its own `reach_error` gives)."""
    text = prog("""extern void exit(int); extern int puts(const char *);
      int main() { int x = __VERIFIER_nondet_int();
        if (x == 7) { exit(99); }
        if (x == 8) { puts("VERIBATCH_REACH_ERROR"); return 0; }
        if (x == 9) { reach_error(); }
        return 0; }""")
    ast = engines.parsed(text)
    assert replay.replay(ast, [9]).confirmed
    for x in (7, 8, 0):
        rep = replay.replay(ast, [x])
        assert not rep.confirmed, (x, rep)



def test_a_replay_program_that_does_not_compile_confirms_nothing() -> None:
    """The front end does not type-check: a program gcc rejects (an undeclared variable) is
    no confirmation, even on the trace that would reach reach_error; its twin, the variable
    declared, compiles and is confirmed on the same trace."""
    body = """int main() { int x = __VERIFIER_nondet_int(); DECL
      if (x == 3) { y = x; reach_error(); } return 0; }"""
    rep = replay.replay(engines.parsed(prog(body.replace("DECL", ""))), [3])
    assert not rep.confirmed and rep.detail.startswith("replay program did not compile"), rep
    assert replay.replay(engines.parsed(prog(body.replace("DECL", "int y = 0;"))), [3]).confirmed

def test_clauses_without_an_error_path_are_proved_and_rechecked() -> None:
    """No path reaches reach_error: Spacer is not even asked (every predicate true), and
    that interpretation still passes the re-check of every clause."""
    text = prog("""int main() { int i = 0; while (__VERIFIER_nondet_int()) { i++; }
      if (i < 0 && 0) { reach_error(); } return 0; }""")
    got = engines.run_spacer(text, 5)
    assert got["answer"] == "safe" and got["proof_checked"] is True, got
    out = portfolio.verify_text(text, 10, in_process=True)  # the verdict carries the flag
    assert out.status == "TRUE" and out.extras["proof_checked"] is True, out


def test_linear_first_check_without_time_for_itself_proves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A linear-first check left less than its minimum (20 ms) is not run — and not taken
    as unsat: the violated twin of the product clause is still found violated."""
    monkeypatch.setattr(chc, "LINEAR_FIRST_MS", 10)
    wrong = {"inv": z3.Var(0, z3.IntSort()) >= 1}
    ok, why = chc.validate(_clauses(_product_clause()), wrong)
    assert ok is False and why == "clause 0 (init, line 1) is violated", why


def test_a_replay_that_does_not_end_confirms_nothing() -> None:
    text = prog("""int main() { int x = __VERIFIER_nondet_int();
      while (x == 5) { } reach_error(); return 0; }""")
    ast = engines.parsed(text)
    rep = replay.replay(ast, [5], timeout_s=1.0)
    assert not rep.confirmed and ("timed out" in rep.detail or "walltime" in rep.detail), rep
