"""Bit-wise `&`, `|`, `^` in the Horn encoding (`bitabs`): exact with a constant operand,
an over-approximation by facts for two variables; Spacer's proofs pass `chc.validate`
on the clauses that carry the facts, and an unsafe program never becomes TRUE."""

from __future__ import annotations

import itertools

import pytest
import z3

from tests.support.z3c_programs import assert_never_true
from veribatch.verifiers.z3c import api, bitabs, chc, cint
from veribatch.verifiers.z3c.encode import encode
from veribatch.verifiers.z3c.engines import parsed

_HEAD = ("extern void reach_error(void);\nextern int __VERIFIER_nondet_int(void);\n"
         "extern unsigned int __VERIFIER_nondet_uint(void);\n"
         "void __VERIFIER_assert(int c) { if (!c) reach_error(); }\n")

# `y &= any` keeps 0 <= y <= x, `z |= any non-negative` keeps z >= x: both need the
# facts of two variables' `&` (sign and order); the masks are exact
MIXED = _HEAD + """int main() {
  int x = __VERIFIER_nondet_int();
  if (x < 0) return 0;
  int y = x, z = x;
  unsigned int u = __VERIFIER_nondet_uint() & 0xF0u;
  while (__VERIFIER_nondet_int()) {
    int m = __VERIFIER_nondet_int();
    y = y & m;
    if (m >= 0) z = z | m;
    u = (u | __VERIFIER_nondet_uint()) & 0xF0u;
  }
  __VERIFIER_assert(ASSERTION);
  return 0;
}
"""

SAFE = MIXED.replace("ASSERTION", "0 <= y && y <= x && z >= x && (u & 15u) == 0 && u <= 240u")


# Stein's gcd loop: `(u | v) & 1` needs bit 0 of the fresh `u & v` (both odd or not)
PARITY = _HEAD + """int main() {
  unsigned int u = __VERIFIER_nondet_uint(), v = __VERIFIER_nondet_uint(), k = 0;
  if (u == 0 || v == 0) return 0;
  while (((u | v) & 1) == 0) { u >>= 1; v >>= 1; k++; }
  __VERIFIER_assert((u & 1) == 1 || (v % 2) == 1);
  return 0;
}
"""


def _values(e: z3.ExprRef, **env: int) -> int:
    return z3.simplify(z3.substitute(e, *((z3.Int(k), z3.IntVal(v)) for k, v in env.items()))).as_long()


def test_constant_masks_are_exact_and_the_facts_hold_of_every_pair():
    """Python's `&`, `|`, `^` on ints are infinite two's complement: C's on in-range values."""
    x, y, a = z3.Ints("x y a")
    for c in [*range(-20, 20), 0x55, 0xF0, -0x100, 0x7FFFFFFF, -0x80000000, 0xAAAAAAAA]:
        for op in "&|^":
            e = bitabs.combine(op, x, z3.IntVal(c), bitabs.and_const(x, c))
            for v in (-1000, -129, -5, -1, 0, 1, 6, 77, 255, 4096 + 17):
                want = {"&": v & c, "|": v | c, "^": v ^ c}[op]
                assert _values(e, x=v) == want, (op, v, c)
    for name in ("signed char", "unsigned char"):
        t = cint.type_named(name)
        facts = bitabs.and_facts(x, y, a, t)
        for vx, vy in itertools.product(range(t.lo, t.hi + 1, 3), range(t.lo, t.hi + 1, 5)):
            sub = z3.substitute(facts, (x, z3.IntVal(vx)), (y, z3.IntVal(vy)), (a, z3.IntVal(vx & vy)))
            assert z3.is_true(z3.simplify(sub)), (name, vx, vy)


def test_the_facts_admit_the_true_value_of_out_of_range_pairs():
    """After an undefined overflow an operand may be outside its type's range: the facts
    must still admit the true `x & y` (they hold of every pair of integers), or a path
    would be cut.  Edge values of each type (its bounds, one past them, far beyond, both
    signs) paired with each other, and seeded random pairs far outside the range."""
    import random

    x, y, a = z3.Ints("x y a")
    rng = random.Random(41)
    for name in ("signed char", "unsigned char", "int", "unsigned int"):
        t = cint.type_named(name)
        edges = {0, 1, -1, 2, -2, t.lo, t.hi, t.lo - 1, t.hi + 1, 2 * t.hi + 1, -2 * t.hi - 3,
                 t.hi * 3 + 7, 2**40 + 5, -(2**40) - 9, 1000, -1000}
        pairs = list(itertools.product(sorted(edges), repeat=2))
        pairs += [(rng.randint(-(2**36), 2**36), rng.randint(-(2**36), 2**36)) for _ in range(150)]
        pairs += [(rng.randint(t.lo - 3000, t.hi + 3000), rng.randint(t.lo - 3000, t.hi + 3000))
                  for _ in range(150)]
        facts = bitabs.and_facts(x, y, a, t)
        for vx, vy in pairs:
            sub = z3.substitute(facts, (x, z3.IntVal(vx)), (y, z3.IntVal(vy)), (a, z3.IntVal(vx & vy)))
            assert z3.is_true(z3.simplify(sub)), (name, vx, vy)


@pytest.mark.parametrize("text", [SAFE, PARITY], ids=["order-sign-masks", "parity"])
def test_spacer_proves_a_loop_with_bitwise_operators_and_the_proof_rechecks(text):
    enc = encode(parsed(text), mode="chc")
    assert any("bitand!" in str(c.constraint) for c in enc.clauses)  # two variables: the abstraction
    ans = chc.solve(enc, timeout_ms=60_000)
    assert ans.status == "safe", ans.reason
    ok, why = chc.validate(enc, ans.interps, timeout_ms=20_000)
    assert ok is True, why


@pytest.mark.parametrize("assertion", [
    "y < x",                       # no iteration: y == x
    "y == 0 || y == x || y < 64",  # -1 & x == x ... but x & 64 == 64 is reachable
    "(u & 15u) == 0 && u < 240u",  # u == 0xF0 is reachable
    "z == x",                      # x | m grows
])
def test_unsafe_bitwise_programs_are_never_true(assertion):
    """The abstraction may admit spurious error paths, never hide real ones: these are
    unsafe, and the portfolio answers FALSE (gcc replays the trace) or UNKNOWN, never TRUE."""
    assert_never_true(MIXED.replace("ASSERTION", assertion), assertion)


def test_safe_program_is_true_through_the_portfolio_with_its_certificate():
    res = api.verify(SAFE, 30, in_process=True)
    assert res.status.value == "TRUE", res.reason
    assert res.extras.get("proof_checked") is True


def test_bmc_runs_first_where_the_clauses_over_approximate():
    """Masks alone are exact (Spacer's "unsafe" stays a hint); `x & y` is not, and a complete
    unrolling, which such programs had to themselves before, keeps the first slice."""
    from veribatch.verifiers.z3c import portfolio

    exact = _HEAD + "int main() { int x = __VERIFIER_nondet_int(); __VERIFIER_assert((x & 12) <= 12); }\n"
    assert not encode(parsed(exact), mode="chc").over_approximate
    assert not portfolio._over_approximate(exact, "ILP32")
    assert portfolio._over_approximate(SAFE, "ILP32")
    res = api.verify(PARITY, 20, in_process=True)
    assert res.status.value == "TRUE" and res.extras["portfolio"][0]["member"] == "bmc", res.extras
