"""Recursive functions in the Horn encoding: one summary predicate per function.

A function on a cycle of the call graph cannot be inlined into Horn clauses (its
inlining never ends), so in ``chc`` mode it gets a predicate ``f(p1, ..., pn, ret)``
(``f(p1, ..., pn)`` when it returns nothing): "a call of f with these arguments can
return ret".  Its clauses come from f's body, executed once from arbitrary arguments;
each call of a recursive function, in that body or anywhere else (main, loops), is a
fresh result constrained by the callee's summary — so a body with two recursive
calls (``fib(n-1) + fib(n-2)``) gives a clause with two summaries in its body, a
non-linear Horn clause, which Spacer solves and `chc.validate` re-checks like any
other (an interpretation of each predicate instantiated at each application).

Sound: the summary's clauses over-approximate every activation (the body starts from
any arguments of the parameters' types, whatever the callers pass).  Where the function
(or one it calls) can reach an error, the body starts from a second predicate instead,
``call_f(p1, ..., pn)``: "f may be called with these arguments", derived at each call
site from the caller's state, so an assertion inside f is checked for the calls that
happen, not for any arguments.  Neither predicate is a loop invariant: their
interpretations are reported apart (`summary_terms`).

What a summary cannot hold stays BMC only (`ir.BmcOnly`, the recursion inlined to the
unrolling depth): a function (or one it calls) that names a global or static variable
(its effects on them would be lost), or, in a program that uses memory, one that may
touch memory (the heap is no summary argument: a call of a function touching none
leaves it as it was), parameters or results that are not integers.
"""

from __future__ import annotations

from dataclasses import replace

import z3
from pycparser import c_ast

from veribatch.verifiers.z3c import cint
from veribatch.verifiers.z3c.calls import _ALLOC, _ASSERT, _ERROR, _SCANF
from veribatch.verifiers.z3c.cint import CType
from veribatch.verifiers.z3c.floats import FloatType
from veribatch.verifiers.z3c.ir import BmcOnly, Clause, Encoding, Pred, PtrType, State, Val, Var

# integer type keywords: a declaration of anything else (pointers, arrays, structs, floats,
# typedef names) may touch memory
_INT_WORDS = {"int", "unsigned", "signed", "long", "short", "char", "_Bool"}


class _Uses(c_ast.NodeVisitor):
    """What a function body names: identifiers, called names, static declarations, and
    the first construct that may touch memory (None: it reads and writes integers only)."""

    def __init__(self, body: c_ast.Node):
        self.ids: set[str] = set()
        self.calls: set[str] = set()
        self.statics: list[str] = []
        self.declared: set[str] = set()
        self.memory: str | None = None
        self.visit(body)

    def _touch(self, what: str) -> None:
        self.memory = self.memory or what

    def visit_UnaryOp(self, n: c_ast.UnaryOp) -> None:
        if n.op in ("*", "&"):
            self._touch(f"unary {n.op}")
        self.generic_visit(n)

    def visit_ArrayRef(self, n: c_ast.ArrayRef) -> None:
        self._touch("an array access")
        self.generic_visit(n)

    def visit_StructRef(self, n: c_ast.StructRef) -> None:
        self._touch("a member access")
        self.generic_visit(n)

    def visit_Cast(self, n: c_ast.Cast) -> None:
        if not _integer_type(n.to_type.type):
            self._touch("a cast to a non-integer type")
        self.generic_visit(n)

    def visit_ID(self, n: c_ast.ID) -> None:
        self.ids.add(n.name)

    def visit_FuncCall(self, n: c_ast.FuncCall) -> None:
        if isinstance(n.name, c_ast.ID):
            self.calls.add(n.name.name)
        self.generic_visit(n)

    def visit_Decl(self, n: c_ast.Decl) -> None:
        if "static" in (n.storage or []):
            self.statics.append(n.name)
        if n.name:
            self.declared.add(n.name)
        if not _integer_type(n.type):
            self._touch(f"the declaration of {n.name}")
        self.generic_visit(n)


def _integer_type(t: c_ast.Node) -> bool:
    return (isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType)
            and set(t.type.names) <= _INT_WORDS)


def call_graph(funcs: dict[str, c_ast.FuncDef]) -> dict[str, set[str]]:
    """Defined function → the defined functions its body calls by name."""
    return {name: _Uses(fdef.body).calls & set(funcs) for name, fdef in funcs.items()}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The functions a call of `start` may run, `start` included."""
    seen = {start}
    todo = [start]
    while todo:
        for g in graph.get(todo.pop(), ()):
            if g not in seen:
                seen.add(g)
                todo.append(g)
    return seen


def recursive_functions(funcs: dict[str, c_ast.FuncDef]) -> frozenset[str]:
    """The functions on a cycle of the call graph (self-recursive or mutually recursive)."""
    graph = call_graph(funcs)
    return frozenset(f for f in graph if any(f in reachable(graph, g) for g in graph[f]))


class SummariesMixin:
    """Summary predicates of recursive functions (part of `encode.Encoder`)."""

    def _summary_setup(self) -> None:
        self.recursive = recursive_functions(self.funcs)
        # function → (predicate, parameter variables, result type or None)
        self.summaries: dict[str, tuple[z3.FuncDeclRef, list[Var], CType | None]] = {}
        self.summary_todo: list[str] = []
        self.summary_calls: dict[str, z3.FuncDeclRef] = {}  # function → its call predicate

    def _summary_refusal(self, fname: str) -> str | None:
        """Why `fname` cannot have a summary predicate (None: it can)."""
        graph = call_graph(self.funcs)
        for g in sorted(reachable(graph, fname)):
            fdef = self.funcs[g]
            uses = _Uses(fdef.body)
            if self.heap:
                # the heap is no summary argument: in a program that uses memory, only
                # functions that touch none of it (the heap is the same after the call)
                if uses.memory is not None or uses.calls & (_ALLOC | _SCANF):
                    return (f"the program uses memory and {g} may touch it "
                            f"({uses.memory or 'an allocation or scanf'})")
                params = {p.name for p in (fdef.decl.type.args.params if fdef.decl.type.args else [])
                          if isinstance(p, c_ast.Decl)}
                boxed = sorted((uses.declared | params) & self.address_taken)
                if boxed:
                    return f"the program uses memory and {g} has a variable {boxed[0]} named like an address-taken one"
            if uses.statics:
                return f"{g} has a static variable {uses.statics[0]}"
            named = sorted(uses.ids & set(self.globals))
            if named:
                return f"{g} names the global {named[0]}"
            ftype = fdef.decl.type
            for p in ftype.args.params if ftype.args else []:
                if isinstance(p, c_ast.Typename) and self.is_void(p.type):
                    continue
                if isinstance(p, c_ast.EllipsisParam) or isinstance(p.type, c_ast.ArrayDecl):
                    return f"{g} has a parameter that is not an integer"
                t = self.resolve_type(p.type, p)
                if isinstance(t, PtrType | FloatType):
                    return f"{g} has a parameter that is not an integer"
            if not self.is_void(ftype.type) and isinstance(
                    self.resolve_type(ftype.type, fdef.decl), PtrType | FloatType):
                return f"{g} returns a value that is not an integer"
        return None

    def _summary_of(self, fname: str, node: c_ast.Node) -> tuple[z3.FuncDeclRef, list[Var], CType | None]:
        """The summary predicate of `fname`, declared (and its body queued) on first use."""
        if fname in self.summaries:
            return self.summaries[fname]
        why = self._summary_refusal(fname)
        if why is not None:
            raise BmcOnly(f"recursion ({fname}) outside the Horn encoding: {why}", node)
        fdef = self.funcs[fname]
        ftype = fdef.decl.type
        params = [
            p for p in (ftype.args.params if ftype.args else [])
            if not (isinstance(p, c_ast.Typename) and self.is_void(p.type))
        ]
        sig = [Var(self.new_uid(p.name), p.name, self.resolve_type(p.type, p)) for p in params]
        ret_t = None if self.is_void(ftype.type) else self.resolve_type(ftype.type, fdef.decl)
        sorts = [z3.IntSort()] * (len(sig) + (ret_t is not None))
        decl = z3.Function(f"sum_{fname}", *sorts, z3.BoolSort())
        line = fdef.coord.line if fdef.coord else 0
        full = sig + ([Var(f"\\result@{fname}", "\\result", ret_t)] if ret_t is not None else [])
        self.preds.append(Pred(decl, full, None, line, function=fname))
        if self._reaches_error(fname):
            calls = z3.Function(f"call_{fname}", *([z3.IntSort()] * len(sig)), z3.BoolSort())
            self.preds.append(Pred(calls, list(sig), None, line, function=fname))
            self.summary_calls[fname] = calls
        self.summaries[fname] = (decl, sig, ret_t)
        self.summary_todo.append(fname)
        return self.summaries[fname]

    def _reaches_error(self, fname: str) -> bool:
        """A call of `fname` may run `reach_error` or an assertion (its own or a callee's)."""
        return any(_Uses(self.funcs[g].body).calls & (_ERROR | _ASSERT)
                   for g in reachable(call_graph(self.funcs), fname))

    def call_summary(
        self, state: State, fdef: c_ast.FuncDef, args: list[c_ast.Node], node: c_ast.Node
    ) -> tuple[State | None, Val]:
        """A call of a recursive function: a fresh result constrained by its summary."""
        fname = fdef.decl.name
        dummy = Val(z3.IntVal(0), self.int_t)
        decl, sig, ret_t = self._summary_of(fname, node)
        if len(sig) != len(args):
            raise BmcOnly(f"call to {fname} with {len(args)} arguments for {len(sig)} parameters", node)
        s: State | None = state
        values: list[z3.ExprRef] = []
        for a, var in zip(args, sig, strict=True):
            s, v = self.eval(s, a)
            if s is None:
                return None, dummy
            values.append(self.coerce(v, var.ctype, node))
        calls = self.summary_calls.get(fname)
        if calls is not None:
            line = node.coord.line if node.coord else 0
            self.clauses.append(Clause(s.preds, z3.And(*s.cond), calls(*values), line, "call"))
        if ret_t is None:
            return State((*s.preds, decl(*values)), s.cond, s.env, s.nd), dummy
        r = self.fresh(f"{fname}_ret")
        cond = s.cond if ret_t.signed else (*s.cond, cint.in_range(r, ret_t))
        return State((*s.preds, decl(*values, r)), cond, s.env, s.nd), Val(r, ret_t)

    def encode_summaries(self) -> None:
        """The clauses of every summary used, from its function's body (more may be queued)."""
        while self.summary_todo:
            self._encode_summary(self.summary_todo.pop(0))

    def _encode_summary(self, fname: str) -> None:
        fdef = self.funcs[fname]
        decl, sig, ret_t = self.summaries[fname]
        entry = {v.uid: z3.Int(f"{v.uid}@{decl.name()}") for v in sig}
        # unsigned and _Bool parameters hold values of their type at every call (coerced)
        facts = tuple(cint.in_range(entry[v.uid], v.ctype) for v in sig if not v.ctype.signed)
        calls = self.summary_calls.get(fname)
        start = (calls(*[entry[v.uid] for v in sig]),) if calls is not None else ()
        state = State(start, facts, dict(entry), z3.IntVal(0))
        saved = (self.frames, self.call_stack, self.goto_frames)
        self.frames = [[{v.cname: v for v in sig}]]
        self.call_stack = [fname]
        self.goto_frames = []
        try:
            self.enter_function(fdef.body)
            out = self.exec_stmt(state, fdef.body)
            self.leave_function()
        finally:
            self.frames, self.call_stack, self.goto_frames = saved
        args = [entry[v.uid] for v in sig]
        line = fdef.coord.line if fdef.coord else 0
        ends: list[tuple[State, z3.ExprRef | None]] = []
        for st in out.normal:  # fell off the end: the result is indeterminate
            ends.append((st, self.fresh(f"{fname}_noreturn") if ret_t is not None else None))
        for st, v in out.ret:
            ends.append((st, self.coerce(v, ret_t, fdef) if ret_t is not None and v is not None
                         else (self.fresh(f"{fname}_noreturn") if ret_t is not None else None)))
        for st, v in ends:
            head = decl(*args, v) if v is not None else decl(*args)
            self.clauses.append(Clause(st.preds, z3.And(*st.cond), head, line, "summary"))


def without_summaries(enc: Encoding) -> Encoding:
    """`enc` with every summary application read as true: its summary clauses dropped and
    the summaries left out of the other clauses' bodies (a call's result any value).

    An over-approximation of `enc` whose clauses follow at most the loop predicates, for
    the templates member's concrete runs and Houdini; an interpretation inductive for it,
    with each summary read as true, is one for `enc` (each clause of `enc` is then its
    relaxed clause), which `chc.validate` checks on `enc` itself.
    """
    summary = {p.decl.name() for p in enc.preds if p.function is not None}
    if not summary:
        return enc
    clauses = [
        replace(c, body=tuple(a for a in c.body if a.decl().name() not in summary))
        for c in enc.clauses if c.head is None or c.head.decl().name() not in summary
    ]
    return replace(enc, preds=[p for p in enc.preds if p.function is None], clauses=clauses)


def summary_terms(preds: list[Pred], interps: dict[str, z3.BoolRef]) -> list[dict]:
    """Each function predicate's interpretation as an SMT-LIB term over the parameters'
    names and ``\\result``: `returns`, what a call with those arguments may return, or
    `calls`, the arguments it may be called with."""
    out = []
    for p in preds:
        if p.function is None or p.decl.name() not in interps:
            continue
        args = [z3.Const(v.cname, p.decl.domain(i)) for i, v in enumerate(p.sig)]
        body = z3.simplify(z3.substitute_vars(interps[p.decl.name()], *args) if args
                           else interps[p.decl.name()])
        kind = "calls" if p.decl.name().startswith("call_") else "returns"
        out.append({"function": p.function, "line": p.line, "kind": kind,
                    "predicate": p.decl.name(), "smt": body.sexpr()})
    return out


__all__ = [
    "SummariesMixin", "call_graph", "reachable", "recursive_functions", "summary_terms",
    "without_summaries",
]
