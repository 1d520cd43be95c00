"""§5.4 reference arm: verifier invariants become ONE candidate per program, placed by line.

UAutomizer reports invariants by line (its results block, and InvBench's
Training/invariants.json); the embedded z3 by loop.  Both must land on the loop the
line names in the original program, all of a program's invariants supplied together.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from veribatch.launch.run_control import ExecChoice, launch_run, plan_run
from veribatch.tasks.invbench.markers import mark
from veribatch.tasks.invbench.stages import _candidate_from_verifier, _validated
from veribatch.verifiers.base import FinishedRun, Query
from veribatch.verifiers.uautomizer import UAutomizerTool


def _training(shared_data: Path) -> tuple[Path, dict[str, list[dict]]]:
    root = shared_data / "invbench" / "Dataset" / "Training"
    return root / "Programs", json.loads((root / "invariants.json").read_text())


def test_upstream_invariants_land_on_the_loops_of_their_lines(shared_data: Path) -> None:
    programs, invariants = _training(shared_data)
    marked = mark((programs / "1064_1.c").read_text(), filename="1064_1.c")
    cand = _candidate_from_verifier(invariants["1064_1.c"], marked)
    assert cand.problem is None and not cand.dropped
    lines = {marked.lines[label]: label for label, _ in cand.invariants}
    assert sorted(lines) == sorted(i["line"] for i in invariants["1064_1.c"]) == [27, 43, 48]
    upstream = [i["invariant"] for i in sorted(invariants["1064_1.c"], key=lambda i: lines[i["line"]])]
    # loop 1 is in is_prime(n), inlined by Ultimate: main's prime_count and N are not in its C
    # scope; those conjuncts are removed (a weaker ψ, still an invariant), `1 <= i` is kept
    assert [p for _, p in sorted(cand.invariants)] == ["1 <= i", *upstream[1:]]
    assert cand.pruned == ["loop 1: 0 <= prime_count", "loop 1: i < N", "loop 1: 2 <= N",
                           "loop 1: prime_count < (i + 1)"]


def test_an_invariant_at_a_function_head_is_left_out_with_its_line(shared_data: Path) -> None:
    programs, invariants = _training(shared_data)
    marked = mark((programs / "4750_5.c").read_text(), filename="4750_5.c")
    cand = _candidate_from_verifier(invariants["4750_5.c"], marked)
    assert "line 91: not a loop head of the program" in cand.dropped
    assert len(cand.invariants) == len(invariants["4750_5.c"]) - 1


def _real_run(case: Path, tmp_path: Path) -> list[dict]:
    tool = UAutomizerTool()
    for name, text in tool.support_files(Query((case / "program.c",))).items():
        (tmp_path / name).write_text(text)
    return tool.determine_result(FinishedRun(0, None, (case / "stdout.txt").read_text(), "exit",
                                             tmp_path)).extras["invariants"]


@pytest.mark.parametrize("case", ["true_five_loop_invariants", "true_quantified_invariants_debian_z3_4.8.12"])
def test_uautomizer_invariants_of_a_real_run_make_one_candidate(shared_data: Path, tmp_path: Path, case: str) -> None:
    """The five invariants of the recorded fermat1-ll_2.c proofs: two at function heads,
    three at the loops.  Every loop invariant mentions UAutomizer's `cond` (the parameter of
    the inlined __VERIFIER_assert, dead at main's loops); the second run's also an
    exists-quantifier over an SSA name of R.  Those parts are removed, not the invariants: all three
    loops keep theirs, valid C over the loop's scope."""
    folder = shared_data / "recorded" / "uautomizer" / case
    invs = _real_run(folder, tmp_path)
    marked = mark((folder / "program.c").read_text(), filename="program.c")
    cand = _candidate_from_verifier(invs, marked)
    assert sorted(label for label, _ in cand.invariants) == [1, 2, 3]
    assert cand.dropped == ["line 22: not a loop head of the program", "line 15: not a loop head of the program"]
    assert any("cond" in p for p in cand.pruned)
    assert case.startswith("true_five") or any("\\exists ULTIMATE.start_main_~R~0#1" in p for p in cand.pruned)
    rec: dict = {}
    valid = _validated(cand, marked, rec)
    assert valid is not None and sorted(label for label, _ in valid) == [1, 2, 3] and not rec
    assert all("cond" not in psi and "exists" not in psi for _, psi in valid)
    assert all(("A * 4" in psi or "(A * 4)" in psi) for _, psi in valid)  # the proof's core is kept


def test_quantifier_over_an_array_cell_is_removed_and_the_rest_kept(shared_data: Path) -> None:
    """Training/invariants.json (UAutomizer's, from InvBench): a ∀ over a heap-array value and
    `unknown-#memory_int-unknown` cells are not C over the loop's scope; the rest stays."""
    from veribatch.tasks.invbench.to_scope import to_scope

    _, invariants = _training(shared_data)
    text = invariants["4704_1.c"][0]["invariant"]
    assert "forall v_ArrVal_174" in text and "unknown-#memory_int-unknown" in text
    scope = {v: "int" for v in ("catalan", "factorial", "fib", "pasc", "i")}
    scoped = to_scope(text, scope)
    assert scoped.predicate is not None and "unknown" not in scoped.predicate and "forall" not in scoped.predicate
    assert "i == 1" in scoped.predicate and any("forall v_ArrVal_174" in r for r in scoped.removed)


def test_forall_over_a_program_variables_ssa_name_is_instantiated_at_it() -> None:
    """∀x. B ⇒ B[R/x]: the quantifier mapped back to the variable (the recorded run's
    quantified conjunct, with its exists-quantifier read as `forall`: no recorded real run
    prints a ∀ over an SSA name, so this case is derived from one that prints the ∃)."""
    from veribatch.tasks.invbench.to_scope import to_scope

    real = ("(\\exists ULTIMATE.start_main_~R~0#1 : int :: ULTIMATE.start_main_~R~0#1 * "
            "ULTIMATE.start_main_~R~0#1 + 1 < 2 * ULTIMATE.start_main_~R~0#1 + A)")
    scope = {"A": "int", "R": "int"}
    assert to_scope(real, scope).predicate is None  # ∃: dead, removed; nothing left
    scoped = to_scope("u == 1 && " + real.replace("\\exists", "forall"), {**scope, "u": "int"})
    assert scoped.predicate == "(u == 1) && (((R * R) + 1) < ((2 * R) + A))"


def test_the_papers_setting_needs_the_training_split() -> None:
    with pytest.raises(ValueError, match="only the training split"):
        plan_run("invbench", options=["verifier_invariants=upstream"])


@pytest.mark.slow
def test_upstream_invariants_end_to_end_on_training_programs(shared_data: Path, tmp_path: Path) -> None:
    programs, invariants = _training(shared_data)
    root = tmp_path / "InvBench" / "Dataset" / "Training"
    (root / "Programs").mkdir(parents=True)
    names = ["1009_1.c", "1064_1.c"]
    for n in names:
        shutil.copy(programs / n, root / "Programs" / n)
    timing = json.loads((shared_data / "invbench" / "Dataset" / "Training" / "timing.json").read_text())
    (root / "timing.json").write_text(json.dumps([r for r in timing if r["file"] in names]))
    (root / "invariants.json").write_text(json.dumps({n: invariants[n] for n in names}))
    plan = plan_run("invbench", dataset=f"training:{tmp_path / 'InvBench'}",
                    options=["budget_s=20", "timeout_source=budget", "verifier_invariants=upstream"])
    out = launch_run(plan, tmp_path / "run", ExecChoice("local", workers=1), progress=False)
    assert out.ok, out
    from veribatch.aggregate.records import load_run

    _, stages = load_run(out.rd.root)
    v = stages["verify"].frame
    inst, cand = v[v["kind"] == "instance"].set_index("instance_id"), v[v["kind"] == "candidate"].set_index("instance_id")
    assert set(inst["invariant_source"]) == {"upstream"} and (inst["generation_time_s"] == 0).all()
    for n in names:
        iid = f"invbench/training/{n}"
        assert cand.loc[iid, "n_invariants"] == len(invariants[n])  # one candidate: the whole set
        assert inst.loc[iid, "n_candidates"] == 1
    assert inst.loc["invbench/training/1009_1.c", "decision"] == "TRUE"
    assert bool(inst.loc["invbench/training/1009_1.c", "correct_invariant"])
