"""Every CE-Bench answer ends as a recorded outcome within a bound (issue 37): fuzzed answers
through `answer.parse_answer` (the shared `extract_label`) and the judge stage's comparison
with the expected label.  Before, the verdict-line regular expression was quadratic: a
32k-character line took 51 s, three answers of "answer" and 40,000 dashes 363 s."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.support.answer_fuzz import FUZZ_SETTINGS, Timed, answers, pathological, report
from veribatch.tasks.cebench.answer import OUTCOMES, parse_answer
from veribatch.tasks.cebench.prompt import LABELS

TIMED = Timed("cebench", bound_s=2.0)
WORDS = ["answer", "Final answer:", "verdict", "**GENUINE**", "SPURIOUS", "label =", "GENUINE"]
LINES = pathological(WORDS) | st.sampled_from([f"{w} {lab}" for w in WORDS for lab in LABELS])


def _status(text: str) -> str:
    got = parse_answer(text)
    assert got.outcome in OUTCOMES and (got.label is None) == (got.outcome != "ok")
    correct = got.label == "GENUINE"  # the judge stage's comparison with the expected label
    return f"{got.outcome}:{'correct' if correct else 'wrong'}"


@FUZZ_SETTINGS
@given(answers(LINES))
@example("answer" + "-" * 40_000)
@example("answer" + "-" * 40_000 + "\n" + "answer" + " -" * 20_000 + "x")
@example("Final answer:" + " " * 32_000 + "GENUINE")
def test_every_answer_ends_with_an_outcome_within_the_bound(text: str) -> None:
    TIMED.run(text, _status)


def test_report_fuzz_figures(capsys: pytest.CaptureFixture[str]) -> None:
    if TIMED.count == 0:
        pytest.skip("run with the fuzz test")
    report(TIMED, capsys)


def test_verdict_lines_read_as_before() -> None:
    assert parse_answer("Reasoning...\nFinal answer: **SPURIOUS**.").label == "SPURIOUS"
    assert parse_answer("answer" + "-" * 1000 + "GENUINE").label == "GENUINE"
    assert parse_answer("**GENUINE**\nthen more prose").label == "GENUINE"
    assert parse_answer("it is GENUINE or SPURIOUS").outcome == "conflict"
    assert parse_answer("answer" + "-" * 40_000).outcome == "none"
