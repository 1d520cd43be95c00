"""Syntactic validation of a candidate predicate ψ (InvBench §3.3).

Before any verifier runs, ψ must be a *state predicate*: a side-effect-free boolean C
expression over the variables in scope at its location.  Inserting it as ``assume(ψ)``
must not change the program state, so assignments (``a += 1``), increments, calls
(which may have effects) and the comma operator are rejected; so are identifiers that
are not in scope and expressions that are not conditions (``x + 1``).  The accepted ψ
is returned in a canonical spelling (pycparser's), which is what Best-of-N deduplicates
on and what the instrumented programs contain.

What ψ may contain is an allow-list (`_ALLOWED_NODES`): variables, constants, operators,
subscripts, field accesses and casts to a *named* scalar or pointer type; anything else
(a call hidden in an array declarator of a cast's type, a compound literal, a statement
expression) is ``unsupported``.  ψ is bounded before any recursive pass sees it
(`MAX_PREDICATE_CHARS`, `MAX_PREDICATE_DEPTH`, `MAX_PREDICATE_NODES`, measured without
recursion): the instrumented programs re-parse the canonical spelling, whose parentheses
cost the recursive C parser several frames a level, so a 150-conjunct chain is recorded as
``too_large`` rather than raising `RecursionError` in a shard.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pycparser import c_ast, c_generator

from veribatch.verifiers.cfront import CParseError
from veribatch.verifiers.cfront import parse_expression as _cfront_expression

_RELATIONAL = {"<", "<=", ">", ">=", "==", "!=", "&&", "||"}
_SIDE_EFFECT_UNARY = {"++", "--", "p++", "p--"}
_ALLOWED_UNARY = {"!", "-", "+", "~", "*", "sizeof"}
_BOOL_TYPES = {"_Bool", "bool"}
_CONSTANT_NAMES = {"true": "1", "false": "0"}

MAX_PREDICATE_CHARS = 16_384
MAX_PREDICATE_DEPTH = 64
MAX_PREDICATE_NODES = 2_000

# Expression nodes ψ may contain; type nodes only below a Cast or sizeof (`_type_problem`).
_ALLOWED_NODES = (c_ast.BinaryOp, c_ast.UnaryOp, c_ast.TernaryOp, c_ast.ID, c_ast.Constant,
                  c_ast.ArrayRef, c_ast.StructRef, c_ast.Cast, c_ast.Typename)


@dataclass(frozen=True)
class Valid:
    canonical: str  # ψ re-printed by pycparser, true/false folded to 1/0
    expr: c_ast.Node = field(repr=False, compare=False)


@dataclass(frozen=True)
class Invalid:
    kind: str  # "unparsable" | "side_effect" | "unknown_variable" | "non_boolean" | "unsupported" | "too_large"
    reason: str


def parse_expression(text: str) -> c_ast.Node:
    """ψ as a pycparser expression node (through the shared C front end, so macros such as
    INT_MAX and true/false mean what they mean in the program); `ValueError` otherwise."""
    if not text.strip() or any(tok in text for tok in ("{", "}", "#", ";")):
        raise ValueError("not a single C expression")
    try:
        return _cfront_expression(text, filename="<predicate>")
    except CParseError as e:
        raise ValueError(str(e)) from e
    except RecursionError:  # UAutomizer's invariants nest hundreds of levels deep
        raise ValueError("nested too deeply to parse") from None


class _Checker(c_ast.NodeVisitor):
    def __init__(self, scope: Mapping[str, str]) -> None:
        self.scope = scope
        self.problem: Invalid | None = None

    def fail(self, kind: str, reason: str) -> None:
        if self.problem is None:
            self.problem = Invalid(kind, reason)

    def visit_Assignment(self, node: c_ast.Assignment) -> None:
        self.fail("side_effect", f"assignment '{node.op}' changes the program state")

    def visit_FuncCall(self, node: c_ast.FuncCall) -> None:
        self.fail("side_effect", "function calls are not allowed (they may have side effects)")

    def visit_ExprList(self, node: c_ast.ExprList) -> None:
        self.fail("side_effect", "the comma operator is not allowed")

    def visit_UnaryOp(self, node: c_ast.UnaryOp) -> None:
        if node.op in _SIDE_EFFECT_UNARY:
            self.fail("side_effect", f"'{node.op.lstrip('p')}' changes the program state")
        elif node.op not in _ALLOWED_UNARY:
            self.fail("unsupported", f"unary operator '{node.op}' is not allowed")
        else:
            self.generic_visit(node)

    def visit_ID(self, node: c_ast.ID) -> None:
        if node.name not in self.scope and node.name not in _CONSTANT_NAMES:
            known = ", ".join(sorted(self.scope)) or "none"
            self.fail("unknown_variable", f"'{node.name}' is not in scope here (in scope: {known})")

    def visit_Constant(self, node: c_ast.Constant) -> None:
        if node.type == "string":
            self.fail("non_boolean", "string literals are not predicates")

    def visit_StructRef(self, node: c_ast.StructRef) -> None:
        self.visit(node.name)  # the field name is not a variable

    def visit_CompoundLiteral(self, node: c_ast.CompoundLiteral) -> None:
        self.fail("unsupported", "compound literals are not allowed")

    def visit_Cast(self, node: c_ast.Cast) -> None:
        problem = _type_problem(node.to_type)
        if problem:
            self.fail("unsupported", f"cast to {problem}")
        self.visit(node.expr)

    def visit_Typename(self, node: c_ast.Typename) -> None:  # sizeof(type)
        problem = _type_problem(node)
        if problem:
            self.fail("unsupported", f"sizeof of {problem}")

    def generic_visit(self, node: c_ast.Node) -> None:
        if not isinstance(node, _ALLOWED_NODES):
            self.fail("unsupported", f"{type(node).__name__} is not allowed in a predicate")
            return
        super().generic_visit(node)


def _type_problem(typename: c_ast.Node) -> str | None:
    """Why a cast's type is not a named scalar (``int``, ``unsigned long``, a typedef name)
    or a pointer to one, or None.  Array and function declarators are refused: their sizes
    and parameters are expressions the predicate would smuggle into the program."""
    node = typename.type if isinstance(typename, c_ast.Typename) else None
    while isinstance(node, c_ast.PtrDecl):
        node = node.type
    if isinstance(node, c_ast.TypeDecl) and isinstance(node.type, c_ast.IdentifierType):
        return None
    what = type(node).__name__ if node is not None else type(typename).__name__
    return f"a type built with {what} (only named scalar types and pointers to them)"


def _shape(expr: c_ast.Node) -> tuple[int, int]:
    """(depth, node count) of an AST, without recursion."""
    depth, count = 0, 0
    stack = [(expr, 1)]
    while stack:
        node, d = stack.pop()
        count += 1
        depth = max(depth, d)
        stack.extend((child, d + 1) for _, child in node.children())
    return depth, count


def is_boolean(node: c_ast.Node, scope: Mapping[str, str]) -> bool:
    """Whether `node` is a condition: comparison, logic, `!`, 0/1, true/false or a _Bool."""
    if isinstance(node, c_ast.BinaryOp):
        return node.op in _RELATIONAL
    if isinstance(node, c_ast.UnaryOp):
        return node.op == "!"
    if isinstance(node, c_ast.TernaryOp):
        return is_boolean(node.iftrue, scope) and is_boolean(node.iffalse, scope)
    if isinstance(node, c_ast.Constant):
        return node.type == "int" and node.value in ("0", "1")
    if isinstance(node, c_ast.ID):
        return node.name in _CONSTANT_NAMES or scope.get(node.name, "").strip() in _BOOL_TYPES
    return False


class _FoldConstants(c_ast.NodeVisitor):
    """Replace `true`/`false` by 1/0 so the instrumented program needs no <stdbool.h>."""

    def generic_visit(self, node: c_ast.Node) -> None:
        for name, child in node.children():
            if isinstance(child, c_ast.ID) and child.name in _CONSTANT_NAMES:
                const = c_ast.Constant("int", _CONSTANT_NAMES[child.name])
                _replace_child(node, name, const)
            else:
                self.visit(child)


def _replace_child(parent: c_ast.Node, name: str, new: c_ast.Node) -> None:
    if "[" in name:
        attr, idx = name[:-1].split("[")
        getattr(parent, attr)[int(idx)] = new
    else:
        setattr(parent, name, new)


def validate(predicate: str, scope: Mapping[str, str]) -> Valid | Invalid:
    """Check ψ against the variables in scope at its location (name → C type)."""
    if len(predicate) > MAX_PREDICATE_CHARS:
        return Invalid("too_large", f"{len(predicate)} characters (at most {MAX_PREDICATE_CHARS})")
    try:
        expr = parse_expression(predicate)
    except ValueError as e:
        return Invalid("unparsable", f"not a C expression: {e}")
    depth, count = _shape(expr)
    if depth > MAX_PREDICATE_DEPTH or count > MAX_PREDICATE_NODES:
        return Invalid("too_large", f"nested {depth} levels, {count} nodes (at most {MAX_PREDICATE_DEPTH} "
                                    f"levels, {MAX_PREDICATE_NODES} nodes)")
    checker = _Checker(scope)
    checker.visit(expr)
    if checker.problem:
        return checker.problem
    if not is_boolean(expr, scope):
        return Invalid("non_boolean", f"{predicate!r} is not a condition (use a comparison or logic)")
    holder = c_ast.Return(expr)
    _FoldConstants().visit(holder)
    canonical = c_generator.CGenerator().visit(holder.expr)
    return Valid(canonical=canonical, expr=holder.expr)
