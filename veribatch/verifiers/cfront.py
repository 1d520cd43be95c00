"""The shared C front end: SV-COMP program text → pycparser AST, loop sites, scopes.

Every part of the toolkit that talks about "loop k" of a C program (InvBench's
`INVARIANT_MARKER_k();`, invariants the z3 verifier extracts, candidate checks)
uses the numbering of `loop_sites`: loops numbered 1..k in the order their
`while`/`for`/`do` keyword appears in the source text, across all functions.

SV-COMP files are not plain ISO C for pycparser: they carry comments,
`#include <assert.h>`, GNU `__attribute__((...))`, `__extension__`, and use
`true`/`INT_MAX`/`size_t` from headers we must not read (system headers are full
of GNU extensions pycparser rejects).  `parse` therefore drops `#include` lines,
prepends a small prelude of the few macros and typedefs such programs use, and
runs the C preprocessor (`cpp`, for `#define`s and comments); without a `cpp`
it falls back to a minimal Python preprocessor (comments, object-like
`#define`s).  Line numbers always refer to the original text.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Literal

from pycparser import c_ast, c_generator, c_parser
from pycparser.c_parser import ParseError

LoopKind = Literal["while", "for", "do"]


class CParseError(ValueError):
    """The program is not C that the front end accepts; the message names file and line."""


# Macros and typedefs of the standard headers SV-COMP / InvBench programs rely on.
_PRELUDE_MACROS = """\
#define __attribute__(x)
#define __attribute(x)
#define __extension__
#define __inline inline
#define __inline__ inline
#define __restrict
#define __restrict__
#define __const const
#define __signed__ signed
#define __volatile__ volatile
#define __asm__(x)
#define __nothrow__
#define __leaf__
#define __noreturn__
#define _Noreturn
#define NULL ((void *)0)
#define true 1
#define false 0
#define bool _Bool
#define CHAR_BIT 8
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define CHAR_MIN (-128)
#define CHAR_MAX 127
#define SHRT_MIN (-32768)
#define SHRT_MAX 32767
#define USHRT_MAX 65535
#define INT_MIN (-2147483647 - 1)
#define INT_MAX 2147483647
#define UINT_MAX 4294967295U
#define LLONG_MIN (-9223372036854775807LL - 1)
#define LLONG_MAX 9223372036854775807LL
#define ULLONG_MAX 18446744073709551615ULL
#define RAND_MAX 2147483647
#define EXIT_SUCCESS 0
#define EXIT_FAILURE 1
"""
_PRELUDE_TYPEDEFS = """\
typedef unsigned long size_t;
typedef long ssize_t;
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
"""
PRELUDE_TYPEDEF_NAMES = frozenset(
    re.findall(r"(\w+);", _PRELUDE_TYPEDEFS)
)

_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\b.*$", re.MULTILINE)
_COMMENT_OR_STRING = re.compile(
    r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL
)


def _blank_includes(text: str) -> str:
    return _INCLUDE.sub("", text)


def _run_cpp(text: str, filename: str) -> str:
    cpp = shutil.which("cpp")
    assert cpp is not None
    source = _PRELUDE_MACROS + f'#line 1 "{filename}"\n' + _blank_includes(text)
    try:
        proc = subprocess.run(
            [cpp, "-nostdinc", "-undef", "-D__x86_64__", "-"],
            input=source,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:  # pragma: no cover - environment
        raise CParseError(f"{filename}: preprocessor failed: {exc}") from exc
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["?"])[0]
        first = first.replace("<stdin>", filename)
        raise CParseError(f"{filename}: preprocessing failed: {first}")
    return proc.stdout


def _python_preprocess(text: str, filename: str) -> str:
    """Fallback without `cpp`: comments, includes, object-like `#define`s only."""

    def blank(match: re.Match[str]) -> str:
        s = match.group(0)
        if s.startswith(("//", "/*")):
            return "\n" * s.count("\n") or " "
        return s

    body = _COMMENT_OR_STRING.sub(blank, _blank_includes(text))
    body = re.sub(r"\\\n", " ", body)
    macros: dict[str, str] = {}
    for line in _PRELUDE_MACROS.splitlines():
        m = re.match(r"#define (\w+)\s*(.*)$", line)
        if m and "(" not in m.group(1):
            macros[m.group(1)] = m.group(2)
    out: list[str] = []
    for lineno, line in enumerate(body.split("\n"), start=1):
        m = re.match(r"^\s*#\s*define\s+(\w+)(\(?)\s*(.*)$", line)
        if m:
            if m.group(2):
                raise CParseError(
                    f"{filename}:{lineno}: function-like macro {m.group(1)!r} needs a C preprocessor"
                )
            macros[m.group(1)] = m.group(3)
            out.append("")
            continue
        if re.match(r"^\s*#", line):
            out.append("")
            continue
        out.append(line)
    joined = "\n".join(out)
    # Mark the attribute keywords, so that only *their* `((...))` argument lists are removed
    # below: a doubly parenthesised expression such as `((x >= 0)) && y` is kept.
    macros["__attribute__"] = macros["__attribute"] = _ATTRIBUTE_MARK
    for _ in range(4):  # nested object-like macros
        joined = re.sub(
            r"\b[A-Za-z_]\w*\b", lambda mm: macros.get(mm.group(0), mm.group(0)), joined
        )
    joined = _strip_attributes(joined)
    return f'#line 1 "{filename}"\n' + joined


_ATTRIBUTE_MARK = "__vb_attribute__"


def _strip_attributes(text: str) -> str:
    """Remove the `((...))` argument lists of removed `__attribute__`s (marked), then the marks."""
    text = re.sub(re.escape(_ATTRIBUTE_MARK) + r"\s*\(\((?:[^()]|\([^()]*\))*\)\)", " ", text)
    return text.replace(_ATTRIBUTE_MARK, " ")


# A line that can only be C code at file scope (declaration keyword or directive),
# never the prose of a header comment.
_CODE_LINE = re.compile(
    r"^\s*(?:#\s*(?:include|define|if|ifdef|ifndef)\b|(?:extern|typedef|static|void|int|"
    r"unsigned|signed|long|short|char|_Bool|struct|union|enum|const|double|float)\b)"
)
_COMMENT_OPEN = re.compile(r'//[^\n]*|/\*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')


def close_lost_comment(text: str) -> tuple[str, str | None]:
    """Close a block comment whose `*/` line was lost; (text, what was done or None).

    Some InvBench files (``prodbin-ll_unwindbound*``) lost the ``*/`` line of their
    header comment when the benchmark was generated: as written the whole program is
    a comment (cpp: "unterminated comment"), yet the upstream task (SV-COMP's
    ``prodbin-ll.c``) and UAutomizer's verdict are about the code after it.  The
    comment is closed at the end of the line before the first line that can only be
    C code at file scope (a declaration keyword or a directive at the line start);
    with no such line the text is returned unchanged and parsing fails as before.
    Comments that are closed are never touched.
    """
    pos = 0
    while True:
        m = _COMMENT_OPEN.search(text, pos)
        if m is None:
            return text, None
        if m.group(0) != "/*":
            pos = m.end()
            continue
        end = text.find("*/", m.end())
        if end >= 0:
            pos = end + 2
            continue
        start = text.index("\n", m.end()) + 1 if "\n" in text[m.end():] else len(text)
        offset = start
        for line in text[start:].splitlines(keepends=True):
            if _CODE_LINE.match(line):
                opened = text.count("\n", 0, m.start()) + 1
                closed = text.count("\n", 0, offset)
                return (
                    text[:offset - 1] + " */" + text[offset - 1:],
                    f"comment opened at line {opened} never closed: closed at the end of line {closed}",
                )
            offset += len(line)
        return text, None


def preprocess(text: str, *, filename: str = "<program>", use_cpp: bool | None = None) -> str:
    """The text pycparser sees: the typedef prelude, then the preprocessed program."""
    if use_cpp is None:
        use_cpp = shutil.which("cpp") is not None
    body = _run_cpp(text, filename) if use_cpp else _python_preprocess(text, filename)
    return '#line 1 "<prelude>"\n' + _PRELUDE_TYPEDEFS + body


def parse(
    text: str, *, filename: str = "<program>", use_cpp: bool | None = None
) -> c_ast.FileAST:
    """Parse an SV-COMP-style C program; raise `CParseError` naming file and line.

    `use_cpp=False` skips the external preprocessor (for small texts without
    function-like macros, e.g. expressions, where its start-up would dominate).
    A block comment left open is closed first (`close_lost_comment`).
    """
    text, _ = close_lost_comment(text)
    source = preprocess(text, filename=filename, use_cpp=use_cpp)
    parser = c_parser.CParser()
    try:
        return parser.parse(source, filename=filename)
    except ParseError as exc:
        raise CParseError(f"{filename}: {_parse_error_text(exc, parser)}") from exc
    except (AssertionError, TypeError, AttributeError) as exc:  # pycparser internal errors
        raise CParseError(f"{filename}: cannot parse: {exc}") from exc


def _parse_error_text(exc: ParseError, parser: c_parser.CParser) -> str:
    msg = str(exc)
    # pycparser: "<file>:LINE:COL: message" (or only "<file>: message")
    m = re.match(r"^.*?:(\d+):(\d+): (.*)$", msg)
    if m:
        return f"line {m.group(1)}, column {m.group(2)}: {m.group(3)}"
    detail = msg.split(": ", 1)[-1]
    try:  # where the parser stood: the next unread token
        tok = parser._peek()
    except Exception:  # noqa: BLE001 - best effort only
        tok = None
    if tok is not None:
        return f"line {tok.lineno}, column {tok.column}: {detail} (before {tok.value!r})"
    return detail


def to_source(ast: c_ast.Node) -> str:
    """C text of an AST (or of one node), via pycparser's generator."""
    text = c_generator.CGenerator().visit(ast)
    if isinstance(ast, c_ast.FileAST):
        text = _drop_prelude_typedefs(text)
    return text


def _drop_prelude_typedefs(text: str) -> str:
    lines = text.split("\n")
    prelude = set(_PRELUDE_TYPEDEFS.strip().split("\n"))
    return "\n".join(line for line in lines if line.strip() not in prelude)


def parse_expression(expr: str, *, filename: str = "<expression>") -> c_ast.Node:
    """Parse one C expression (e.g. a candidate invariant); raise `CParseError`."""
    if ";" in expr or "{" in expr or "}" in expr:
        raise CParseError(f"{filename}: not a single expression: {expr!r}")
    prefix = "void __vb_expr(void) { (void)("
    try:
        ast = parse(prefix + expr + "); }", filename=filename, use_cpp=False)
    except CParseError as exc:
        m = re.search(r"line 1, column (\d+): (.*)$", str(exc))
        where = f"column {int(m.group(1)) - len(prefix)}: {m.group(2)}" if m else str(exc)
        raise CParseError(f"{filename}: not a C expression: {expr!r} ({where})") from exc
    func = ast.ext[-1]
    assert isinstance(func, c_ast.FuncDef)
    stmt = func.body.block_items[0]
    assert isinstance(stmt, c_ast.Cast)
    return stmt.expr


@dataclass(frozen=True)
class LoopSite:
    """One loop of the program: `label` is the toolkit-wide loop number (1-based)."""

    label: int
    kind: LoopKind
    line: int
    function: str
    node: c_ast.Node

    @property
    def column(self) -> int:
        return int(getattr(self.node.coord, "column", 0) or 0)


_LOOP_KINDS: dict[type, LoopKind] = {c_ast.While: "while", c_ast.For: "for", c_ast.DoWhile: "do"}


def _iter_nodes(node: c_ast.Node):
    yield node
    for _, child in node.children():
        yield from _iter_nodes(child)


def _is_user(node: c_ast.Node) -> bool:
    coord = node.coord
    return coord is not None and coord.file != "<prelude>"


def loop_sites(ast: c_ast.FileAST) -> list[LoopSite]:
    """All loops, numbered in order of their keyword's position in the source text."""
    found: list[tuple[int, int, str, c_ast.Node]] = []
    for ext in ast.ext:
        if not isinstance(ext, c_ast.FuncDef) or not _is_user(ext):
            continue
        fname = ext.decl.name
        for node in _iter_nodes(ext.body):
            if type(node) in _LOOP_KINDS:
                coord = node.coord
                found.append((coord.line, coord.column or 0, fname, node))
    found.sort(key=lambda t: (t[0], t[1]))
    return [
        LoopSite(label=i, kind=_LOOP_KINDS[type(node)], line=line, function=fname, node=node)
        for i, (line, _col, fname, node) in enumerate(found, start=1)
    ]


def type_to_str(type_node: c_ast.Node) -> str:
    """A readable C type, e.g. ``int``, ``unsigned long long``, ``int *``, ``int[10]``."""
    gen = c_generator.CGenerator()
    if isinstance(type_node, c_ast.TypeDecl):
        return gen.visit(type_node.type) if not type_node.quals else " ".join(
            [*type_node.quals, gen.visit(type_node.type)]
        )
    if isinstance(type_node, c_ast.PtrDecl):
        return type_to_str(type_node.type) + " *"
    if isinstance(type_node, c_ast.ArrayDecl):
        dim = gen.visit(type_node.dim) if type_node.dim is not None else ""
        return f"{type_to_str(type_node.type)}[{dim}]"
    if isinstance(type_node, c_ast.FuncDecl):
        return "function"
    return gen.visit(type_node)


def _decl_vars(decl: c_ast.Decl) -> tuple[str, str] | None:
    if decl.name is None or isinstance(decl.type, c_ast.FuncDecl):
        return None
    if "typedef" in (decl.storage or []):
        return None
    return decl.name, type_to_str(decl.type)


def variables_in_scope(ast: c_ast.FileAST, site: LoopSite) -> dict[str, str]:
    """Variables visible at the head of loop `site` (name → C type), innermost binding wins.

    Globals declared before the enclosing function, its parameters, locals of every
    enclosing block declared before the loop, `for`-init declarations of enclosing
    `for` loops and of the loop itself.
    """
    scope: dict[str, str] = {}
    for ext in ast.ext:
        if isinstance(ext, c_ast.Decl) and _is_user(ext):
            got = _decl_vars(ext)
            if got:
                scope[got[0]] = got[1]
        elif isinstance(ext, c_ast.FuncDef) and ext.decl.name == site.function:
            params = ext.decl.type.args.params if ext.decl.type.args else []
            for p in params:
                if isinstance(p, c_ast.Decl):
                    got = _decl_vars(p)
                    if got:
                        scope[got[0]] = got[1]
            path = _path_to(ext.body, site.node)
            if path is None:  # pragma: no cover - site from another AST
                raise ValueError(f"loop {site.label} is not in function {site.function}")
            for parent, child in zip(path, path[1:], strict=False):
                _collect_before(parent, child, scope)
            if isinstance(site.node, c_ast.For) and isinstance(site.node.init, c_ast.DeclList):
                for d in site.node.init.decls:
                    got = _decl_vars(d)
                    if got:
                        scope[got[0]] = got[1]
            return scope
    raise ValueError(f"function {site.function!r} of loop {site.label} not found")


def _path_to(root: c_ast.Node, target: c_ast.Node) -> list[c_ast.Node] | None:
    if root is target:
        return [root]
    for _, child in root.children():
        sub = _path_to(child, target)
        if sub is not None:
            return [root, *sub]
    return None


def _collect_before(parent: c_ast.Node, child: c_ast.Node, scope: dict[str, str]) -> None:
    if isinstance(parent, c_ast.Compound):
        for item in parent.block_items or []:
            if item is child:
                break
            if isinstance(item, c_ast.Decl):
                got = _decl_vars(item)
                if got:
                    scope[got[0]] = got[1]
            elif isinstance(item, c_ast.DeclList):
                for d in item.decls:
                    got = _decl_vars(d)
                    if got:
                        scope[got[0]] = got[1]
    elif (
        isinstance(parent, c_ast.For)
        and isinstance(parent.init, c_ast.DeclList)
        and child is not parent.init
    ):
        for d in parent.init.decls:
            got = _decl_vars(d)
            if got:
                scope[got[0]] = got[1]


def function_defs(ast: c_ast.FileAST) -> dict[str, c_ast.FuncDef]:
    """Function definitions of the program by name (the last definition wins)."""
    return {ext.decl.name: ext for ext in ast.ext if isinstance(ext, c_ast.FuncDef)}
