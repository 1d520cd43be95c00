"""Bit-wise `&`, `|`, `^` on integers in the Horn encoding (the clauses Spacer solves).

Both operands are first converted to the common type (`expressions.arith`), so they
are values of that type, and the C result is the operation on their two's-complement
bits: on mathematical integers that is the operation on their *infinite*
two's-complement expansions (a value of the type sign-extends to it and the result,
read back, is a value of the type again).  Everything here holds of that operation
on every pair of integers, so no path is ever cut, also after an undefined signed
overflow left an operand out of its type's range.

- One operand a constant c: **exact**, by linear arithmetic with `div`/`mod` by
  powers of two (which Spacer and the candidate checks accept): for c >= 0,
  ``x & c`` is the sum over c's runs of one bits i..j-1 of
  ``((x div 2^i) mod 2^(j-i)) * 2^i`` (z3's `div` by a positive literal is floor
  division and `mod` is non-negative, so these are x's bits also for x < 0); for
  c < 0, ``x & c == x - (x & ~c)``.
- Both operands variables: **an over-approximation**: a fresh ``a`` for ``x & y``
  constrained by `and_facts` (sign, order, x & x == x, bit 0, the type's range), with
  ``x | y == x + y - a`` and ``x ^ y == x + y - 2a``, identities of two's
  complement.  The facts are conjoined to every clause that mentions ``a``
  (`Encoder._with_division_facts`), so `chc.validate` re-checks a proof on
  clauses that carry them, and an error path Spacer finds through the abstraction
  is no verdict (FALSE needs BMC's trace replayed by gcc).
"""

from __future__ import annotations

import z3

from veribatch.verifiers.z3c import cint
from veribatch.verifiers.z3c.cint import CType


def _runs(c: int) -> list[tuple[int, int]]:
    """The maximal runs of one bits of ``c >= 0`` as (lowest bit, length)."""
    runs, i = [], 0
    while c >> i:
        if c >> i & 1:
            j = i
            while c >> j & 1:
                j += 1
            runs.append((i, j - i))
            i = j
        else:
            i += 1
    return runs


def and_const(x: z3.ArithRef, c: int) -> z3.ArithRef:
    """``x & c`` exactly, for any integer x (infinite two's complement)."""
    if c < 0:
        return x - and_const(x, ~c)
    terms = []
    for lo, n in _runs(c):
        part = x / (1 << lo) if lo else x
        terms.append((part % (1 << n)) * (1 << lo) if lo else part % (1 << n))
    return z3.Sum(terms) if len(terms) > 1 else terms[0] if terms else z3.IntVal(0)


def combine(op: str, x: z3.ArithRef, y: z3.ArithRef, conj: z3.ArithRef) -> z3.ArithRef:
    """``x op y`` from ``conj == x & y``: ``x | y == x + y - (x & y)``, ``x ^ y == x + y - 2(x & y)``."""
    if op == "&":
        return conj
    return x + y - conj if op == "|" else x + y - 2 * conj


def and_facts(x: z3.ArithRef, y: z3.ArithRef, a: z3.ArithRef, t: CType) -> z3.BoolRef:
    """What holds of ``a == x & y`` for all integers x, y (two's complement, sign-extended).

    ``x & y`` has a subset of each operand's bits: it is negative only if both are,
    at most x when x >= 0 or y < 0 (and symmetrically), x itself when y == x, and odd
    only if both are (so ``(x | y) & 1`` is exact).
    ``x ^ y`` (``x + y - 2a``) is negative exactly when the signs differ.  For
    operands in the type's range, ``&``, ``|`` and ``^`` are in it too.
    """
    neg_x, neg_y = x < 0, y < 0
    facts = [
        (a < 0) == z3.And(neg_x, neg_y),
        z3.Implies(z3.Or(z3.Not(neg_x), neg_y), a <= x),
        z3.Implies(z3.Or(z3.Not(neg_y), neg_x), a <= y),
        z3.Implies(x == y, a == x),
        (x + y - 2 * a < 0) == (neg_x != neg_y),
        (a % 2 == 1) == z3.And(x % 2 == 1, y % 2 == 1),  # bit 0 (`mod` is non-negative)
    ]
    in_range = z3.And(cint.in_range(x, t), cint.in_range(y, t))
    facts.append(z3.Implies(in_range, z3.And(
        *(cint.in_range(combine(op, x, y, a), t) for op in ("&", "|", "^")))))
    return z3.And(*facts)
