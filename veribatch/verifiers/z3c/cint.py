"""C integer types and their arithmetic over mathematical integers.

Values are z3 `Int`s (notes.md: as fast as plain integers, bit-vectors were far
slower).  What makes this sound for C:

* every input (nondet call, uninitialised local) is constrained to its type's range;
* conversions to a type whose range does not contain the source range wrap
  (unsigned: mod 2^w; signed: gcc's implementation-defined modular wrap), so
  unsigned arithmetic and narrowing assignments behave exactly as in C;
* `/` and `%` truncate toward zero (SMT `div`/`mod` are Euclidean);
* signed overflow is undefined behaviour and outside the reach-safety property
  (SV-COMP convention): signed results are left unbounded, which over-approximates
  every defined execution, so a proof stays a proof.  A counterexample is only
  reported after a concrete replay under gcc's UB sanitizer (see `replay`).
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

DataModel = str  # "ILP32" (SV-COMP 32bit, the default) or "LP64"


@dataclass(frozen=True)
class CType:
    """An integer type: `rank` orders types for the usual arithmetic conversions."""

    name: str
    width: int
    signed: bool
    rank: int

    @property
    def is_bool(self) -> bool:
        return self.name == "_Bool"

    @property
    def lo(self) -> int:
        if self.is_bool:
            return 0
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def hi(self) -> int:
        if self.is_bool:
            return 1
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1

    def contains(self, other: CType) -> bool:
        return self.lo <= other.lo and other.hi <= self.hi


def _types(model: DataModel) -> dict[str, CType]:
    long_w = 64 if model == "LP64" else 32
    return {
        "_Bool": CType("_Bool", 1, False, 0),
        "char": CType("char", 8, True, 1),
        "signed char": CType("signed char", 8, True, 1),
        "unsigned char": CType("unsigned char", 8, False, 1),
        "short": CType("short", 16, True, 2),
        "unsigned short": CType("unsigned short", 16, False, 2),
        "int": CType("int", 32, True, 3),
        "unsigned int": CType("unsigned int", 32, False, 3),
        "long": CType("long", long_w, True, 4),
        "unsigned long": CType("unsigned long", long_w, False, 4),
        "long long": CType("long long", 64, True, 5),
        "unsigned long long": CType("unsigned long long", 64, False, 5),
    }


_TABLES = {m: _types(m) for m in ("ILP32", "LP64")}


def type_named(name: str, model: DataModel = "ILP32") -> CType:
    return _TABLES[model][name]


def from_specifiers(names: list[str], model: DataModel) -> CType | None:
    """`['unsigned', 'long', 'int']` → unsigned long; None when not an integer type."""
    words = [n for n in names if n not in ("const", "volatile", "register", "static", "extern")]
    if not words:
        return None
    if any(w not in ("signed", "unsigned", "char", "short", "int", "long", "_Bool") for w in words):
        return None
    if words == ["_Bool"]:
        return _TABLES[model]["_Bool"]
    unsigned = "unsigned" in words
    signed_kw = "signed" in words
    longs = words.count("long")
    if "char" in words:
        base = "char"
        if unsigned:
            return _TABLES[model]["unsigned char"]
        return _TABLES[model]["signed char" if signed_kw else "char"]
    if "short" in words:
        base = "short"
    elif longs >= 2:
        base = "long long"
    elif longs == 1:
        base = "long"
    else:
        base = "int"
    return _TABLES[model][("unsigned " if unsigned else "") + base]


def promote(t: CType, model: DataModel) -> CType:
    """Integer promotion: everything narrower than int becomes int."""
    return _TABLES[model]["int"] if t.rank < 3 else t


def common_type(a: CType, b: CType, model: DataModel) -> CType:
    """The usual arithmetic conversions of C11 6.3.1.8 for integer operands."""
    a, b = promote(a, model), promote(b, model)
    if a == b:
        return a
    if a.signed == b.signed:
        return a if a.rank >= b.rank else b
    u, s = (a, b) if not a.signed else (b, a)
    if u.rank >= s.rank:
        return u
    if s.contains(u):
        return s
    table = _TABLES[model]
    return table["unsigned " + s.name]


def convert(e: z3.ArithRef, src: CType, dst: CType) -> z3.ArithRef:
    """The value of `e` (of type `src`) converted to `dst`, wrapping where C wraps."""
    if dst.is_bool:
        if src.is_bool:
            return e
        return z3.If(e != 0, z3.IntVal(1), z3.IntVal(0))
    if dst.contains(src):
        return e
    m = 1 << dst.width
    if not dst.signed:
        return e % m
    u = e % m
    return z3.If(u > dst.hi, u - m, u)


def convert_py(v: int, dst: CType) -> int:
    if dst.is_bool:
        return 1 if v != 0 else 0
    m = 1 << dst.width
    u = v % m
    if dst.signed and u > dst.hi:
        return u - m
    return u


def in_range(e: z3.ArithRef, t: CType) -> z3.BoolRef:
    return z3.And(e >= t.lo, e <= t.hi)


def c_div(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    """C division (truncation toward zero) for a possibly negative dividend/divisor."""
    bv = _const(b)
    if bv is not None:
        if bv == 0:
            return a / b  # UB in C; any value
        d = abs(bv)
        q = z3.If(a >= 0, a / d, -((-a) / d))
        return q if bv > 0 else -q
    return z3.If(
        b >= 0,
        z3.If(a >= 0, a / b, -((-a) / b)),
        z3.If(a >= 0, -(a / (-b)), (-a) / (-b)),
    )


def c_rem(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    """C remainder: sign follows the dividend; |a % b| < |b|."""
    bv = _const(b)
    if bv is not None and bv != 0:
        d = abs(bv)
        r = a % d  # Euclidean: 0 <= r < d
        return z3.If(z3.Or(a >= 0, r == 0), r, r - d)
    return a - b * c_div(a, b)


def _const(e: z3.ExprRef) -> int | None:
    e = z3.simplify(e) if not z3.is_int_value(e) else e
    return e.as_long() if z3.is_int_value(e) else None


def c_div_py(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def c_rem_py(a: int, b: int) -> int:
    return a - b * c_div_py(a, b)
