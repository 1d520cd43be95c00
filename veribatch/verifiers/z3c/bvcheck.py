"""A bounded unrolling's integer query decided exactly over bit-vectors (rule 23).

The unrolling (`mode="unroll"`) encodes bit-wise operators bit by bit over
mathematical integers (`expressions.bitwise`): exact, but z3's arithmetic solver
rarely decides such queries, and ``nla2bv`` only under-approximates them.  Here the
same query is rewritten over bit-vectors of one width W *wide enough that no term
overflows*, so the rewrite is equisatisfiable and its "unsat" is as good as the
integer solver's:

* every input ``ND(i)`` is a value of a C integer type (`calls.nondet` reads only
  those), so each lies in ``[-2^63, 2^64 - 1]``; a real execution's inputs satisfy
  that, and the rewrite assumes nothing else about them;
* an interval for every integer term, bottom up from the inputs' and the
  constants' (``+ *`` by interval arithmetic; ``mod k`` in ``[0, |k| - 1]``; ``div k``
  from its operand, rounded as z3 rounds; ``ite`` the union), and W is the widest
  signed width any of them needs, plus one (``x div k`` is computed through
  ``x - x mod |k|``, which can lie just below x's interval);
* ``+ *`` are then exact in W bits, comparisons signed, ``x mod k`` is
  ``bvsmod(x, |k|)`` (z3's ``mod`` is Euclidean, in ``[0, |k|)``) and ``x div k``
  the exact quotient ``bvsdiv(x - x mod |k|, k)``.  A partial sum or product of an
  n-ary term may wrap: ``+`` and ``*`` modulo 2^W are ring operations, so the whole
  term's value modulo 2^W does not depend on it, and that value fits.

Only the operators ``z3.simplify`` leaves are covered (it writes ``x - y`` as
``x + -1*y``, ``-x`` as ``-1*x``, ``Xor`` as ``Not(==)`` and ``Implies`` as ``Or``);
an operator it would leave in a later z3 is refused, not guessed.

Anything else — a division by a non-constant, an uninterpreted term other than
``ND`` and Boolean bits, arrays, reals, floating point, a width above `MAX_WIDTH` —
is no rewrite (`translate` returns None) and the integer solver decides as before.
"""

from __future__ import annotations

import ctypes
from typing import Any

import z3

MAX_WIDTH = 192
ND_LO, ND_HI = -(1 << 63), (1 << 64) - 1  # every C integer type's values (ILP32 and LP64)
LAST_REFUSAL = [""]  # why the last `translate` returned None (tests and the member's reason)

_ARITH = {z3.Z3_OP_ADD, z3.Z3_OP_MUL}
_CMP = {z3.Z3_OP_LE: z3.Z3_mk_bvsle, z3.Z3_OP_LT: z3.Z3_mk_bvslt,
        z3.Z3_OP_GE: z3.Z3_mk_bvsge, z3.Z3_OP_GT: z3.Z3_mk_bvsgt}
_BOOL_NARY = {z3.Z3_OP_AND: z3.Z3_mk_and, z3.Z3_OP_OR: z3.Z3_mk_or}
_BOOL_OTHER = {z3.Z3_OP_NOT, z3.Z3_OP_TRUE, z3.Z3_OP_FALSE}


class NoRewrite(Exception):
    """The query has a term the exact rewrite does not cover."""


class _Node:
    """One subterm, read once through Z3's C API (the Python wrappers cost ~50x more)."""

    __slots__ = ("ast", "kind", "sort", "args", "name", "value")

    def __init__(self, c: Any, a: Any) -> None:
        self.ast = a
        sk = z3.Z3_get_sort_kind(c, z3.Z3_get_sort(c, a))
        self.sort = "int" if sk == z3.Z3_INT_SORT else "bool" if sk == z3.Z3_BOOL_SORT else "other"
        self.value: int | None = None
        self.name = ""
        self.args: list[Any] = []
        ak = z3.Z3_get_ast_kind(c, a)
        if ak == z3.Z3_NUMERAL_AST:
            self.kind = z3.Z3_OP_ANUM
            if self.sort == "int":
                self.value = int(z3.Z3_get_numeral_string(c, a))
            return
        if ak != z3.Z3_APP_AST:
            self.kind = -1  # a quantifier or a bound variable
            return
        app = z3.Z3_to_app(c, a)
        d = z3.Z3_get_app_decl(c, app)
        self.kind = z3.Z3_get_decl_kind(c, d)
        self.args = [z3.Z3_get_app_arg(c, app, i) for i in range(z3.Z3_get_app_num_args(c, app))]
        if self.kind == z3.Z3_OP_UNINTERPRETED:
            self.name = z3.Z3_get_symbol_string(c, z3.Z3_get_decl_name(c, d))


class Rewrite:
    """An unrolling's Boolean terms over bit-vectors of one width (see the module)."""

    def __init__(self, terms: list[z3.ExprRef], nd: z3.FuncDeclRef,
                 joins: dict[str, z3.ExprRef], nd_ranges: dict[int, tuple[int, int]]) -> None:
        # each input's range: the union of the types read at its index on any path;
        # were some index not a constant, every input gets every C type's range
        self._nd_ranges = {} if -1 in nd_ranges else dict(nd_ranges)
        self.ctx = terms[0].ctx if terms else z3.main_ctx()
        self._c = self.ctx.ref()
        self._nd_name = nd.name()
        self._keep = [*terms, *joins.values()]  # the raw subterms live as long as these
        self._joins = {k: self._id(t.as_ast()) for k, t in joins.items()}
        self._join_ast = {self._id(t.as_ast()): t.as_ast() for t in joins.values()}
        self._nodes: dict[int, _Node] = {}
        self.nd: dict[int, z3.BitVecRef] = {}  # input index -> its bit-vector
        self.width = self._bounds([t.as_ast() for t in terms])
        self._bv = z3.BitVecSort(self.width, self.ctx)
        self._done: dict[int, z3.ExprRef] = {}
        self.terms = [self._expr(t.as_ast()) for t in terms]

    def _id(self, a: Any) -> int:
        return z3.Z3_get_ast_id(self._c, a)

    def _node(self, i: int, a: Any) -> _Node:
        n = self._nodes.get(i)
        if n is None:
            n = self._nodes[i] = _Node(self._c, a)
        return n

    def _nd_range(self, i: int) -> tuple[int, int]:
        return self._nd_ranges.get(i, (ND_LO, ND_HI))

    def ranges(self) -> list[z3.BoolRef]:
        """Each input read in its range (`_nd_range`)."""
        out = []
        for i, v in self.nd.items():
            lo, hi = self._nd_range(i)
            out.append(z3.And(v >= z3.BitVecVal(lo, self.width, self.ctx),
                              v <= z3.BitVecVal(hi, self.width, self.ctx)))
        return out

    def input_value(self, m: z3.ModelRef, i: int) -> int:
        """Input i of a model as a (signed) integer; 0 for an input no term reads."""
        v = self.nd.get(i)
        if v is None:
            return 0
        val = m.eval(v, model_completion=True)
        return val.as_signed_long() if isinstance(val, z3.BitVecNumRef) else 0

    # ------------------------------------------------------------------ intervals
    def _bounds(self, roots: list[Any]) -> int:
        iv: dict[int, tuple[int, int]] = {}
        seen: set[int] = set()
        width = 2
        stack: list[tuple[Any, bool]] = [(a, False) for a in roots]
        while stack:
            a, ready = stack.pop()
            i = self._id(a)
            if i in seen:
                continue
            n = self._node(i, a)
            if not ready:
                stack.append((a, True))
                kids = n.args
                if n.kind == z3.Z3_OP_UNINTERPRETED and not n.args and n.name in self._joins:
                    j = self._joins[n.name]
                    kids = [self._join_ast[j]]
                stack.extend((k, False) for k in kids if self._id(k) not in seen)
                continue
            seen.add(i)
            if n.sort == "bool":
                self._check_bool(n)
                continue
            if n.sort != "int":  # a quantifier or bound variable is refused by `_interval`
                raise NoRewrite("a term that is neither an integer nor a truth value")
            r = self._interval(n, iv)
            iv[i] = r
            width = max(width, _signed_width(*r))
            if width > MAX_WIDTH:
                raise NoRewrite(f"terms wider than {MAX_WIDTH} bits")
        return width + 1

    def _interval(self, n: _Node, iv: dict[int, tuple[int, int]]) -> tuple[int, int]:
        k = n.kind
        if n.value is not None:
            return n.value, n.value
        if k == z3.Z3_OP_UNINTERPRETED:
            if not n.args:
                j = self._joins.get(n.name)
                # a join's constant: its term's values (`control._merge` conjoins
                # `c == term` to the path of every state that reads c); any other
                # constant (an undefined shift, an indeterminate local, printf's result)
                # is some value of a C integer type
                if j is not None and j not in iv:
                    raise NoRewrite(f"the join constant {n.name} defined through itself")
                return iv[j] if j is not None else (ND_LO, ND_HI)
            arg = self._node(self._id(n.args[0]), n.args[0])
            if n.name != self._nd_name or len(n.args) != 1 or arg.value is None:
                raise NoRewrite(f"the term {n.name}")
            return self._nd_range(arg.value)
        if k == z3.Z3_OP_ITE:
            (a, b), (c, d) = iv[self._id(n.args[1])], iv[self._id(n.args[2])]
            return min(a, c), max(b, d)
        ivs = [iv[self._id(a)] for a in n.args]
        if k in _ARITH:
            r = ivs[0]
            for b in ivs[1:]:
                r = _combine(k, r, b)
            return r
        if k in (z3.Z3_OP_MOD, z3.Z3_OP_IDIV):
            d = self._node(self._id(n.args[1]), n.args[1]).value
            if not d:
                raise NoRewrite("a division by a variable or by 0")
            lo, hi = ivs[0]
            if k == z3.Z3_OP_MOD:
                return 0, abs(d) - 1
            qs = (_quotient(lo, d), _quotient(hi, d))  # monotone in the operand
            return min(qs), max(qs)
        raise NoRewrite(f"the operator {k}")

    def _check_bool(self, n: _Node) -> None:
        k = n.kind
        if k in _BOOL_NARY or k in _BOOL_OTHER or k == z3.Z3_OP_ITE:
            return
        if k == z3.Z3_OP_UNINTERPRETED and not n.args:
            return  # a Boolean bit (`expressions.bitwise`) or a join's truth value
        if k in (z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT) or k in _CMP:
            return  # operands checked on their own (integers or truth values)
        raise NoRewrite(f"the predicate {k}")

    # ------------------------------------------------------------------ rewrite
    def _expr(self, root: Any) -> z3.ExprRef:
        stack: list[tuple[Any, bool]] = [(root, False)]
        while stack:
            a, ready = stack.pop()
            i = self._id(a)
            if i in self._done:
                continue
            n = self._nodes[i]
            if not ready:
                stack.append((a, True))
                stack.extend((k, False) for k in n.args if self._id(k) not in self._done)
                continue
            self._done[i] = self._one(n)
        return self._done[self._id(root)]

    def _one(self, n: _Node) -> z3.ExprRef:
        c, k = self._c, n.kind
        if n.value is not None:
            return z3.BitVecVal(n.value, self.width, self.ctx)
        if n.sort == "bool" and (k in (z3.Z3_OP_TRUE, z3.Z3_OP_FALSE)
                                 or (k == z3.Z3_OP_UNINTERPRETED and not n.args)):
            return z3.BoolRef(n.ast, self.ctx)
        if k == z3.Z3_OP_UNINTERPRETED:
            if not n.args:
                return z3.BitVec(f"{n.name}!bv", self.width, self.ctx)
            idx = self._nodes[self._id(n.args[0])].value
            assert idx is not None
            v = self.nd.get(idx)
            if v is None:
                v = self.nd[idx] = z3.BitVec(f"nd!{idx}", self.width, self.ctx)
            return v
        kids = [self._done[self._id(a)] for a in n.args]
        raw = [x.as_ast() for x in kids]
        if k in _ARITH:
            mk = z3.Z3_mk_bvadd if k == z3.Z3_OP_ADD else z3.Z3_mk_bvmul
            r = kids[0]
            for b in kids[1:]:
                r = z3.BitVecRef(mk(c, r.as_ast(), b.as_ast()), self.ctx)
            return r
        if k in (z3.Z3_OP_MOD, z3.Z3_OP_IDIV):
            d = self._nodes[self._id(n.args[1])].value
            assert d
            # z3's `mod` is Euclidean, in [0, |d|): bvsmod takes the divisor's sign
            m = z3.BitVecRef(z3.Z3_mk_bvsmod(c, raw[0], z3.BitVecVal(abs(d), self.width,
                                                                      self.ctx).as_ast()), self.ctx)
            if k == z3.Z3_OP_MOD:
                return m
            # `div`: x = d*q + (x mod |d|), so q is the exact quotient of x - x mod |d|
            return z3.BitVecRef(z3.Z3_mk_bvsdiv(c, (kids[0] - m).as_ast(), raw[1]), self.ctx)
        if k == z3.Z3_OP_ITE:
            r = z3.Z3_mk_ite(c, *raw)
            return z3.BoolRef(r, self.ctx) if n.sort == "bool" else z3.BitVecRef(r, self.ctx)
        if k == z3.Z3_OP_EQ:
            return z3.BoolRef(z3.Z3_mk_eq(c, raw[0], raw[1]), self.ctx)
        if k == z3.Z3_OP_DISTINCT:
            return z3.Distinct(*kids)
        if k in _CMP:
            return z3.BoolRef(_CMP[k](c, raw[0], raw[1]), self.ctx)
        if k in _BOOL_NARY:
            arr = (z3.Ast * len(raw))(*raw)
            return z3.BoolRef(_BOOL_NARY[k](c, len(raw), arr), self.ctx)
        if k == z3.Z3_OP_NOT:
            return z3.BoolRef(z3.Z3_mk_not(c, raw[0]), self.ctx)
        raise NoRewrite(f"the operator {k}")  # `_bounds` admitted it: never a verdict


def _signed_width(lo: int, hi: int) -> int:
    return max(hi.bit_length(), (-lo - 1).bit_length() if lo < 0 else 0) + 1


def _quotient(v: int, d: int) -> int:
    """z3's ``v div d``: v = d*q + r with 0 <= r < |d|."""
    return (v - v % abs(d)) // d


def _combine(k: int, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    if k == z3.Z3_OP_ADD:
        return a[0] + b[0], a[1] + b[1]
    ps = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
    return min(ps), max(ps)


def translate(terms: list[z3.ExprRef], nd: z3.FuncDeclRef, joins: dict[str, z3.ExprRef],
              nd_ranges: dict[int, tuple[int, int]]) -> Rewrite | None:
    """`terms` (Boolean, over the unrolling's integers) over bit-vectors (`Rewrite.terms`,
    with the inputs' ranges in `Rewrite.ranges`); None when a term is outside the exact
    rewrite (the reason in `LAST_REFUSAL`)."""
    terms = [z3.simplify(t) for t in terms]  # constant input positions: ND(0 + 1) -> ND(1)
    joins = {k: z3.simplify(t) for k, t in joins.items()}
    try:
        return Rewrite(terms, nd, joins, nd_ranges)
    except (NoRewrite, KeyError, ctypes.ArgumentError, z3.Z3Exception) as exc:
        LAST_REFUSAL[0] = str(exc)
        return None
