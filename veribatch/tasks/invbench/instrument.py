"""The two programs of the decision procedure (§3.2), built on the C AST.

    d_a = V(P, ∅, q):   ψ asserted at loop head ℓ; the original target not asserted.
    d_b = V(P, {q}, p*): ψ assumed at ℓ; the original target asserted as it was.

The target of an SV-COMP program is "``reach_error()`` is unreachable".  For d_a every
original call of ``reach_error()`` becomes ``abort()``: the execution still ends where P
would have ended it (reach_error never returns in SV-COMP programs), but reaching it is
no longer an error, so the only error left is ψ failing.  Both programs are plain C in
SV-COMP form (``reach_error``/``abort``), which the embedded z3 verifier and Ultimate
Automizer both read.

ψ sits at the loop *head*, checked on entry and after each iteration before the loop
condition is evaluated (the cut point of the loop), so a condition with side effects
(``while (counter++ < 5)``) is handled exactly::

    while (c) S          →  while (1) { CHECK; if (!(c)) break; S }
    for (i; c; n) S      →  for (i; ; n) { CHECK; if (!(c)) break; S }
    do S while (c)       →  do { CHECK; S } while (c)

A ``continue`` in S reaches CHECK again, as it reaches the head in the original loop.

Placement ``body`` (``-o prompt=wonda``, `markers` placement ``body``) puts ψ where wonda's
harness puts it: at the start of the loop body, reached each time the condition held
(after any side effect of the condition)::

    while (c) S          →  while (c) { CHECK; S }
    for (i; c; n) S      →  for (i; c; n) { CHECK; S }
    do S while (c)       →  do { CHECK; S } while (c)

This is the check wonda makes: its d_a/d_b replace the body-start marker by
``assert(ψ)``/``assume(ψ)`` (`if (!ψ) reach_error()` / `if (!ψ) abort()`).  It is a weaker
claim than a head invariant: ψ need not hold when the loop exits.

`instrument_all` does the same for a *set* of invariants q₁…qₙ at several loops (§5.4:
all of a program's UAutomizer invariants supplied together): d_a asserts every ψᵢ at its
loop head (the set is proved only if each of them holds), d_b assumes every one.
"""

from __future__ import annotations

from dataclasses import dataclass

from pycparser import c_ast

from veribatch.tasks.invbench.markers import Placement, insert_at_body_start, replace_node
from veribatch.verifiers import cfront

ERROR_FN = "reach_error"
# Calls that are the target in SV-COMP programs (reach_error's own body is left alone).
TARGET_CALLS = frozenset({ERROR_FN, "__VERIFIER_error", "__assert_fail"})


# The conjunction of a loop's ψs, as deep as the verifiers' C front end re-reads within
# Python's default recursion limit (every printed level is a pair of parentheses).
MAX_INSTRUMENTED_DEPTH = 80


def _depth(expr: c_ast.Node) -> int:
    """An expression's depth, without recursion."""
    deepest, stack = 0, [(expr, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((child, d + 1) for _, child in node.children())
    return deepest


class InstrumentationError(ValueError):
    """The program cannot be instrumented (no target, unknown loop, odd target call)."""


@dataclass(frozen=True)
class Instrumented:
    check_invariant: str  # d_a's program
    use_invariant: str  # d_b's program


def _call(name: str) -> c_ast.FuncCall:
    return c_ast.FuncCall(c_ast.ID(name), None)


def _not(expr: c_ast.Node) -> c_ast.UnaryOp:
    return c_ast.UnaryOp("!", expr)


def _loop_head(loop: c_ast.Node, check: c_ast.Node) -> c_ast.Node:
    body = loop.stmt if loop.stmt is not None else c_ast.EmptyStatement()
    if isinstance(loop, c_ast.DoWhile):
        return c_ast.DoWhile(loop.cond, c_ast.Compound([check, body]), loop.coord)
    exit_ = [] if loop.cond is None else [c_ast.If(_not(loop.cond), c_ast.Break(), None)]
    new_body = c_ast.Compound([check, *exit_, body])
    if isinstance(loop, c_ast.While):
        return c_ast.While(c_ast.Constant("int", "1"), new_body, loop.coord)
    assert isinstance(loop, c_ast.For)
    return c_ast.For(loop.init, None, loop.next, new_body, loop.coord)


class _TargetCalls(c_ast.NodeVisitor):
    """Every target call (``reach_error()``...) in statement position, with its parent."""

    def __init__(self) -> None:
        self.sites: list[tuple[c_ast.Node, str]] = []
        self.in_expression: list[c_ast.Node] = []

    def generic_visit(self, node: c_ast.Node) -> None:
        for name, child in node.children():
            if isinstance(child, c_ast.FuncCall) and _is_target(child):
                if isinstance(node, c_ast.Compound | c_ast.Label | c_ast.If | c_ast.Case | c_ast.Default):
                    self.sites.append((node, name))
                else:
                    self.in_expression.append(child)
            else:
                self.visit(child)


def _is_target(call: c_ast.FuncCall) -> bool:
    return isinstance(call.name, c_ast.ID) and call.name.name in TARGET_CALLS


def _declares(ast: c_ast.FileAST, name: str) -> bool:
    return any(isinstance(e, c_ast.Decl | c_ast.FuncDef) and _name(e) == name for e in ast.ext)


def _name(ext: c_ast.Node) -> str | None:
    return ext.decl.name if isinstance(ext, c_ast.FuncDef) else getattr(ext, "name", None)


def _abort_decl() -> c_ast.Decl:
    fdecl = c_ast.FuncDecl(
        c_ast.ParamList([c_ast.Typename(None, [], None, c_ast.TypeDecl(None, [], None, c_ast.IdentifierType(["void"])))]),
        c_ast.TypeDecl("abort", [], None, c_ast.IdentifierType(["void"])),
    )
    return c_ast.Decl("abort", [], [], ["extern"], [], fdecl, None, None)


def _prepare(program: str, labels: list[int], filename: str) -> tuple[c_ast.FileAST, dict[int, c_ast.Node]]:
    ast = cfront.parse(program, filename=filename)
    if not any(isinstance(e, c_ast.FuncDef) and e.decl.name == ERROR_FN for e in ast.ext) and not _declares(ast, ERROR_FN):
        raise InstrumentationError(f"{filename}: no {ERROR_FN}() target in the program")
    sites = {s.label: s for s in cfront.loop_sites(ast)}
    missing = sorted(set(labels) - set(sites))
    if missing:
        raise InstrumentationError(f"{filename}: no loop {', '.join(map(str, missing))} (loops: {sorted(sites)})")
    if not _declares(ast, "abort"):
        ast.ext.insert(0, _abort_decl())
    return ast, {label: sites[label].node for label in labels}


def instrument(program: str, label: int, predicate: c_ast.Node | str, *, filename: str = "<program>",
               placement: Placement = "head") -> Instrumented:
    """d_a's and d_b's programs for ψ (an expression node or validated C text) at loop `label`."""
    return instrument_all(program, [(label, predicate)], filename=filename, placement=placement)


def instrument_all(
    program: str, invariants: list[tuple[int, c_ast.Node | str]], *, filename: str = "<program>",
    placement: Placement = "head",
) -> Instrumented:
    """d_a's and d_b's programs for a set of invariants (loop label, ψ); ψs of one loop are
    conjoined and checked at the loop head or at its body's start (`placement`).  ψs come
    bounded (`validation.validate`); a set whose conjunction is still too deep for the
    recursive C parser and printer is refused, never a `RecursionError`."""
    try:
        return _instrument_all(program, invariants, filename=filename, placement=placement)
    except RecursionError:
        raise InstrumentationError(f"{filename}: the invariants are nested too deeply to instrument") from None


def _place(ast: c_ast.FileAST, loop: c_ast.Node, check: c_ast.Node, placement: Placement) -> None:
    if placement == "body":
        insert_at_body_start(loop, [check])
    else:
        replace_node(ast, loop, _loop_head(loop, check))


def _instrument_all(
    program: str, invariants: list[tuple[int, c_ast.Node | str]], *, filename: str, placement: Placement
) -> Instrumented:
    if not invariants:
        raise InstrumentationError(f"{filename}: no invariant to instrument")
    by_loop: dict[int, list[str]] = {}
    for label, predicate in invariants:
        text = predicate if isinstance(predicate, str) else cfront.to_source(predicate)
        by_loop.setdefault(label, []).append(text)

    def psi(label: int) -> c_ast.Node:
        parts = [cfront.parse_expression(p, filename="<predicate>") for p in by_loop[label]]
        expr = parts[0]
        for part in parts[1:]:
            expr = c_ast.BinaryOp("&&", expr, part)
        depth = _depth(expr)
        if depth > MAX_INSTRUMENTED_DEPTH:
            raise InstrumentationError(f"{filename}: the invariants of loop {label} are nested too deeply "
                                       f"together ({depth} levels, at most {MAX_INSTRUMENTED_DEPTH})")
        return expr

    labels = sorted(by_loop)
    # d_a: neutralise the original target first, then add the ψ assertions at their loops.
    ast_a, loops_a = _prepare(program, labels, filename)
    finder = _TargetCalls()
    for ext in ast_a.ext:
        if isinstance(ext, c_ast.FuncDef) and ext.decl.name != ERROR_FN:
            finder.visit(ext)
    if finder.in_expression:
        raise InstrumentationError(
            f"{filename}: {ERROR_FN}() used inside an expression; cannot drop the target for d_a"
        )
    for parent, name in finder.sites:
        new = _call("abort")
        if "[" in name:
            attr, idx = name[:-1].split("[")
            getattr(parent, attr)[int(idx)] = new
        else:
            setattr(parent, name, new)
    for label in labels:
        assert_psi = c_ast.If(_not(psi(label)), c_ast.Compound([_call(ERROR_FN)]), None)
        _place(ast_a, loops_a[label], assert_psi, placement)

    # d_b: the target stays; every ψ is assumed at its loop.
    ast_b, loops_b = _prepare(program, labels, filename)
    for label in labels:
        assume_psi = c_ast.If(_not(psi(label)), c_ast.Compound([_call("abort")]), None)
        _place(ast_b, loops_b[label], assume_psi, placement)
    return Instrumented(check_invariant=cfront.to_source(ast_a), use_invariant=cfront.to_source(ast_b))
