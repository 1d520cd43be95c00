"""Floating point: `float` and `double` as IEEE 754 binary32/binary64 (z3's FP theory).

C semantics as gcc implements them on x86-64 (SSE, FLT_EVAL_METHOD 0): every
operation rounds to nearest-even in the operand type; integer operands are
converted to the floating type first (usual arithmetic conversions); comparisons
with NaN are false; conversion to an integer type truncates toward zero, and is
undefined for NaN, infinities and values outside the target range (like signed
overflow, outside the property: such a conversion yields an arbitrary value of
the type here, so no verdict depends on it).

Inputs (`__VERIFIER_nondet_float/double`, uninitialised locals) are bit patterns:
the nondet value ``ND(i)`` is read as the unsigned integer of the type's bits, so
a counterexample's inputs are the exact values `replay` copies into the program.

In the Horn encoding (the clauses Spacer solves) floating point is **abstracted
away**: every floating-point value is an *opaque* integer term (`FloatType.opaque`)
that nothing constrains, a fresh one for every constant, operation and conversion
to a floating type; every comparison is a fresh Boolean; a conversion to an integer
type is any value of that type, fresh per conversion (`float_to_int`); a value's truth
(`if (d)`, `!d`) is its term's (term != 0), which nothing else constrains.  Each execution of the
program is one of the abstraction's (choose the fresh values as the execution
computes them), so a proof of the clauses covers the program, while an error they
reach may be spurious (`Encoding.over_approximate`: only BMC's replayed trace makes
it FALSE).  A property that depends on floating-point values is thus never proved
in the Horn encoding, only one that holds whatever they are (a double that only
feeds a `printf`, a loop over doubles beside the asserted integers).  Where no
clause carries fresh terms (candidate invariants, `cexpr`: ``abstract_floats``
off) it is `BmcOnly` as before.  `long double` stays `Unsupported`.
Mixed into `encode.Encoder`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import z3
from pycparser import c_ast

from veribatch.verifiers.z3c import cint
from veribatch.verifiers.z3c.cint import CType
from veribatch.verifiers.z3c.ir import BmcOnly, PtrType, State, Unsupported, Val


@dataclass(frozen=True)
class FloatType(CType):
    """`float` or `double`; `opaque`: a Horn-encoding input known only through int conversion."""

    ebits: int = 0
    sbits: int = 0
    opaque: bool = False

    def sort(self) -> z3.FPSortRef:
        return z3.FPSort(self.ebits, self.sbits)


FLOAT = FloatType("float", 32, True, 10, 8, 24)
DOUBLE = FloatType("double", 64, True, 11, 11, 53)
_RNE = z3.RNE
_RTZ = z3.RTZ


def float_from_specifiers(names: list[str]) -> FloatType | None:
    words = [n for n in names if n not in ("const", "volatile", "register", "static", "extern")]
    if words == ["float"]:
        return FLOAT
    if words == ["double"]:
        return DOUBLE
    return None


def is_float(v: Val) -> bool:
    return isinstance(v.ctype, FloatType)


def reads_floating_point(ast: c_ast.FileAST) -> bool:
    """Whether the program mentions `float`/`double` (then BMC tags every input's kind)."""

    class Scan(c_ast.NodeVisitor):
        found = False

        def visit_IdentifierType(self, node: c_ast.IdentifierType) -> None:
            self.found = self.found or "double" in node.names or "float" in node.names

        def visit_ID(self, node: c_ast.ID) -> None:
            self.found = self.found or node.name.startswith(("__VERIFIER_nondet_float",
                                                             "__VERIFIER_nondet_double"))

    scan = Scan()
    scan.visit(ast)
    return scan.found


class FloatsMixin:
    """Floating-point values and operations (part of `encode.Encoder`)."""

    def need_fp(self, construct: str, node: c_ast.Node | None) -> None:
        if self.mode != "unroll" and not self.abstract_floats:
            raise BmcOnly(construct, node)

    def _abstract(self) -> bool:
        """The Horn encoding: floating-point values are opaque (see the module docstring)."""
        if self.mode == "unroll":
            return False
        self.over_approximate = True
        return True

    def opaque_float(self, t: FloatType) -> Val:
        """Any value of `t` (Horn encoding): a fresh opaque term."""
        return Val(self.fresh("fp"), FloatType(t.name, t.width, True, t.rank, t.ebits, t.sbits, True))

    def float_zero(self, t: FloatType) -> z3.ExprRef:
        """`0.0` of `t` (a static's initial value): opaque in the Horn encoding."""
        if self._abstract():
            return self.opaque_float(t).expr
        return z3.fpToFP(_RNE(), z3.RealVal(0), t.sort())

    def float_constant(self, node: c_ast.Constant) -> Val:
        self.need_fp("floating point unsupported", node)
        text = node.value.lower()
        t = DOUBLE
        if text.endswith("f"):
            t, text = FLOAT, text[:-1]
        elif text.endswith("l"):
            raise Unsupported("long double unsupported", node)
        try:
            q = Fraction(float.fromhex(text)) if text.startswith("0x") else Fraction(text)
        except ValueError as exc:
            raise Unsupported(f"floating constant {node.value} unsupported", node) from exc
        if self._abstract():
            return self.opaque_float(t)
        return Val(z3.simplify(z3.fpToFP(_RNE(), z3.RealVal(q), t.sort())), t)

    def float_nondet(self, state: State, t: FloatType, tag: str) -> tuple[State, Val]:
        """An input of type `t`: any bit pattern (NaN and infinities included)."""
        if self.mode != "unroll":
            # Horn encoding: an opaque input, usable only through integer conversion
            return state, Val(self.fresh(tag), FloatType(t.name, t.width, True, t.rank, t.ebits, t.sbits, True))
        # The bits come from their own sequence ND_bits<w>(i); ND_kind(i) says which
        # sequence slot i was read from (linking them to ND(i) by bv2int is far slower).
        assert self.nd_kind is not None
        b = self.nd_bits[t.width](state.nd)
        s = State(state.preds, (*state.cond, self.nd_kind(state.nd) == t.width), state.env,
                  state.nd + 1)
        return s, Val(z3.fpBVToFP(b, t.sort()), t)

    def to_float(self, v: Val, t: FloatType, node: c_ast.Node) -> z3.FPRef:
        """`v` converted to `t` (C 6.3.1.4/6.3.1.5: round to nearest-even)."""
        self.need_fp("floating point unsupported", node)
        if self._abstract():
            if isinstance(v.ctype, FloatType) and (v.ctype.ebits, v.ctype.sbits) == (t.ebits, t.sbits):
                return v.expr  # the same value
            return self.opaque_float(t).expr
        if isinstance(v.ctype, FloatType):
            if (v.ctype.ebits, v.ctype.sbits) == (t.ebits, t.sbits):
                return v.expr
            return z3.fpToFP(_RNE(), v.expr, t.sort())
        if isinstance(v.ctype, PtrType):
            raise Unsupported("pointer to floating point conversion unsupported", node)
        # A fresh bit-vector b defined by bv2int(b) = x (linear; int2bv and the real
        # conversion fp.to_fp(Real) are far slower).  w bits hold every value of the
        # type and every result of a signed overflow of it (undefined anyway) but absurd ones.
        x = z3.simplify(v.as_int())
        if z3.is_int_value(x):
            return z3.simplify(z3.fpToFP(_RNE(), z3.RealVal(x.as_long()), t.sort()))
        w = 2 * max(v.ctype.width, 64) + 1
        b = z3.FreshConst(z3.BitVecSort(w), "i2f")
        self.definitions.append(z3.BV2Int(b, is_signed=True) == v.as_int())
        return z3.fpSignedToFP(_RNE(), b, t.sort())

    def float_to_int(self, v: Val, t: CType) -> z3.ArithRef:
        """Truncation toward zero; NaN, infinities and out-of-range values are undefined."""
        if v.ctype.opaque or not z3.is_fp(v.expr):  # a variable's opaque value (Horn encoding)
            # Any value of `t` (each is the conversion of some double; no others are
            # defined), fresh per conversion and never the opaque term itself: the term's
            # truth (`Val.as_bool`: term != 0) must stay free of it (0.5 is true, (int)0.5 is 0)
            if t.is_bool:
                return z3.If(z3.FreshBool("fpbool"), z3.IntVal(1), z3.IntVal(0))
            r = self.fresh("fp2int")
            return z3.If(cint.in_range(r, t), r, z3.IntVal(t.lo))
        x = v.expr
        if t.is_bool:
            return z3.If(z3.fpIsZero(x), z3.IntVal(0), z3.IntVal(1))
        sort = x.sort()
        r = z3.fpRoundToIntegral(_RTZ(), x)
        lo = z3.fpToFP(_RNE(), z3.RealVal(t.lo), sort)  # -2^(w-1) or 0: exact
        top = z3.fpToFP(_RNE(), z3.RealVal(t.hi + 1), sort)  # 2^(w-1) or 2^w: exact
        ok = z3.And(z3.Not(z3.fpIsNaN(x)), z3.fpGEQ(r, lo), z3.fpLT(r, top))
        trunc = z3.BV2Int(z3.fpToSBV(_RTZ(), x, z3.BitVecSort(t.width + 1)), is_signed=True)
        return z3.If(ok, trunc, z3.IntVal(t.lo))

    def float_arith(self, op: str, a: Val, b: Val, node: c_ast.Node) -> Val:
        self.need_fp("floating point unsupported", node)
        fa = a.ctype if is_float(a) else None
        fb = b.ctype if is_float(b) else None
        t = DOUBLE if DOUBLE in (fa, fb) or (fa and fa.width == 64) or (fb and fb.width == 64) else FLOAT
        if self._abstract():
            if op in ("+", "-", "*", "/"):
                return self.opaque_float(t)
            if op in ("<", "<=", ">", ">=", "==", "!="):
                return Val(z3.FreshBool("fpcmp"), self.int_t)
            raise Unsupported(f"operator {op!r} on floating point unsupported", node)
        x, y = self.to_float(a, t, node), self.to_float(b, t, node)
        if op in ("+", "-", "*", "/"):
            f = {"+": z3.fpAdd, "-": z3.fpSub, "*": z3.fpMul, "/": z3.fpDiv}[op]
            return Val(f(_RNE(), x, y), t)
        cmp = {"<": z3.fpLT, "<=": z3.fpLEQ, ">": z3.fpGT, ">=": z3.fpGEQ, "==": z3.fpEQ}
        if op in cmp:
            return Val(cmp[op](x, y), self.int_t)
        if op == "!=":
            return Val(z3.Not(z3.fpEQ(x, y)), self.int_t)
        raise Unsupported(f"operator {op!r} on floating point unsupported", node)

    def float_unary(self, op: str, v: Val, node: c_ast.Node) -> Val:
        self.need_fp("floating point unsupported", node)
        if self._abstract() and op in ("-", "+", "!"):
            if op == "!":  # the opaque term's own truth, as in `if (d)` (`Val.as_bool`)
                return Val(z3.Not(v.as_bool()), self.int_t)
            return self.opaque_float(v.ctype)
        if op == "-":
            return Val(z3.fpNeg(v.expr), v.ctype)
        if op == "+":
            return v
        if op == "!":
            return Val(z3.fpIsZero(v.expr), self.int_t)
        raise Unsupported(f"unary {op!r} on floating point unsupported", node)
