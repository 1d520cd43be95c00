"""Syntactic validation (§3.3): side-effect-free boolean C over variables in scope."""

from __future__ import annotations

import pytest

from veribatch.tasks.invbench.validation import Invalid, Valid, validate

SCOPE = {"x": "int", "y": "long long", "n": "unsigned int", "flag": "_Bool", "a": "int[10]"}


@pytest.mark.parametrize(
    ("psi", "canonical"),
    [
        ("x % 7 == 3", "(x % 7) == 3"),
        ("x >= 0 && (y == 1 || flag)", "(x >= 0) && ((y == 1) || flag)"),
        ("!(x < n)", "!(x < n)"),
        ("(long long) x * y >= 0", "(((long long) x) * y) >= 0"),
        ("a[0] <= x", "a[0] <= x"),
        ("flag", "flag"),
        ("true", "1"),
        ("x < INT_MAX", "x < 2147483647"),
        ("x > 0 ? y > 0 : flag", "(x > 0) ? (y > 0) : (flag)"),
    ],
)
def test_accepts_state_predicates(psi: str, canonical: str) -> None:
    got = validate(psi, SCOPE)
    assert isinstance(got, Valid), got
    assert got.canonical == canonical


@pytest.mark.parametrize(
    ("psi", "kind"),
    [
        ("a += 1", "side_effect"),
        ("x = 1", "side_effect"),
        ("x++ > 0", "side_effect"),
        ("--x == 0", "side_effect"),
        ("f(x) > 0", "side_effect"),
        ("__VERIFIER_nondet_int() > 0", "side_effect"),
        ("(x = 1, y > 0)", "side_effect"),
        ("z > 0", "unknown_variable"),
        ("x + 1", "non_boolean"),
        ("x", "non_boolean"),
        ("2", "non_boolean"),
        ('"x > 0"', "non_boolean"),
        ("x >", "unparsable"),
        ("x > 0; y = 1", "unparsable"),
        ("{ x > 0 }", "unparsable"),
        ("", "unparsable"),
        ("&x != 0", "unsupported"),
    ],
)
def test_rejects(psi: str, kind: str) -> None:
    got = validate(psi, SCOPE)
    assert isinstance(got, Invalid), got
    assert got.kind == kind, got


def test_unknown_variable_message_lists_scope() -> None:
    got = validate("i < n", {"n": "int"})
    assert isinstance(got, Invalid)
    assert "'i'" in got.reason and "n" in got.reason
