"""What a contract says, judged without Dafny where that can be decided: vacuous
``requires``, trivially true ``ensures``, ``decreases *``.

Spelling does not decide: ``requires false``, ``requires 0 > 1``, ``requires x > 10``
with ``requires x < 5`` all make every body verify vacuously; ``ensures true``,
``ensures 1 > 0``, ``ensures true && true``, ``ensures x == x`` all say nothing;
``decreases *``, ``decreases /* c */ *`` and ``decreases {:x} *`` all switch termination
checking off.  Clauses are read by Dafny's grammar (the scanner's tokens: comments and
attributes are not part of the expression), and an expression in the arithmetic fragment
(integer and boolean literals, the declaration's ``int``/``nat``/``bool`` parameters and
results, ``+ - * / %``, comparisons including chains ``1 <= n <= 250``, ``! && || ==> <==
<==>``) is handed to z3 (Dafny's own solver; ``/`` and ``%`` are Euclidean in both).
Anything outside the fragment (calls, sequences, quantifiers) is *opaque*: an unknown
boolean for the vacuity question, never "trivially true" — Dafny itself judges those
(`strength`: generated lemmas; ``--warn-contradictory-assumptions``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from veribatch.tasks.dafnycomp.syntax import Clause, Declaration, Token, tokenize

CONTRACTS_VERSION = "dafnycomp-contracts-v1"


class _Opaque(Exception):
    """The expression leaves the fragment z3 is asked about."""


def expression_tokens(clause: Clause) -> list[Token]:
    """The clause's expression by the grammar: keyword, attributes and comments dropped."""
    toks = tokenize(clause.text, comments=False)
    return [t for t in toks[1:] if t.kind != "attr"]


def is_decreases_star(clause: Clause) -> bool:
    return clause.keyword == "decreases" and [t.text for t in expression_tokens(clause)] == ["*"]


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


def parameters(decl: Declaration) -> dict[str, str]:
    """Name → type of the declaration's parameters and named results (from its signature)."""
    out: dict[str, str] = {}
    for group in re.findall(r"\(([^()]*)\)", decl.signature):
        for p in split_parameters(group):
            name, sep, ty = p.partition(":")
            if sep and name.strip():
                out[name.split()[-1]] = ty.strip()
    return out


class _Parser:
    """Recursive descent over Dafny's expression precedence (the arithmetic fragment)."""

    def __init__(self, toks: list[Token], env: dict[str, object]) -> None:
        self.t = [x.text for x in toks]
        self.i = 0
        self.env = env

    def peek(self, n: int = 0) -> str:
        return self.t[self.i + n] if self.i + n < len(self.t) else ""

    def op(self) -> str:
        """The operator at the cursor (the scanner gives one character per punctuation token)."""
        for cand in ("<==>", "==>", "<==", "&&", "||", "==", "!=", "<=", ">="):
            if "".join(self.t[self.i:self.i + len(cand)]) == cand:
                return cand
        return self.peek()

    def take(self, o: str) -> None:
        self.i += len(o) if o in ("<==>", "==>", "<==", "&&", "||", "==", "!=", "<=", ">=") else 1

    def parse(self) -> object:
        e = self.equiv()
        if self.i != len(self.t):
            raise _Opaque(self.peek())
        return e

    def equiv(self) -> object:
        e = self.implies()
        while self.op() == "<==>":
            self.take("<==>")
            e = e == self.implies()
        return e

    def implies(self) -> object:
        import z3
        e = self.logical()
        if self.op() == "==>":
            self.take("==>")
            return z3.Implies(e, self.implies())
        while self.op() == "<==":
            self.take("<==")
            e = z3.Implies(self.logical(), e)
        return e

    def logical(self) -> object:
        import z3
        e = self.relation()
        if self.op() in ("&&", "||"):
            o = self.op()
            parts = [e]
            while self.op() == o:
                self.take(o)
                parts.append(self.relation())
            e = z3.And(*parts) if o == "&&" else z3.Or(*parts)
        return e

    def relation(self) -> object:
        import z3
        left = self.term()
        chain = []
        while self.op() in ("==", "!=", "<=", ">=", "<", ">"):
            o = self.op()
            self.take(o)
            right = self.term()
            chain.append({"==": left == right, "!=": left != right, "<=": left <= right,
                          ">=": left >= right, "<": left < right, ">": left > right}[o])
            left = right
        return chain[0] if len(chain) == 1 else z3.And(*chain) if chain else left

    def term(self) -> object:
        e = self.factor()
        while self.op() in ("+", "-"):
            o = self.op()
            self.take(o)
            r = self.factor()
            e = e + r if o == "+" else e - r
        return e

    def factor(self) -> object:
        e = self.unary()
        while self.op() in ("*", "/", "%"):
            o = self.op()
            self.take(o)
            r = self.unary()
            e = e * r if o == "*" else e / r if o == "/" else e % r
        return e

    def unary(self) -> object:
        import z3
        o = self.op()
        if o == "!":
            self.take(o)
            return z3.Not(self.unary())
        if o == "-":
            self.take(o)
            return -self.unary()
        return self.atom()

    def atom(self) -> object:
        import z3
        tok = self.peek()
        if tok == "(":
            self.i += 1
            e = self.equiv()
            if self.peek() != ")":
                raise _Opaque(self.peek())
            self.i += 1
            return e
        self.i += 1
        if tok in ("true", "false"):
            return z3.BoolVal(tok == "true")
        if tok.isdigit():
            return z3.IntVal(int(tok))
        if tok in self.env and self.peek() not in ("(", "[", "."):
            return self.env[tok]
        raise _Opaque(tok)


@dataclass
class Judge:
    """z3 questions about one declaration's contract."""

    decl: Declaration

    def __post_init__(self) -> None:
        import z3
        self.env: dict[str, object] = {}
        self.facts: list[object] = []
        for name, ty in parameters(self.decl).items():
            if ty in ("int", "nat"):
                v = z3.Int(name)
                self.env[name] = v
                if ty == "nat":
                    self.facts.append(v >= 0)
            elif ty == "bool":
                self.env[name] = z3.Bool(name)

    def formula(self, clause: Clause) -> object | None:
        """The clause as a z3 formula, or None when it leaves the fragment."""
        import z3
        toks = expression_tokens(clause)
        if not toks:
            return None
        try:
            e = _Parser(toks, self.env).parse()
        except (_Opaque, z3.Z3Exception, TypeError, AttributeError, KeyError):
            return None
        return e if z3.is_bool(e) else None

    def _check(self, formula: object) -> str:
        import z3
        s = z3.Solver()
        s.set("timeout", 2000)
        s.add(*self.facts, formula)
        return str(s.check())

    def vacuous(self) -> bool:
        """The requires clauses cannot all hold (opaque clauses count as unknown booleans)."""
        import z3
        reqs = [self.formula(c) for c in self.decl.clauses if c.keyword == "requires"]
        known = [f for f in reqs if f is not None]
        return bool(known) and self._check(z3.And(*known)) == "unsat"

    def trivially_true(self, clause: Clause) -> bool:
        """The clause holds whatever the values (decided in the fragment, else by shape)."""
        import z3
        f = self.formula(clause)
        if f is not None:
            return self._check(z3.Not(f)) == "unsat"
        text = "".join(t.text for t in expression_tokens(clause))
        while text.startswith("(") and text.endswith(")"):
            text = text[1:-1]
        return bool(_SAME_SIDES.match(text))


_SAME_SIDES = re.compile(r"^(.+?)(==>|<==>|==|<=|>=)\1$")


def says_something(decl: Declaration, clause: Clause, judge: Judge | None = None) -> bool:
    return not (judge or Judge(decl)).trivially_true(clause)
