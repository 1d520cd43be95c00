"""Output comparison as REFUTE's harness does it (``refute/utils/checker.py``), token by token.

Both outputs are split into whitespace-separated tokens (blank lines, trailing spaces and
line layout never matter).  A token pair where both are ``yes``/``no`` in any case compares
case-insensitively (Codeforces accepts ``Yes``, ``YES``, ``yes``); every other token must be
equal exactly — numbers as text, since REFUTE's problems have exact answers.

Two rules (`RULES`, REFUTE's ``-o compare=``): ``per-token`` (default) — a departure from
the harness, on purpose: the harness switches to case-insensitive YES/NO only when *every*
token of the jury's output is YES/NO, so for an answer like ``YES`` followed by a
construction it counts ``Yes 1 2`` against ``YES 1 2`` as different — a "counterexample"
that is only a capitalisation; ``harness`` — exactly the harness's `AdaptiveChecker`, for
figures comparable with the paper's.
"""

from __future__ import annotations

_YES_NO = frozenset({"yes", "no"})
RULES = ("per-token", "harness")


def tokens(text: str) -> list[str]:
    return text.split()


def _same(a: str, b: str) -> bool:
    if a == b:
        return True
    la, lb = a.lower(), b.lower()
    return la in _YES_NO and lb in _YES_NO and la == lb


def _harness_difference(a: list[str], b: list[str]) -> str | None:
    """The harness's `AdaptiveChecker.check` on token lists: YES/NO mode only when every jury
    token is YES/NO (then each answer token must be YES/NO, case-insensitively equal)."""
    if not a or not all(t.lower() in _YES_NO for t in a):
        return None if a == b else _exact_difference(a, b)
    if len(a) != len(b):
        return f"expected {len(a)} answers, found {len(b)}"
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if y.lower() not in _YES_NO or x.lower() != y.lower():
            return f"token {i + 1}: expected {x[:50]!r}, found {y[:50]!r}"
    return None


def _exact_difference(a: list[str], b: list[str]) -> str | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"token {i + 1}: expected {x[:50]!r}, found {y[:50]!r}"
    return f"expected {len(a)} tokens, found {len(b)}" if len(a) != len(b) else None


def first_difference(expected: str, got: str, rule: str = "per-token") -> str | None:
    """None when the outputs match under `rule`; otherwise what differs, in the harness
    checker's words."""
    a, b = tokens(expected), tokens(got)
    if rule == "harness":
        return _harness_difference(a, b)
    if rule != "per-token":
        raise ValueError(f"compare rule {rule!r}: expected one of {', '.join(RULES)}")
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if not _same(x, y):
            return f"token {i + 1}: expected {x[:50]!r}, found {y[:50]!r}"
    if len(a) != len(b):
        return f"expected {len(a)} tokens, found {len(b)}"
    return None


def outputs_match(a: str, b: str, rule: str = "per-token") -> bool:
    """True iff `a` and `b` have the same tokens under `rule` (per-token: YES/NO tokens compared
    case-insensitively)."""
    return first_difference(a, b, rule) is None
