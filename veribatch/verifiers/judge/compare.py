"""Output comparison as REFUTE's harness does it (``refute/utils/checker.py``), token by token.

Both outputs are split into whitespace-separated tokens (blank lines, trailing spaces and
line layout never matter).  A token pair where both are ``yes``/``no`` in any case compares
case-insensitively (Codeforces accepts ``Yes``, ``YES``, ``yes``); every other token must be
equal exactly — numbers as text, since REFUTE's problems have exact answers.

One departure from the harness, on purpose: it switches to case-insensitive YES/NO only
when *every* token of the jury's output is YES/NO, so for an answer like ``YES`` followed
by a construction it counts ``Yes 1 2`` against ``YES 1 2`` as different — a
"counterexample" that is only a capitalisation.  Here the rule is per token.
"""

from __future__ import annotations

_YES_NO = frozenset({"yes", "no"})


def tokens(text: str) -> list[str]:
    return text.split()


def _same(a: str, b: str) -> bool:
    if a == b:
        return True
    la, lb = a.lower(), b.lower()
    return la in _YES_NO and lb in _YES_NO and la == lb


def first_difference(expected: str, got: str) -> str | None:
    """None when the outputs match; otherwise what differs, in the harness checker's words."""
    a, b = tokens(expected), tokens(got)
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if not _same(x, y):
            return f"token {i + 1}: expected {x[:50]!r}, found {y[:50]!r}"
    if len(a) != len(b):
        return f"expected {len(a)} tokens, found {len(b)}"
    return None


def outputs_match(a: str, b: str) -> bool:
    """True iff `a` and `b` have the same tokens (YES/NO tokens compared case-insensitively)."""
    return first_difference(a, b) is None
