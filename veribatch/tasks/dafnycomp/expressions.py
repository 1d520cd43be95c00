"""Dafny specification expressions as z3 terms, so that what a contract says is judged by
its meaning, not its spelling, and not stopped by a helper declaration.

A helper predicate that is ``false``, a helper function whose value breaks a required
equation, or a helper predicate that is ``true`` standing for a whole postcondition all
read as an innocent call; so do quantified contradictions.  Calls of the program's own
functions and predicates are therefore looked through: a non-recursive one is *unfolded*
(its body with the arguments in place of its parameters), a recursive one with scalar
parameters becomes a z3 recursive function (``define-fun-rec``: z3 unfolds it as far as an
answer needs, or says unknown).  The function's own ``requires`` are not assumed: a call
outside them is a well-formedness error Dafny reports anyway.

The fragment: integer, boolean and char literals (a char is its code point), parameters of
type ``int``/``nat``/``bool``/``char``, sequences, strings and one-dimensional arrays of
those (a length and an element array, each element in its type's range: ``|s|``,
``a.Length``, ``s[i]``, displays, ``x in s``; sequences of ``int``/``bool`` sequences;
of other elements, only the length),
``+ - * / %`` (Euclidean in both), comparisons and chains, ``! && || ==> <== <==>``,
``if-then-else``, ``var x := e; body``, ``as int``/``as char``, quantifiers over
int/nat/char/bool variables (``forall i, j: int | range :: body``, ``exists``) and calls as
above.  Anything else (slices, ``old``, ``fresh``, sets and multisets beyond a display,
maps, methods, fields, 2-D arrays) raises `Opaque`: the caller decides what an expression
it cannot read means (the strict protocol: undecided, never "fine").
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from veribatch.tasks.dafnycomp.syntax import Declaration, _matching, tokenize

_OPS = ("<==>", "==>", "<==", "&&", "||", "==", "!=", "<=", ">=", "::", "..", ":=")
_SCALARS = ("int", "nat", "bool", "char")
_SEQ = re.compile(r"^(seq|array)\s*<\s*(int|nat|bool|char)\s*>$")
_fresh = itertools.count()
# A contract's helper calls are unfolded once per distinct argument list (memoised), and at
# most this many times in all: a chain F_i(x) = F_{i-1}(x) + F_{i-1}(x + 1) still costs 2^k
# distinct calls, so past the cap the contract is opaque (undecided), never "fine".
MAX_UNFOLDINGS = 2000


class Opaque(Exception):
    """The expression leaves the fragment; the message names the construct."""


@dataclass(frozen=True)
class SeqTerm:
    """A sequence or one-dimensional array: its length and its elements (by index)."""

    length: Any
    elems: Any
    elem: str  # int | nat | bool | char | seq:int | seq:bool | other (only the length is read)
    inner: Any = None  # for seq:T, the elements' element arrays (`elems` holds their lengths)


def scalar_type(ty: str) -> str | None:
    ty = re.sub(r"\s+", "", ty)
    return ty if ty in _SCALARS else None


def value_type(ty: str) -> tuple[str, str] | None:
    """("scalar", T) or ("seq", element T) for a type in the fragment, else None."""
    ty = re.sub(r"\s+", " ", ty).strip()
    if scalar_type(ty):
        return ("scalar", scalar_type(ty) or "")
    if ty == "string":
        return ("seq", "char")
    m = _SEQ.match(ty)
    if m:
        return ("seq", m.group(2))
    m = re.match(r"^(seq|array)\s*<\s*(seq|array)\s*<\s*(int|bool)\s*>\s*>$", ty)
    if m:
        return ("seq", "seq:" + m.group(3))
    # other element types: the length is read, an element is opaque
    return ("seq", "other") if re.match(r"^(seq|array)\s*<.+>$", ty) else None


def _sort(elem: str) -> Any:
    import z3
    return z3.BoolSort() if elem == "bool" else z3.IntSort()


def variable(name: str, ty: str, facts: list[Any]) -> Any:
    """A fresh z3 value for a variable of type `ty` (its range facts appended), or None
    when the type is outside the fragment."""
    import z3
    vt = value_type(ty)
    if vt is None:
        return None
    kind, elem = vt
    n = next(_fresh)
    if kind == "scalar":
        if elem == "bool":
            return z3.Bool(f"{name}!{n}")
        v = z3.Int(f"{name}!{n}")
        if elem == "nat":
            facts.append(v >= 0)
        elif elem == "char":
            facts.append(z3.And(v >= 0, v < 0x110000))
        return v
    length = z3.Int(f"|{name}|!{n}")
    facts.append(length >= 0)
    if elem.startswith("seq:"):  # a sequence of sequences: every element's length is >= 0
        lengths = z3.Array(f"|{name}[]|!{n}", z3.IntSort(), z3.IntSort())
        k = z3.Int(f"k!{n}")
        facts.append(z3.ForAll([k], z3.Select(lengths, k) >= 0))
        inner = z3.Array(f"{name}!{n}", z3.IntSort(), z3.ArraySort(z3.IntSort(), _sort(elem[4:])))
        return SeqTerm(length, lengths, elem, inner)
    elems = z3.Array(f"{name}!{n}", z3.IntSort(), _sort(elem))
    if elem in ("nat", "char"):  # every element in its type's range
        k = z3.Int(f"k!{n}")
        e = z3.Select(elems, k)
        facts.append(z3.ForAll([k], e >= 0 if elem == "nat" else z3.And(e >= 0, e < 0x110000)))
    return SeqTerm(length, elems, elem)


@dataclass(frozen=True)
class FunctionDef:
    """A function or predicate of the program with an expression body."""

    name: str
    params: tuple[tuple[str, str], ...]  # (name, type)
    result: str                          # its type ("bool" for a predicate)
    body: tuple[str, ...]                # the body's tokens, braces excluded
    calls: frozenset[str]                # names called in the body


def split_parameters(text: str) -> list[str]:
    """Top-level comma split of a parameter list (``x: int, a: map<int, int>``);
    ``ghost``/``nameonly``/``older`` and default values dropped."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += 1 if ch in "(<[" else -1 if ch in ")>]" else 0
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    cleaned = []
    for p in out:
        p = re.sub(r"\b(ghost|nameonly|older)\s+", "", p.split(":=")[0]).strip()
        if p:
            cleaned.append(p)
    return cleaned


def _function_def(text: str, d: Declaration) -> FunctionDef | None:
    if d.kind not in ("function", "predicate") or d.body is None:
        return None
    sig = " ".join(t.text for t in tokenize(d.signature, comments=False) if t.kind != "attr")
    if re.search(r"\b(twostate|least|greatest|inductive|copredicate)\b", sig):
        return None
    m = re.match(r"^.*?\b(?:function|predicate)\b(?:\s+method)?\s+([^\s(<]+)\s*(<[^(]*>)?\s*\((.*?)\)\s*(?::\s*(.+))?$",
                 sig, re.DOTALL)
    if m is None or m.group(2):
        return None  # generic functions are left opaque
    params = []
    for p in split_parameters(m.group(3)):
        pname, sep, pty = p.partition(":")
        if not sep:
            return None
        params.append((pname.split()[-1], pty.strip()))
    result = "bool" if d.kind == "predicate" else (m.group(4) or "").strip()
    named = re.match(r"^\(\s*[A-Za-z_][\w']*\s*:\s*(.+)\)$", result)
    if named:
        result = named.group(1).strip()
    toks = [t for t in tokenize(text[d.body[0]:d.body[1]], comments=False) if t.kind != "attr"]
    if not toks or toks[0].text != "{":
        return None
    close = _matching(toks, 0, text[d.body[0]:d.body[1]])
    body = tuple(t.text for t in toks[1:close])
    calls = frozenset(body[i] for i in range(len(body) - 1) if body[i + 1] == "(")
    return FunctionDef(d.name, tuple(params), result, body, calls)


def definitions(text: str, decls: list[Declaration]) -> dict[str, FunctionDef]:
    """The program's functions and predicates whose bodies can be read (first of a name)."""
    out: dict[str, FunctionDef] = {}
    for d in decls:
        f = _function_def(text, d)
        if f is not None and f.name not in out:
            out[f.name] = f
    return out


def recursive(defs: dict[str, FunctionDef]) -> frozenset[str]:
    """Functions that can reach themselves through calls."""
    out = set()
    for name in defs:
        seen, todo = set(), list(defs[name].calls)
        while todo:
            g = todo.pop()
            if g == name:
                out.add(name)
                break
            if g in seen or g not in defs:
                continue
            seen.add(g)
            todo.extend(defs[g].calls)
    return frozenset(out)


@dataclass
class Translator:
    """Turns token lists into z3 terms over one program's definitions."""

    defs: dict[str, FunctionDef]
    recursive: frozenset[str] = frozenset()
    facts: list[Any] = field(default_factory=list)
    _rec: dict[str, Any] = field(default_factory=dict)
    _unfolding: tuple[str, ...] = ()
    _unfolded: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    _unfoldings: int = 0

    def term(self, toks: list[str], env: dict[str, Any]) -> Any:
        return _Parser(self, toks, env).parse()

    def call(self, name: str, args: list[Any]) -> Any:
        import z3
        f = self.defs.get(name)
        if f is None:
            raise Opaque(f"{name}(...): not a function of the program")
        if len(args) != len(f.params):
            raise Opaque(f"{name}: {len(args)} arguments for {len(f.params)} parameters")
        if name not in self.recursive:
            if name in self._unfolding:
                raise Opaque(f"{name}: recursion")
            key = _memo_key(name, args)
            if key is not None and key in self._unfolded:
                return self._unfolded[key]
            self._unfoldings += 1
            if self._unfoldings > MAX_UNFOLDINGS:
                raise Opaque(f"{name}: more than {MAX_UNFOLDINGS} helper unfoldings in one contract")
            env = {p: a for (p, _), a in zip(f.params, args, strict=True)}
            outer = self._unfolding
            self._unfolding = (*outer, name)
            try:
                value = self.term(list(f.body), env)
            finally:
                self._unfolding = outer
            if key is not None:
                self._unfolded[key] = value
            return value
        if not all(scalar_type(t) for _, t in f.params) or not scalar_type(f.result):
            raise Opaque(f"{name}: a recursive function over non-scalar values")
        if any(not z3.is_expr(a) or isinstance(a, SeqTerm) for a in args):
            raise Opaque(f"{name}: non-scalar argument")
        decl = self._rec.get(name)
        if decl is None:
            sorts = [_sort(scalar_type(t) or "") for _, t in f.params]
            decl = z3.RecFunction(f"{name}!{next(_fresh)}", *sorts, _sort(scalar_type(f.result) or ""))
            self._rec[name] = decl
            consts = [z3.Const(f"{p}!{next(_fresh)}", s) for (p, _), s in zip(f.params, sorts, strict=True)]
            try:
                body = self.term(list(f.body), dict(zip((p for p, _ in f.params), consts, strict=True)))
            except Opaque:
                self._rec[name] = None
                raise
            z3.RecAddDefinition(decl, consts, body)
        if decl is None:
            raise Opaque(f"{name}: its body leaves the fragment")
        return decl(*args)


def _memo_key(name: str, args: list[Any]) -> tuple[Any, ...] | None:
    """A call's identity for the unfolding memo: z3 terms are hash-consed, so two equal
    arguments have one AST id; None (no memo) for an argument of another kind."""
    import z3
    parts: list[Any] = [name]
    for a in args:
        if isinstance(a, SeqTerm):
            inner = a.inner.get_id() if z3.is_expr(a.inner) else None
            if not (z3.is_expr(a.length) and z3.is_expr(a.elems)) or (a.inner is not None and inner is None):
                return None
            parts.append(("seq", a.length.get_id(), a.elems.get_id(), a.elem, inner))
        elif z3.is_expr(a):
            parts.append(("z3", a.get_id()))
        else:
            return None
    return tuple(parts)


def _is_z3(v: Any) -> bool:
    import z3
    return z3.is_expr(v)


class _Parser:
    """Recursive descent over Dafny's expression precedence (the fragment above)."""

    def __init__(self, tr: Translator, toks: list[str], env: dict[str, Any]) -> None:
        self.tr = tr
        self.t = toks
        self.i = 0
        self.env = env

    def peek(self, n: int = 0) -> str:
        return self.t[self.i + n] if self.i + n < len(self.t) else ""

    def op(self) -> str:
        """The operator at the cursor (the scanner gives one character per punctuation token)."""
        for cand in _OPS:
            if "".join(self.t[self.i:self.i + len(cand)]) == cand:
                return cand
        if self.peek() == "!" and self.peek(1) == "in":
            return "!in"
        return self.peek()

    def take(self, o: str) -> None:
        self.i += 2 if o == "!in" else len(o) if o in _OPS else 1

    def expect(self, o: str) -> None:
        if self.op() != o:
            raise Opaque(f"expected {o!r} at {self.peek()!r}")
        self.take(o)

    def parse(self) -> Any:
        e = self.equiv()
        if self.i != len(self.t):
            raise Opaque(f"unread: {' '.join(self.t[self.i:self.i + 5])}")
        return e

    # -------------------------------------------------------------- logic
    def equiv(self) -> Any:
        e = self.implies()
        while self.op() == "<==>":
            self.take("<==>")
            e = _bool(e) == _bool(self.implies())
        return e

    def implies(self) -> Any:
        import z3
        e = self.logical()
        if self.op() == "==>":
            self.take("==>")
            return z3.Implies(_bool(e), _bool(self.implies()))
        while self.op() == "<==":
            self.take("<==")
            e = z3.Implies(_bool(self.logical()), _bool(e))
        return e

    def logical(self) -> Any:
        import z3
        e = self.relation()
        if self.op() in ("&&", "||"):
            o = self.op()
            parts = [_bool(e)]
            while self.op() == o:
                self.take(o)
                parts.append(_bool(self.relation()))
            e = z3.And(*parts) if o == "&&" else z3.Or(*parts)
        return e

    def relation(self) -> Any:
        import z3
        left = self.term()
        chain = []
        while self.op() in ("==", "!=", "<=", ">=", "<", ">", "in", "!in"):
            o = self.op()
            self.take(o)
            right = self.term()
            if o in ("in", "!in"):
                m = _member(left, right)
                chain.append(m if o == "in" else z3.Not(m))
            else:
                chain.append(_compare(o, _scalar(left), _scalar(right)))
            left = right
        return chain[0] if len(chain) == 1 else z3.And(*chain) if chain else left

    # -------------------------------------------------------------- arithmetic
    def term(self) -> Any:
        e = self.factor()
        while self.op() in ("+", "-"):
            o = self.op()
            self.take(o)
            r = self.factor()
            e = _int(e) + _int(r) if o == "+" else _int(e) - _int(r)
        return e

    def factor(self) -> Any:
        e = self.conversion()
        while self.op() in ("*", "/", "%"):
            o = self.op()
            self.take(o)
            r = self.conversion()
            a, b = _int(e), _int(r)
            e = a * b if o == "*" else a / b if o == "/" else a % b
        return e

    def conversion(self) -> Any:
        e = self.unary()
        while self.peek() in ("as", "is"):
            if self.peek() == "is" or self.peek(1) not in ("int", "char", "nat"):
                raise Opaque(f"{self.peek()} {self.peek(1)}")
            self.i += 2
            e = _int(e)
        return e

    def unary(self) -> Any:
        import z3
        o = self.op()
        if o == "!" and self.peek(1) != "in":
            self.take(o)
            return z3.Not(_bool(self.unary()))
        if o == "-":
            self.take(o)
            return -_int(self.unary())
        return self.suffixes(self.atom())

    def suffixes(self, e: Any) -> Any:
        while True:
            if self.peek() == "[":
                self.i += 1
                if self.op() == "..":
                    raise Opaque("slice")
                idx = self.equiv()
                if self.peek() != "]":
                    raise Opaque(f"[... {self.peek()}")  # slices, updates, 2-D indexing
                self.i += 1
                if not isinstance(e, SeqTerm) or e.elem == "other":
                    raise Opaque("indexing a non-sequence, or one of elements outside the fragment")
                import z3
                if e.elem.startswith("seq:"):
                    e = SeqTerm(z3.Select(e.elems, _int(idx)), z3.Select(e.inner, _int(idx)), e.elem[4:])
                else:
                    e = z3.Select(e.elems, _int(idx))
            elif self.peek() == "." and self.peek(1) != ".":
                if self.peek(1) == "Length" and isinstance(e, SeqTerm):
                    self.i += 2
                    e = e.length
                else:
                    raise Opaque(f".{self.peek(1)}")
            else:
                return e

    # -------------------------------------------------------------- atoms
    def atom(self) -> Any:
        import z3
        tok = self.peek()
        if tok == "(":
            self.i += 1
            e = self.equiv()
            self.expect(")")
            return e
        if tok == "|" and self.peek(1) != "|":
            self.i += 1
            e = self.term()
            self.expect("|")
            if not isinstance(e, SeqTerm):
                raise Opaque("|...| of a non-sequence")
            return e.length
        if tok == "[":
            return self.display()
        if tok in ("forall", "exists"):
            return self.quantifier()
        if tok == "if":
            self.i += 1
            c = _bool(self.equiv())
            self.expect("then")
            a = self.equiv()
            self.expect("else")
            b = self.equiv()
            return z3.If(c, _scalar(a), _scalar(b))
        if tok == "var":
            return self.let()
        self.i += 1
        if tok in ("true", "false"):
            return z3.BoolVal(tok == "true")
        if tok[:1].isdigit():
            try:
                return z3.IntVal(int(tok.replace("_", ""), 0))
            except ValueError:
                raise Opaque(tok) from None
        if tok.startswith("'") and len(tok) >= 3:
            try:
                ch = ast.literal_eval(tok)
            except (ValueError, SyntaxError):
                raise Opaque(tok) from None
            if len(ch) == 1:
                return z3.IntVal(ord(ch))
        if tok.startswith('"'):
            try:
                s = ast.literal_eval(tok)
            except (ValueError, SyntaxError):
                raise Opaque(tok) from None
            arr = z3.K(z3.IntSort(), z3.IntVal(0))
            for k, ch in enumerate(s):
                arr = z3.Store(arr, k, ord(ch))
            return SeqTerm(z3.IntVal(len(s)), arr, "char")
        if tok in self.env and self.peek() != "(":
            return self.env[tok]
        if re.match(r"^[^\W\d][\w'?]*$", tok) and self.peek() == "(":
            self.i += 1
            args = []
            while self.peek() != ")":
                args.append(self.equiv())
                if self.peek() == ",":
                    self.i += 1
                elif self.peek() != ")":
                    raise Opaque(f"argument list at {self.peek()!r}")
            self.i += 1
            return self.tr.call(tok, args)
        raise Opaque(tok or "end of expression")

    def display(self) -> Any:
        import z3
        self.i += 1
        items = []
        while self.peek() != "]":
            items.append(_scalar(self.equiv()))
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != "]":
                raise Opaque(f"sequence display at {self.peek()!r}")
        self.i += 1
        boolean = bool(items) and z3.is_bool(items[0])
        arr = z3.K(z3.IntSort(), z3.BoolVal(False) if boolean else z3.IntVal(0))
        for k, v in enumerate(items):
            arr = z3.Store(arr, k, v)
        return SeqTerm(z3.IntVal(len(items)), arr, "bool" if boolean else "int")

    def quantifier(self) -> Any:
        import z3
        kind = self.peek()
        self.i += 1
        bound: list[Any] = []
        ranges: list[Any] = []
        env = dict(self.env)
        while True:
            name = self.peek()
            if not re.match(r"^[^\W\d][\w'?]*$", name):
                raise Opaque(f"{kind} binder {name!r}")
            self.i += 1
            ty = "int"
            if self.peek() == ":" and self.peek(1) != ":":
                self.i += 1
                ty = self.peek()
                self.i += 1
            if scalar_type(ty) is None:
                raise Opaque(f"{kind} over {ty}")
            v = z3.Bool(f"{name}!q{next(_fresh)}") if ty == "bool" else z3.Int(f"{name}!q{next(_fresh)}")
            if ty == "nat":
                ranges.append(v >= 0)
            elif ty == "char":
                ranges.append(z3.And(v >= 0, v < 0x110000))
            bound.append(v)
            env[name] = v
            if self.peek() != ",":
                break
            self.i += 1
        outer, self.env = self.env, env
        try:
            if self.peek() == "|":
                self.i += 1
                ranges.append(_bool(self.implies()))
            self.expect("::")
            body = _bool(self.equiv())
        finally:
            self.env = outer
        if kind == "forall":
            return z3.ForAll(bound, z3.Implies(z3.And(*ranges), body) if ranges else body)
        return z3.Exists(bound, z3.And(*ranges, body) if ranges else body)

    def let(self) -> Any:
        self.i += 1
        name = self.peek()
        self.i += 1
        if self.peek() == ":" and self.peek(1) != "=":
            self.i += 2  # a type annotation: the value's own type decides
        self.expect(":=")
        value = self.equiv()
        self.expect(";")
        outer, self.env = self.env, {**self.env, name: value}
        try:
            return self.equiv()
        finally:
            self.env = outer


def _compare(o: str, a: Any, b: Any) -> Any:
    if o in ("==", "!="):
        return a == b if o == "==" else a != b
    a, b = _int(a), _int(b)
    return a <= b if o == "<=" else a >= b if o == ">=" else a < b if o == "<" else a > b


def _member(x: Any, s: Any) -> Any:
    import z3
    if not isinstance(s, SeqTerm) or s.elem == "other" or s.elem.startswith("seq:"):
        raise Opaque("`in` outside a sequence of the fragment")
    k = z3.Int(f"in!{next(_fresh)}")
    return z3.Exists([k], z3.And(k >= 0, k < s.length, z3.Select(s.elems, k) == _scalar(x)))


def _scalar(v: Any) -> Any:
    if isinstance(v, SeqTerm) or not _is_z3(v):
        raise Opaque("a sequence where a scalar is needed")
    return v


def _int(v: Any) -> Any:
    import z3
    v = _scalar(v)
    if not z3.is_int(v):
        raise Opaque("a non-integer in arithmetic")
    return v


def _bool(v: Any) -> Any:
    import z3
    v = _scalar(v)
    if not z3.is_bool(v):
        raise Opaque("a non-boolean in logic")
    return v

