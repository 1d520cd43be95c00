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

from veribatch.launch.api import ExecChoice, launch_run, plan_run
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
    assert [p for _, p in sorted(cand.invariants)] == [
        i["invariant"] for i in sorted(invariants["1064_1.c"], key=lambda i: lines[i["line"]])]


def test_an_invariant_at_a_function_head_is_left_out_with_its_line(shared_data: Path) -> None:
    programs, invariants = _training(shared_data)
    marked = mark((programs / "4750_5.c").read_text(), filename="4750_5.c")
    cand = _candidate_from_verifier(invariants["4750_5.c"], marked)
    assert "line 91: not a loop head of the program" in cand.dropped
    assert len(cand.invariants) == len(invariants["4750_5.c"]) - 1


def test_uautomizer_invariants_of_a_real_run_make_one_candidate(shared_data: Path, tmp_path: Path) -> None:
    """The five invariants of the recorded fermat1-ll_2.c proof: two at function heads,
    three at the loops; UAutomizer's `cond` (a parameter of the inlined __VERIFIER_assert)
    is not in scope at main's loops, so those invariants are left out, the rest stay."""
    case = shared_data / "recorded" / "uautomizer" / "true_five_loop_invariants"
    tool = UAutomizerTool()
    for name, text in tool.support_files(Query((case / "program.c",))).items():
        (tmp_path / name).write_text(text)
    invs = tool.determine_result(FinishedRun(0, None, (case / "stdout.txt").read_text(), "exit",
                                             tmp_path)).extras["invariants"]
    marked = mark((case / "program.c").read_text(), filename="program.c")
    cand = _candidate_from_verifier(invs, marked)
    assert sorted(label for label, _ in cand.invariants) == [1, 2, 3]
    assert cand.dropped == ["line 22: not a loop head of the program", "line 15: not a loop head of the program"]
    rec: dict = {}
    valid = _validated(cand, marked, rec)
    kept = {label for label, _ in valid or []}
    assert all("cond" not in psi for label, psi in cand.invariants if label in kept)
    assert any("'cond'" in d for d in cand.dropped)


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
