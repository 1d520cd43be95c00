"""Every REFUTE answer ends as a recorded outcome within a bound (issue 37): fuzzed answers
through the generate/search stages' readers — `answer.program` (a standard answer),
`answer.randsearch` (brute force and generator) and `answer.action` (the agent's move) —
which decide what, if anything, reaches the sandboxed compile.  Before, 20,000 unclosed
``<thoughts>`` tags took 3-5 s per reader and 5,000 unclosed ``<code>`` actions 7-8 s
(backtracking expressions); both are single passes now, with the same readings."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.support.answer_fuzz import FUZZ_SETTINGS, Timed, answers, pathological, report
from veribatch.tasks.refute import answer

TIMED = Timed("refute", bound_s=2.0)
TAGS = ["<action>", "</action>", "<name>print_fail_case</name>", "<code>", "</code>", "<lang>python</lang>",
        "<thoughts>", "</thoughts>", "<think>", "</think>", "ACTION: SUBMIT", "ACTION: EXECUTE", "```python",
        "```cpp", "```input", "```", "brute force:", "generator:", "#include <cstdio>\nint main() {}"]
LINES = st.sampled_from(TAGS) | pathological(TAGS) | st.lists(st.sampled_from(TAGS), max_size=30).map("".join)


def _status(text: str) -> str:
    prog = answer.program(text, None)
    brute, gen = answer.randsearch(text, "length")
    act = answer.action(text, None)
    return f"{prog.outcome}/{brute.outcome}+{gen.outcome}/{act.kind}"


@FUZZ_SETTINGS
@given(answers(LINES))
@example("<thoughts>" * 20_000)
@example("<action><name>x</name><code>" * 5_000)
@example("\n" * 40_000 + "ACTION: SUBMIT")
@example("<action><name>" + " " * 30_000 + "x")
def test_every_answer_ends_with_an_outcome_within_the_bound(text: str) -> None:
    TIMED.run(text, _status)


def test_report_fuzz_figures(capsys: pytest.CaptureFixture[str]) -> None:
    if TIMED.count == 0:
        pytest.skip("run with the fuzz test")
    report(TIMED, capsys)


def test_readings_kept() -> None:
    text = ("<thoughts>draft <action><name>print_fail_case</name><code>bad</code></action></thoughts>\n"
            "<action><name>print_fail_case</name><code>```python\nprint(1)\n```</code><lang>python</lang></action>")
    got = answer.program(text)
    assert (got.outcome, got.lang, got.code) == ("ok", "python", "print(1)\n")
    cut = answer.program("<action><name>print_fail_case</name><code>print(", "length")
    assert cut.outcome == "truncated"
    assert answer.action("**ACTION: EXECUTE**\n```python\nprint(2)\n```").kind == "execute"
