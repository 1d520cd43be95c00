"""Calls: SV-COMP builtins (nondet, assume, assert, error, abort), inlining of defined functions.

Mixed into `encode.Encoder`; `nondet_type_name` is also what `replay` uses to
type a counterexample's inputs.
"""

from __future__ import annotations

import re

import z3
from pycparser import c_ast

from veribatch.verifiers.z3c import cint
from veribatch.verifiers.z3c.cint import CType
from veribatch.verifiers.z3c.floats import DOUBLE, FLOAT, FloatType
from veribatch.verifiers.z3c.ir import (
    BmcOnly,
    PtrType,
    State,
    Unsupported,
    Val,
    Var,
    base_of,
    mk_ptr,
)
from veribatch.verifiers.z3c.memory import is_ptr

# Builtins: nondet functions and their result types.
_NONDET = {
    "int": "int", "uint": "unsigned int", "unsigned_int": "unsigned int", "unsigned": "unsigned int",
    "long": "long", "ulong": "unsigned long", "unsigned_long": "unsigned long",
    "longlong": "long long", "long_long": "long long", "ulonglong": "unsigned long long",
    "short": "short", "ushort": "unsigned short", "unsigned_short": "unsigned short",
    "char": "char", "schar": "signed char", "uchar": "unsigned char", "unsigned_char": "unsigned char",
    "bool": "_Bool", "_Bool": "_Bool", "size_t": "unsigned long", "u32": "unsigned int",
    "u16": "unsigned short", "u8": "unsigned char", "loff_t": "long long", "sector_t": "unsigned long",
}
_ASSUME = {"__VERIFIER_assume", "assume", "assume_abort_if_not", "assume_cycle_if_not"}
_ASSERT = {"__VERIFIER_assert", "assert"}
_ERROR = {"reach_error", "__assert_fail", "__VERIFIER_error"}
_ABORT = {"abort", "exit", "_exit", "__builtin_abort"}
_NOOP = {"printf", "puts", "putchar", "srand", "fflush", "fprintf"}
_NONDET_LIKE = {"rand": "int", "time": "long"}
_NONDET_FLOAT = {"__VERIFIER_nondet_float": FLOAT, "__VERIFIER_nondet_double": DOUBLE}
_ALLOC = {"malloc", "calloc", "alloca", "__builtin_alloca", "free"}
_SCANF = {"scanf", "__isoc99_scanf"}
# scanf's conversions read as inputs: [width] [hh|h|l|ll] d i u x X o c (`replay.SCANF_C` parses
# the same subset); anything else (`%s`, `%f`, `%*d`, `%[`) is outside the subset.
_SCANF_CONV = re.compile(r"%(%|(\d*)(hh|h|ll|l|)([diuxXoc])|.)")


def scanf_conversions(fmt: str) -> list[str] | None:
    """The C types `scanf(fmt, ...)` stores into, in order; None when outside the subset."""
    out: list[str] = []
    for m in _SCANF_CONV.finditer(fmt):
        if m.group(1) == "%":
            continue
        if m.group(4) is None:
            return None
        size, conv = m.group(3), m.group(4)
        if conv == "c":
            if size or m.group(2) not in ("", "1"):
                return None
            out.append("char")
            continue
        base = {"hh": "char", "h": "short", "": "int", "l": "long", "ll": "long long"}[size]
        out.append(("signed " if conv in "di" else "unsigned ") + base
                   if base == "char" else (base if conv in "di" else "unsigned " + base))
    return out


def nondet_type_name(fname: str) -> str | None:
    if fname.startswith("__VERIFIER_nondet_"):
        return _NONDET.get(fname[len("__VERIFIER_nondet_"):])
    return None



class CallsMixin:
    """Function calls (part of `encode.Encoder`)."""

    def nondet(self, state: State, t: CType, tag: str) -> tuple[State, z3.ArithRef]:
        if self.mode == "unroll":
            v = self.nd_func(state.nd)
            cond = (*state.cond, cint.in_range(v, t))
            idx = z3.simplify(state.nd)
            if z3.is_int_value(idx):  # the input's range for `bvcheck` (an index on a path)
                lo, hi = self.nd_ranges.get(idx.as_long(), (t.lo, t.hi))
                self.nd_ranges[idx.as_long()] = (min(lo, t.lo), max(hi, t.hi))
            else:
                self.nd_ranges[-1] = (t.lo, t.hi)  # some read's index is not a constant
            if self.nd_kind is not None:  # the program also reads floating-point inputs
                cond = (*cond, self.nd_kind(state.nd) == 0)
            return State(state.preds, cond, state.env, state.nd + 1), v
        c = self.fresh(tag)
        return State(state.preds, (*state.cond, cint.in_range(c, t)), state.env, state.nd), c

    # ------------------------------------------------------------------ calls
    def eval_call(
        self, state: State, node: c_ast.FuncCall, want_value: bool
    ) -> tuple[State | None, Val]:
        dummy = Val(z3.IntVal(0), self.int_t)
        if not isinstance(node.name, c_ast.ID):
            raise Unsupported("call through a function pointer unsupported", node)
        fname = node.name.name
        args = node.args.exprs if node.args is not None else []
        line = node.coord.line if node.coord else 0
        nd = nondet_type_name(fname)
        if fname in _NONDET_FLOAT:
            return self.float_nondet(state, _NONDET_FLOAT[fname], fname)
        if fname.startswith("__VERIFIER_nondet_") and nd is None:
            raise Unsupported(f"nondet function {fname} unsupported", node)
        if nd is not None or fname in _NONDET_LIKE:
            if fname in _NONDET_LIKE and fname in self.funcs:
                pass  # user-defined rand(): inline below
            else:
                if fname == "rand":
                    t = self.int_t
                    s, v = self.nondet(state, t, "rand")
                    return s.assume(v >= 0), Val(v, t)
                t = cint.type_named(nd or _NONDET_LIKE[fname], self.dm)
                s, v = self.nondet(state, t, fname)
                return s, Val(v, t)
        if fname in _ERROR:
            self.emit_error(state, line)
            return None, dummy
        if fname in _ABORT:
            return None, dummy
        if fname.startswith("INVARIANT_MARKER") or fname == "__VERIFIER_marker":
            return state, dummy
        if fname in self.funcs:
            return self.inline(state, self.funcs[fname], args, node)
        if fname in _ASSUME or fname in _ASSERT:
            if len(args) != 1:
                raise Unsupported(f"{fname} with {len(args)} arguments", node)
            s, c = self.eval(state, args[0])
            if s is None:
                return None, dummy
            cb = c.as_bool()
            if fname in _ASSERT:
                self.emit_error(s.assume(z3.Not(cb)), line)
            return s.assume(cb), dummy
        if fname in _ALLOC:
            return self.eval_alloc(state, fname, args, node)
        if fname in _NOOP:
            s: State | None = state
            for a in args:
                if isinstance(a, c_ast.Constant) and a.type == "string":
                    if "%n" in a.value:
                        raise Unsupported("printf with %n unsupported", node)
                    continue
                s, _ = self.eval(s, a)
                if s is None:
                    return None, dummy
            # The return value is unknown but not an input: a fresh constant outside
            # the ND sequence, so a replay (where the real printf runs) stays aligned.
            r = self.fresh(fname)
            return s.assume(cint.in_range(r, self.int_t)), Val(r, self.int_t)
        if fname in _SCANF:
            return self.eval_scanf(state, args, node)
        if fname == "abs":
            s, v = self.eval(state, args[0])
            if s is None:
                return None, dummy
            e = v.as_int()
            return s, Val(z3.If(e < 0, -e, e), self.int_t)
        raise Unsupported(f"call to undefined function {fname}", node)

    def eval_scanf(
        self, state: State, args: list[c_ast.Node], node: c_ast.FuncCall
    ) -> tuple[State | None, Val]:
        """`scanf(fmt, p1, ..., pk)` as input: the count it returns, then one value per conversion.

        Exactly C's effect for any stdin: it returns r in -1..k (EOF, or how many
        conversions matched) and stores into the first max(r, 0) targets only; the
        others keep their values.  All k + 1 values are read from the input sequence
        whatever r is, which is what `replay`'s scanf does with a trace's inputs.
        """
        fmt = args[0] if args else None
        if not (isinstance(fmt, c_ast.Constant) and fmt.type == "string"):
            raise Unsupported("scanf without a literal format unsupported", node)
        convs = scanf_conversions(fmt.value[1:-1])
        if convs is None:
            raise Unsupported(f"scanf format {fmt.value} unsupported", node)
        if len(convs) != len(args) - 1:
            raise Unsupported(f"scanf with {len(convs)} conversions for {len(args) - 1} targets", node)
        s, r = self.nondet(state, self.int_t, "scanf_count")
        s = s.assume(z3.And(r >= -1, r <= len(convs)))
        for i, (conv, target) in enumerate(zip(convs, args[1:], strict=True)):
            where = target.expr if isinstance(target, c_ast.UnaryOp) and target.op == "&" \
                else c_ast.UnaryOp("*", target, target.coord)
            s, loc = self.lvalue(s, where)
            if s is None:
                return None, Val(z3.IntVal(0), self.int_t)
            if isinstance(loc.ctype, PtrType | FloatType) or loc.ctype is None:
                raise Unsupported("scanf into a non-integer unsupported", node)
            t = cint.type_named(conv, self.dm)
            s, v = self.nondet(s, t, "scanf")
            s, old = self.read(s, loc)
            if s is None:
                return None, Val(z3.IntVal(0), self.int_t)
            new = z3.If(r > i, self.coerce(Val(v, t), loc.ctype, node), old.expr)
            s = self.write(s, loc, new)
        return s, Val(r, self.int_t)

    def inline(
        self, state: State, fdef: c_ast.FuncDef, args: list[c_ast.Node], node: c_ast.Node
    ) -> tuple[State | None, Val]:
        fname = fdef.decl.name
        dummy = Val(z3.IntVal(0), self.int_t)
        if self.mode == "chc" and fname in self.recursive:
            # Horn clauses: a recursive function's calls go through its summary predicate
            # (`summaries`); one it cannot summarise raises `BmcOnly`
            return self.call_summary(state, fdef, args, node)
        if fname in self.call_stack:
            # Recursion is inlined like a loop is unrolled: at most depth + 1 nested
            # recursive activations, deeper calls cut (so only an unrolling that shows
            # them infeasible proves anything).
            if self.mode != "unroll":  # pragma: no cover - chc mode summarises recursion
                raise BmcOnly(f"recursion ({fname}) unsupported", node)
            if self.call_stack.count(fname) > self.depth + 1:
                self.cut = True
                self.cut_guards.append(z3.And(*state.cond))
                return None, dummy
        ftype = fdef.decl.type
        params = [
            p for p in (ftype.args.params if ftype.args else [])
            if not (isinstance(p, c_ast.Typename) and self.is_void(p.type))
        ]
        if any(isinstance(p, c_ast.EllipsisParam) for p in params):
            raise Unsupported(f"variadic function {fname} unsupported", node)
        if len(params) != len(args):
            raise Unsupported(f"call to {fname} with {len(args)} arguments for {len(params)} parameters", node)
        s: State | None = state
        values: list[Val] = []
        for a in args:
            s, v = self.eval(s, a)
            if s is None:
                return None, dummy
            values.append(v)
        ret_void = self.is_void(ftype.type)
        ret_t = None if ret_void else self.resolve_type(ftype.type, fdef.decl)
        scope: dict[str, Var] = {}
        env = dict(s.env)
        for p, v in zip(params, values, strict=True):
            if isinstance(p.type, c_ast.ArrayDecl):  # `T a[]` is `T *a` (C 6.7.6.3)
                self.need_heap("arrays unsupported", p)
                pt = self.ptr_type(self.resolve_type(p.type.type, p))
            else:
                pt = self.resolve_type(p.type, p)
            var = Var(self.new_uid(p.name), p.name, pt)
            scope[p.name] = var
            env[var.uid] = self.coerce(v, pt, p)
        s = s.with_env(env)
        self.frames.append([scope])
        self.call_stack.append(fname)
        self.enter_function(fdef.body)
        try:
            out = self.exec_stmt(s, fdef.body)
            self.leave_function()
        finally:
            if self.goto_frames and len(self.goto_frames) > len(self.call_stack) - 1:
                self.goto_frames.pop()
            self.call_stack.pop()
            frame = self.frames.pop()
        dead = {v.uid for sc in frame for v in sc.values()}
        ends: list[State] = []
        vals: list[Val | None] = []
        for st in out.normal:
            st2 = self._drop(st, dead)
            if isinstance(ret_t, PtrType | FloatType):
                raise Unsupported(f"{fname} returns a {ret_t.name} without a return statement", fdef)
            if ret_t is not None:
                st2, v = self.nondet(st2, ret_t, f"{fname}_noreturn")
                vals.append(Val(v, ret_t))
            else:
                vals.append(None)
            ends.append(st2)
        for st, v in out.ret:
            ends.append(self._drop(st, dead))
            if ret_t is not None and v is not None:
                vals.append(Val(self.coerce(v, ret_t, node), ret_t))
            else:
                vals.append(None)
        if not ends:
            return None, dummy
        if ret_t is None:
            return self.merge(ends), dummy
        ms, mv = self.merge(ends, vals)
        return ms, mv if mv is not None else dummy

    def eval_alloc(
        self, state: State, fname: str, args: list[c_ast.Node], node: c_ast.Node
    ) -> tuple[State | None, Val]:
        """`malloc`, `calloc`, `alloca`, `free` on the heap of `memory`."""
        self.need_heap("pointers unsupported", node)
        want = 2 if fname == "calloc" else 1
        if len(args) != want:
            raise Unsupported(f"{fname} with {len(args)} arguments", node)
        s: State | None = state
        vals: list[Val] = []
        for a in args:
            s, v = self.eval(s, a)
            if s is None:
                return None, Val(z3.IntVal(0), self.int_t)
            vals.append(v)
        if fname == "free":
            return self.free(s, vals[0], node), Val(z3.IntVal(0), self.int_t)
        size_t = cint.type_named("unsigned long", self.dm)
        if any(is_ptr(v) for v in vals):
            raise Unsupported(f"{fname} of a pointer-sized amount unsupported", node)
        sizes = [cint.convert(v.as_int(), v.ctype, size_t) for v in vals]
        nbytes = sizes[0] * sizes[1] if fname == "calloc" else sizes[0]
        s, p = self.allocate(s, nbytes, zero=fname == "calloc")
        if fname in ("malloc", "calloc"):
            # may fail: NULL on an arbitrary choice (not an input, so a trace that needs
            # the failure is not replayed: gcc's malloc succeeds there)
            # (the choice on the base alone: `base(p)`/`off(p)` stay simple terms)
            ok = z3.FreshConst(z3.BoolSort(), f"{fname}_ok")
            p = mk_ptr(z3.If(ok, base_of(p), z3.IntVal(0)), z3.IntVal(0))
        return s, Val(p, self.ptr_type(None))

