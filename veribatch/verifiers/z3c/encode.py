"""C AST → constrained Horn clauses (or a bounded unrolling) by symbolic execution.

One pass over the structured AST of `main`, calls inlined.  The symbolic state is
(conjunction of predicate applications, path constraint, variable → z3 term).
Loop-free code is executed symbolically, branches are merged at join points with
fresh variables (large-block encoding, linear in the program size).  Two modes:

* ``chc``: every loop head is a cut point with its own predicate ``inv<k>`` over the
  variables live there (k = the loop label of `verifiers.cfront.loop_sites`).  The
  entry path, each back edge and each path to ``reach_error`` become clauses.
  Where states with different predicates meet (a loop inside one branch of an
  `if`), a join predicate is introduced.
* ``unroll``: loops are unrolled `depth` times (paths staying longer are cut):
  bounded model checking for counterexamples.  Nondet values are read from one
  uninterpreted sequence ``ND(0), ND(1), ...`` in call order, so a model of the
  error path is a concrete input sequence for `replay`.

Anything outside the supported subset raises `Unsupported` naming the construct
and line; the verifier answers UNKNOWN with that reason, never a guess.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import z3
from pycparser import c_ast

from veribatch.verifiers import cfront
from veribatch.verifiers.z3c import cint
from veribatch.verifiers.z3c.cint import CType

Mode = Literal["chc", "unroll"]


class Unsupported(Exception):
    """A construct outside the verifier's C subset."""

    def __init__(self, construct: str, node: c_ast.Node | None = None, line: int | None = None):
        if line is None and node is not None and node.coord is not None:
            line = node.coord.line
        self.construct = construct
        self.line = line
        super().__init__(f"{construct} (line {line})" if line else construct)


@dataclass(frozen=True)
class Var:
    uid: str
    cname: str
    ctype: CType
    is_global: bool = False


@dataclass
class Pred:
    """A predicate of the Horn system: a loop head (`label` set) or a join point."""

    decl: z3.FuncDeclRef
    sig: list[Var]
    label: int | None
    line: int
    visible: dict[str, str] = field(default_factory=dict)  # C name → uid visible at the head


@dataclass
class Clause:
    body: tuple[z3.BoolRef, ...]  # predicate applications
    constraint: z3.BoolRef
    head: z3.BoolRef | None  # None: the clause leads to reach_error
    line: int
    kind: str  # "init" | "step" | "error" | "join"


@dataclass
class State:
    preds: tuple[z3.BoolRef, ...]
    cond: tuple[z3.BoolRef, ...]
    env: dict[str, z3.ArithRef]
    nd: z3.ArithRef  # unroll mode: index of the next nondet value

    def assume(self, c: z3.BoolRef) -> State | None:
        if z3.is_false(c):
            return None
        if z3.is_true(c):
            return self
        return State(self.preds, (*self.cond, c), self.env, self.nd)

    def with_env(self, env: dict[str, z3.ArithRef]) -> State:
        return State(self.preds, self.cond, env, self.nd)


@dataclass
class Val:
    expr: z3.ExprRef  # ArithRef, or BoolRef for 0/1 results of comparisons
    ctype: CType

    def as_int(self) -> z3.ArithRef:
        if z3.is_bool(self.expr):
            return z3.If(self.expr, z3.IntVal(1), z3.IntVal(0))
        return self.expr  # type: ignore[return-value]

    def as_bool(self) -> z3.BoolRef:
        if z3.is_bool(self.expr):
            return self.expr  # type: ignore[return-value]
        return self.expr != 0

    @property
    def is_01(self) -> bool:
        return z3.is_bool(self.expr) or self.ctype.is_bool


@dataclass
class Outcomes:
    normal: list[State] = field(default_factory=list)
    brk: list[State] = field(default_factory=list)
    cont: list[State] = field(default_factory=list)
    ret: list[tuple[State, Val | None]] = field(default_factory=list)

    def absorb(self, other: Outcomes, *, normal: bool = True) -> None:
        if normal:
            self.normal += other.normal
        self.brk += other.brk
        self.cont += other.cont
        self.ret += other.ret


@dataclass
class ErrorPath:
    """Unroll mode: the guard of one path to reach_error and its nondet count."""

    guard: z3.BoolRef
    nd: z3.ArithRef
    line: int


@dataclass
class Encoding:
    mode: Mode
    preds: list[Pred]
    clauses: list[Clause]
    errors: list[ErrorPath]
    nd_func: z3.FuncDeclRef
    loop_sites: list[cfront.LoopSite]
    cut: bool  # unroll mode: some path was cut at the unrolling depth
    cut_guards: list[z3.BoolRef]  # unroll mode: path constraints of the cut paths


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


def nondet_type_name(fname: str) -> str | None:
    if fname.startswith("__VERIFIER_nondet_"):
        return _NONDET.get(fname[len("__VERIFIER_nondet_"):])
    return None


class Encoder:
    """Symbolic executor; build with `encode(ast, mode=...)`."""

    def __init__(
        self,
        ast: c_ast.FileAST,
        *,
        mode: Mode = "chc",
        depth: int = 0,
        data_model: str = "ILP32",
        should_stop: Callable[[], bool] | None = None,
    ):
        self.ast = ast
        self.mode = mode
        self.depth = depth
        self.dm = data_model
        self.should_stop = should_stop or (lambda: False)
        self.funcs = cfront.function_defs(ast)
        self.sites = cfront.loop_sites(ast)
        self.site_of = {id(s.node): s for s in self.sites}
        self.typedefs: dict[str, c_ast.Node] = {}
        self.preds: list[Pred] = []
        self.clauses: list[Clause] = []
        self.errors: list[ErrorPath] = []
        self.globals: dict[str, Var] = {}
        self.frames: list[list[dict[str, Var]]] = []
        self.call_stack: list[str] = []
        self.counter = itertools.count()
        self.uids: set[str] = set()
        self.nd_func = z3.Function("ND", z3.IntSort(), z3.IntSort())
        self.cut = False
        self.cut_guards: list[z3.BoolRef] = []
        self.instances: dict[int, int] = {}
        self.int_t = cint.type_named("int", data_model)

    # ------------------------------------------------------------------ helpers
    def fresh(self, base: str) -> z3.ArithRef:
        return z3.Int(f"{base}!{next(self.counter)}")

    def new_uid(self, cname: str) -> str:
        uid = cname
        while uid in self.uids:
            uid = f"{cname}#{next(self.counter)}"
        self.uids.add(uid)
        return uid

    def live_vars(self) -> list[Var]:
        out = list(self.globals.values())
        for frame in self.frames:
            for scope in frame:
                out.extend(scope.values())
        return out

    def lookup(self, name: str, node: c_ast.Node) -> Var:
        if self.frames:
            for scope in reversed(self.frames[-1]):
                if name in scope:
                    return scope[name]
        if name in self.globals:
            return self.globals[name]
        raise Unsupported(f"undeclared identifier {name!r}", node)

    def resolve_type(self, tnode: c_ast.Node, where: c_ast.Node) -> CType:
        if isinstance(tnode, c_ast.TypeDecl):
            inner = tnode.type
            if isinstance(inner, c_ast.IdentifierType):
                names = inner.names
                if len(names) == 1 and names[0] in self.typedefs:
                    return self.resolve_type(self.typedefs[names[0]], where)
                t = cint.from_specifiers(names, self.dm)
                if t is None:
                    raise Unsupported(f"type {' '.join(names)!r} unsupported", where)
                return t
            if isinstance(inner, c_ast.Struct | c_ast.Union):
                raise Unsupported("structs/unions unsupported", where)
            if isinstance(inner, c_ast.Enum):
                raise Unsupported("enums unsupported", where)
        if isinstance(tnode, c_ast.Typename):
            return self.resolve_type(tnode.type, where)
        if isinstance(tnode, c_ast.PtrDecl):
            raise Unsupported("pointers unsupported", where)
        if isinstance(tnode, c_ast.ArrayDecl):
            raise Unsupported("arrays unsupported", where)
        raise Unsupported(f"type {type(tnode).__name__} unsupported", where)

    def is_void(self, tnode: c_ast.Node) -> bool:
        return (
            isinstance(tnode, c_ast.TypeDecl)
            and isinstance(tnode.type, c_ast.IdentifierType)
            and tnode.type.names == ["void"]
        )

    def nondet(self, state: State, t: CType, tag: str) -> tuple[State, z3.ArithRef]:
        if self.mode == "unroll":
            v = self.nd_func(state.nd)
            s = State(state.preds, (*state.cond, cint.in_range(v, t)), state.env, state.nd + 1)
            return s, v
        c = self.fresh(tag)
        return State(state.preds, (*state.cond, cint.in_range(c, t)), state.env, state.nd), c

    # ------------------------------------------------------------------ merging
    def merge(self, states: list[State], vals: list[Val | None] | None = None):
        """Join states (and values): one state, with fresh variables where they differ."""
        states = [s for s in states if s is not None]
        if not states:
            return (None, None) if vals is not None else None
        if vals is not None:
            if len(states) == 1:
                return states[0], vals[0]
            envs = []
            for s, v in zip(states, vals, strict=True):
                env = dict(s.env)
                if v is not None:
                    env["$v"] = v.as_int()
                envs.append(s.with_env(env))
            t = next((v.ctype for v in vals if v is not None), self.int_t)
            m = self._merge(envs)
            env = dict(m.env)
            ve = env.pop("$v", None)
            return m.with_env(env), (Val(ve, t) if ve is not None else None)
        if len(states) == 1:
            return states[0]
        return self._merge(states)

    def _merge(self, states: list[State]) -> State:
        keys0 = list(states[0].env)
        if any(list(s.env) != keys0 for s in states[1:]):
            keys = [k for k in keys0 if all(k in s.env for s in states)]
        else:
            keys = keys0
        pids = [tuple(p.get_id() for p in s.preds) for s in states]
        if any(p != pids[0] for p in pids[1:]):
            return self._join_pred(states, keys)
        # common prefix of path constraints
        n = 0
        while all(len(s.cond) > n for s in states) and all(
            s.cond[n] is states[0].cond[n] or s.cond[n].eq(states[0].cond[n]) for s in states
        ):
            n += 1
        prefix = states[0].cond[:n]
        guards = [z3.And(*s.cond[n:]) if len(s.cond) > n else z3.BoolVal(True) for s in states]
        cond = list(prefix)
        cond.append(z3.Or(*guards))
        env: dict[str, z3.ArithRef] = {}
        for k in keys:
            vals = [s.env[k] for s in states]
            if all(v.eq(vals[0]) for v in vals[1:]):
                env[k] = vals[0]
                continue
            f = self.fresh(k)
            term = vals[-1]
            for g, v in zip(reversed(guards[:-1]), reversed(vals[:-1]), strict=True):
                term = z3.If(g, v, term)
            cond.append(f == term)
            env[k] = f
        nds = [s.nd for s in states]
        nd = nds[0]
        if not all(x.eq(nd) for x in nds[1:]):
            term = nds[-1]
            for g, v in zip(reversed(guards[:-1]), reversed(nds[:-1]), strict=True):
                term = z3.If(g, v, term)
            nd = z3.simplify(term)
        return State(states[0].preds, tuple(cond), env, nd)

    def _join_pred(self, states: list[State], keys: list[str]) -> State:
        if self.mode == "unroll":  # pragma: no cover - unroll mode has no predicates
            raise AssertionError("predicates in unroll mode")
        live = {v.uid: v for v in self.live_vars()}
        sig = [live.get(k) or Var(k, k, self.int_t) for k in keys]
        decl = z3.Function(f"join{len(self.preds)}", *[z3.IntSort()] * len(sig), z3.BoolSort())
        self.preds.append(Pred(decl, sig, None, 0))
        for s in states:
            self.clauses.append(
                Clause(s.preds, z3.And(*s.cond), decl(*[s.env[k] for k in keys]), 0, "join")
            )
        fresh = {k: self.fresh(k) for k in keys}
        return State((decl(*[fresh[k] for k in keys]),), (), fresh, states[0].nd)

    def emit_error(self, state: State | None, line: int) -> None:
        if state is None:
            return
        if self.mode == "chc":
            self.clauses.append(Clause(state.preds, z3.And(*state.cond), None, line, "error"))
        else:
            self.errors.append(ErrorPath(z3.And(*state.cond), state.nd, line))

    # ------------------------------------------------------------------ program
    def encode(self) -> Encoding:
        init = State((), (), {}, z3.IntVal(0))
        state: State | None = init
        for ext in self.ast.ext:
            if isinstance(ext, c_ast.Typedef):
                self.typedefs[ext.name] = ext.type
            elif isinstance(ext, c_ast.Decl) and not isinstance(ext.type, c_ast.FuncDecl):
                if ext.name is None:
                    if isinstance(ext.type, c_ast.Struct | c_ast.Union | c_ast.Enum):
                        continue
                    raise Unsupported("declaration without a name", ext)
                if "extern" in (ext.storage or []) and ext.init is None:
                    t = self.resolve_type(ext.type, ext)
                    state = self._declare_global(state, ext, t, nondet=True)
                else:
                    t = self.resolve_type(ext.type, ext)
                    state = self._declare_global(state, ext, t, nondet=False)
        main = self.funcs.get("main")
        if main is None:
            raise Unsupported("no main function")
        if state is None:
            return self._result()
        self.frames.append([{}])
        self.call_stack.append("main")
        out = self.exec_stmt(state, main.body)
        self.call_stack.pop()
        self.frames.pop()
        del out  # leaving main (fall-through or return) ends the program: safe
        return self._result()

    def _result(self) -> Encoding:
        return Encoding(
            self.mode, self.preds, self.clauses, self.errors, self.nd_func, self.sites,
            self.cut, self.cut_guards,
        )

    def _declare_global(self, state: State | None, decl: c_ast.Decl, t: CType, *, nondet: bool):
        if state is None:
            return None
        var = Var(self.new_uid(decl.name), decl.name, t, is_global=True)
        self.globals[decl.name] = var
        if decl.init is not None:
            state, v = self.eval(state, decl.init)
            if state is None:
                return None
            value = cint.convert(v.as_int(), v.ctype, t)
        elif nondet:
            state, value = self.nondet(state, t, decl.name)
        else:
            value = z3.IntVal(0)
        env = dict(state.env)
        env[var.uid] = value
        return state.with_env(env)

    # ------------------------------------------------------------------ statements
    def exec_stmt(self, state: State | None, node: c_ast.Node) -> Outcomes:
        out = Outcomes()
        if state is None:
            return out
        if self.should_stop():
            raise TimeoutError("encoding stopped")
        if isinstance(node, c_ast.Compound):
            return self.exec_block(state, node.block_items or [], node)
        if isinstance(node, c_ast.Decl):
            out.normal.append(self.exec_decl(state, node))
            return out
        if isinstance(node, c_ast.DeclList):
            s: State | None = state
            for d in node.decls:
                if s is None:
                    break
                s = self.exec_decl(s, d)
            if s is not None:
                out.normal.append(s)
            return out
        if isinstance(node, c_ast.If):
            s, c = self.eval(state, node.cond)
            if s is None:
                return out
            cb = z3.simplify(c.as_bool())
            then_s = s.assume(cb)
            else_s = s.assume(z3.Not(cb))
            out.absorb(self.exec_stmt(then_s, node.iftrue))
            if node.iffalse is not None:
                out.absorb(self.exec_stmt(else_s, node.iffalse))
            elif else_s is not None:
                out.normal.append(else_s)
            return out
        if isinstance(node, c_ast.While | c_ast.For | c_ast.DoWhile):
            return self.exec_loop(state, node)
        if isinstance(node, c_ast.Break):
            out.brk.append(state)
            return out
        if isinstance(node, c_ast.Continue):
            out.cont.append(state)
            return out
        if isinstance(node, c_ast.Return):
            if node.expr is None:
                out.ret.append((state, None))
                return out
            s, v = self.eval(state, node.expr)
            if s is not None:
                out.ret.append((s, v))
            return out
        if isinstance(node, c_ast.Label):
            return self.exec_stmt(state, node.stmt)
        if isinstance(node, c_ast.EmptyStatement | c_ast.Pragma):
            out.normal.append(state)
            return out
        if isinstance(node, c_ast.Typedef):
            self.typedefs[node.name] = node.type
            out.normal.append(state)
            return out
        if isinstance(node, c_ast.Goto):
            raise Unsupported("goto unsupported", node)
        if isinstance(node, c_ast.Switch):
            return self.exec_switch(state, node)
        if isinstance(node, c_ast.FuncDef):
            raise Unsupported("nested function definition unsupported", node)
        # expression statement
        s, _ = self.eval(state, node, want_value=False)
        if s is not None:
            out.normal.append(s)
        return out

    def exec_block(self, state: State, items: list[c_ast.Node], node: c_ast.Node) -> Outcomes:
        frame = self.frames[-1]
        frame.append({})
        out = Outcomes()
        s: State | None = state
        try:
            for item in items:
                if s is None:
                    break
                sub = self.exec_stmt(s, item)
                out.absorb(sub, normal=False)
                s = self.merge(sub.normal)
            if s is not None:
                out.normal.append(s)
        finally:
            scope = frame.pop()
        dead = {v.uid for v in scope.values()}
        if dead:
            out.normal = [self._drop(x, dead) for x in out.normal]
            out.brk = [self._drop(x, dead) for x in out.brk]
            out.cont = [self._drop(x, dead) for x in out.cont]
            out.ret = [(self._drop(x, dead), v) for x, v in out.ret]
        return out

    def exec_switch(self, state: State, node: c_ast.Switch) -> Outcomes:
        """Dispatch on the case constants, with fall-through; `break` leaves the switch."""
        out = Outcomes()
        s, v = self.eval(state, node.cond)
        if s is None:
            return out
        if isinstance(node.stmt, c_ast.Compound):
            items = node.stmt.block_items or []
        else:
            items = [node.stmt]
        if any(not isinstance(it, c_ast.Case | c_ast.Default) for it in items):
            raise Unsupported("switch body with statements outside case labels unsupported", node)
        t = cint.promote(v.ctype, self.dm)
        ve = cint.convert(v.as_int(), v.ctype, t)
        consts = []
        for it in items:
            if isinstance(it, c_ast.Case):
                _, cv = self.eval(s, it.expr)
                k = _int_value(cint.convert(cv.as_int(), cv.ctype, t))
                if k is None:
                    raise Unsupported("non-constant case label", it)
                consts.append(k)
        no_match = z3.And(*[ve != k for k in consts]) if consts else z3.BoolVal(True)
        has_default = any(isinstance(it, c_ast.Default) for it in items)
        frame = self.frames[-1]
        frame.append({})
        try:
            through: list[State] = []
            ci = 0
            for it in items:
                if isinstance(it, c_ast.Case):
                    entry = s.assume(ve == consts[ci])
                    ci += 1
                else:
                    entry = s.assume(no_match)
                cur = self.merge([x for x in [*through, entry] if x is not None])
                through = []
                for st in it.stmts or []:
                    if cur is None:
                        break
                    sub = self.exec_stmt(cur, st)
                    out.normal += sub.brk
                    out.cont += sub.cont
                    out.ret += sub.ret
                    cur = self.merge(sub.normal)
                if cur is not None:
                    through.append(cur)
            out.normal += through
            if not has_default:
                miss = s.assume(no_match)
                if miss is not None:
                    out.normal.append(miss)
        finally:
            scope = frame.pop()
        dead = {x.uid for x in scope.values()}
        if dead:
            out.normal = [self._drop(x, dead) for x in out.normal]
            out.cont = [self._drop(x, dead) for x in out.cont]
            out.ret = [(self._drop(x, dead), r) for x, r in out.ret]
        return out

    @staticmethod
    def _drop(state: State, dead: set[str]) -> State:
        return state.with_env({k: v for k, v in state.env.items() if k not in dead})

    def exec_decl(self, state: State, decl: c_ast.Decl) -> State | None:
        if isinstance(decl.type, c_ast.FuncDecl):
            return state  # a local prototype
        if decl.name is None:
            raise Unsupported("declaration without a name", decl)
        storage = decl.storage or []
        if "static" in storage:
            raise Unsupported("static local variables unsupported", decl)
        if "typedef" in storage:
            self.typedefs[decl.name] = decl.type
            return state
        t = self.resolve_type(decl.type, decl)
        s: State | None = state
        if decl.init is not None:
            if isinstance(decl.init, c_ast.InitList):
                raise Unsupported("initializer lists unsupported", decl)
            s, v = self.eval(state, decl.init)
            if s is None:
                return None
            value = cint.convert(v.as_int(), v.ctype, t)
        else:
            s, value = self.nondet(state, t, decl.name)
        var = Var(self.new_uid(decl.name), decl.name, t)
        self.frames[-1][-1][decl.name] = var
        env = dict(s.env)
        env[var.uid] = value
        return s.with_env(env)

    # ------------------------------------------------------------------ loops
    def exec_loop(self, state: State, node: c_ast.Node) -> Outcomes:
        site = self.site_of.get(id(node))
        label = site.label if site else 0
        line = node.coord.line if node.coord else 0
        is_for = isinstance(node, c_ast.For)
        out = Outcomes()
        frame = self.frames[-1]
        frame.append({})  # scope of a for-init declaration
        try:
            s: State | None = state
            if is_for and node.init is not None:
                sub = self.exec_stmt(s, node.init)
                s = self.merge(sub.normal)
            if s is not None:
                if self.mode == "chc":
                    inner = self._loop_chc(s, node, label, line)
                else:
                    inner = self._loop_unroll(s, node)
                out.absorb(inner)
        finally:
            scope = frame.pop()
        dead = {v.uid for v in scope.values()}
        if dead:
            out.normal = [self._drop(x, dead) for x in out.normal]
            out.ret = [(self._drop(x, dead), v) for x, v in out.ret]
        return out

    def _iteration(self, s: State, node: c_ast.Node) -> tuple[Outcomes, list[State]]:
        """One pass from the loop head: (outcomes, states back at the head)."""
        out = Outcomes()
        back: list[State] = []
        if isinstance(node, c_ast.DoWhile):
            body = self.exec_stmt(s, node.stmt)
            out.ret += body.ret
            out.normal += body.brk
            for b in [*body.normal, *body.cont]:
                bs, c = self.eval(b, node.cond)
                if bs is None:
                    continue
                cb = c.as_bool()
                t = bs.assume(cb)
                if t is not None:
                    back.append(t)
                f = bs.assume(z3.Not(cb))
                if f is not None:
                    out.normal.append(f)
            return out, back
        cond = node.cond
        if cond is None:
            cs: State | None = s
            cb: z3.BoolRef = z3.BoolVal(True)
        else:
            cs, cv = self.eval(s, cond)
            cb = z3.simplify(cv.as_bool()) if cs is not None else z3.BoolVal(False)
        if cs is None:
            return out, back
        exit_s = cs.assume(z3.Not(cb))
        if exit_s is not None:
            out.normal.append(exit_s)
        body_s = cs.assume(cb)
        body = self.exec_stmt(body_s, node.stmt)
        out.ret += body.ret
        out.normal += body.brk
        for b in [*body.normal, *body.cont]:
            if isinstance(node, c_ast.For) and node.next is not None:
                bs, _ = self.eval(b, node.next, want_value=False)
                if bs is not None:
                    back.append(bs)
            else:
                back.append(b)
        return out, back

    def _loop_chc(self, s: State, node: c_ast.Node, label: int, line: int) -> Outcomes:
        live = self.live_vars()
        keys = [v.uid for v in live if v.uid in s.env]
        sig = [v for v in live if v.uid in s.env]
        inst = self.instances.get(label, 0)
        self.instances[label] = inst + 1
        name = f"inv{label}" if inst == 0 else f"inv{label}_{inst}"
        decl = z3.Function(name, *[z3.IntSort()] * len(sig), z3.BoolSort())
        visible = {name: v.uid for name, v in self.globals.items()}
        for scope in self.frames[-1]:
            visible.update({name: v.uid for name, v in scope.items()})
        self.preds.append(Pred(decl, sig, label, line, visible))
        self.clauses.append(Clause(s.preds, z3.And(*s.cond), decl(*[s.env[k] for k in keys]), line, "init"))
        head_env = {k: z3.Int(f"{k}@{name}") for k in keys}
        # Unsigned and _Bool variables always hold values of their type (they wrap);
        # stating it helps Spacer.  Signed ones are left unbounded (see cint).
        facts = tuple(
            cint.in_range(head_env[v.uid], v.ctype) for v in sig if not v.ctype.signed
        )
        head = State((decl(*[head_env[k] for k in keys]),), facts, head_env, s.nd)
        out, back = self._iteration(head, node)
        for b in back:
            self.clauses.append(
                Clause(b.preds, z3.And(*b.cond), decl(*[b.env[k] for k in keys]), line, "step")
            )
        return out

    def _loop_unroll(self, s: State, node: c_ast.Node) -> Outcomes:
        out = Outcomes()
        cur: State | None = s
        for _ in range(self.depth + 1):
            if cur is None:
                break
            it, back = self._iteration(cur, node)
            out.absorb(it)
            cur = self.merge(back)
        if cur is not None:
            # paths longer than the bound are dropped (under-approximation); if all of
            # these guards are unsatisfiable the unrolling covers every execution.
            self.cut = True
            self.cut_guards.append(z3.And(*cur.cond))
        return out

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
            var = self.lookup(node.name, node)
            return state, Val(state.env[var.uid], var.ctype)
        if isinstance(node, c_ast.Cast):
            s, v = self.eval(state, node.expr)
            if self.is_void(node.to_type.type):
                return s, dummy
            t = self.resolve_type(node.to_type.type, node)
            if s is None:
                return None, dummy
            return s, Val(cint.convert(v.as_int(), v.ctype, t), t)
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
            t = cint.common_type(tv.ctype, fv.ctype, self.dm)
            tv = Val(cint.convert(tv.as_int(), tv.ctype, t), t)
            fv = Val(cint.convert(fv.as_int(), fv.ctype, t), t)
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
            raise Unsupported("arrays unsupported", node)
        if isinstance(node, c_ast.StructRef):
            raise Unsupported("structs/pointers unsupported", node)
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
            raise Unsupported("floating point unsupported", node)
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

    def _lvalue(self, node: c_ast.Node) -> Var:
        if isinstance(node, c_ast.ID):
            return self.lookup(node.name, node)
        if isinstance(node, c_ast.ArrayRef):
            raise Unsupported("arrays unsupported", node)
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            raise Unsupported("pointers unsupported", node)
        raise Unsupported(f"assignment to {type(node).__name__} unsupported", node)

    def _store(self, state: State, var: Var, value: z3.ArithRef) -> State:
        env = dict(state.env)
        env[var.uid] = value
        return state.with_env(env)

    def eval_unary(self, state: State, node: c_ast.UnaryOp) -> tuple[State | None, Val]:
        op = node.op
        if op == "sizeof":
            if isinstance(node.expr, c_ast.Typename):
                t = self.resolve_type(node.expr.type, node)
            else:
                _, v = self.eval(state, node.expr)
                t = v.ctype
            ul = cint.type_named("unsigned long", self.dm)
            return state, Val(z3.IntVal(max(1, t.width // 8)), ul)
        if op in ("&", "*"):
            raise Unsupported("pointers unsupported", node)
        if op in ("++", "--", "p++", "p--"):
            var = self._lvalue(node.expr)
            old = state.env[var.uid]
            delta = 1 if "+" in op else -1
            pt = cint.common_type(var.ctype, self.int_t, self.dm)
            new = cint.convert(cint.convert(old, var.ctype, pt) + delta, pt, var.ctype)
            s = self._store(state, var, new)
            return s, Val(old if op.startswith("p") else new, var.ctype)
        s, v = self.eval(state, node.expr)
        if s is None:
            return None, v
        if op == "!":
            return s, Val(z3.Not(v.as_bool()), self.int_t)
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
        return s, self.arith(op, a, b, node)

    def arith(self, op: str, a: Val, b: Val, node: c_ast.Node) -> Val:
        int_t = self.int_t
        if op in ("<<", ">>"):
            t = cint.promote(a.ctype, self.dm)
            ae = cint.convert(a.as_int(), a.ctype, t)
            k = _int_value(b.as_int())
            if k is None or k < 0 or k >= t.width:
                raise Unsupported(f"shift by a non-constant amount unsupported ({op})", node)
            if op == "<<":
                r = ae * (1 << k)
                return Val(r if t.signed else cint.convert(r, _wide(t), t), t)
            return Val(ae / (1 << k), t)  # floor: gcc's arithmetic shift for signed
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
            raise Unsupported("bitwise & with a non-mask operand unsupported", node)
        if op in ("|", "^"):
            raise Unsupported(f"bitwise {op} unsupported", node)
        raise Unsupported(f"operator {op!r} unsupported", node)

    def eval_assign(self, state: State, node: c_ast.Assignment) -> tuple[State | None, Val]:
        var = self._lvalue(node.lvalue)
        s, v = self.eval(state, node.rvalue)
        if s is None:
            return None, v
        if node.op != "=":
            cur = Val(s.env[var.uid], var.ctype)
            v = self.arith(node.op[:-1], cur, v, node)
        new = cint.convert(v.as_int(), v.ctype, var.ctype)
        return self._store(s, var, new), Val(new, var.ctype)

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
        if fname == "abs":
            s, v = self.eval(state, args[0])
            if s is None:
                return None, dummy
            e = v.as_int()
            return s, Val(z3.If(e < 0, -e, e), self.int_t)
        raise Unsupported(f"call to undefined function {fname}", node)

    def inline(
        self, state: State, fdef: c_ast.FuncDef, args: list[c_ast.Node], node: c_ast.Node
    ) -> tuple[State | None, Val]:
        fname = fdef.decl.name
        dummy = Val(z3.IntVal(0), self.int_t)
        if fname in self.call_stack:
            raise Unsupported(f"recursion ({fname}) unsupported", node)
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
        values: list[tuple[z3.ArithRef, CType]] = []
        for a in args:
            s, v = self.eval(s, a)
            if s is None:
                return None, dummy
            values.append((v.as_int(), v.ctype))
        ret_void = self.is_void(ftype.type)
        ret_t = None if ret_void else self.resolve_type(ftype.type, fdef.decl)
        scope: dict[str, Var] = {}
        env = dict(s.env)
        for p, (e, t) in zip(params, values, strict=True):
            pt = self.resolve_type(p.type, p)
            var = Var(self.new_uid(p.name), p.name, pt)
            scope[p.name] = var
            env[var.uid] = cint.convert(e, t, pt)
        s = s.with_env(env)
        self.frames.append([scope])
        self.call_stack.append(fname)
        try:
            out = self.exec_stmt(s, fdef.body)
        finally:
            self.call_stack.pop()
            frame = self.frames.pop()
        dead = {v.uid for sc in frame for v in sc.values()}
        ends: list[State] = []
        vals: list[Val | None] = []
        for st in out.normal:
            st2 = self._drop(st, dead)
            if ret_t is not None:
                st2, v = self.nondet(st2, ret_t, f"{fname}_noreturn")
                vals.append(Val(v, ret_t))
            else:
                vals.append(None)
            ends.append(st2)
        for st, v in out.ret:
            ends.append(self._drop(st, dead))
            if ret_t is not None and v is not None:
                vals.append(Val(cint.convert(v.as_int(), v.ctype, ret_t), ret_t))
            else:
                vals.append(None)
        if not ends:
            return None, dummy
        if ret_t is None:
            return self.merge(ends), dummy
        ms, mv = self.merge(ends, vals)
        return ms, mv if mv is not None else dummy


def _wide(t: CType) -> CType:
    """A type wide enough to hold any result before wrapping (for `convert`'s range test)."""
    return CType("wide", 200, True, 9)


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
    side_effect = isinstance(node, c_ast.FuncCall | c_ast.Assignment) or (
        isinstance(node, c_ast.UnaryOp) and node.op in _SIDE_EFFECT_OPS
    )
    result = not side_effect and all(_is_simple(c) for _, c in node.children())
    if len(_SIMPLE) > 100_000:
        _SIMPLE.clear()
    _SIMPLE[id(node)] = (node, result)
    return result


def encode(
    ast: c_ast.FileAST,
    *,
    mode: Mode = "chc",
    depth: int = 0,
    data_model: str = "ILP32",
    should_stop: Callable[[], bool] | None = None,
) -> Encoding:
    """Encode `main` of `ast`; raises `Unsupported`."""
    return Encoder(ast, mode=mode, depth=depth, data_model=data_model, should_stop=should_stop).encode()
