"""§3.1 on real programs and logs: every state is what its category says, judged by gcc."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cebench_gcc import c_holds, declarations, gcc_run
from veribatch.tasks.cebench.counterexamples import collect, extremal_usage
from veribatch.tasks.cebench.lam4inv import parse_log
from veribatch.tasks.cebench.program import normalise
from veribatch.verifiers import cfront


def _collect(root: Path, n: int):
    prog = normalise((root / f"Benchmarks/Linear/c/{n}.c").read_text(), f"{n}.c")
    log = parse_log((root / f"Result/GPT4TurboFull/{n}.txt").read_text(), f"{n}.txt")
    return prog, log, collect(prog, log.candidates, log.final_invariant, log_file=f"{n}.txt",
                              final_line=log.final_line)


def _one_iteration(prog, pre: dict[str, int]) -> str:
    """C code: the pre-state, one run of the loop body, exit 0 iff the result is `post`."""
    body = cfront.to_source(prog.loop.stmt)
    return declarations(prog, pre) + "\n" + body


@pytest.mark.parametrize("n", [1, 300])
def test_inductive_states_are_real_consecution_failures(lam4inv_root: Path, n: int) -> None:
    prog, log, got = _collect(lam4inv_root, n)
    inductive = [c for c in got.counterexamples if c.category == "Inductive"]
    assert inductive and got.candidates_checked == len(log.candidates)
    for ce in inductive:
        for origin in ce.origins:
            psi, post = origin["candidate"], origin["post"]
            assert origin["log_line"] in {c.line for c in log.candidates if c.expr == psi}
            # pre satisfies ψ and the guard; one body execution from it gives post, violating ψ
            assert c_holds(prog, f"({psi}) && ({prog.guard})", ce.state), (psi, ce.state)
            assert not c_holds(prog, psi, post), (psi, post)
            check = " && ".join(f"{v} == {post[v]}" for v in post)
            assert gcc_run(_one_iteration(prog, ce.state) + f"\n  return ({check}) ? 0 : 1;") == 0


def test_omt_states_sit_where_their_category_says(lam4inv_root: Path) -> None:
    prog, log, got = _collect(lam4inv_root, 1)
    inv, pre, guard = log.final_invariant, prog.precondition, prog.guard
    assert got.invariant_check == "valid"
    by_cat: dict[str, list] = {"UNSAT_Pre": [], "SAT_Pre": []}
    for ce in got.counterexamples:
        if ce.category in by_cat:
            by_cat[ce.category].append(ce)
    assert by_cat["UNSAT_Pre"] and by_cat["SAT_Pre"]
    for ce in by_cat["UNSAT_Pre"]:
        assert c_holds(prog, f"({inv}) && !({pre})", ce.state)
    for ce in by_cat["SAT_Pre"]:
        assert c_holds(prog, f"({inv}) && ({pre}) && ({guard})", ce.state)
    # x has no maximum under I ∧ ¬P in the integers: pushed to INT_MAX and marked so
    top = [ce for ce in by_cat["UNSAT_Pre"] for o in ce.origins if o.get("objective") == "max x"]
    assert top and top[0].state["x"] == 2**31 - 1 and top[0].origins[0]["bounded_by_type"] is True
    assert extremal_usage(top[0].state, prog.variables) in ("one", "multiple", "all")
    # deduplicated per category, every objective kept as an origin
    for ces in by_cat.values():
        assert len({tuple(sorted(c.state.items())) for c in ces}) == len(ces)
    objectives = sorted(o["objective"] for c in by_cat["SAT_Pre"] for o in c.origins)
    assert objectives == ["max x", "max y", "min x", "min y"]  # (1, 0) is the only SAT_Pre state


def test_a_program_without_final_invariant_gives_only_inductive_states(lam4inv_root: Path) -> None:
    prog = normalise((lam4inv_root / "Benchmarks/Linear/c/253.c").read_text(), "253.c")
    log = parse_log((lam4inv_root / "Result/GPT4TurboFull/253.txt").read_text(), "253.txt")
    assert log.final_invariant is None
    got = collect(prog, log.candidates[:4], None, log_file="253.txt")
    assert {c.category for c in got.counterexamples} <= {"Inductive"}
    assert [s.kind for s in got.skips if s.kind == "no_final_invariant"] == ["no_final_invariant"]


def test_a_program_outside_the_solver_subset_is_a_named_skip(lam4inv_root: Path) -> None:
    prog = normalise((lam4inv_root / "Benchmarks/Linear/c/240.c").read_text(), "240.c")  # floats
    log = parse_log((lam4inv_root / "Result/GPT4TurboFull/240.txt").read_text(), "240.txt")
    got = collect(prog, log.candidates, log.final_invariant, log_file="240.txt")
    assert not got.counterexamples
    assert got.skips and all(s.kind in ("program_unsupported", "no_final_invariant", "candidate_not_c",
                                        "omt_error") for s in got.skips)
    assert any("float" in s.reason for s in got.skips)


def test_inductive_states_follow_lam4inv_check_order(lam4inv_root: Path) -> None:
    """LaM4Inv's checker stops at the first failing condition: a candidate whose initiation
    fails yields an initiation counterexample, never an inductive one (the default rule).
    The older rule (`consecution`) takes every consecution failure; it stays selectable."""
    from veribatch.verifiers.z3c.api import check_candidate

    prog = normalise((lam4inv_root / "Benchmarks/Linear/c/1.c").read_text(), "1.c")
    log = parse_log((lam4inv_root / "Result/GPT4TurboFull/1.txt").read_text(), "1.txt")
    kw = {"log_file": "1.txt", "final_line": log.final_line}
    paper = collect(prog, log.candidates, log.final_invariant, **kw)
    every = collect(prog, log.candidates, log.final_invariant, inductive_rule="consecution", **kw)

    def origins(got):
        return {(o["candidate"], o["log_line"]) for c in got.counterexamples if c.category == "Inductive"
                for o in c.origins}

    # line 11's candidate fails initiation (x = 1, y = 0 gives 1 != 0) and consecution
    bad = "(y >= 0) && (x == (y * (y + 1)) / 2)"
    res = check_candidate(prog.text(), 1, bad, 5000)
    assert res.initiation is False and res.consecution is False
    assert (bad, 11) in origins(every) and (bad, 11) not in origins(paper)
    assert origins(paper) < origins(every)
    assert paper.candidates_failing_initiation == every.candidates_failing_initiation > 0
    for cand, _line in origins(paper):  # every state the default keeps: initiation holds
        assert check_candidate(prog.text(), 1, cand, 5000).initiation is True
    # OMT categories do not depend on the inductive rule (the objectives and their optima; which
    # optimal model Z3 returns may differ with the solver's history in the process)
    def optima(got):
        return sorted((c.category, o["objective"], o["value"]) for c in got.counterexamples
                      if c.category != "Inductive" for o in c.origins)

    assert optima(paper) == optima(every) and optima(paper)


def test_lam4inv_precondition_is_its_textual_reading(lam4inv_root: Path) -> None:
    """LaM4Inv's own precondition reading (a named option): what its regexes see, misses
    included — Code2Inv's `(x = 1);` is not an assignment to it."""
    from veribatch.tasks.cebench.program import lam4inv_precondition

    one = (lam4inv_root / "Benchmarks/Linear/c/1.c").read_text()
    assert "(x = 1);" in one.split("while")[0]
    pre, conjuncts = lam4inv_precondition(one)
    assert all("x == 1" not in c for c in conjuncts)  # missed, as LaM4Inv misses it
    p300, c300 = lam4inv_precondition((lam4inv_root / "Benchmarks/Linear/c/300.c").read_text())
    assert "n <= 20000001" in c300
    assert lam4inv_precondition("int main() { int x; assume((x > 0)); while (x) x--; }") == ("1", [])
    assert lam4inv_precondition("int main() { int i, n, s = 0; y = n; assume(n > 0);\n while (1) {} }")[1] \
        == ["s == 0", "s == 0", "y == n", "n > 0"]


def test_lam4inv_precondition_moves_only_the_omt_categories(lam4inv_root: Path) -> None:
    """Program 1 writes its precondition Code2Inv-style, `(x = 1); (y = 0);`: LaM4Inv's reading
    finds no P at all, so I ∧ ¬P is empty (no UNSAT_Pre state) and SAT_Pre is I ∧ B alone."""
    prog = normalise((lam4inv_root / "Benchmarks/Linear/c/1.c").read_text(), "1.c")
    log = parse_log((lam4inv_root / "Result/GPT4TurboFull/1.txt").read_text(), "1.txt")
    exact = collect(prog, log.candidates, log.final_invariant, log_file="1.txt")
    textual = collect(prog, log.candidates, log.final_invariant, log_file="1.txt", precondition="lam4inv")
    assert exact.precondition == prog.precondition == "x == 1 && y == 0" and textual.precondition == "1"
    cats = [c.category for c in textual.counterexamples]
    assert "UNSAT_Pre" in [c.category for c in exact.counterexamples] and "UNSAT_Pre" not in cats
    sat = [c for c in textual.counterexamples if c.category == "SAT_Pre"]
    assert len(sat) > len([c for c in exact.counterexamples if c.category == "SAT_Pre"])
    for ce in sat:
        assert c_holds(prog, f"({log.final_invariant}) && ({prog.guard})", ce.state)
    ind = sorted(c.key() for c in exact.counterexamples if c.category == "Inductive")
    assert ind == sorted(c.key() for c in textual.counterexamples if c.category == "Inductive")


def test_states_do_not_depend_on_what_the_process_solved_before(lam4inv_root: Path) -> None:
    """A resumed or differently sharded build handles a program after other programs than
    before: the states it collects must be the same (Z3's models follow its history).
    Program 1 guards the OMT states (SAT_Pre/UNSAT_Pre); program 23 the Inductive ones, whose
    consecution models came from the shared context before the fix — collected again after
    programs 24-26, 3 of its 12 Inductive states were other states then (and 11, not 12)."""

    def states(got):
        return sorted((c.category, c.key(), json.dumps(c.origins, sort_keys=True)) for c in got.counterexamples)

    for n, between in ((1, (300, 5, 77)), (23, (24, 25, 26))):
        first = _collect(lam4inv_root, n)[2]
        for m in between:
            _collect(lam4inv_root, m)
        again = _collect(lam4inv_root, n)[2]
        assert states(first) == states(again) and len(states(first)) > 5, n
    inductive = [c for c in first.counterexamples if c.category == "Inductive"]
    assert len(inductive) >= 10


def test_omt_variables_choose_which_objectives_are_asked(lam4inv_root: Path) -> None:
    """Program 20: I mentions x and m, not n; SAT_Pre's formula (I ∧ P ∧ B) mentions n through
    the guard `x < n`.  The choice of variables is a construction option (§3.1.2 says only
    "each variable")."""
    prog = normalise((lam4inv_root / "Benchmarks/Linear/c/20.c").read_text(), "20.c")
    log = parse_log((lam4inv_root / "Result/GPT4TurboFull/20.txt").read_text(), "20.txt")
    got = {choice: collect(prog, [], log.final_invariant, log_file="20.txt", omt_variables=choice)
           for choice in ("visible", "invariant", "formula")}

    def objectives(c, category):
        return sorted({o["objective"].split()[1] for ce in c.counterexamples if ce.category == category
                       for o in ce.origins})

    assert objectives(got["visible"], "SAT_Pre") == ["m", "n", "x"]
    assert objectives(got["invariant"], "SAT_Pre") == ["m", "x"] == objectives(got["invariant"], "UNSAT_Pre")
    assert objectives(got["formula"], "SAT_Pre") == ["m", "n", "x"]
    assert got["invariant"].objectives["SAT_Pre"] == 4 and got["visible"].objectives["SAT_Pre"] == 6
