"""Cone of influence: variables whose values never reach a branch, call or return.

Such a variable (`x` in ps4/ps5's ``x = y*y*y + x``) cannot change which paths run
or whether `reach_error` is reached, so the Horn encoding for Spacer may give it an
arbitrary value at each assignment (``Encoder(havoc=...)``): the sliced system
over-approximates the program, so an invariant proved inductive for it is one for
the program too, and its non-linear updates no longer reach the solver.

Conservative by construction: a variable is relevant when any occurrence of its
name (in any scope) is read outside the right-hand side of a statement-level
assignment or an initialiser, or when it flows into a relevant variable through
one; a right-hand side with a call, an assignment or an increment makes every name
in it relevant.  Only the Spacer members use the slice; candidate checks and BMC
(whose traces are replayed) see the whole program.
"""

from __future__ import annotations

from pycparser import c_ast

_INC = {"++", "--", "p++", "p--"}


def irrelevant_names(ast: c_ast.FileAST) -> frozenset[str]:
    seeds: set[str] = set()
    flows: dict[str, set[str]] = {}  # read name → names it is assigned into
    assigned: set[str] = set()

    def names_in(node: c_ast.Node) -> set[str]:
        out: set[str] = set()

        class V(c_ast.NodeVisitor):
            def visit_ID(self, n: c_ast.ID) -> None:
                out.add(n.name)

            def visit_FuncCall(self, n: c_ast.FuncCall) -> None:
                if n.args is not None:
                    self.visit(n.args)

        V().visit(node)
        return out

    def impure(node: c_ast.Node) -> bool:
        if isinstance(node, c_ast.FuncCall | c_ast.Assignment):
            return True
        if isinstance(node, c_ast.UnaryOp) and node.op in _INC:
            return True
        return any(impure(c) for _, c in node.children())

    def flow(rhs: c_ast.Node | None, target: str) -> None:
        if rhs is None:
            return
        if impure(rhs):
            visit(rhs)
            return
        for n in names_in(rhs):
            flows.setdefault(n, set()).add(target)

    def statement_expr(node: c_ast.Node) -> bool:
        """A statement-level assignment or increment of a plain variable: handled here."""
        if isinstance(node, c_ast.Assignment) and isinstance(node.lvalue, c_ast.ID):
            w = node.lvalue.name
            assigned.add(w)
            flow(node.rvalue, w)
            if node.op != "=":
                flows.setdefault(w, set()).add(w)
            return True
        if isinstance(node, c_ast.UnaryOp) and node.op in _INC and isinstance(node.expr, c_ast.ID):
            assigned.add(node.expr.name)
            return True
        if isinstance(node, c_ast.ExprList):
            for e in node.exprs:
                if not statement_expr(e):
                    visit(e)
            return True
        return False

    def visit(node: c_ast.Node | None) -> None:
        if node is None:
            return
        if isinstance(node, c_ast.Compound):
            for item in node.block_items or []:
                if not statement_expr(item):
                    visit(item)
            return
        if isinstance(node, c_ast.For):
            for part in (node.init, node.next):
                if part is not None and not statement_expr(part):
                    visit(part)
            visit(node.cond)
            visit(node.stmt)
            return
        if isinstance(node, c_ast.If | c_ast.While | c_ast.DoWhile | c_ast.Label | c_ast.Case
                      | c_ast.Default):
            for name, c in node.children():
                # a condition's value is used: only the branches hold statements
                if name in ("cond", "expr") or not statement_expr(c):
                    visit(c)
            return
        if isinstance(node, c_ast.Decl):
            if isinstance(node.type, c_ast.TypeDecl) and node.name:
                assigned.add(node.name)
                flow(node.init, node.name)
            elif node.init is not None:
                visit(node.init)
            return
        if isinstance(node, c_ast.ID):
            seeds.add(node.name)
            return
        if isinstance(node, c_ast.FuncCall):
            if node.args is not None:
                visit(node.args)
            return
        for _, c in node.children():
            visit(c)

    for ext in ast.ext:
        if isinstance(ext, c_ast.FuncDef):
            visit(ext.body)
        elif isinstance(ext, c_ast.Decl):
            visit(ext)
    relevant = set(seeds)
    work = list(seeds)
    back: dict[str, set[str]] = {}
    for src, dsts in flows.items():
        for d in dsts:
            back.setdefault(d, set()).add(src)
    while work:
        w = work.pop()
        for src in back.get(w, ()):
            if src not in relevant:
                relevant.add(src)
                work.append(src)
    return frozenset(assigned - relevant)
