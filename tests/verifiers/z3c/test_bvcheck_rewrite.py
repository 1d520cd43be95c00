"""Rule 23's rewrite (`bvcheck`) against integer values computed here, term by term.

A proof by complete unrolling over bit-vectors is sound only if every query the integers
satisfy, the rewrite satisfies too: no term may wrap in W bits.  The guards in
`test_bitvector_bmc` check single terms whose width is set by one node; a narrowed
interval deeper in a term (a sum feeding a product, a negative-only product, a quotient
of the widest input) is hidden there by the one-bit margin and by wider neighbours.  Here
seeded random terms over inputs of C types up to 32 bits, each input pinned at a value
(its type's edges among them), are evaluated in Python with z3's Euclidean ``div`` and
``mod``; the rewrite must be satisfiable with the term equal to that value modulo two
primes and of the same sign.  A wrapped term differs from its value by k * 2^W; the primes
(2 is a primitive root of the first) divide that only if both divide k, so a term that
wraps fails the check.  (Modulo 7, as first written, (2^32 - 1)^3 wrapped in 66 bits kept
its residue: 2^30 - 1 is a multiple of 7.)

The expected values come from `_Term.value`, an evaluator of its own, never from the code
under test.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import z3

from veribatch.verifiers.z3c import bvcheck

ND = z3.Function("ND", z3.IntSort(), z3.IntSort())
# C integer types up to 32 bits (wider inputs set W by themselves and hide the rest)
TYPES = {"signed char": (-128, 127), "unsigned char": (0, 255), "short": (-(1 << 15), (1 << 15) - 1),
         "unsigned short": (0, (1 << 16) - 1), "int": (-(1 << 31), (1 << 31) - 1),
         "unsigned int": (0, (1 << 32) - 1)}
INPUTS = 3


@dataclass
class _Term:
    expr: z3.ArithRef
    value: int


def _euclid(a: int, d: int) -> tuple[int, int]:
    """z3's integer ``div`` and ``mod``: a = d*q + r with 0 <= r < |d|."""
    r = a % abs(d)
    return (a - r) // d, r


def _term(rnd: random.Random, depth: int, inputs: list[_Term]) -> _Term:
    if depth == 0 or rnd.random() < 0.25:
        if rnd.random() < 0.8:
            return rnd.choice(inputs)
        k = rnd.choice([-3, -1, 2, 5, 100, 1 << 31])
        return _Term(z3.IntVal(k), k)
    op = rnd.choice(["+", "-", "*", "*", "neg", "div", "mod", "ite"])
    a = _term(rnd, depth - 1, inputs)
    if op == "neg":
        return _Term(-a.expr, -a.value)
    if op in ("div", "mod"):
        d = rnd.choice([-7, -2, 3, 4, 9])
        q, r = _euclid(a.value, d)
        return _Term(a.expr / d, q) if op == "div" else _Term(a.expr % d, r)
    b = _term(rnd, depth - 1, inputs)
    if op == "+":
        return _Term(a.expr + b.expr, a.value + b.value)
    if op == "-":
        return _Term(a.expr - b.expr, a.value - b.value)
    if op == "*":
        return _Term(a.expr * b.expr, a.value * b.value)
    c, e = _term(rnd, depth - 1, inputs), _term(rnd, depth - 1, inputs)
    cond = a.value <= b.value
    return _Term(z3.If(a.expr <= b.expr, c.expr, e.expr), c.value if cond else e.value)


def _pins(rnd: random.Random) -> tuple[list[_Term], dict[int, tuple[int, int]], list[z3.BoolRef]]:
    inputs, ranges, pins = [], {}, []
    for i in range(INPUTS):
        lo, hi = TYPES[rnd.choice(sorted(TYPES))]
        v = rnd.choice([lo, hi, lo + 1, hi - 1, 0 if lo < 0 else hi // 2, rnd.randint(lo, hi)])
        inputs.append(_Term(ND(i), v))
        ranges[i] = (lo, hi)
        pins.append(ND(i) == v)
    return inputs, ranges, pins


def _holds(query: list[z3.BoolRef], ranges: dict[int, tuple[int, int]],
           joins: dict[str, z3.ArithRef] | None = None) -> z3.CheckSatResult | None:
    """The rewrite's answer on a query the integers satisfy (None: no rewrite)."""
    rw = bvcheck.translate(query, ND, joins or {}, ranges)
    if rw is None:
        return None
    s = z3.SolverFor("QF_BV")
    s.add(*rw.terms, *rw.ranges())
    return s.check()


PRIMES = (1_000_003, 999_983)  # small enough that the residue never sets the width


def _value_kept(t: _Term, primes: tuple[int, ...] = PRIMES) -> list[z3.BoolRef]:
    return [*(t.expr % p == t.value % p for p in primes),
            (t.expr >= 0) == z3.BoolVal(t.value >= 0)]


@pytest.mark.parametrize("seed", range(4))
def test_every_random_term_keeps_its_integer_value_in_the_rewrite(seed: int) -> None:
    rnd = random.Random(seed)
    rewritten, wrong = 0, []
    for _ in range(150):
        inputs, ranges, pins = _pins(rnd)
        t = _term(rnd, rnd.randint(1, 4), inputs)
        got = _holds([*pins, *_value_kept(t)], ranges)
        if got is None:
            continue  # wider than MAX_WIDTH: the integer solver decides, as it must
        rewritten += 1
        if got != z3.sat:
            wrong.append((str(z3.simplify(t.expr)), t.value, [p.arg(1) for p in pins]))
    assert not wrong, wrong[:3]
    assert rewritten >= 140, rewritten


# Terms chosen by hand where one node's interval alone sets the width it needs: each is
# sat over the integers with the inputs pinned, and wraps when that node's interval is
# narrowed (the comment names the node).
U32 = (0, (1 << 32) - 1)
HAND: dict[str, tuple[Callable[[z3.ArithRef, z3.ArithRef, z3.ArithRef], z3.ArithRef],
                      Callable[[int, int, int], int], tuple[int, int, int]]] = {
    "a sum feeding a product": (lambda x, y, z: (x + y) * z, lambda x, y, z: (x + y) * z,
                                ((1 << 32) - 1, (1 << 32) - 1, (1 << 32) - 1)),
    "a difference feeding a product": (lambda x, y, z: (x - y) * z, lambda x, y, z: (x - y) * z,
                                       (0, (1 << 32) - 1, (1 << 32) - 1)),
    "a product of negatives only": (lambda x, y, z: -x * y * z, lambda x, y, z: -x * y * z,
                                    ((1 << 32) - 1, (1 << 32) - 1, (1 << 32) - 1)),
    "a product of three": (lambda x, y, z: x * y * z, lambda x, y, z: x * y * z,
                           ((1 << 32) - 1, (1 << 32) - 1, (1 << 32) - 1)),
    "a quotient feeding a product": (lambda x, y, z: (x / 3) * (y / -3) * z,
                                     lambda x, y, z: _euclid(x, 3)[0] * _euclid(y, -3)[0] * z,
                                     ((1 << 32) - 1, (1 << 32) - 1, (1 << 32) - 1)),
    "a remainder feeding a product": (lambda x, y, z: (x % 2) * y * z,
                                      lambda x, y, z: _euclid(x, 2)[1] * y * z,
                                      ((1 << 32) - 1, (1 << 32) - 1, (1 << 32) - 1)),
    # each corner product of an interval product is the extreme one somewhere
    "a negative factor times a positive one": (lambda x, y, z: (x - (1 << 32)) * y * z,
                                               lambda x, y, z: (x - (1 << 32)) * y * z,
                                               (0, (1 << 32) - 1, 1)),
    # z3.simplify orders factors its own way: here the negative one first
    "a negative factor times a remainder": (lambda x, y, z: (x - (1 << 32)) * (y % 5) * z,
                                            lambda x, y, z: (x - (1 << 32)) * (y % 5) * z,
                                            (0, 4, (1 << 32) - 1)),
    "two negative factors": (lambda x, y, z: (x - (1 << 32)) * (y - (1 << 32)) * z,
                             lambda x, y, z: (x - (1 << 32)) * (y - (1 << 32)) * z, (0, 0, 1)),
    "a choice feeding a product": (lambda x, y, z: z3.If(x <= y, x * y, -x) * z,
                                   lambda x, y, z: (x * y if x <= y else -x) * z,
                                   ((1 << 32) - 1, (1 << 32) - 1, (1 << 32) - 1)),
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_a_narrowed_node_would_wrap_these_terms(name: str) -> None:
    make, value, pinned = HAND[name]
    xs = [ND(i) for i in range(3)]
    t = _Term(make(*xs), value(*pinned))
    pins = [ND(i) == v for i, v in enumerate(pinned)]
    assert _holds([*pins, *_value_kept(t)], dict(enumerate([U32] * 3))) == z3.sat


@pytest.mark.parametrize("typ", ["signed char", "short", "int", "two signed chars"])
def test_the_quotient_of_the_widest_input_at_its_lowest_value(typ: str) -> None:
    """x div 3 is rewritten as (x - x mod 3) / 3: at x = -2^(n-1), x - x mod 3 is one below
    the type's range, so the width needs its margin bit (without it the quotient of
    -128 would come out as 42 instead of -43).  The sum of two signed chars needs an odd
    width (9 bits), where a margin taken as ``width | 1`` would add nothing."""
    x, y = ND(0), ND(1)
    if typ == "two signed chars":
        lo, hi = TYPES["signed char"]
        operand, low, ranges = x + y, 2 * lo, {0: (lo, hi), 1: (lo, hi)}
        pins = [x == lo, y == lo]
    else:
        lo, hi = TYPES[typ]
        operand, low, ranges, pins = x, lo, {0: (lo, hi)}, [x == lo]
    q, _ = _euclid(low, 3)
    assert q == {"signed char": -43, "short": -10923, "int": -715827883,
                 "two signed chars": -86}[typ]
    assert _holds([*pins, operand / 3 == q], ranges) == z3.sat
    assert _holds([*pins, operand / 3 == q + 1], ranges) == z3.unsat


def test_every_divisor_of_a_value_in_minus_255_to_0_at_its_lowest() -> None:
    """x in [-255, 0] needs 9 bits; x - x mod 7 for x in -255..-253 is -259, below 9 bits'
    -256: the margin bit is needed off a power of two too.  No constant pins x (-255
    itself would set the width), and the range is given directly (an unsigned char's own
    0..255 would too): x div d equal to -255's quotient must stay satisfiable."""
    x = ND(0)
    wrong = []
    for d in (2, 3, 4, 5, 7, 9, -7):
        q, _ = _euclid(-255, d)
        if _holds([x / d == q], {0: (-255, 0)}) != z3.sat:
            wrong.append((d, q))
    assert not wrong, wrong


def _power(t: z3.ArithRef, n: int) -> z3.ArithRef:
    out = t
    for _ in range(n - 1):
        out = out * t
    return out


@pytest.mark.parametrize("d", [3, -3])
def test_a_quotients_bounds_round_as_z3s_div(d: int) -> None:
    """x div d for x in [-5, 2]: d = 3 gives [-2, 0] (floor), d = -3 gives [0, 2] (ceiling).
    Rounded the other way each bound loses one, which matters only where the quotient is
    small and multiplied often: q^9 needs 11 bits, [-1, 1]^9 one.  (Residues modulo small
    primes here: the large ones would set the width by themselves.)"""
    x = ND(0)
    q = x / d
    qv, _ = _euclid(-5, d)
    assert qv == (-2 if d == 3 else 2)
    t = _Term(_power(q, 9), qv ** 9)
    assert _holds([x == -5, *_value_kept(t, (3, 5, 7))], {0: (-5, 2)}) == z3.sat


def _as_factor(small: _Term, pins: list[z3.BoolRef],
               ranges: dict[int, tuple[int, int]]) -> z3.CheckSatResult | None:
    """`small` (a value near 0) as the factor small^9 * y * z of two inputs at 2^32 - 1: a
    bound of `small` one step too close to 0 is harmless alone and many bits short here."""
    y, z = ND(8), ND(9)
    m = (1 << 32) - 1
    t = _Term(_power(small.expr, 9) * y * z, small.value ** 9 * m * m)
    return _holds([*pins, y == m, z == m, *_value_kept(t)], {**ranges, 8: U32, 9: U32})


def test_small_quotients_keep_their_values() -> None:
    x = ND(0)
    wrong = []
    for v in range(-7, 8):
        for d in (2, 3, -3, 4, -4):
            small = _Term(x / d, _euclid(v, d)[0])
            got = _as_factor(small, [x == v], {0: (v, v)})
            if got != z3.sat:
                wrong.append((v, d, got))
    assert not wrong, wrong


def test_small_remainders_keep_their_values() -> None:
    """(x mod d) + c for x pinned in 0..7 and c in -2..2: the remainder's interval is all of
    [0, |d| - 1], 0 included."""
    x, c = ND(0), ND(1)
    wrong = []
    for v in range(8):
        for d in (2, 3, -3, 4):
            for cv in range(-2, 3):
                small = _Term(x % d + c, _euclid(v, d)[1] + cv)
                got = _as_factor(small, [x == v, c == cv], {0: (v, v), 1: (cv, cv)})
                if got != z3.sat:
                    wrong.append((v, d, cv, got))
    assert not wrong, wrong


def test_small_choices_keep_their_values() -> None:
    """If(x <= y, x, y) for x, y pinned in -3..3: the choice's interval spans both branches."""
    x, y = ND(0), ND(1)
    wrong = []
    for xv in range(-3, 4):
        for yv in range(-3, 4):
            small = _Term(z3.If(x <= y, x, y), xv if xv <= yv else yv)
            got = _as_factor(small, [x == xv, y == yv], {0: (xv, xv), 1: (yv, yv)})
            if got != z3.sat:
                wrong.append((xv, yv, got))
    assert not wrong, wrong


def test_a_remainder_above_its_operand_keeps_the_operand_values() -> None:
    """x mod 1000 of an unsigned char is x itself; its interval is [0, 999], never the
    quotient's [0, 0]."""
    x, y, z = ND(0), ND(1), ND(2)
    m = (1 << 32) - 1
    t = _Term((x % 1000) * y * z, 255 * m * m)
    assert _holds([x == 255, y == m, z == m, *_value_kept(t)],
                  {0: TYPES["unsigned char"], 1: U32, 2: U32}) == z3.sat


def test_a_sum_of_negatives_feeding_a_power() -> None:
    """Each lower bound adds: x + y of two values in [-2^31, -1] reaches -2^32, and its
    fifth power -2^160; a bound one bit short loses five bits there."""
    x, y = ND(0), ND(1)
    lo = -(1 << 31)
    t = _Term(_power(x + y, 5), (2 * lo) ** 5)
    assert _holds([x == lo, y == lo, *_value_kept(t)], {0: (lo, -1), 1: (lo, -1)}) == z3.sat


def _bool(rnd: random.Random, depth: int, inputs: list[_Term]) -> tuple[z3.BoolRef, bool]:
    if depth == 0 or rnd.random() < 0.3:
        a, b = _term(rnd, 1, inputs), _term(rnd, 1, inputs)
        cmp = rnd.choice(["<", "<=", ">", ">=", "==", "!="])
        fs = {"<": (lambda p, q: p < q), "<=": (lambda p, q: p <= q), ">": (lambda p, q: p > q),
              ">=": (lambda p, q: p >= q), "==": (lambda p, q: p == q), "!=": (lambda p, q: p != q)}
        return fs[cmp](a.expr, b.expr), fs[cmp](a.value, b.value)
    op = rnd.choice(["and", "or", "not", "implies", "xor", "iff", "ite", "distinct"])
    p, pv = _bool(rnd, depth - 1, inputs)
    if op == "not":
        return z3.Not(p), not pv
    q, qv = _bool(rnd, depth - 1, inputs)
    if op == "and":
        return z3.And(p, q), pv and qv
    if op == "or":
        return z3.Or(p, q), pv or qv
    if op == "implies":
        return z3.Implies(p, q), (not pv) or qv
    if op == "xor":
        return z3.Xor(p, q), pv != qv
    if op == "iff":
        return p == q, pv == qv
    if op == "distinct":
        return z3.Distinct(p, q), pv != qv
    r, rv = _bool(rnd, depth - 1, inputs)
    return z3.If(p, q, r), qv if pv else rv


@pytest.mark.parametrize("seed", range(2))
def test_every_random_predicate_keeps_its_truth_value_in_the_rewrite(seed: int) -> None:
    rnd = random.Random(100 + seed)
    for _ in range(100):
        inputs, ranges, pins = _pins(rnd)
        f, truth = _bool(rnd, rnd.randint(1, 3), inputs)
        for want, answer in ((truth, z3.sat), (not truth, z3.unsat)):
            got = _holds([*pins, f == z3.BoolVal(want)], ranges)
            assert got in (None, answer), (str(f), truth, want, got)


def _admits(rw: bvcheck.Rewrite, i: int, v: int) -> bool:
    s = z3.SolverFor("QF_BV")
    s.add(*rw.ranges(), rw.nd[i] == z3.BitVecVal(v, rw.width))
    return s.check() == z3.sat


def test_an_input_admits_every_value_of_the_types_it_is_read_with() -> None:
    x, y, z = ND(0), ND(1), ND(2)
    query = [x + y + z > 0]
    rw = bvcheck.translate(query, ND, {}, {0: (-128, 127), 1: (0, 255)})
    assert rw is not None, bvcheck.LAST_REFUSAL
    assert _admits(rw, 0, -128) and _admits(rw, 0, 127) and not _admits(rw, 0, 128)
    assert _admits(rw, 1, 0) and _admits(rw, 1, 255) and not _admits(rw, 1, -1)
    # an input read with no recorded type: any value of any C integer type (long long's
    # lowest, unsigned long long's highest)
    assert _admits(rw, 2, -(1 << 63)) and _admits(rw, 2, (1 << 64) - 1)
    # one read at an index that is not a constant: every input may be any C value
    rw = bvcheck.translate(query, ND, {}, {0: (-128, 127), 1: (0, 255), -1: (0, 1)})
    assert rw is not None, bvcheck.LAST_REFUSAL
    for i in range(3):
        assert _admits(rw, i, -(1 << 63)) and _admits(rw, i, (1 << 64) - 1), i


def test_a_free_constant_may_be_any_c_value() -> None:
    """An undefined shift's result or an indeterminate local: some C integer value."""
    u = z3.Int("undefined")
    assert _holds([u == -(1 << 63), u * u % 7 == (1 << 126) % 7], {}) == z3.sat
    assert _holds([u == (1 << 64) - 1, u * u % 7 == ((1 << 64) - 1) ** 2 % 7], {}) == z3.sat


def test_a_join_constant_has_its_terms_values() -> None:
    """`control._merge` names a merged value by a constant c and conjoins c == term; a
    product over c needs c's own interval (here 80 bits), not a C type's 64."""
    x, y, z = ND(0), ND(1), ND(2)
    c = z3.Int("join!1")
    term = x * y * z
    ranges = {0: U32, 1: U32, 2: (0, (1 << 16) - 1)}
    xv, yv, zv = (1 << 32) - 1, (1 << 32) - 1, (1 << 16) - 1
    cv = xv * yv * zv
    query = [x == xv, y == yv, z == zv, c == term, c * c % 7 == cv * cv % 7]
    assert _holds(query, ranges, {"join!1": term}) == z3.sat


def test_the_rewrite_refuses_what_is_not_an_input_or_an_integer() -> None:
    x = ND(0)
    g = z3.Function("g", z3.IntSort(), z3.IntSort())
    r = {0: (-100, 100)}
    assert bvcheck.translate([g(0) > 5, x == 1], ND, {}, r) is None  # another function
    a_fn = z3.Function("A", z3.IntSort(), z3.IntSort())  # a name sorting before "ND"
    assert bvcheck.translate([a_fn(0) > 5, x == 1], ND, {}, r) is None
    assert bvcheck.translate([ND(x) > 5], ND, {}, r) is None  # an input at a variable index
    assert bvcheck.translate([z3.Real("r") > 0, x == 1], ND, {}, r) is None
    assert bvcheck.translate([z3.Real("r") > z3.Real("s"), x == 1], ND, {}, r) is None
    f32 = z3.Float32()
    assert bvcheck.translate([z3.FP("f", f32) == z3.FP("g", f32), x == 1], ND, {}, r) is None
    assert bvcheck.translate([z3.ToReal(x) / 2 > 0], ND, {}, r) is None
    s = z3.DeclareSort("S")
    assert bvcheck.translate([z3.Const("s1", s) == z3.Const("s2", s), x == 1], ND, {}, r) is None
    a = z3.Array("a", z3.IntSort(), z3.IntSort())
    assert bvcheck.translate([a[x] > 0], ND, {}, r) is None
    k = z3.Int("k")
    assert bvcheck.translate([z3.ForAll([k], k * x >= 0)], ND, {}, r) is None


def test_the_rewrite_keeps_a_division_by_a_constant_and_refuses_one_by_zero() -> None:
    x = ND(0)
    r = {0: (-100, 100)}
    assert bvcheck.translate([x % 8 == 3], ND, {}, r) is not None
    assert bvcheck.translate([x / 8 == 3], ND, {}, r) is not None
    assert bvcheck.translate([x / 0 == 3], ND, {}, r) is None
    assert bvcheck.translate([x % 0 == 3], ND, {}, r) is None
