"""C expressions over mathematical integers: constants, operators, assignments.

Integer semantics (promotions, conversions, wrapping, C division) come from
`cint`; variables are read and written through the memory model (`memory`).
Mixed into `encode.Encoder`.
"""

from __future__ import annotations

import z3
from pycparser import c_ast

from veribatch.verifiers.z3c import bitabs, cint
from veribatch.verifiers.z3c.cint import CType
from veribatch.verifiers.z3c.floats import is_float
from veribatch.verifiers.z3c.ir import BmcOnly, State, Unsupported, Val, Var, base_of, mk_ptr
from veribatch.verifiers.z3c.memory import is_ptr


class ExpressionsMixin:
    """Expression evaluation (part of `encode.Encoder`)."""

    # ------------------------------------------------------------------ expressions
    def eval(
        self, state: State, node: c_ast.Node, *, want_value: bool = True
    ) -> tuple[State | None, Val]:
        dummy = Val(z3.IntVal(0), self.int_t)
        if state is None:
            return None, dummy
        if isinstance(node, c_ast.Constant):
            return state, self.constant(node)
        if isinstance(node, c_ast.ID):
            ev = self.enum_constant(node.name, node)
            if ev is not None:
                return state, ev
            var = self.lookup(node.name, node)
            if var.uid in self.struct_uids:
                raise Unsupported("struct values (copy, pass or return by value) unsupported", node)
            if var.uid in self.rows:  # its rows are arrays: only `a[i][j]` (memory._element_2d)
                raise Unsupported("a two-dimensional array other than as a[i][j] unsupported", node)
            if var.uid in self.boxed:  # an address-taken scalar: its value is in memory
                s, loc = self.lvalue(state, node)
                return self.read(s, loc)
            return state, Val(state.env[var.uid], var.ctype)
        if isinstance(node, c_ast.Cast):
            s, v = self.eval(state, node.expr)
            if self.is_void(node.to_type.type):
                return s, dummy
            t = self.resolve_type(node.to_type.type, node)
            if s is None:
                return None, dummy
            return s, Val(self.coerce(v, t, node), t)
        if isinstance(node, c_ast.UnaryOp):
            return self.eval_unary(state, node)
        if isinstance(node, c_ast.BinaryOp):
            return self.eval_binary(state, node)
        if isinstance(node, c_ast.Assignment):
            return self.eval_assign(state, node)
        if isinstance(node, c_ast.TernaryOp):
            s, c = self.eval(state, node.cond)
            if s is None:
                return None, dummy
            cb = c.as_bool()
            ts, tv = self.eval(s.assume(cb), node.iftrue) if not z3.is_false(cb) else (None, None)
            fs, fv = self.eval(s.assume(z3.Not(cb)), node.iffalse) if not z3.is_true(cb) else (None, None)
            if ts is None and fs is None:
                return None, dummy
            if ts is None:
                return fs, fv
            if fs is None:
                return ts, tv
            if is_ptr(tv) or is_ptr(fv):
                t = tv.ctype if is_ptr(tv) else fv.ctype
            elif is_float(tv) or is_float(fv):
                t = self.float_arith("+", tv, fv, node).ctype  # the usual arithmetic conversions
            else:
                t = cint.common_type(tv.ctype, fv.ctype, self.dm)
            tv = Val(self.coerce(tv, t, node), t)
            fv = Val(self.coerce(fv, t, node), t)
            if self._same_env(ts, fs, s):
                return s, Val(z3.If(cb, tv.expr, fv.expr), t)
            return self.merge([ts, fs], [tv, fv])
        if isinstance(node, c_ast.ExprList):
            s: State | None = state
            v = dummy
            for e in node.exprs:
                s, v = self.eval(s, e)
                if s is None:
                    return None, dummy
            return s, v
        if isinstance(node, c_ast.FuncCall):
            return self.eval_call(state, node, want_value)
        if isinstance(node, c_ast.ArrayRef):
            s, loc = self.lvalue(state, node)
            if s is None:
                return None, dummy
            return self.read(s, loc)
        if isinstance(node, c_ast.StructRef):
            s, loc = self.field_loc(state, node)
            if s is None:
                return None, dummy
            return self.read(s, loc)
        raise Unsupported(f"expression {type(node).__name__} unsupported", node)

    @staticmethod
    def _same_env(a: State, b: State, base: State) -> bool:
        """Both branches only added their branch condition to `base` (no side effects)."""
        n = len(base.cond)
        return (
            a.env is base.env and b.env is base.env
            and a.nd.eq(base.nd) and b.nd.eq(base.nd)
            and len(a.cond) == n + 1 and len(b.cond) == n + 1
            and all(x is y for x, y in zip(a.cond, base.cond, strict=False))
            and all(x is y for x, y in zip(b.cond, base.cond, strict=False))
        )

    def constant(self, node: c_ast.Constant) -> Val:
        text = node.value
        if node.type == "char":
            body = text[1:-1]
            if body.startswith("\\"):
                esc = {"n": 10, "t": 9, "0": 0, "\\": 92, "'": 39, '"': 34, "r": 13}
                if body[1:] in esc:
                    val = esc[body[1:]]
                elif body[1] == "x":
                    val = int(body[2:], 16)
                else:
                    val = int(body[1:], 8)
            else:
                val = ord(body)
            return Val(z3.IntVal(val), self.int_t)
        if node.type == "string":
            raise Unsupported("string literals unsupported", node)
        if "float" in node.type or "double" in node.type:
            return self.float_constant(node)
        digits = text.rstrip("uUlL")
        suffix = text[len(digits):].lower()
        if digits.lower().startswith("0x"):
            val = int(digits, 16)
        elif digits.lower().startswith("0b"):
            val = int(digits, 2)
        elif len(digits) > 1 and digits.startswith("0"):
            val = int(digits, 8)
        else:
            val = int(digits)
        decimal = not (len(digits) > 1 and digits.startswith("0"))
        cands: list[str]
        if "u" in suffix:
            cands = ["unsigned int", "unsigned long", "unsigned long long"]
            if suffix.count("l") == 1:
                cands = cands[1:]
            elif suffix.count("l") == 2:
                cands = cands[2:]
        else:
            if decimal:
                cands = ["int", "long", "long long"]
            else:
                cands = ["int", "unsigned int", "long", "unsigned long", "long long", "unsigned long long"]
            nl = suffix.count("l")
            if nl == 1:
                cands = [c for c in cands if "long" in c]
            elif nl == 2:
                cands = [c for c in cands if "long long" in c]
        for c in cands:
            t = cint.type_named(c, self.dm)
            if t.lo <= val <= t.hi:
                return Val(z3.IntVal(val), t)
        raise Unsupported(f"integer constant {text} too large", node)

    def eval_unary(self, state: State, node: c_ast.UnaryOp) -> tuple[State | None, Val]:
        op = node.op
        if op == "sizeof":
            ul = cint.type_named("unsigned long", self.dm)
            if isinstance(node.expr, c_ast.Typename):
                t = self.resolve_type(node.expr.type, node)
            elif isinstance(node.expr, c_ast.ID) and \
                    self.lookup(node.expr.name, node).uid in self.array_uids:
                arr = state.env[self.lookup(node.expr.name, node).uid]
                return state, Val(state.env["$size"][base_of(arr)], ul)  # the whole array
            else:
                _, v = self.eval(state, node.expr)
                t = v.ctype
            return state, Val(z3.IntVal(self.sizeof(t, node)), ul)
        if op == "*":
            s, loc = self.lvalue(state, node)
            if s is None:
                return None, Val(z3.IntVal(0), self.int_t)
            return self.read(s, loc)
        if op == "&":
            self.need_heap("pointers unsupported", node)
            if isinstance(node.expr, c_ast.ID) and \
                    self.lookup(node.expr.name, node).uid in self.boxed:
                var = self.lookup(node.expr.name, node)
                return state, Val(state.env[var.uid], var.ctype)
            if isinstance(node.expr, c_ast.ID) and \
                    self.lookup(node.expr.name, node).uid in self.struct_uids:
                return self.struct_addr(state, node.expr)
            if not isinstance(node.expr, c_ast.ArrayRef | c_ast.UnaryOp):
                raise Unsupported("address of a variable or struct member unsupported", node)
            s, loc = self.lvalue(state, node.expr)
            if s is None:
                return None, Val(z3.IntVal(0), self.int_t)
            return s, Val(mk_ptr(loc.base, loc.off), self.ptr_type(loc.ctype))
        if op in ("++", "--", "p++", "p--"):
            s, loc = self.lvalue(state, node.expr)
            if s is None:
                return None, Val(z3.IntVal(0), self.int_t)
            s, cur = self.read(s, loc)
            if s is None:
                return None, cur
            one = Val(z3.IntVal(1), self.int_t)
            if is_ptr(cur):
                s, nv = self.ptr_arith(s, "+" if "+" in op else "-", cur, one, node)
                if s is None:
                    return None, cur
                new = nv.expr
            elif is_float(cur):
                new = self.float_arith("+" if "+" in op else "-", cur, one, node).expr
            else:
                delta = 1 if "+" in op else -1
                pt = cint.common_type(cur.ctype, self.int_t, self.dm)
                new = cint.convert(cint.convert(cur.expr, cur.ctype, pt) + delta, pt, cur.ctype)
            if isinstance(loc, Var) and loc.cname in self.havoc:
                new = self.fresh_like(loc.uid, new)  # outside the cone of influence: any value
            s = self.write(s, loc, new)
            return s, Val(cur.expr if op.startswith("p") else new, cur.ctype)
        s, v = self.eval(state, node.expr)
        if s is None:
            return None, v
        if op == "!":
            return s, Val(z3.Not(v.as_bool()), self.int_t)
        if is_ptr(v):
            raise Unsupported(f"unary {op!r} on a pointer unsupported", node)
        if is_float(v):
            return s, self.float_unary(op, v, node)
        t = cint.promote(v.ctype, self.dm)
        e = cint.convert(v.as_int(), v.ctype, t)
        if op == "-":
            return s, Val(cint.convert(-e, _wide(t), t) if not t.signed else -e, t)
        if op == "+":
            return s, Val(e, t)
        if op == "~":
            if t.signed:
                return s, Val(-e - 1, t)
            return s, Val((1 << t.width) - 1 - e, t)
        raise Unsupported(f"unary operator {op!r} unsupported", node)

    def eval_binary(self, state: State, node: c_ast.BinaryOp) -> tuple[State | None, Val]:
        op = node.op
        if op in ("&&", "||"):
            s, a = self.eval(state, node.left)
            if s is None:
                return None, a
            ab = a.as_bool()  # no simplify here: quadratic on long && chains
            if _is_simple(node.right):
                _, b = self.eval(s, node.right)
                bb = b.as_bool()
                return s, Val(z3.And(ab, bb) if op == "&&" else z3.Or(ab, bb), self.int_t)
            go_on = ab if op == "&&" else z3.Not(ab)
            stop = s.assume(z3.Not(go_on))
            rs, b = self.eval(s.assume(go_on), node.right) if not z3.is_false(go_on) else (None, None)
            short = Val(z3.BoolVal(op == "||"), self.int_t)
            if rs is None:
                return stop, short
            rb = Val(b.as_bool(), self.int_t)
            if stop is None:
                return rs, rb
            return self.merge([stop, rs], [short, rb])
        s, a = self.eval(state, node.left)
        if s is None:
            return None, a
        s, b = self.eval(s, node.right)
        if s is None:
            return None, b
        if is_ptr(a) or is_ptr(b):
            return self.ptr_arith(s, op, a, b, node)
        if is_float(a) or is_float(b):
            return s, self.float_arith(op, a, b, node)
        v = self.arith(op, a, b, node)
        self.note_defined(s, op, a, b, v)
        return s, v

    def note_defined(self, state: State, op: str, a: Val, b: Val, r: Val) -> None:
        """Unroll mode: what gcc's sanitised replay requires of this operation.

        Signed overflow, a signed left shift of a negative value or beyond the
        type, a shift count outside 0..width-1 and a division by zero are
        undefined: the encoding gives them a value (so no path is cut and no
        proof depends on them), but a trace through one is rejected by `replay`.
        ``Implies(path condition, defined)`` goes to `Encoding.no_ub`, which only
        the counterexample search of `engines._bit_blasted_traces` assumes, so it
        does not hand out traces the replay must reject (collected only in programs
        with bitwise operators: `Encoder.track_ub`).
        """
        if not self.track_ub:
            return
        t = r.ctype
        x, y = a.as_int(), b.as_int()
        conds = []
        if op in ("<<", ">>"):
            conds += [y >= 0, y < t.width]
            if op == "<<" and t.signed:
                conds += [cint.convert(x, a.ctype, t) >= 0, cint.in_range(r.expr, t)]
        elif op in ("+", "-", "*") and t.signed:
            conds.append(cint.in_range(r.expr, t))
        elif op in ("/", "%"):
            conds.append(y != 0)
            if t.signed:
                conds.append(z3.Not(z3.And(x == t.lo, y == -1)))
        if conds:
            self.no_ub.append(z3.Implies(z3.And(*state.cond), z3.And(*conds)))

    def arith(self, op: str, a: Val, b: Val, node: c_ast.Node) -> Val:
        int_t = self.int_t
        if op in ("<<", ">>"):
            t = cint.promote(a.ctype, self.dm)
            ae = cint.convert(a.as_int(), a.ctype, t)
            k = _int_value(b.as_int())

            def shifted(k: int) -> z3.ArithRef:
                if op == "<<":
                    r = ae * (1 << k)
                    return r if t.signed else cint.convert(r, _wide(t), t)
                return ae / (1 << k)  # floor: gcc's arithmetic shift for signed

            if k is None:
                # A count outside 0..width-1 is undefined behaviour (C 6.5.7), outside the
                # property like signed overflow: any value.  (gcc's replay runs with
                # -fsanitize=shift, so no counterexample rests on it.)
                be = b.as_int()
                r = self.fresh("shift_ub")
                for i in reversed(range(t.width)):
                    r = z3.If(be == i, shifted(i), r)
                return Val(r, t)
            if k < 0 or k >= t.width:
                raise Unsupported(f"shift by {k} (undefined for {t.name}) unsupported ({op})", node)
            return Val(shifted(k), t)
        if op in ("&", "|", "^") and a.is_01 and b.is_01:
            ab, bb = a.as_bool(), b.as_bool()
            r = z3.And(ab, bb) if op == "&" else z3.Or(ab, bb) if op == "|" else z3.Xor(ab, bb)
            return Val(r, int_t)
        t = cint.common_type(a.ctype, b.ctype, self.dm)
        ae = cint.convert(a.as_int(), a.ctype, t)
        be = cint.convert(b.as_int(), b.ctype, t)
        if op in ("<", "<=", ">", ">=", "==", "!="):
            r = {
                "<": ae < be, "<=": ae <= be, ">": ae > be, ">=": ae >= be,
                "==": ae == be, "!=": ae != be,
            }[op]
            return Val(r, int_t)
        if op in ("+", "-", "*"):
            r = ae + be if op == "+" else ae - be if op == "-" else ae * be
            return Val(r if t.signed else cint.convert(r, _wide(t), t), t)
        if op in ("/", "%") and self.fresh_division and _int_value(be) is None:
            return Val(self.quotient(ae, be)[op == "%"], t)
        if op == "/":
            r = cint.c_div(ae, be) if t.signed else ae / be
            return Val(r if t.signed else r, t)
        if op == "%":
            r = cint.c_rem(ae, be) if t.signed else ae % be
            return Val(r, t)
        if op == "&":
            for x, y in ((ae, be), (be, ae)):
                k = _int_value(y)
                if k is not None and k >= 0 and (k & (k + 1)) == 0:
                    return Val(x % (k + 1) if k else z3.IntVal(0), t)
        if op in ("&", "|", "^") and self.mode != "unroll":
            return Val(self.bitwise_horn(op, ae, be, t, node), t)
        if op in ("&", "|", "^"):
            return Val(self.bitwise(op, (a.as_int(), a.ctype), (b.as_int(), b.ctype), t, node), t)
        raise Unsupported(f"operator {op!r} unsupported", node)

    def quotient(self, a: z3.ArithRef, b: z3.ArithRef) -> tuple[z3.ArithRef, z3.ArithRef]:
        """C's `a / b` and `a % b` by a non-constant divisor as fresh q, r (Horn encoding).

        Spacer gives up on `div`/`mod` by a variable ("Uninterpreted 'div'"); with
        ``b != 0 → a == q*b + r ∧ |r| < |b| ∧ r has a's sign (or is 0)`` q and r are
        exactly C's truncating quotient and remainder, and any value when b is 0
        (undefined).  The definition is not a path condition (a `&&` operand's state is
        not kept): `Encoder._result` conjoins it to every clause that mentions q or r.
        """
        q, r = self.fresh("quot"), self.fresh("rem")
        mag = z3.If(b >= 0, b, -b)
        fact = z3.Implies(b != 0, z3.And(
            a == q * b + r,
            z3.If(a >= 0, z3.And(r >= 0, r < mag), z3.And(r <= 0, r > -mag))))
        self.division_facts[q.decl().name()] = fact
        self.division_facts[r.decl().name()] = fact
        return q, r

    def bitwise_horn(self, op: str, x: z3.ArithRef, y: z3.ArithRef, t: CType,
                     node: c_ast.Node) -> z3.ArithRef:
        """`x op y` (both of the common type `t`) in the Horn encoding (`bitabs`).

        Exact when an operand is a constant; otherwise ``x & y`` is a fresh value
        whose facts (`bitabs.and_facts`) travel with every clause that mentions it,
        like a quotient's (`quotient`).  Where no clause carries them (a candidate
        invariant, `cexpr`: ``fresh_division`` off) it is `BmcOnly` as before.
        """
        for u, v in ((x, y), (y, x)):
            k = _int_value(v)
            if k is not None:
                return bitabs.combine(op, u, v, bitabs.and_const(u, k))
        if not self.fresh_bitwise:
            raise BmcOnly(f"bitwise {op} unsupported", node)
        a = self.fresh("bitand")
        self.over_approximate = True
        self.division_facts[a.decl().name()] = bitabs.and_facts(x, y, a, t)
        return bitabs.combine(op, x, y, a)

    def bitwise(self, op: str, a: tuple[z3.ArithRef, CType], b: tuple[z3.ArithRef, CType],
                t: CType, node: c_ast.Node) -> z3.ArithRef:
        """`a op b` (values with their own types) in the common type `t`, bit by bit.

        C 6.5.10-12 on gcc's two's complement: both operands converted to `t` (a
        signed value out of range after an overflow, undefined anyway, is wrapped, so
        no path is cut here) and the result read back as a value of `t`.  A
        non-constant operand gets fresh Boolean bits ``bit_i`` with ``value =
        sum(bit_i * 2^i)`` (minus ``bit_k * 2^k`` for the sign of a signed operand):
        linear integer arithmetic, which z3 bit-blasts well (`engines.run_bmc`
        searches such encodings for counterexamples with ``nla2bv``); bv2int/int2bv
        links are far slower.  An operand of a narrower type (a promoted `char` or
        `short`) gets only its own type's bits, the rest being zero (unsigned) or
        copies of its sign bit.  For bounded model checking only: in the Horn
        encoding it is `BmcOnly`, so such a program is proved only by a complete
        unrolling.
        """
        if self.mode != "unroll":
            raise BmcOnly(f"bitwise {op} unsupported", node)
        w = t.width
        self.bit_level = True

        def bits(e: z3.ArithRef, src: CType) -> list[z3.BoolRef]:
            e = cint.convert(e, src, t)
            k = z3.simplify(e % (1 << w))
            if z3.is_int_value(k):
                return [z3.BoolVal(bool(k.as_long() >> i & 1)) for i in range(w)]
            # e's bit pattern: unsigned values are in range (C wraps them); a signed one
            # is too unless an overflow (undefined) left it out: only then `mod`,
            # which z3's arithmetic handles far worse than a case split
            if t.signed:
                k = z3.If(cint.in_range(e, t), z3.If(e < 0, e + (1 << w), e), k)
            elif z3.is_app_of(e, z3.Z3_OP_MOD) and _int_value(e.arg(1)) == 1 << w:
                k = _wrap(e.arg(0), w)  # an unsigned result wrapped by `cint.convert`
            else:
                k = z3.If(cint.in_range(e, t), e, k)
            n = src.width if t.contains(src) and 0 < src.width < w and not src.is_bool else w
            bs = [z3.FreshBool("bit") for _ in range(n)]
            total = z3.Sum([z3.If(x, z3.IntVal(1 << i), 0) for i, x in enumerate(bs)])
            if n == w:
                self.definitions.append(k == total)
                return bs
            # a value of `src` is in its range; were one not (a modelling gap), it gets
            # some value of the range rather than cutting the path
            e = z3.If(cint.in_range(e, src), e, z3.IntVal(src.lo))
            if src.signed:  # two's complement of the narrow value, sign-extended
                self.definitions.append(e == total - z3.If(bs[-1], z3.IntVal(1 << n), 0))
                return bs + [bs[-1]] * (w - n)
            self.definitions.append(e == total)
            return bs + [z3.BoolVal(False)] * (w - n)

        f = {"&": z3.And, "|": z3.Or, "^": z3.Xor}[op]
        terms = []
        for i, (x, y) in enumerate(zip(bits(*a), bits(*b), strict=True)):
            r = z3.simplify(f(x, y))
            if not z3.is_false(r):
                terms.append(z3.If(r, z3.IntVal(1 << i), z3.IntVal(0)))
        u = z3.Sum(terms) if terms else z3.IntVal(0)
        return z3.If(u > t.hi, u - (1 << w), u) if t.signed else u

    def eval_assign(self, state: State, node: c_ast.Assignment) -> tuple[State | None, Val]:
        s, loc = self.lvalue(state, node.lvalue)
        if s is None:
            return None, Val(z3.IntVal(0), self.int_t)
        s, v = self.eval(s, node.rvalue)
        if s is None:
            return None, v
        if node.op != "=":
            s, cur = self.read(s, loc)
            if s is None:
                return None, v
            if is_ptr(cur) or is_ptr(v):
                s, v = self.ptr_arith(s, node.op[:-1], cur, v, node)
                if s is None:
                    return None, v
            elif is_float(cur) or is_float(v):
                v = self.float_arith(node.op[:-1], cur, v, node)
            else:
                r = self.arith(node.op[:-1], cur, v, node)
                self.note_defined(s, node.op[:-1], cur, v, r)
                v = r
        new = self.coerce(v, loc.ctype, node)
        if isinstance(loc, Var) and loc.cname in self.havoc:
            new = self.fresh_like(loc.uid, new)  # outside the cone of influence: any value
        return self.write(s, loc, new), Val(new, loc.ctype)


def _wide(t: CType) -> CType:
    """A type wide enough to hold any result before wrapping (for `convert`'s range test)."""
    return CType("wide", 200, True, 9)


def uses_bitwise(ast: c_ast.Node) -> bool:
    """Whether the program applies `&`, `|` or `^` (or their assignments) anywhere."""

    class Scan(c_ast.NodeVisitor):
        found = False

        def visit_BinaryOp(self, node: c_ast.BinaryOp) -> None:
            self.found = self.found or node.op in ("&", "|", "^")
            self.generic_visit(node)

        def visit_Assignment(self, node: c_ast.Assignment) -> None:
            self.found = self.found or node.op in ("&=", "|=", "^=")
            self.generic_visit(node)

    scan = Scan()
    scan.visit(ast)
    return scan.found


def _wrap(x: z3.ArithRef, w: int) -> z3.ArithRef:
    """``x mod 2^w``, by cases for the usual one-off wraps (z3 handles `mod` badly)."""
    m = 1 << w
    return z3.If(z3.And(x >= 0, x < m), x,
                 z3.If(z3.And(x >= m, x < 2 * m), x - m,
                       z3.If(z3.And(x >= -m, x < 0), x + m, x % m)))


def _int_value(e: z3.ExprRef) -> int | None:
    e = z3.simplify(e)
    return e.as_long() if z3.is_int_value(e) else None


_SIDE_EFFECT_OPS = {"++", "--", "p++", "p--"}


_SIMPLE: dict[int, tuple[c_ast.Node, bool]] = {}


def _is_simple(node: c_ast.Node) -> bool:
    """No calls, assignments or increments: safe to evaluate unconditionally (memoised)."""
    hit = _SIMPLE.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    # memory reads are not simple either: their definedness depends on the guard
    side_effect = isinstance(node, c_ast.FuncCall | c_ast.Assignment | c_ast.ArrayRef) or (
        isinstance(node, c_ast.UnaryOp) and (node.op in _SIDE_EFFECT_OPS or node.op == "*")
    )
    result = not side_effect and all(_is_simple(c) for _, c in node.children())
    if len(_SIMPLE) > 100_000:
        _SIMPLE.clear()
    _SIMPLE[id(node)] = (node, result)
    return result
