"""A verifier's loop invariant made a C predicate over the loop head's scope (§5.4 arm only).

Ultimate reports invariants over *its* variables, not only the program's: the parameter of
an inlined ``__VERIFIER_assert`` (``cond``), SSA names (``ULTIMATE.start_main_~R~0#1``),
heap arrays (``unknown-#memory_int-unknown[f][f]``), and quantifiers over them
(``\\exists x : int :: …``, ``forall x : int :: …``).  None of these is in scope at the
loop head, so the validator rejected the whole invariant — 4 of 10 TRUE easy programs lost
their only loop invariant to a ``cond == 1`` conjunct.

Those parts are dead at the loop head, and removing them keeps the invariant true:
- every *atom* (a comparison, a quantifier…) that mentions a name not in scope is replaced
  by ``1`` where it occurs positively (under ``&&``/``||``) and by ``0`` under ``!``.  That
  only weakens ψ, so ψ stays an invariant wherever the original is one; for a top-level
  conjunct over dead names only (``cond == 1``, ``\\exists R' :: …``) it is exactly the
  projection onto the live variables.
- ``forall x : int :: B`` where ``x`` is the SSA name of a program variable in scope
  (``ULTIMATE.start_main_~R~0#1`` → ``R``) becomes ``B[x := R]``: an instance of the
  ∀ (∀x. B ⇒ B[R/x]), so again implied — the quantifier mapped back to the variable.

Model answers never go through here: a model's ψ is judged as written (§3.3).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pycparser import c_ast, c_generator

from veribatch.tasks.invbench.validation import parse_expression

# `(\exists x : int :: …)`, `(forall v_ArrVal_1 : int, y : int :: …)` — Ultimate's syntax
_QUANTIFIER = re.compile(r"\(\s*\\?(forall|exists)\s+((?:[^:()]+?\s*:\s*[\w\[\]]+\s*,?\s*)+?)::")
# an SSA name of a program variable: [v_][ULTIMATE.start_]<procedure>_~<var>[~N][#N][_N]
_SSA = re.compile(r"^(?:v_)?(?:ULTIMATE\.start_)?\w*?_~([A-Za-z_]\w*?)(?:~\d+)?(?:#\d+)?(?:_\d+)?$")
# Ultimate's own names that are not C: SSA names, heap arrays, \old(…)
_NON_C_NAME = re.compile(r"unknown-#[\w]+-unknown|[A-Za-z_][\w.]*~[\w~#.]*|\\old")
_DEAD = "__veribatch_dead_{}"


@dataclass
class Scoped:
    """ψ over the loop head's scope (None: nothing of it is left), and what was removed."""

    predicate: str | None
    removed: list[str] = field(default_factory=list)


def _closing(text: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced parentheses")


def _bound_names(binders: str) -> list[str]:
    return [b.split(":")[0].strip() for b in binders.split(",") if b.strip()]


class _Rewriter:
    def __init__(self, scope: Mapping[str, str]) -> None:
        self.scope = scope
        self.dead: dict[str, str] = {}  # placeholder → the Ultimate text it stands for
        self.removed: list[str] = []

    def placeholder(self, original: str) -> str:
        name = _DEAD.format(len(self.dead))
        self.dead[name] = original
        return name

    def quantifiers(self, text: str) -> str:
        """Quantifiers replaced, innermost last: a ∀ over a program variable's SSA name by
        its instance at that variable, anything else by a dead placeholder."""
        m = _QUANTIFIER.search(text)
        if m is None:
            return text
        close = _closing(text, m.start())
        body = text[m.end():close]
        kind, names = m.group(1), _bound_names(m.group(2))
        targets = [(_SSA.match(n).group(1) if _SSA.match(n) else None) for n in names]
        if kind == "forall" and all(t is not None and t in self.scope for t in targets):
            for name, target in zip(names, targets, strict=True):
                body = re.sub(rf"(?<![\w.~#]){re.escape(name)}(?![\w~#])", str(target), body)
            self.removed.append(f"forall over {', '.join(names)} instantiated at {', '.join(map(str, targets))}")
            middle = "(" + self.quantifiers(body) + ")"
        else:
            middle = self.placeholder(text[m.start():close + 1])
        return text[:m.start()] + middle + self.quantifiers(text[close + 1:])

    def names(self, text: str) -> str:
        return _NON_C_NAME.sub(lambda m: self.placeholder(m.group(0)), text)


_GEN = c_generator.CGenerator()


def _ids(node: c_ast.Node) -> set[str]:
    found: set[str] = set()

    class V(c_ast.NodeVisitor):
        def visit_ID(self, n: c_ast.ID) -> None:
            found.add(n.name)

        def visit_StructRef(self, n: c_ast.StructRef) -> None:
            self.visit(n.name)

        def visit_Cast(self, n: c_ast.Cast) -> None:
            self.visit(n.expr)

    V().visit(node)
    return found


def _const(node: c_ast.Node) -> str | None:
    return node.value if isinstance(node, c_ast.Constant) and node.value in ("0", "1") else None


def _prune(node: c_ast.Node, positive: bool, live: set[str], rw: _Rewriter) -> c_ast.Node:
    if isinstance(node, c_ast.BinaryOp) and node.op in ("&&", "||"):
        left = _prune(node.left, positive, live, rw)
        right = _prune(node.right, positive, live, rw)
        unit, zero = ("1", "0") if node.op == "&&" else ("0", "1")
        if _const(left) == zero or _const(right) == zero:
            return c_ast.Constant("int", zero)
        if _const(left) == unit:
            return right
        if _const(right) == unit:
            return left
        return c_ast.BinaryOp(node.op, left, right)
    if isinstance(node, c_ast.UnaryOp) and node.op == "!":
        inner = _prune(node.expr, not positive, live, rw)
        c = _const(inner)
        return c_ast.Constant("int", "0" if c == "1" else "1") if c is not None else c_ast.UnaryOp("!", inner)
    dead = _ids(node) - live
    if not dead:
        return node
    text = _GEN.visit(node)
    for name, original in rw.dead.items():
        text = text.replace(name, original)
    rw.removed.append(text)
    return c_ast.Constant("int", "1" if positive else "0")


def to_scope(invariant: str, scope: Mapping[str, str]) -> Scoped:
    """`invariant` (Ultimate's syntax) over the variables of `scope` (name → C type)."""
    rw = _Rewriter(scope)
    try:
        text = rw.names(rw.quantifiers(invariant))
        expr = parse_expression(text)
    except ValueError:
        return Scoped(invariant)  # not ours to fix: the validator says what is wrong
    live = set(scope) | {"true", "false"}
    try:
        pruned = _prune(expr, True, live, rw)
        if _const(pruned) == "1" and rw.removed:  # only dead parts: nothing of it is left
            return Scoped(None, rw.removed)
        return Scoped(_GEN.visit(pruned) if rw.removed else invariant, rw.removed)
    except RecursionError:
        return Scoped(invariant)
