"""§3.1 on real programs and logs: every state is what its category says, judged by gcc."""

from __future__ import annotations

from pathlib import Path

import pytest
from cebench_gcc import c_holds, declarations, gcc_run

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
