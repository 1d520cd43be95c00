"""LaM4Inv's loop programs as SV-COMP programs, and what CE-Bench reads off them.

LaM4Inv's benchmark (Code2Inv style) writes a program as one ``main``: declarations,
pre-conditions (assignments and ``assume(c)``), ONE ``while`` loop whose condition or body
may call ``unknown()`` (a nondeterministic choice), then a post-condition ``assert``.  It
is not an SV-COMP program (no ``reach_error``, undeclared ``unknown``/``assume``/``assert``,
uninitialised variables standing for inputs), so both the embedded verifier and
UAutomizer need it normalised (`normalise`):

* every uninitialised local becomes an explicit input, ``int x = __VERIFIER_nondet_int();``
  (``unsigned int`` → ``__VERIFIER_nondet_uint()``, …);
* ``unknown()`` (and the misspelt ``unkown()`` of two upstream files) →
  ``__VERIFIER_nondet_int()``; ``assume(c)`` → ``assume_abort_if_not(c)``;
  ``assert(c)`` → ``__VERIFIER_assert(c)``; the SV-COMP prelude defines them.

The same normalised program is what the counterexamples are computed on
(`counterexamples`), so variable names, types and the loop are one and the same for
the solver, the labelling verifier and the prompt.

It also yields, as C expressions over the variables at the loop head:

* P, the pre-condition as a *state* predicate (`LoopProgram.precondition`): the loop-free
  code before the loop executed symbolically — ``x = 1; assume(n > 0); y = n;`` gives
  ``x == 1 && n > 0 && y == n``.  Code whose effect cannot be written over the final
  values alone (a variable read, then overwritten: P would need ∃) leaves P undefined,
  with the reason; the OMT categories are then skipped for that program, by name.
* B, the loop guard with every ``unknown()`` eliminated exactly (``B[u:=1] || B[u:=0]``:
  a nondeterministic choice can go either way).

The paper never says how P is written.  `lam4inv_precondition` is the other reading on
offer: P as LaM4Inv's own ``extract_preconditions.py`` reads it off the program *text*
(a named construction option, ``-o precondition=lam4inv``).  It is lossy by design: it
sees ``x = 1;`` but not Code2Inv's ``(x = 1);``, nor an ``assume`` with nested
parentheses, nor a negative literal, so many programs get a weaker (often empty) P.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from pycparser import c_ast

from veribatch.verifiers import cfront

Site = Literal["body_start", "body_end"]

NONDET_CALLS = frozenset({"unknown", "unkown", "nondet", "__VERIFIER_nondet_int"})
ASSUME_CALLS = frozenset({"assume", "__VERIFIER_assume", "assume_abort_if_not"})
ASSERT_CALLS = frozenset({"assert", "__VERIFIER_assert"})
# C type → suffix of its SV-COMP nondet function (``__VERIFIER_nondet_<suffix>``).
NONDET_SUFFIX = {
    "int": "int", "signed int": "int", "unsigned int": "uint", "unsigned": "uint",
    "short": "short", "unsigned short": "ushort", "long": "long", "unsigned long": "ulong",
    "long long": "longlong", "unsigned long long": "ulonglong", "char": "char",
    "unsigned char": "uchar", "_Bool": "bool", "float": "float", "double": "double",
}
TYPE_RANGES = {
    "int": (-(2**31), 2**31 - 1), "signed int": (-(2**31), 2**31 - 1),
    "unsigned int": (0, 2**32 - 1), "unsigned": (0, 2**32 - 1),
    "short": (-(2**15), 2**15 - 1), "unsigned short": (0, 2**16 - 1),
    "long": (-(2**31), 2**31 - 1), "unsigned long": (0, 2**32 - 1),  # ILP32, as verified
    "long long": (-(2**63), 2**63 - 1), "unsigned long long": (0, 2**64 - 1),
    "char": (-128, 127), "unsigned char": (0, 255), "_Bool": (0, 1),
}
CHECKPOINT = "__CEBENCH_CHECKPOINT"

PRELUDE = """\
extern void abort(void);
extern void __assert_fail(const char *, const char *, unsigned int, const char *);
void reach_error(void) {{ __assert_fail("0", "{file}", 0, "reach_error"); }}
{nondets}
void assume_abort_if_not(int cond) {{ if (!cond) {{ abort(); }} }}
void __VERIFIER_assert(int cond) {{ if (!(cond)) {{ ERROR: {{ reach_error(); abort(); }} }} return; }}
"""


class ProgramError(ValueError):
    """The file is not a LaM4Inv loop program we can normalise; the message names file and line."""


@dataclass
class LoopProgram:
    """One normalised program.  `main` is its ``main`` (post-condition included) as an AST."""

    file: str
    original: str
    header: str                  # the SV-COMP prelude (declarations before main)
    main: c_ast.FuncDef
    loop_index: int              # position of the loop among main's top-level statements
    variables: dict[str, str]    # loop-head variables in declaration order → C type
    precondition: str | None     # P over the loop-head variables (None: see precondition_note)
    precondition_note: str | None
    guard: str                   # B with nondeterministic choices eliminated
    notes: list[str] = field(default_factory=list)

    @property
    def loop(self) -> c_ast.While:
        node = self.main.body.block_items[self.loop_index]
        assert isinstance(node, c_ast.While)
        return node

    def text(self) -> str:
        """The whole normalised program, original post-condition kept (as __VERIFIER_assert)."""
        return self.header + "\n" + cfront.to_source(self.main)

    def instrumented(self, state: dict[str, int], site: Site) -> str:
        """§3.2.1: the post-condition dropped, ``__VERIFIER_assert(!(state))`` at `site`."""
        check = _call("__VERIFIER_assert", c_ast.UnaryOp("!", cfront.parse_expression(self.state_expr(state))))
        return self.header + "\n" + cfront.to_source(self._with_statement(check, site))

    def display(self, site: Site) -> str:
        """What a model is shown: main without its post-condition, a comment at `site`."""
        text = cfront.to_source(self._with_statement(_call(CHECKPOINT), site))
        lines = []
        for line in text.splitlines():
            if CHECKPOINT in line:
                indent = line[: len(line) - len(line.lstrip())]
                line = f"{indent}// <-- CHECK POINT: is the state reachable here?"
            lines.append(line)
        return "\n".join(lines).rstrip() + "\n"

    def state_expr(self, state: dict[str, int]) -> str:
        """``x == 1 && y == -2`` in declaration order; literals valid in the variable's type."""
        order = [v for v in self.variables if v in state] + sorted(set(state) - set(self.variables))
        return " && ".join(f"{v} == {c_literal(state[v], self.variables.get(v, 'int'))}" for v in order)

    def _with_statement(self, stmt: c_ast.Node, site: Site) -> c_ast.FuncDef:
        main = copy.deepcopy(self.main)
        items = main.body.block_items
        loop = items[self.loop_index]
        del items[self.loop_index + 1:]  # the post-condition (everything after the loop)
        body = loop.stmt if isinstance(loop.stmt, c_ast.Compound) else c_ast.Compound(
            [loop.stmt] if loop.stmt is not None else [])
        stmts = list(body.block_items or [])
        body.block_items = [stmt, *stmts] if site == "body_start" else [*stmts, stmt]
        loop.stmt = body
        return main


def c_literal(value: int, ctype: str) -> str:
    """A C literal of `value` that keeps its value in `ctype` (INT_MIN is not ``-2147483648``:
    that is ``-(2147483648)``, a long long in C99)."""
    lo, hi = TYPE_RANGES.get(ctype, (-(2**31), 2**31 - 1))
    if lo < 0 and value == lo:
        return f"({value + 1} - 1)"
    if ctype.startswith("unsigned") and value > 2**31 - 1:
        return f"{value}U"
    return str(value)


def _call(name: str, *args: c_ast.Node) -> c_ast.FuncCall:
    return c_ast.FuncCall(c_ast.ID(name), c_ast.ExprList(list(args)) if args else None)


def _type_name(decl: c_ast.Decl) -> str | None:
    t = decl.type
    if not isinstance(t, c_ast.TypeDecl) or not isinstance(t.type, c_ast.IdentifierType):
        return None
    return " ".join(t.type.names)


def _line(node: c_ast.Node | None) -> str:
    coord = getattr(node, "coord", None)
    return f"line {coord.line}" if coord is not None and coord.line else "?"


class _Rewrite(c_ast.NodeVisitor):
    """unknown() → nondet, assume/assert → the SV-COMP names (in place)."""

    def visit_FuncCall(self, node: c_ast.FuncCall) -> None:
        if isinstance(node.name, c_ast.ID):
            name = node.name.name
            if name in NONDET_CALLS:
                node.name = c_ast.ID("__VERIFIER_nondet_int")
                node.args = None
            elif name in ASSUME_CALLS:
                node.name = c_ast.ID("assume_abort_if_not")
            elif name in ASSERT_CALLS:
                node.name = c_ast.ID("__VERIFIER_assert")
        self.generic_visit(node)


def normalise(text: str, file: str) -> LoopProgram:
    """The SV-COMP form of a LaM4Inv program; `ProgramError` names what is not supported."""
    try:
        ast = cfront.parse(text, filename=file)
    except cfront.CParseError as e:
        raise ProgramError(str(e)) from None
    funcs = [e for e in ast.ext if isinstance(e, c_ast.FuncDef)]
    mains = [f for f in funcs if f.decl.name == "main"]
    if not mains:
        raise ProgramError(f"{file}: no main function")
    if len(funcs) > 1:
        others = ", ".join(f.decl.name for f in funcs if f.decl.name != "main")
        raise ProgramError(f"{file}: functions besides main ({others}) are not LaM4Inv's format")
    main = copy.deepcopy(mains[0])
    sites = cfront.loop_sites(ast)
    if len(sites) != 1:
        raise ProgramError(f"{file}: {len(sites)} loops; LaM4Inv programs have exactly one")
    items = list(main.body.block_items or [])
    loop_index = next((i for i, s in enumerate(items) if isinstance(s, c_ast.While)), None)
    if loop_index is None:
        raise ProgramError(f"{file}: the loop ({sites[0].kind}, {_line(sites[0].node)}) is not a "
                           "top-level while statement of main")
    notes: list[str] = []
    variables: dict[str, str] = {}
    nondet_types: set[str] = {"int"}
    for stmt in items[:loop_index]:
        if isinstance(stmt, c_ast.Decl):
            tname = _type_name(stmt)
            if tname is None:
                raise ProgramError(f"{file}: {_line(stmt)}: declaration of {stmt.name!r} is not a "
                                   "plain scalar")
            variables[stmt.name] = tname
            if stmt.init is None:
                suffix = NONDET_SUFFIX.get(tname)
                if suffix is None:
                    raise ProgramError(f"{file}: {_line(stmt)}: no nondet function for type {tname!r}")
                nondet_types.add(tname)
                stmt.init = _call(f"__VERIFIER_nondet_{suffix}")
    for stmt in items[loop_index + 1:]:
        if isinstance(stmt, c_ast.Decl):
            notes.append(f"declaration of {stmt.name} after the loop")
    main.body.block_items = items
    _Rewrite().visit(main)
    header = PRELUDE.format(
        file=file,
        nondets="\n".join(f"extern {t} __VERIFIER_nondet_{NONDET_SUFFIX[t]}(void);"
                          for t in sorted(nondet_types, key=lambda t: (t != "int", t))))
    precondition, pnote = _precondition(items[:loop_index], variables)
    loop = items[loop_index]
    guard = _eliminate_nondet(loop.cond)
    return LoopProgram(file=file, original=text, header=header, main=main, loop_index=loop_index,
                       variables=variables, precondition=precondition, precondition_note=pnote,
                       guard=guard, notes=notes)


# ------------------------------------------------------------------ pre-condition P


class _Unexpressible(Exception):
    pass


def _ids(node: c_ast.Node) -> Iterator[str]:
    if isinstance(node, c_ast.ID):
        yield node.name
    for _, child in node.children():
        if not (isinstance(node, c_ast.FuncCall) and child is node.name):
            yield from _ids(child)


def _subst(node: c_ast.Node, env: dict[str, c_ast.Node]) -> c_ast.Node:
    if isinstance(node, c_ast.ID):
        return copy.deepcopy(env[node.name]) if node.name in env else copy.deepcopy(node)
    if isinstance(node, c_ast.FuncCall):
        raise _Unexpressible(f"call {cfront.to_source(node)} inside an expression")
    new = copy.copy(node)
    for name, child in node.children():
        if "[" in name:
            attr, idx = name[:-1].split("[")
            lst = list(getattr(new, attr))
            lst[int(idx)] = _subst(child, env)
            setattr(new, attr, lst)
        else:
            setattr(new, name, _subst(child, env))
    return new


_COMPOUND_OPS = {"+=": "+", "-=": "-", "*=": "*", "/=": "/", "%=": "%"}


def _precondition(stmts: list[c_ast.Node], variables: dict[str, str]) -> tuple[str | None, str | None]:
    """P over the loop-head values: each variable equals its value expression over the inputs,
    plus the assumptions — valid when no input is read and then overwritten."""
    env: dict[str, c_ast.Node] = {}          # variable → value over input symbols (= names)
    assumptions: list[c_ast.Node] = []
    read: set[str] = set()                    # input symbols some value or assumption reads
    overwritten: set[str] = set()

    def assign(name: str, value: c_ast.Node | None, where: c_ast.Node) -> None:
        if name not in variables:
            raise _Unexpressible(f"{_line(where)}: assignment to undeclared {name!r}")
        if value is None:  # a fresh input: its symbol is the variable itself
            if name in read:
                raise _Unexpressible(f"{_line(where)}: {name} is read, then overwritten by an input")
            env.pop(name, None)
            overwritten.discard(name)
            return
        value = _subst(value, env)
        read.update(_ids(value))
        env[name] = value
        overwritten.add(name)

    try:
        for stmt in stmts:
            if isinstance(stmt, c_ast.Decl):
                init = stmt.init
                if init is None or _is_nondet(init):
                    assign(stmt.name, None, stmt)
                else:
                    assign(stmt.name, init, stmt)
            elif isinstance(stmt, c_ast.Assignment) and isinstance(stmt.lvalue, c_ast.ID):
                name = stmt.lvalue.name
                if stmt.op == "=":
                    assign(name, None if _is_nondet(stmt.rvalue) else stmt.rvalue, stmt)
                elif stmt.op in _COMPOUND_OPS:
                    assign(name, c_ast.BinaryOp(_COMPOUND_OPS[stmt.op], c_ast.ID(name), stmt.rvalue), stmt)
                else:
                    raise _Unexpressible(f"{_line(stmt)}: assignment operator {stmt.op}")
            elif isinstance(stmt, c_ast.UnaryOp) and stmt.op in ("p++", "p--", "++", "--") \
                    and isinstance(stmt.expr, c_ast.ID):
                op = "+" if "+" in stmt.op else "-"
                assign(stmt.expr.name, c_ast.BinaryOp(op, c_ast.ID(stmt.expr.name), c_ast.Constant("int", "1")), stmt)
            elif isinstance(stmt, c_ast.FuncCall) and isinstance(stmt.name, c_ast.ID) \
                    and stmt.name.name in ASSUME_CALLS | {"assume_abort_if_not"} and stmt.args is not None \
                    and len(stmt.args.exprs) == 1:
                cond = _subst(stmt.args.exprs[0], env)
                read.update(_ids(cond))
                assumptions.append(cond)
            elif isinstance(stmt, c_ast.EmptyStatement):
                continue
            else:
                raise _Unexpressible(f"{_line(stmt)}: statement {type(stmt).__name__} before the loop")
        stale = sorted(read & overwritten)
        if stale:
            raise _Unexpressible(f"the input value of {', '.join(stale)} is read before being overwritten")
    except _Unexpressible as e:
        return None, f"pre-condition not expressible over the loop-head state: {e}"
    parts: list[str] = []
    for name in variables:
        if name in env:
            value = cfront.to_source(env[name])
            if variables[name] not in ("int", "signed int") and not _is_small_literal(env[name]):
                value = f"({variables[name]}) ({value})"
            parts.append(f"{name} == {_paren(value)}")
    parts += [_paren(cfront.to_source(a)) for a in assumptions]
    return (" && ".join(parts) if parts else "1"), None


# LaM4Inv's textual reading of the code before the loop (see `lam4inv_precondition`).
_L4I_DECL = re.compile(r"int\s+([\w\s,=]+);")         # int a, b = 1, c = d;
_L4I_ASSIGN = re.compile(r"\b(\w+)\s*=\s*(\w+);")     # a = 1;  a = b;
_L4I_ASSUME = re.compile(r"assume\(([^)]+)\);")          # assume(c) without inner parentheses


def lam4inv_precondition(original: str) -> tuple[str, list[str]]:
    """P read off the original program text the way LaM4Inv's ``extract_preconditions.py``
    reads it: in the text before the first ``while``, every ``int`` declaration with
    ``name = value`` items, every ``name = word;`` assignment and every ``assume(c);``
    without nested parentheses becomes a conjunct (in that order, duplicates kept — they
    change nothing).  Returns the C expression (``1`` when nothing was found) and its
    conjuncts.  Deliberately not a semantic reading: it reproduces the precondition the
    paper's tool had, misses and all."""
    before = original.split("while")[0]
    conjuncts: list[str] = []
    for m in _L4I_DECL.finditer(before):
        for item in m.group(1).split(","):
            if "=" in item:
                name, value = item.split("=", 1)
                conjuncts.append(f"{name.strip()} == {value.strip()}")
    conjuncts += [f"{m.group(1)} == {m.group(2)}" for m in _L4I_ASSIGN.finditer(before)]
    conjuncts += [m.group(1).strip() for m in _L4I_ASSUME.finditer(before)]
    return (" && ".join(f"({c})" for c in conjuncts) if conjuncts else "1"), conjuncts


def _is_nondet(node: c_ast.Node) -> bool:
    return isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID) and (
        node.name.name in NONDET_CALLS or node.name.name.startswith("__VERIFIER_nondet_"))


def _is_small_literal(node: c_ast.Node) -> bool:
    return isinstance(node, c_ast.Constant) and node.type == "int" and node.value.isdigit() \
        and int(node.value) < 2**31


_ATOM = re.compile(r"^-?(?:[A-Za-z_]\w*|\d+[uUlL]*)$")


def _paren(text: str) -> str:
    text = text.strip()
    if _ATOM.match(text):
        return text
    if text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        return text
    return f"({text})"


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


# ------------------------------------------------------------------ guard B


def _eliminate_nondet(cond: c_ast.Node | None) -> str:
    """∃ choices. B, as a disjunction over the truth values of its nondet calls."""
    if cond is None:
        return "1"
    calls = [n for n in _walk(cond) if _is_nondet(n)]
    if not calls:
        return cfront.to_source(cond)
    disjuncts = []
    for values in itertools.product((1, 0), repeat=len(calls)):
        replaced = _replace_calls(cond, dict(zip(map(id, calls), values, strict=True)))
        disjuncts.append(_paren(cfront.to_source(replaced)))
    if "1" in disjuncts:  # some choice makes the guard true whatever the state
        return "1"
    return " || ".join(dict.fromkeys(disjuncts))


def _walk(node: c_ast.Node) -> Iterator[c_ast.Node]:
    yield node
    for _, child in node.children():
        yield from _walk(child)


def _replace_calls(node: c_ast.Node, values: dict[int, int]) -> c_ast.Node:
    if id(node) in values:
        return c_ast.Constant("int", str(values[id(node)]))
    new = copy.copy(node)
    for name, child in node.children():
        if "[" in name:
            attr, idx = name[:-1].split("[")
            lst = list(getattr(new, attr))
            lst[int(idx)] = _replace_calls(child, values)
            setattr(new, attr, lst)
        else:
            setattr(new, name, _replace_calls(child, values))
    return new
