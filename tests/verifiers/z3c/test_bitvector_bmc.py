"""Rule 23: a bounded unrolling with bit-wise operators decided over bit-vectors (`bvcheck`).

SV-COMP's `bitvector/interleave_bits` (written here in InvBench's form, not copied) needs
exact bits: a 16-iteration loop builds z bit by bit, the mask steps build the same value;
the integer encoding's queries stay undecided.  Its complete unrolling is a proof only if
the rewrite is equisatisfiable with the integer query: every term fits the width (partial
sums and products included), each input keeps every range it is read with, and z3's
Euclidean `mod`/`div` keep their meaning.  Each guard below fails when one of those goes.
"""

from __future__ import annotations

import time

import z3

from tests.support.z3c_programs import prog
from veribatch.verifiers.z3c import bvcheck, engines

INTERLEAVE = """extern void abort(void);
extern void __assert_fail(const char *, const char *, unsigned int, const char *) __attribute__((__nothrow__, __leaf__)) __attribute__((__noreturn__));
void reach_error() { __assert_fail("0", "interleave_bits.c", 3, "reach_error"); }
extern unsigned short __VERIFIER_nondet_ushort(void);
void __VERIFIER_assert(int cond) {
    if (!(cond)) {
    ERROR : {
        reach_error();
        abort();
    }
    }
    return;
}
int main() {
    unsigned short x = __VERIFIER_nondet_ushort();
    unsigned short y = __VERIFIER_nondet_ushort();
    unsigned int xx;
    unsigned int yy;
    unsigned int zz;
    unsigned int z = 0;
    unsigned int i = 0;
    while (i < sizeof(x) * 8) {
        z |= ((x & (1U << i)) << i) | ((y & (1U << i)) << (i + 1));
        i += 1U;
    }
    xx = x;
    yy = y;
    xx = (xx | (xx << 8u)) & 16711935U;
    xx = (xx | (xx << 4u)) & 252645135U;
    xx = (xx | (xx << 2u)) & 858993459U;
    xx = (xx | (xx << 1u)) & 1431655765U;
    yy = (yy | (yy << 8u)) & 16711935U;
    yy = (yy | (yy << 4u)) & 252645135U;
    yy = (yy | (yy << 2u)) & 858993459U;
    yy = (yy | (yy << 1u)) & 1431655765U;
    zz = xx | (yy << 1U);
    __VERIFIER_assert(z == zz);
    return 0;
}
"""
# unsafe twin: one wrong mask bit in yy's 2-step (y's bit 0 lost): x = 0, y = 1 reaches the error
INTERLEAVE_UNSAFE = INTERLEAVE.replace("yy = (yy | (yy << 2u)) & 858993459U;",
                                       "yy = (yy | (yy << 2u)) & 858993458U;")


def test_interleave_bits_is_proved_by_a_complete_unrolling_over_bit_vectors() -> None:
    got = engines.run_bmc(INTERLEAVE, 60)
    assert got == {"answer": "safe", "proof": "complete-unrolling", "invariants": []}, got


def test_interleave_bits_unsafe_twin_is_false_by_replay_never_true() -> None:
    assert INTERLEAVE_UNSAFE != INTERLEAVE
    got = engines.run_bmc(INTERLEAVE_UNSAFE, 60)
    assert got["answer"] == "false", got
    cex = got["counterexample"]
    assert cex["search"] == "bit-vectors" and "reach_error" in cex["replay"], cex


ND = z3.Function("ND", z3.IntSort(), z3.IntSort())


def _agree(formula: z3.BoolRef, nd_ranges: dict[int, tuple[int, int]]) -> tuple[z3.CheckSatResult, z3.CheckSatResult]:
    """The integer solver's answer on `formula` with the inputs' ranges, and the rewrite's."""
    ints = z3.Solver()
    ints.add(formula, *[z3.And(ND(i) >= lo, ND(i) <= hi) for i, (lo, hi) in nd_ranges.items()])
    rw = bvcheck.translate([formula], ND, {}, nd_ranges)
    assert rw is not None, bvcheck.LAST_REFUSAL
    bvs = z3.SolverFor("QF_BV")
    bvs.add(*rw.terms, *rw.ranges())
    return ints.check(), bvs.check()


def test_the_rewrite_keeps_values_wider_than_the_inputs() -> None:
    """x * 2^40 of a 32-bit x is a 72-bit value; in a machine's 64 bits it would wrap
    (2^24 * 2^40 = 2^64 wraps to 0, and the unsat twin would turn sat)."""
    x, y = ND(0), ND(1)
    r = {0: (0, (1 << 32) - 1), 1: (0, 0)}
    assert _agree(z3.And(x * (1 << 40) == y, x != 0), r) == (z3.unsat, z3.unsat)
    assert _agree(z3.And(x * (1 << 40) == y + (1 << 64), x != 0), r) == (z3.sat, z3.sat)
    assert _agree(x * x * 4 == 1 << 64, r) == (z3.sat, z3.sat)


def test_the_rewrite_keeps_z3s_euclidean_mod_and_div() -> None:
    x = ND(0)
    r = {0: (-100, 100)}
    assert _agree(z3.And(x == -1, x % 3 == 2), r) == (z3.sat, z3.sat)  # bvsrem: -1
    assert _agree(z3.And(x == -1, x % -3 == 2), r) == (z3.sat, z3.sat)  # bvsmod by -3: -1
    assert _agree(z3.And(x == -1, x / 3 == -1), r) == (z3.sat, z3.sat)  # bvsdiv: 0
    assert _agree(z3.And(x == -7, x / -2 == 4), r) == (z3.sat, z3.sat)  # bvsdiv: 3
    assert _agree(z3.And(x == -7, x / -2 == 3), r) == (z3.unsat, z3.unsat)


def test_the_rewrite_refuses_what_it_cannot_keep_exact() -> None:
    x, y = ND(0), ND(1)
    r = {0: (-100, 100), 1: (-100, 100)}
    assert bvcheck.translate([x % y == 1], ND, {}, r) is None  # division by a variable
    assert bvcheck.translate([z3.Int("free") * x == 1], ND, {}, r) is not None  # any C value
    assert bvcheck.translate([z3.ToReal(x) == 1], ND, {}, r) is None
    assert bvcheck.translate([x * x * x * x * x * x * x == 1], ND, {}, {}) is None  # > MAX_WIDTH


# The same input index read as an int on one path and an unsigned char on the other: the
# input keeps both ranges (their union).  Were the later read's range kept alone, b < 0
# would be impossible and the unsafe program proved.
TWO_TYPES = """extern unsigned char __VERIFIER_nondet_uchar(void);
int main() { int c = __VERIFIER_nondet_int();
  if (c) { int b = __VERIFIER_nondet_int(); if ((b & c) == 3 && b < 0) { reach_error(); } }
  else { unsigned char a = __VERIFIER_nondet_uchar(); if (a == 7) { return 1; } }
  return 0; }"""


def test_an_input_read_with_two_types_keeps_both_ranges() -> None:
    got = engines.run_bmc(prog(TWO_TYPES), 30)
    assert got["answer"] == "false", got
    assert got["counterexample"]["search"] == "bit-vectors", got
    enc = engines.encode(engines.parsed(prog(TWO_TYPES)), mode="unroll", depth=1)
    found = engines._exact_bits(enc, list(engines._guards(enc)), time.monotonic() + 20)
    assert isinstance(found, tuple) and found[0][1] < 0, found  # b = ND(1) < 0
