"""Output comparison as Codeforces checkers do it for REFUTE: token-wise, case-insensitive.

Whitespace of any kind and amount separates tokens and is otherwise ignored, so a
trailing newline or a different line layout never counts as a difference; letters
are compared case-folded ("YES" == "yes").  Numbers are compared as text: REFUTE's
problems are chosen with exact answers.
"""

from __future__ import annotations


def tokens(text: str) -> list[str]:
    return text.casefold().split()


def outputs_match(a: str, b: str) -> bool:
    """True iff `a` and `b` have the same whitespace-separated tokens, ignoring case."""
    return tokens(a) == tokens(b)
