"""Control flow: statements, blocks, switch, loops (cut points or unrolling), joins.

Loop heads become Horn predicates (``chc`` mode) or are unrolled (``unroll``
mode); states meeting at a join are merged with fresh variables.  Mixed into
`encode.Encoder`.
"""

from __future__ import annotations

import z3
from pycparser import c_ast

from veribatch.verifiers.z3c import cint
from veribatch.verifiers.z3c.expressions import _int_value
from veribatch.verifiers.z3c.ir import (
    Clause,
    ErrorPath,
    Outcomes,
    Pred,
    State,
    Unsupported,
    Val,
    Var,
)


class ControlFlowMixin:
    """Statements and loops (part of `encode.Encoder`)."""

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
            f = self.fresh(k) if z3.is_int(vals[0]) else z3.FreshConst(vals[0].sort(), k)
            term = vals[-1]
            for g, v in zip(reversed(guards[:-1]), reversed(vals[:-1]), strict=True):
                term = z3.If(g, v, term)
            cond.append(f == term)
            if z3.is_int(f):
                self.joins[f.decl().name()] = term
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
        sorts = [states[0].env[k].sort() for k in keys]
        decl = z3.Function(f"join{len(self.preds)}", *sorts, z3.BoolSort())
        self.preds.append(Pred(decl, sig, None, 0))
        for s in states:
            self.clauses.append(
                Clause(s.preds, z3.And(*s.cond), decl(*[s.env[k] for k in keys]), 0, "join")
            )
        fresh = {k: self.fresh_like(k, states[0].env[k]) for k in keys}
        return State((decl(*[fresh[k] for k in keys]),), (), fresh, states[0].nd)

    def emit_error(self, state: State | None, line: int) -> None:
        if state is None:
            return
        if self.mode == "chc":
            self.clauses.append(Clause(state.preds, z3.And(*state.cond), None, line, "error"))
        else:
            self.errors.append(ErrorPath(z3.And(*state.cond), state.nd, line))

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
            self.exec_goto(state, node)
            return out
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
                s = self.arrive(s, item)  # forward gotos to a label on `item` join here
                if s is None:
                    continue
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

    # ------------------------------------------------------------------ goto
    # A forward goto (CIL's `goto while_break;`, `goto return_label;`) parks its state
    # until the block walk arrives at the labelled statement, where it joins the states
    # arriving in sequence: the control-flow graph's edge, encoded like a `break`.  A
    # goto to a label before it (a loop made of gotos) or one never arrived at (inside
    # a branch or loop the walk does not enter) stays unsupported.
    def enter_function(self, body: c_ast.Node) -> None:
        labels: dict[str, tuple[int, int]] = {}

        class Labels(c_ast.NodeVisitor):
            def visit_Label(self, n: c_ast.Label) -> None:
                labels[n.name] = (n.coord.line, n.coord.column) if n.coord else (0, 0)
                self.generic_visit(n)

        Labels().visit(body)
        self.goto_frames.append((labels, {}))

    def leave_function(self) -> None:
        _, pending = self.goto_frames.pop()
        left = [name for name, states in pending.items() if states]
        if left:
            raise Unsupported(f"goto {left[0]} into a block not entered unsupported")

    def exec_goto(self, state: State, node: c_ast.Goto) -> None:
        labels, pending = self.goto_frames[-1]
        at = (node.coord.line, node.coord.column) if node.coord else (0, 0)
        if node.name not in labels:
            raise Unsupported(f"goto to an undefined label {node.name!r}", node)
        if labels[node.name] <= at:
            raise Unsupported("goto to an earlier label (backward goto) unsupported", node)
        pending.setdefault(node.name, []).append(state)

    def arrive(self, s: State | None, item: c_ast.Node) -> State | None:
        """Join the states of gotos to the labels on `item` with `s` (None: unreachable)."""
        if not self.goto_frames or not isinstance(item, c_ast.Label):
            return s
        pending = self.goto_frames[-1][1]
        jumps: list[State] = []
        while isinstance(item, c_ast.Label):
            jumps += pending.pop(item.name, [])
            item = item.stmt
        if not jumps:
            return s
        if s is not None:
            # variables of scopes the jump left go (arrays die); ones declared between
            # the goto and the label are indeterminate on the jump
            aligned = []
            for g in jumps:
                g = self._drop(g, set(g.env) - set(s.env))
                env = dict(g.env)
                for k, v in s.env.items():
                    if k not in env:
                        env[k] = self.fresh(k) if z3.is_int(v) else z3.FreshConst(v.sort(), k)
                aligned.append(g.with_env(env))
            jumps = aligned
        return self.merge([x for x in [s, *jumps] if x is not None])

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
        sig = [v for v in live if v.uid in s.env] + self.heap_vars(s.env)
        keys = [v.uid for v in sig]
        inst = self.instances.get(label, 0)
        self.instances[label] = inst + 1
        name = f"inv{label}" if inst == 0 else f"inv{label}_{inst}"
        decl = z3.Function(name, *[s.env[k].sort() for k in keys], z3.BoolSort())
        visible = {name: v.uid for name, v in self.globals.items()}
        for scope in self.frames[-1]:
            visible.update({name: v.uid for name, v in scope.items()})
        # an address-taken scalar's variable holds its address: C cannot name that value
        visible = {name: uid for name, uid in visible.items() if uid not in self.boxed}
        self.preds.append(Pred(decl, sig, label, line, visible))
        self.clauses.append(Clause(s.preds, z3.And(*s.cond), decl(*[s.env[k] for k in keys]), line, "init"))
        head_env = {k: z3.Const(f"{k}@{name}", s.env[k].sort()) for k in keys}
        # Unsigned and _Bool variables always hold values of their type (they wrap);
        # stating it helps Spacer.  Signed ones are left unbounded (see cint).
        facts = tuple(
            cint.in_range(head_env[v.uid], v.ctype)
            for v in sig if not v.ctype.signed and z3.is_int(head_env[v.uid])
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
