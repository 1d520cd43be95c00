"""Candidate locations: every loop head gets a stable label, shown to the model as a marker.

Labels are `verifiers.cfront.loop_sites` numbers (1..k in source order), the same numbers
the embedded verifier uses for the invariants it reports, so an answer
``location: INVARIANT_MARKER_2`` maps back to exactly one loop.  The program the model
sees is the preprocessed program (comments removed, so an SV-COMP comment that explains
why a task is incorrect does not leak the verdict), re-printed with one line
``INVARIANT_MARKER_k();`` immediately before loop k, in the spirit of wonda's harness.

A marker stands for the loop *head*: the point reached on entry and after every
iteration, before the loop condition is evaluated.  `tasks.invbench.instrument` puts ψ
exactly there.

Placement ``body`` (``-o prompt=wonda``) puts the marker where wonda's harness puts it:
as the first statement of loop k's body (a body that is one statement is wrapped in a
block), the point reached each time the loop condition has held.  The label k is the same
loop number, so a body-start marker maps back to its loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from pycparser import c_ast

from veribatch.verifiers import cfront

MARKER = "INVARIANT_MARKER_{k}"
Placement = Literal["head", "body"]
PLACEMENTS: tuple[Placement, ...] = ("head", "body")


@dataclass(frozen=True)
class MarkedProgram:
    text: str  # the program shown to the model
    labels: list[int]
    lines: dict[int, int]  # label → line of the loop keyword in the original program
    scopes: dict[int, dict[str, str]]  # label → variables in scope at the loop head


def _parents(node: c_ast.Node) -> Iterator[tuple[c_ast.Node, str, c_ast.Node]]:
    for name, child in node.children():
        yield node, name, child
        yield from _parents(child)


def replace_node(root: c_ast.Node, old: c_ast.Node, new: c_ast.Node) -> None:
    """Put `new` where `old` is in the tree under `root` (pycparser has no parent links)."""
    for parent, name, child in _parents(root):
        if child is old:
            if "[" in name:
                attr, idx = name[:-1].split("[")
                getattr(parent, attr)[int(idx)] = new
            else:
                setattr(parent, name, new)
            return
    raise ValueError("node not found in tree")


def insert_before(root: c_ast.Node, target: c_ast.Node, stmts: list[c_ast.Node]) -> None:
    """Insert statements right before `target` (a statement), wrapping it in a block if needed."""
    for parent, _name, child in _parents(root):
        if child is target and isinstance(parent, c_ast.Compound):
            items = parent.block_items
            pos = next(i for i, it in enumerate(items) if it is target)
            items[pos:pos] = stmts
            return
    replace_node(root, target, c_ast.Compound([*stmts, target]))


def marker_call(label: int) -> c_ast.FuncCall:
    return c_ast.FuncCall(c_ast.ID(MARKER.format(k=label)), None)


def insert_at_body_start(loop: c_ast.Node, stmts: list[c_ast.Node]) -> None:
    """Make `stmts` the first statements of `loop`'s body (a While, For or DoWhile)."""
    body = loop.stmt
    if isinstance(body, c_ast.Compound):
        body.block_items = [*stmts, *(body.block_items or [])]
    else:
        loop.stmt = c_ast.Compound([*stmts, body if body is not None else c_ast.EmptyStatement()])


def mark(program: str, *, filename: str = "<program>", placement: Placement = "head") -> MarkedProgram:
    """The program with ``INVARIANT_MARKER_k();`` before each loop (``head``) or as the first
    statement of each loop's body (``body``); raises `cfront.CParseError`."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement {placement!r}: expected one of {', '.join(PLACEMENTS)}")
    ast = cfront.parse(program, filename=filename)
    sites = cfront.loop_sites(ast)
    scopes = {s.label: cfront.variables_in_scope(ast, s) for s in sites}
    for site in sites:
        if placement == "body":
            insert_at_body_start(site.node, [marker_call(site.label)])
        else:
            insert_before(ast, site.node, [marker_call(site.label)])
    return MarkedProgram(
        text=cfront.to_source(ast),
        labels=[s.label for s in sites],
        lines={s.label: s.line for s in sites},
        scopes=scopes,
    )
