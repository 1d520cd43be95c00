"""Every InvBench answer ends as a candidate status within a bound (issue 37): fuzzed answers
go through the verify stage's own path — `_candidates_from_model` (parse), `_validated`
(validate against the loop's scope) and `instrument_all` (both programs) — on a shipped
program with two loops.  Before the bounds, a 150-conjunct invariant raised RecursionError
in `instrument_all` (the shard failed) and a cast's array type could carry a call."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.support.answer_fuzz import (
    FUZZ_SETTINGS,
    Timed,
    answers,
    conjunction,
    pathological,
    report,
)
from veribatch.tasks.invbench.instrument import (
    MAX_INSTRUMENTED_DEPTH,
    InstrumentationError,
    instrument_all,
)
from veribatch.tasks.invbench.markers import mark
from veribatch.tasks.invbench.stages import Candidate, _candidates_from_model, _validated
from veribatch.tasks.invbench.validation import MAX_PREDICATE_DEPTH, Invalid, Valid, validate
from veribatch.verifiers import cfront

SAMPLE = Path(__file__).resolve().parents[3] / "veribatch" / "tasks" / "invbench" / "sample"
PROGRAM = (SAMPLE / "nested.c").read_text()
MARKED = mark(PROGRAM, filename="nested.c")
TIMED = Timed("invbench", bound_s=5.0)


def _status(text: str) -> str:
    """The candidate record's status as `verify_instance` sets it before any verifier runs."""
    (cand,) = _candidates_from_model([{"status": "ok", "sample_index": 0, "completion_text": text}],
                                     MARKED.labels)
    if cand.problem is not None:
        return cand.problem_status
    rec: dict[str, object] = {}
    valid = _validated(cand, MARKED, rec)
    if valid is None:
        return str(rec["status"])
    try:
        instrument_all(PROGRAM, valid, filename="nested.c")
    except InstrumentationError:
        return "instrumentation_error"
    return "instrumented"


ATOMS = ("i < n", "(int) i >= 0", "(int (*)[system(\"touch /tmp/x\")])0 == 0", "sizeof(int [f()]) > 0",
         "i <= n + 1", "!(i > n)", "f(i) > 0", "i", "((long long) i) * 2 >= 0")
PREDICATES = conjunction(ATOMS) | pathological(["i < n", "x"]) | st.text(max_size=200)
LINES = (st.sampled_from(["location: INVARIANT_MARKER_1", "location: INVARIANT_MARKER_2", "**location**: 2",
                          "```c", "```"])
         | PREDICATES.map(lambda p: "invariant: " + p)
         | pathological(["location", "invariant", "- **invariant**"]))

TWO_LINES = st.builds(lambda before, loc, p, after: f"{before}\nlocation: {loc}\ninvariant: {p}\n{after}",
                      st.text(max_size=40), st.sampled_from(["INVARIANT_MARKER_1", "2", "`INVARIANT_MARKER_2`"]),
                      PREDICATES, st.text(max_size=40))


@FUZZ_SETTINGS
@given(answers(LINES) | TWO_LINES)
@example("location: INVARIANT_MARKER_1\ninvariant: " + " && ".join(["i >= 0"] * 150))
@example("location: INVARIANT_MARKER_1\ninvariant: " + " && ".join(["i >= 0"] * 250))
@example("location: INVARIANT_MARKER_1\ninvariant: " + "*`" * 30_000 + "i >= 0")
@example("location: 1\ninvariant:" + " " * 40_000 + "x")
def test_every_answer_ends_with_a_status_within_the_bound(text: str) -> None:
    TIMED.run(text, _status)


def test_report_fuzz_figures(capsys: pytest.CaptureFixture[str]) -> None:
    if TIMED.count == 0:
        pytest.skip("run with the fuzz test")
    report(TIMED, capsys)


def test_deep_invariant_is_a_status_and_the_deepest_allowed_is_instrumented() -> None:
    scope = MARKED.scopes[1]
    for n in (150, 250):
        got = validate(" && ".join(["i >= 0"] * n), scope)
        assert isinstance(got, Invalid) and got.kind == "too_large", got
    # the deepest accepted chain (depth = conjuncts + 1) goes through both programs
    deepest = validate(" && ".join(["i >= 0"] * (MAX_PREDICATE_DEPTH - 1)), scope)
    assert isinstance(deepest, Valid), deepest
    for program in sorted(SAMPLE.glob("*.c")):
        marked = mark(program.read_text(), filename=program.name)
        psi = " && ".join(["1 >= 0"] * (MAX_PREDICATE_DEPTH - 1))
        for label in marked.labels:
            assert isinstance(validate(psi, marked.scopes[label]), Valid)
            progs = instrument_all(program.read_text(), [(label, psi)], filename=program.name)
            for text in (progs.check_invariant, progs.use_invariant):
                cfront.parse(text, filename=program.name)  # what the verifiers read, re-read


def test_the_deepest_instrumented_set_is_read_back() -> None:
    """A set at one loop as deep as `MAX_INSTRUMENTED_DEPTH` allows is still C the front end reads."""
    per = MAX_PREDICATE_DEPTH - 1
    n = MAX_INSTRUMENTED_DEPTH - per
    progs = instrument_all(PROGRAM, [(2, " && ".join(["1 >= 0"] * (per - 1)))] * n, filename="nested.c")
    for text in (progs.check_invariant, progs.use_invariant):
        cfront.parse(text, filename="nested.c")


@pytest.mark.parametrize("psi", [
    '(int (*)[system("touch /tmp/x")])0 == 0 && i < 0',
    "(int (*)(int))0 == 0",
    "sizeof(int [f()]) > 0",
    "(struct { int a; })0 == 0",
])
def test_a_cast_or_sizeof_type_carries_no_expression(psi: str) -> None:
    got = validate(psi, MARKED.scopes[1])
    assert isinstance(got, Invalid) and got.kind in ("unsupported", "unparsable"), got


def test_a_set_too_deep_together_is_an_instrumentation_error() -> None:
    cand = Candidate(0, "", [(1, " && ".join(["i >= 0"] * 60))] * 40)
    valid = _validated(cand, MARKED, {})
    assert valid is not None
    with pytest.raises(InstrumentationError, match="nested too deeply"):
        instrument_all(PROGRAM, valid, filename="nested.c")
