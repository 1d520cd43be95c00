"""The shipped sample is sound, judged by the real judge: every problem's validator accepts its
example, the correct solution prints the example output, the wrong solution passes the
example (as a real wrong submission passes test 1), its known counterexample is judged a
success for the reason the problem is there to cover, and its blind generator prints inputs
the validator accepts."""

from __future__ import annotations

from pathlib import Path

import pytest

from veribatch.tasks.refute import data
from veribatch.tasks.refute.counterexample import JudgeLimits, judge_generator
from veribatch.tasks.refute.problem import program, solutions
from veribatch.verifiers.judge import Program, detect_sandbox, outputs_match, run_program

pytestmark = pytest.mark.slow

EXPECTED = {"S01": "differs", "S02": "differs", "S03": "wrong_crash", "S04": "wrong_crash",
            "S05": "wrong_timeout", "S06": "differs", "S07": "differs", "S08": "differs",
            "S09": "differs", "S10": "differs", "S11": "wrong_timeout", "S12": "differs"}
LIMITS = JudgeLimits(run_s=5.0, generator_s=10.0)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bin")


def test_the_sample_covers_every_judge_outcome_the_issue_lists() -> None:
    insts = data.load("sample")
    assert {i.payload["problem_id"] for i in insts} == set(EXPECTED)
    assert set(EXPECTED.values()) == {"differs", "wrong_crash", "wrong_timeout"}
    py_wrong = {i.payload["problem_id"] for i in insts if i.meta["wrong_lang"] == "python"}
    assert py_wrong == {"S04", "S07", "S11"}  # a Python crash, answer and timeout
    yes_no = [i for i in insts if "YES" in i.payload["example_output"].upper()]
    multi = [i for i in insts if "test case" in i.payload["input"]]
    assert len(yes_no) >= 2 and len(multi) >= 2


@pytest.mark.parametrize("pid", sorted(EXPECTED))
def test_sample_problem(pid: str, tmp_path: Path, cache: Path) -> None:
    inst = next(i for i in data.load("sample") if i.payload["problem_id"] == pid)
    p = inst.payload
    sol = solutions(inst, tmp_path / pid)
    box = detect_sandbox()

    def run(prog: Program, stdin: str):
        return run_program(prog, stdin, time_s=5, cache_dir=cache, sandbox=box)

    ex = p["example_input"]
    v = run(sol.validator, ex)
    assert v.verdict == "OK", v.stderr
    c, w = run(sol.correct, ex), run(sol.wrong, ex)
    assert c.verdict == "OK" and outputs_match(c.output, p["example_output"]), c
    assert w.verdict == "OK" and outputs_match(w.output, p["example_output"]), w
    ce = program(tmp_path / pid, "ce", "python", p["x_counterexample_generator"])
    for _ in range(3):  # S06 is nondeterministic: its 5 runs miss with probability 4 %
        j = judge_generator(sol, ce, LIMITS, cache_dir=cache, sandbox=box)
        if j.success or pid != "S06":
            break
    assert (j.outcome, j.reason) == ("success", EXPECTED[pid]), j
    gen = program(tmp_path / pid, "blind", "python", p["x_blind_generator"])
    for _ in range(3):
        g = run(gen, "")
        assert g.verdict == "OK"
        assert run(sol.validator, g.output).verdict == "OK", (g.output[:200], pid)
