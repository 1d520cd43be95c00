"""The answer parser tolerates wrapping but never guesses."""

from __future__ import annotations

import pytest

from veribatch.tasks.invbench.answer import Answer, Unparsable, parse_answer


@pytest.mark.parametrize(
    "text",
    [
        "location: INVARIANT_MARKER_2\ninvariant: x % 7 == 3",
        "Sure! Here it is:\n```\nlocation: INVARIANT_MARKER_2\ninvariant: `x % 7 == 3`;\n```\nDone.",
        "**Location:** INVARIANT_MARKER_2\n**Invariant:** assert(x % 7 == 3);",
        "- location: 2\n- invariant: x % 7 == 3\n\nBecause x starts at 3 and grows by 7.",
        "location = INVARIANT_MARKER_2()\ninvariant = x % 7 == 3",
    ],
)
def test_tolerates_wrapping(text: str) -> None:
    assert parse_answer(text, [1, 2]) == Answer(2, "x % 7 == 3")


def test_repeated_identical_answer_is_not_ambiguous() -> None:
    text = "location: INVARIANT_MARKER_1\ninvariant: x >= 0\n...\nlocation: 1\ninvariant: x >= 0"
    assert parse_answer(text, [1]) == Answer(1, "x >= 0")


@pytest.mark.parametrize(
    ("text", "labels", "why"),
    [
        ("I think x is positive.", [1], "no 'invariant:'"),
        ("location: 1\ninvariant: x > 0\ninvariant: x > 1", [1], "ambiguous"),
        ("location: 1\nlocation: 2\ninvariant: x > 0", [1, 2], "ambiguous"),
        ("invariant: x > 0", [1, 2], "no 'location:'"),
        ("location: INVARIANT_MARKER_3\ninvariant: x > 0", [1, 2], "names no marker"),
        ("location: the first loop\ninvariant: x > 0", [1, 2], "not a marker name"),
        ("location: 1\ninvariant:   ", [1], "no 'invariant:'"),
    ],
)
def test_never_guesses(text: str, labels: list[int], why: str) -> None:
    got = parse_answer(text, labels)
    assert isinstance(got, Unparsable)
    assert why in got.reason


def test_single_marker_needs_no_location() -> None:
    assert parse_answer("invariant: i <= n", [1]) == Answer(1, "i <= n")
