"""Verdict → label (§3.2.2) with its evidence, on results of the real embedded verifier;
and the one-shot example's labels, checked by that verifier."""

from __future__ import annotations

from pathlib import Path

import pytest

from veribatch.tasks.cebench.instrument import instrument
from veribatch.tasks.cebench.label import label_of
from veribatch.tasks.cebench.program import normalise
from veribatch.tasks.cebench.prompt import EXAMPLE_PROGRAM, EXAMPLE_STATES, user_prompt
from veribatch.verifiers.base import Query
from veribatch.verifiers.registry import get_verifier
from veribatch.verifiers.result import Limits, Status, VerifierResult

EXAMPLE = """int main() {
  int i = 0;
  int n;
  assume(((n >= 0) && (n <= 100)));
  while ((i < n)) {
    (i  = (i + 2));
  }
  assert( (i >= n) );
}
"""


def _verify(tmp_path: Path, text: str, wall_s: float = 60.0) -> VerifierResult:
    path = tmp_path / "p.c"
    path.write_text(text)
    return get_verifier("z3").run(Query(files=(path,)), Limits(wall_s=wall_s, memory_mb=2048), tmp_path)


def test_the_one_shot_example_is_labelled_right(tmp_path: Path) -> None:
    prog = normalise(EXAMPLE, "example.c")
    assert prog.display("body_start").strip() == EXAMPLE_PROGRAM.strip()
    for state, label, _why in EXAMPLE_STATES:
        res = _verify(tmp_path, instrument(prog, state, "SAT_Pre").program)
        lab = label_of(res)
        assert lab.label == label, (state, res.status, res.reason)
        assert lab.evidence == ("replayed-trace" if label == "GENUINE" else "checked-proof:spacer")
    prompt = user_prompt("one-shot", prog.display("body_start"), {"i": 2, "n": 5})
    assert prompt.count("Answer: GENUINE") == 1 and prompt.count("Answer: SPURIOUS") == 1
    assert prompt.rstrip().endswith("GENUINE or SPURIOUS.") and "i = 2, n = 5" in prompt


def test_verdicts_without_evidence_are_not_trusted(tmp_path: Path) -> None:
    prog = normalise(EXAMPLE, "example.c")
    res = _verify(tmp_path, instrument(prog, {"i": 4, "n": 7}, "SAT_Pre").program)
    assert res.status is Status.FALSE and label_of(res).label == "GENUINE"
    stripped = VerifierResult(**{**res.__dict__, "extras": {}})
    assert (label_of(stripped).label, label_of(stripped).evidence) == ("UNKNOWN", "none")
    proved = _verify(tmp_path, instrument(prog, {"i": 3, "n": 7}, "SAT_Pre").program)
    assert proved.status is Status.TRUE and proved.extras.get("proof_checked") is True
    unchecked = VerifierResult(**{**proved.__dict__, "extras": {**proved.extras, "proof_checked": False}})
    assert label_of(unchecked).label == "UNKNOWN" and "unchecked proof" in (label_of(unchecked).note or "")


@pytest.mark.parametrize(("case", "label"), [
    ("false_counterexample", "GENUINE"), ("true_invariants", "SPURIOUS"), ("true_five_loop_invariants", "SPURIOUS"),
    ("unknown_toolchain_timeout", "UNKNOWN"), ("timeout_killed_5s", "UNKNOWN"),
    ("error_bitprecise_needs_mathsat", "UNKNOWN"),
])
def test_uautomizer_verdicts_on_recorded_real_runs(shared_data: Path, case: str, label: str) -> None:
    """UAutomizer cannot run here; its real recorded output, read by its adapter, is labelled
    as the paper labels it (its verdicts trusted; anything but TRUE/FALSE is UNKNOWN)."""
    from veribatch.verifiers.base import FinishedRun
    from veribatch.verifiers.uautomizer import UAutomizerTool

    d = shared_data / "recorded" / "uautomizer" / case
    rc = int((d / "exit_code.txt").read_text().strip())
    verdict = UAutomizerTool().determine_result(FinishedRun(rc, None, (d / "stdout.txt").read_text(), "exit", d))
    res = VerifierResult(status=verdict.status, wall_s=float((d / "wall_s.txt").read_text()), cpu_s=0.0,
                         peak_mem_mb=0.0, termination_reason="exit", tool="uautomizer", tool_version="0.2.3",
                         reason=verdict.reason, extras=dict(verdict.extras))
    lab = label_of(res)
    assert lab.label == label, (case, verdict.status)
    assert lab.evidence == ("trusted-verdict:uautomizer" if label != "UNKNOWN" else "none")
