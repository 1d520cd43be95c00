"""Every DafnyComp answer ends as a recorded outcome within a bound (issue 37): fuzzed answers
through the check stage's path before Dafny — `answer.extract_program` (extraction) and
`integrity.check` (the strict protocol, helpers unfolded into z3).  Before, a helper chain
``F_i(x) = F_{i-1}(x) + F_{i-1}(x)`` was unfolded afresh at every call: 2^k (k = 18: 38 s,
k = 40 never ended) and judged honest."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support.answer_fuzz import FUZZ_SETTINGS, Timed, pathological, report
from veribatch.tasks.dafnycomp.answer import extract_program
from veribatch.tasks.dafnycomp.integrity import check
from veribatch.tasks.dafnycomp.syntax import declarations

TIMED = Timed("dafnycomp", bound_s=15.0)
_ORIGINAL: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def original(shared_data: Path) -> str:
    if not _ORIGINAL:
        _ORIGINAL.append(sorted((shared_data / "dafnycomp").glob("*/dafny_code.dfy"))[0].read_text())
    return _ORIGINAL[0]


def _main_param(program: str) -> tuple[int, str]:
    m = next(d for d in declarations(program) if d.name.startswith("main_"))
    found = re.search(r"\(\s*([A-Za-z_]\w*)\s*:\s*int\b", m.signature)
    assert found
    return m.signature_end, found.group(1)


def chain(k: int, twice: tuple[str, str]) -> str:
    """Helpers F_0..F_k, each calling the one below twice (`twice`: the two arguments)."""
    return "function F0(v: int): int { v }\n" + "".join(
        f"function F{i}(v: int): int {{ F{i - 1}({twice[0]}) + F{i - 1}({twice[1]}) }}\n" for i in range(1, k + 1))


def with_clause(program: str, clause: str, helpers: str) -> str:
    at, _ = _main_param(program)
    return program[:at] + "\n    " + clause + program[at:] + "\n" + helpers


def _status(text: str) -> str:
    original = _ORIGINAL[0]
    names = [d.name for d in declarations(original)]
    got = extract_program(text, None, names)
    if not got.usable or got.code is None:
        return f"extract:{got.outcome}"
    return f"integrity:{check(original, got.code).status}"


CLAUSES = st.sampled_from(["requires {x} > 0", "requires F{k}({x}) >= 0 || F{k}({x}) < 0",
                           "ensures F{k}({x}) == F{k}({x})", "requires " + "(" * 300 + "{x}" + ")" * 300 + " > 0",
                           "requires " + " && ".join(["{x} > 0"] * 300)])
TWICE = st.sampled_from([("v", "v"), ("v", "v + 1"), ("2 * v", "2 * v + 1")])


@st.composite
def candidate_answers(draw: st.DrawFn) -> str:
    original = _ORIGINAL[0]
    _, x = _main_param(original)
    k = draw(st.integers(1, 40))
    program = with_clause(original, draw(CLAUSES).format(x=x, k=k), chain(k, draw(TWICE)))
    wrap = draw(st.sampled_from(["```dafny\n{p}\n```", "{p}", "<think>draft</think>\n```dfy\n{p}\n```",
                                 "```dafny\n{p}", "{noise}\n```dafny\n{p}\n```\n{noise}"]))
    return wrap.format(p=program, noise=draw(pathological(["```", "<think>", "dafny"])))


@settings(FUZZ_SETTINGS, max_examples=25)
@given(candidate_answers())
@example("```dafny\n" + "method M() {}\n" * 3000 + "```")
@example("```" + "`" * 40_000)
def test_every_answer_ends_with_an_outcome_within_the_bound(text: str) -> None:
    TIMED.run(text, _status)


def test_report_fuzz_figures(capsys: pytest.CaptureFixture[str]) -> None:
    if TIMED.count == 0:
        pytest.skip("run with the fuzz test")
    report(TIMED, capsys)


@pytest.mark.parametrize(("twice", "decided"), [(("v", "v"), True), (("2 * v", "2 * v + 1"), False)])
def test_helper_chains_are_memoised_and_capped(original: str, twice: tuple[str, str], decided: bool) -> None:
    """Equal calls are unfolded once (k = 40 is linear and still read); 2^k distinct calls
    pass the cap and leave the clause undecided: never judged honest."""
    _, x = _main_param(original)
    start = time.perf_counter()
    got = check(original, with_clause(original, f"requires F40({x}) < 0", chain(40, twice)))
    assert time.perf_counter() - start < 10.0
    if decided:
        assert got.status == "cheat" and "vacuous" in got.kinds, got
    else:
        assert got.status == "unchecked", got
