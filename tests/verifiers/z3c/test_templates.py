"""Template invariants (`z3c.templates`): polynomial equalities guessed from concrete runs,
kept only when inductive, and TRUE only from an interpretation `chc.validate` re-checked.

The InvBench programs here are ones the portfolio timed out on before the member existed
(egcd, cohendiv, prod4br, ps4 at 30 s): Spacer alone does not find their polynomial
invariants, so these verdicts need the feature.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import z3

from veribatch.verifiers.result import Status
from veribatch.verifiers.z3c import api, chc, engines, portfolio, templates

EGCD = """extern void reach_error(void); extern int __VERIFIER_nondet_int(void);
void __VERIFIER_assert(int cond) { if (!cond) reach_error(); }
int main() {
  int x = __VERIFIER_nondet_int(); int y = __VERIFIER_nondet_int();
  if (x < 1 || y < 1 || x > 1000 || y > 1000) return 0;
  long long a = x, b = y, p = 1, q = 0, r = 0, s = 1;
  while (a != b) {
    __VERIFIER_assert(b == x * q + y * s);
    if (a > b) { a = a - b; p = p - q; r = r - s; } else { b = b - a; q = q - p; s = s - r; }
  }
  __VERIFIER_assert(a == x * p + y * r);
  return 0;
}
"""

# 2*s == i*(i-1) holds on every state a small input reaches, but not past i == 5000.
LATE_BREAK = """extern void reach_error(void); extern int __VERIFIER_nondet_int(void);
int main() {
  int n = __VERIFIER_nondet_int(); long long i = 0, s = 0;
  if (n < 0 || n > 100000) return 0;
  while (i < n) { s = s + i; if (i == 5000) s = s + 1; i = i + 1; }
  if (2 * s != i * (i - 1)) reach_error();
  return 0;
}
"""


def _easy(invbench_easy: Path, name: str) -> str:
    return (invbench_easy / f"{name}.c").read_text()


def test_null_space_finds_the_polynomial_relation_of_the_samples():
    # rows: monomials (1, a, b, a*b) at states where a*b == 6 + 0*a: the one relation
    rows = [[1, a, b, a * b] for a, b in ((1, 6), (2, 3), (3, 2), (6, 1), (-2, -3))]
    [vec] = templates._null_space(rows, 4)
    assert vec in ([6, 0, 0, -1], [-6, 0, 0, 1])


def test_equalities_recover_the_egcd_invariant_from_samples():
    st = engines.spacer_program(EGCD)[1]
    states = templates.reachable_states(st, seed=0)
    [pred] = [p for p in st.preds if p.label == 1]
    found = templates.candidates(st, states)[pred.decl.name()]
    args = [z3.Int(v.uid) for v in pred.sig]
    idx = {v.uid.split("@")[0].split("!")[0]: i for i, v in enumerate(pred.sig)}
    wanted = args[idx["b"]] == args[idx["x"]] * args[idx["q"]] + args[idx["y"]] * args[idx["s"]]
    inst = [z3.substitute_vars(f, *args) for f in found]
    s = z3.Solver()
    s.add(*inst)
    s.add(z3.Not(wanted))
    assert s.check() == z3.unsat, "the sampled equalities should imply b == x*q + y*s"


def test_templates_member_proves_egcd_with_a_rechecked_invariant():
    # (the grace lets the C form of the invariant re-check too, as a forked member's does)
    got = portfolio.run_member_safely("templates", EGCD, 20.0, "ILP32", recheck_grace_s=10.0)
    assert got["answer"] == "safe", got
    assert got["proof"].startswith("templates") and got["proof_checked"] is True
    [inv] = got["invariants"]
    # the C text re-checks independently as an inductive invariant that implies safety: in a
    # fresh interpreter, as a validation query runs, since in a process that has done much z3
    # work before (a full test session) the same non-linear query took from 0.6 s to over 30 s
    check = subprocess.run(
        [sys.executable, "-c", "import json, sys; from veribatch.verifiers.z3c import api; "
         "c = api.check_candidate(sys.argv[1], 1, sys.argv[2], 30000); "
         "print(json.dumps([c.ok, c.reasons]))", EGCD, inv["invariant"]],
        capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr[-2000:]
    ok, reasons = json.loads(check.stdout.strip().splitlines()[-1])
    assert ok, reasons


def test_a_guess_true_on_every_sample_but_not_inductive_is_no_proof():
    _, enc = engines.spacer_program(LATE_BREAK)
    states = templates.reachable_states(enc, seed=0)
    [pred] = [p for p in enc.preds if p.label == 1]
    cands = templates.candidates(enc, states)
    # the guess is made (every sampled state has i < 5000) ...
    assert any(z3.is_eq(f) and "Var" in str(f) and "*" in str(f) for f in cands[pred.decl.name()])
    # ... and dropped: not inductive, so neither alone nor strengthening Spacer is it a proof
    got = portfolio.run_member_safely("templates", LATE_BREAK, 8.0, "ILP32")
    assert got["answer"] != "safe", got


def test_validate_decides_prod4br_consecution_with_the_other_arith_solver(invbench_easy: Path):
    # Z3's default arithmetic solver does not decide this clause in 20 s; the old one in 0.01 s.
    _, enc = engines.spacer_program(_easy(invbench_easy, "prod4br-ll_unwindbound5_1"))
    [pred] = [p for p in enc.preds if p.label == 1]
    names = [v.uid for v in pred.sig]
    v = {n.split("@")[0]: z3.Var(i, z3.IntSort()) for i, n in enumerate(names)}
    inv = v["q"] + v["a"] * v["b"] * v["p"] == v["x"] * v["y"]
    t0 = time.monotonic()
    ok, why = chc.validate(enc, {pred.decl.name(): inv}, timeout_ms=4000)
    assert ok is True, why
    assert time.monotonic() - t0 < 30


def test_check_arith_tries_each_solver_briefly_before_the_long_turns(invbench_easy: Path):
    # The same clause with a 10 s budget: split between the solvers one after another,
    # the default (undecided in 20 s) spent 5 s of it before the old solver's 0.01 s;
    # the short probes (`chc.ARITH_PROBE_MS`) reach the old solver after 50 ms.
    _, enc = engines.spacer_program(_easy(invbench_easy, "prod4br-ll_unwindbound5_1"))
    [pred] = [p for p in enc.preds if p.label == 1]
    v = {s.uid.split("@")[0]: z3.Var(i, z3.IntSort()) for i, s in enumerate(pred.sig)}
    inv = v["q"] + v["a"] * v["b"] * v["p"] == v["x"] * v["y"]
    t0 = time.monotonic()
    ok, why = chc.validate(enc, {pred.decl.name(): inv}, timeout_ms=10_000)
    assert ok is True, why
    assert time.monotonic() - t0 < 3.0, time.monotonic() - t0


def test_validate_checks_only_the_clauses_of_the_changed_predicates():
    # `invariants_from` re-checks a loop's C text on the clauses at that loop only
    _, enc = engines.spacer_program(COHENCU)
    [pred] = [p for p in enc.preds if p.label == 1]
    v = {s.uid.split("@")[0]: z3.Var(i, z3.IntSort()) for i, s in enumerate(pred.sig)}
    wrong = {pred.decl.name(): v["n"] - v["a"] <= 0}  # not inductive (n reaches a + 1)
    ok, _ = chc.validate(enc, wrong, changed={pred.decl.name()})
    assert ok is False
    ok, _ = chc.validate(enc, wrong, changed={"no-such-predicate"})
    assert ok is True  # no clause reads or defines it: nothing to check


def test_invariants_from_prints_only_texts_equivalent_or_re_checked(monkeypatch):
    # `invariants_from` skips the re-check of a C text equivalent to the validated
    # interpretation (`engines._equivalent`); any other text must still re-check
    ast, enc = engines.spacer_program(COHENCU)
    [pred] = [p for p in enc.preds if p.label == 1]
    v = {s.uid.split("@")[0]: z3.Var(i, z3.IntSort()) for i, s in enumerate(pred.sig)}
    a, n, y, zz = v["a"], v["n"], v["y"], v["z"]
    interps = {pred.decl.name(): z3.And(zz == 6 * n + 6, y == 3 * n * n + 3 * n + 1, n >= 0,
                                        a >= 0, a <= 100, n - a <= 1)}
    assert chc.validate(enc, interps)[0] is True
    assert [i["loop"] for i in engines.invariants_from(ast, enc, interps)] == [1]
    assert engines._equivalent(pred, n >= 0, z3.Not(n < 0))
    assert not engines._equivalent(pred, n >= 0, n >= 1)
    z3.set_param("rlimit", 1)  # every check "unknown": not shown equivalent
    try:
        assert not engines._equivalent(pred, n >= 0, z3.Not(n < 0))
    finally:
        z3.set_param("rlimit", 0)
    monkeypatch.setattr(engines.cexpr, "to_c", lambda e, p: "n <= a")  # not inductive
    assert engines.invariants_from(ast, enc, interps) == []


@pytest.mark.parametrize("name", ["cohendiv-ll_unwindbound100_2", "ps4-ll_2"])
def test_portfolio_decides_former_nonlinear_timeouts(invbench_easy: Path, name: str):
    text = _easy(invbench_easy, name)
    res = api.verify(text, 40, in_process=True)
    assert res.status is Status.TRUE, (res.status, res.reason)
    assert res.extras["proof"] in ("templates", "templates+spacer")
    assert res.extras["proof_checked"] is True
    log = res.extras["portfolio"]
    assert log[-1]["member"] == "templates"
    # polynomial clauses: templates first runs in round 0, after BMC's and Spacer's slices
    # and before spacer-global's
    first = next(i for i, e in enumerate(log) if e["member"] == "templates")
    assert [e["member"] for e in log[:first]] == ["bmc", "spacer-nla", "spacer"]
    assert portfolio._templates_round(text, "ILP32", engines.MEMBERS) == portfolio.TEMPLATES_ROUND_POLY


def test_templates_run_before_spacer_global_only_on_clauses_with_products():
    assert portfolio._poly_order(engines.MEMBERS) == (
        "bmc", "spacer-nla", "spacer", "templates", "spacer-global")
    assert portfolio._poly_order(("bmc", "spacer", "spacer-nla", "spacer-global", "templates")) \
        == ("bmc", "spacer-nla", "spacer", "templates", "spacer-global")
    assert portfolio._poly_order(("spacer", "templates")) == ("spacer", "templates")
    linear = ("extern void reach_error(void); extern int __VERIFIER_nondet_int(void);\n"
              "int main() { int n = __VERIFIER_nondet_int(), i = 0;\n"
              "  if (n < 0 || n > 1000000) return 0;\n"
              "  while (i < n) { i = i + 1; }\n"
              "  if (i != n) reach_error(); return 0; }\n")
    members = ("spacer-global", "templates")  # on clauses with products templates goes first
    res = portfolio.verify_text(ISQRT, 30, members=members, in_process=True)
    assert res.status == "TRUE", (res.status, res.reason)
    assert [e["member"] for e in res.extras["portfolio"]] == ["templates"]
    # ... on linear clauses the order is the members' own (templates from round 2)
    res = portfolio.verify_text(linear, 30, members=members, in_process=True)
    assert res.extras["portfolio"][0]["member"] == "spacer-global", res.extras["portfolio"]


def test_templates_round_follows_the_clauses():
    assert templates.nonlinear(engines.spacer_program(EGCD)[1])
    linear = ("extern void reach_error(void); extern int __VERIFIER_nondet_int(void);\n"
              "int main() { int n = __VERIFIER_nondet_int(), i = 0, s = 0;\n"
              "  if (n < 0 || n > 50) return 0;\n"
              "  while (i < n) { s = s + 2; i = i + 1; }\n"
              "  if (s != 2 * i) reach_error(); return 0; }\n")
    assert not templates.nonlinear(engines.spacer_program(linear)[1])
    assert portfolio._templates_round(linear, "ILP32", engines.MEMBERS) == 2
    assert portfolio._templates_round(EGCD, "ILP32", engines.MEMBERS) == 0


# Cohen's consecutive cubes with an input bound (InvBench's cohencu-ll_valuebound family):
# z == 6n + 6 and y == 3n^2 + 3n + 1 hold throughout, and the exit pins n to a + 1, which
# only the difference bound n - a <= 1 says.  UNSAFE_COHENCU's constant is off by 2.
COHENCU = """extern void reach_error(void); extern unsigned short __VERIFIER_nondet_ushort(void);
int main() {
  int a = __VERIFIER_nondet_ushort(); long long n = 0, x = 0, y = 1, z = 6;
  if (a > 100) return 0;
  while (n <= a) { n = n + 1; x = x + y; y = y + z; z = z + 6; }
  if (a * z - 6 * a - 2 * y + 2 * z - 10 != 0) reach_error();
  return 0;
}
"""
UNSAFE_COHENCU = COHENCU.replace("2 * z - 10", "2 * z - 8")


def test_equalities_leave_out_what_the_lower_degrees_generate():
    # y == x*x on every sample: x*y == x^3 and y*y == x*x*y hold too, but follow from it
    x, y = z3.Ints("x y")
    found = templates.equalities([(v, v * v) for v in range(-10, 11)], [x, y])
    assert len(found) == 1, found
    s = z3.Solver()
    s.add(z3.Not(z3.Implies(y == x * x, found[0])), z3.Not(z3.Implies(found[0], y == x * x)))
    assert s.check() == z3.unsat, found


def test_deep_runs_reach_past_the_breadth_first_states():
    _, enc = engines.spacer_program(COHENCU)
    states = templates.reachable_states(enc, seed=0)
    [pred] = [p for p in enc.preds if p.label == 1]
    n = next(i for i, v in enumerate(pred.sig) if v.uid.split("@")[0] == "n")
    assert max(st[n].as_long() for st in states[pred.decl.name()]) >= 20


def test_templates_alone_prove_cohencu_with_the_exit_bound_and_not_its_unsafe_twin():
    _, enc = engines.spacer_program(COHENCU)
    [pred] = [p for p in enc.preds if p.label == 1]
    idx = {v.uid.split("@")[0]: i for i, v in enumerate(pred.sig)}
    states = templates.reachable_states(enc, seed=0)
    bound = z3.Var(idx["n"], z3.IntSort()) - z3.Var(idx["a"], z3.IntSort()) <= 1
    assert any(f.eq(bound) for f in templates.candidates(enc, states)[pred.decl.name()])
    got = portfolio.run_member_safely("templates", COHENCU, 20.0, "ILP32", recheck_grace_s=10.0)
    assert got["answer"] == "safe" and got["proof"] == "templates", got
    bad = portfolio.run_member_safely("templates", UNSAFE_COHENCU, 8.0, "ILP32")
    assert bad["answer"] != "safe", bad
    res = api.verify(UNSAFE_COHENCU, 30, in_process=True)
    assert res.status is Status.FALSE, (res.status, res.reason)


def test_bmc_goes_first_on_clauses_with_products_with_longer_slices_from_round_1():
    # every loop bounded by 5 iterations in all (InvBench's `_unwindbound5`): a complete
    # unrolling proves it, in BMC's first slice (1 s) or its longer later ones
    text = """extern void reach_error(void); extern int __VERIFIER_nondet_int(void);
int counter = 0;
int main() {
  int x = __VERIFIER_nondet_int(); long long s = 0, i = 0;
  if (x < 0 || x > 1000) return 0;
  while (counter++ < 5) { s = s + x * i; i = i + 1; }
  if (s < 0) reach_error();
  return 0;
}
"""
    res = portfolio.verify_text(text, 30, in_process=True)
    assert res.status == "TRUE", (res.status, res.reason)
    assert res.extras["portfolio"][0]["member"] == "bmc"  # first of all the members
    assert res.extras["portfolio"][0]["slice_s"] == portfolio.BMC_FIRST_POLY_S
    # on linear clauses BMC keeps its place (after two Spacer members)
    linear = portfolio.verify_text(text.replace("x * i", "x"), 30, in_process=True,
                                   members=("spacer-global", "bmc"))
    assert linear.extras["portfolio"][0]["member"] == "spacer-global"
    # an unbounded loop with products: BMC's round-0 slice is the shorter, later ones longer
    unbounded = text.replace("counter++ < 5", "i < x").replace("x > 1000)", "x > 1000000)")
    res = portfolio.verify_text(unbounded, 5, members=("bmc",), in_process=True)
    slices = [e["slice_s"] for e in res.extras["portfolio"]]
    assert slices[0] == portfolio.BMC_FIRST_POLY_S, slices
    assert slices[1] >= portfolio.BMC_SLICE_POLY_S - 0.3, slices


def test_validate_decides_linear_conjuncts_under_the_linear_hypotheses_alone(monkeypatch):
    _, enc = engines.spacer_program(COHENCU)
    [pred] = [p for p in enc.preds if p.label == 1]
    v = {s.uid.split("@")[0]: z3.Var(i, z3.IntSort()) for i, s in enumerate(pred.sig)}
    a, n, y, zz = v["a"], v["n"], v["y"], v["z"]
    inv = [zz == 6 * n + 6, y == 3 * n * n + 3 * n + 1, n >= 0, a >= 0, a <= 100]
    full: list[z3.BoolRef] = []  # the goals checked with every (some non-linear) hypothesis
    real = chc.check_arith

    def counting(assertions, budget, share=False):
        if not chc.is_linear(*assertions[:-1]):
            full.append(assertions[-1])
        return real(assertions, budget, share=share)

    monkeypatch.setattr(chc, "check_arith", counting)
    ok, why = chc.validate(enc, {pred.decl.name(): z3.And(*inv, n - a <= 1)})
    assert ok is True, why
    # the bounds and z == 6n + 6 needed no non-linear query; y's equality and safety did
    linear_goals = [g for g in full if chc.is_linear(g) and not z3.is_false(g.arg(0))]
    assert linear_goals == [], linear_goals
    # a linear conjunct that is not inductive is still refuted (n reaches a + 1)
    ok, why = chc.validate(enc, {pred.decl.name(): z3.And(*inv, n - a <= 0)})
    assert ok is False, why


# An integer square root by search (InvBench training 6086_1's kind): the loop needs
# guess*guess <= n, a bound on the program's own product that no equality states (with the
# step in a variable, Spacer on the clauses the equalities strengthen finds no proof either).
ISQRT = """extern void reach_error(void); extern int __VERIFIER_nondet_int(void);
int main() {
  int n = __VERIFIER_nondet_int(); int guess = 0, step = 1; long long square;
  if (n < 0) return 0;
  while (1) {
    square = (long long)guess * guess;
    if (square > n || square + 2 * guess + 1 > n) break;
    guess = guess + step;
  }
  if (!(square <= n && square + 2 * guess + 1 > n)) reach_error();
  return 0;
}
"""
# i*i <= j == 100000 + 100*i on every state a small input reaches (i <= 300), not from
# i == 373 on, where the error is reached (n may be up to 10^6).
LATE_SQUARE = """extern void reach_error(void); extern int __VERIFIER_nondet_int(void);
int main() {
  int n = __VERIFIER_nondet_int(); long long i = 0, j = 100000;
  if (n < 0 || n > 1000000) return 0;
  while (i < n) { if (i * i > j) reach_error(); i = i + 1; j = j + 100; }
  return 0;
}
"""


def _loop_vars(enc) -> tuple[object, dict[str, z3.ArithRef]]:
    [pred] = [p for p in enc.preds if p.label == 1]
    return pred, {v.uid.split("@")[0]: z3.Var(i, z3.IntSort()) for i, v in enumerate(pred.sig)}


def test_the_programs_own_products_are_bounded_by_its_variables():
    _, enc = engines.spacer_program(ISQRT)
    pred, v = _loop_vars(enc)
    pos = {s.uid.split("@")[0]: i for i, s in enumerate(pred.sig)}
    assert templates.products(enc, pred.decl.name()) == [(pos["guess"], pos["guess"])]
    states = templates.reachable_states(enc, seed=0)
    wanted = v["guess"] * v["guess"] <= v["n"]
    guessed = templates.candidates(enc, states, with_products=True)[pred.decl.name()]
    assert any(f.eq(wanted) for f in guessed)
    # (a later stage of `prove`: the first ones do not pay for these non-linear guesses)
    assert not any(f.eq(wanted) for f in templates.candidates(enc, states)[pred.decl.name()])


def test_a_product_bound_proves_the_square_root_search_and_is_needed(monkeypatch):
    got = portfolio.run_member_safely("templates", ISQRT, 20.0, "ILP32", recheck_grace_s=10.0)
    assert got["answer"] == "safe" and got["proof"].startswith("templates"), got
    [inv] = got["invariants"]
    assert "(guess * guess) <= n" in inv["invariant"], inv
    # the unsafe twin (one more than the loop ensures) is never proved
    bad = ISQRT.replace("square + 2 * guess + 1 > n)) reach_error", "square + 2 * guess > n))"
                        " reach_error")
    assert bad != ISQRT
    assert portfolio.run_member_safely("templates", bad, 8.0, "ILP32")["answer"] != "safe"
    # without the product bounds the equalities and linear bounds do not prove it
    monkeypatch.setattr(templates, "product_bounds", lambda *a, **k: [])
    got = portfolio.run_member_safely("templates", ISQRT, 8.0, "ILP32")
    assert got["answer"] != "safe", got


def test_a_product_bound_true_on_every_sample_but_not_inductive_is_no_proof():
    _, enc = engines.spacer_program(LATE_SQUARE)
    pred, v = _loop_vars(enc)
    states = templates.reachable_states(enc, seed=0)
    wrong = v["i"] * v["i"] <= v["j"]
    # the guess is made (every sampled state has i <= 300) ...
    guessed = templates.candidates(enc, states, with_products=True)[pred.decl.name()]
    assert any(f.eq(wrong) for f in guessed)
    # ... and Houdini drops it; nothing else proves the (unsafe) program
    got = portfolio.run_member_safely("templates", LATE_SQUARE, 8.0, "ILP32")
    assert got["answer"] != "safe", got


def test_a_forked_templates_member_that_finds_proofs_in_two_stages_still_answers():
    # ISQRT: the first stage's guesses pass the error clauses (the member says "P" for the
    # re-check's extra time) but do not re-check; the product stage's then do, and says
    # so again: the answer must still reach the portfolio (it read "P{...}" as a crash)
    got = portfolio._run_forked("templates", ISQRT, 8.0, "ILP32", 0, 0, grace_s=1.0,
                                proof_deadline=time.monotonic() + 20.0)
    assert got["answer"] == "safe", got
