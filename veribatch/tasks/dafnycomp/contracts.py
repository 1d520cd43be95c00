"""What a contract says, judged without Dafny where that can be decided: vacuous
``requires``, trivially true ``requires``/``ensures``, ``decreases *``.

Spelling does not decide: ``requires false``, ``requires 0 > 1``, ``requires x > 10``
with ``requires x < 5``, ``requires Bad(x)`` with ``predicate Bad(x: int) { false }``,
``requires Two() == 3`` with ``function Two(): int { 2 }`` and ``requires forall k :: k <
x`` all make every body verify vacuously; ``ensures true``, ``ensures 1 > 0``, ``ensures x
== x`` and ``ensures Post(r)`` with ``predicate Post(r: int) { true }`` all say nothing;
``decreases *``, ``decreases /* c */ *`` and ``decreases {:x} *`` all switch termination
checking off.  Clauses are read by Dafny's grammar (the scanner's tokens: comments and
attributes are not part of the expression) and handed to z3 (Dafny's own solver) through
`expressions`, which looks through the program's functions and predicates.

Each question has three answers, because a clause may leave the fragment or z3 may run
out of time (quantifiers, recursive functions): vacuity is ``vacuous`` (z3: the requires
that could be read are already unsatisfiable), ``satisfiable`` (every requires read, and
z3 found values) or ``unknown``; a clause is ``trivial`` (valid), ``says`` (z3 found
values that falsify it, every part read) or ``unknown``.  What an ``unknown`` means is the
caller's decision (`integrity`: the candidate is not trusted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from veribatch.tasks.dafnycomp.expressions import (
    FunctionDef,
    Opaque,
    Translator,
    split_parameters,
    variable,
)
from veribatch.tasks.dafnycomp.syntax import Clause, Declaration, Token, tokenize

# Per z3 question.  The resource limit (z3's deterministic count) decides first, so a verdict
# does not depend on the machine's load; the time limit only caps what z3 spends between
# counts (recursive functions).  The questions decided on the 125 shipped programs and
# their cheats take at most ~0.8 M units (0.3 s).
RESOURCE_LIMIT = 3_000_000
TIME_LIMIT_MS = 2000

__all__ = ["Answer", "Judge", "expression_tokens", "is_decreases_star", "parameters", "split_parameters"]


def expression_tokens(clause: Clause) -> list[Token]:
    """The clause's expression by the grammar: keyword, attributes and comments dropped."""
    toks = tokenize(clause.text, comments=False)
    return [t for t in toks[1:] if t.kind != "attr"]


def is_decreases_star(clause: Clause) -> bool:
    return clause.keyword == "decreases" and [t.text for t in expression_tokens(clause)] == ["*"]


def parameters(decl: Declaration) -> dict[str, str]:
    """Name → type of the declaration's parameters and named results (from its signature)."""
    out: dict[str, str] = {}
    for group in re.findall(r"\(([^()]*)\)", decl.signature):
        for p in split_parameters(group):
            name, sep, ty = p.partition(":")
            if sep and name.strip():
                out[name.split()[-1]] = ty.strip()
    return out




@dataclass(frozen=True)
class Answer:
    verdict: str          # vacuous | satisfiable | unknown  (or trivial | says | unknown)
    why: str = ""         # for unknown: what could not be decided


@dataclass
class Judge:
    """z3 questions about one declaration's contract, over the program's definitions
    (`expressions.definitions`; empty: calls are opaque)."""

    decl: Declaration
    defs: dict[str, FunctionDef] = field(default_factory=dict)
    recursive: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self.tr = Translator(self.defs, self.recursive)
        self.env: dict[str, object] = {}
        for name, ty in parameters(self.decl).items():
            v = variable(name, ty, self.tr.facts)
            if v is not None:
                self.env[name] = v
        self.opaque: dict[Clause, str] = {}

    def formula(self, clause: Clause) -> object | None:
        """The clause as a z3 formula, or None when it leaves the fragment (`opaque` says why)."""
        import z3
        toks = [t.text for t in expression_tokens(clause)]
        if not toks:
            self.opaque[clause] = "empty clause"
            return None
        try:
            e = self.tr.term(toks, self.env)
        except Opaque as err:
            self.opaque[clause] = str(err)
            return None
        except (z3.Z3Exception, TypeError, AttributeError, KeyError, IndexError, RecursionError) as err:
            self.opaque[clause] = f"not an expression z3 takes ({type(err).__name__})"
            return None
        if not z3.is_bool(e):
            self.opaque[clause] = "not a boolean"
            return None
        return e

    def _check(self, formula: object) -> str:
        import z3
        s = z3.Solver()
        s.set("rlimit", RESOURCE_LIMIT)
        s.set("timeout", TIME_LIMIT_MS)
        s.add(*self.tr.facts, formula)
        return str(s.check())

    def vacuity(self, focus: frozenset[str] = frozenset()) -> Answer:
        """Whether the requires clauses can all hold (opaque clauses count as unknown
        booleans).  Subsets are asked first, each small and fast to refute: the clauses in
        `focus` (whitespace-normalised texts: those the answer added), then those without
        quantifiers or recursive calls, then all; any unsatisfiable subset settles it."""
        import z3
        reqs = [c for c in self.decl.clauses if c.keyword == "requires"]
        read = {c: f for c in reqs if (f := self.formula(c)) is not None}
        unread = [c for c in reqs if c in self.opaque and not _same_sides(c)]  # `m == m` holds
        slow = re.compile(r"\b(forall|exists|" + "|".join(map(re.escape, self.recursive)) + r")\b"
                          if self.recursive else r"\b(forall|exists)\b")
        stages = [[c for c in read if re.sub(r"\s+", " ", c.text) in focus],
                  [c for c in read if not slow.search(c.text)], list(read)]
        got, asked = "sat", []
        for stage in stages:
            if not stage or stage in asked:
                continue
            asked.append(stage)
            got = self._check(z3.And(*(read[c] for c in stage)))
            if got == "unsat":
                return Answer("vacuous")
        if stages[-1] and stages[-1] != asked[-1]:
            got = self._check(z3.And(*read.values()))
        if got == "sat" and not unread:
            return Answer("satisfiable")
        if got != "sat":
            return Answer("unknown", f"z3 answered {got} (limits: {RESOURCE_LIMIT} resource units, {TIME_LIMIT_MS} ms)")
        return Answer("unknown", "; ".join(f"{_short(c)}: {self.opaque[c]}" for c in unread))

    def vacuous(self) -> bool:
        """The requires clauses cannot all hold."""
        return self.vacuity().verdict == "vacuous"

    def triviality(self, clause: Clause) -> Answer:
        """Whether the clause holds whatever the values (z3 in the fragment, else by shape)."""
        import z3
        f = self.formula(clause)
        if f is None:
            if _same_sides(clause):
                return Answer("trivial")
            return Answer("unknown", f"{_short(clause)}: {self.opaque[clause]}")
        got = self._check(z3.Not(f))
        if got == "unsat":
            return Answer("trivial")
        if got == "sat":
            return Answer("says")
        return Answer("unknown", f"{_short(clause)}: z3 answered {got} (limits: {RESOURCE_LIMIT} resource units, {TIME_LIMIT_MS} ms)")


def _short(clause: Clause, n: int = 80) -> str:
    text = re.sub(r"\s+", " ", clause.text)
    return text if len(text) <= n else text[:n - 1] + "…"


def _same_sides(clause: Clause) -> bool:
    """``e == e``, ``e <= e``, ``e ==> e``...: valid whatever `e` is (read by shape)."""
    text = "".join(t.text for t in expression_tokens(clause))
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    return bool(_SAME_SIDES.match(text))


_SAME_SIDES = re.compile(r"^(.+?)(==>|<==>|==|<=|>=)\1$")
