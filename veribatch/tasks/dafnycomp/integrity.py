"""Integrity of a candidate program: the implementation kept, nothing switched off.

DafnyComp asks a model for specifications only.  A returned program counts (as syntax-correct
or verified) only if it equals the original once the contract clauses of both are stripped,
comments and whitespace aside, and uses none of Dafny's ways of not proving something.
Dafny itself does not catch these: ``{:verify false}`` members are skipped with a warning
and ``0 errors``, ``assume`` is a warning, a bodyless lemma without ``ensures`` produces no
message at all (see ../shared/data/recorded/dafny/README.md).

Every violation is a *cheat kind* (`CHEAT_KINDS`); a candidate with any is recorded as
``cheat`` with its kinds, and never counted as verified or syntax-correct.  Constructs the
original itself uses (several DafnyComp programs contain ``assume {:axiom}`` or
``decreases *``) are allowed up to the original's count.  Declarations are compared by name,
so reordering them is allowed (Dafny does not care); anything else outside them must be
token-for-token the same.  A program the scanner cannot read is ``unchecked``: it is not
trusted either, and Dafny's own verdict on it is still recorded.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass

from veribatch.tasks.dafnycomp.syntax import (
    DafnySyntaxError,
    Declaration,
    Token,
    declarations,
    tokenize,
)

INTEGRITY_VERSION = "dafnycomp-integrity-v1"

CHEAT_KINDS: dict[str, str] = {
    "assume": "more `assume` statements than the original",
    "expect": "more `expect` statements than the original (the verifier assumes them)",
    "axiom": "more `{:axiom}` attributes than the original",
    "verify_false": "`{:verify false}`: the member is skipped by the verifier",
    "extern": "`{:extern}`: contracts trusted, not proved",
    "only": "`{:only}`: every other member is skipped",
    "options": "`{:options ...}`: command-line options (e.g. --allow-axioms) from inside the program",
    "decreases_star": "`decreases *` where the original's declaration has none (termination not proved)",
    "bodyless": "a declaration without the body it has in the original",
    "removed": "a declaration of the original is missing",
    "added": "a declaration the original does not have",
    "renamed": "a declaration of the original under another name",
    "signature_changed": "a declaration's signature differs from the original",
    "body_changed": "a declaration's body differs from the original (comments and whitespace aside)",
    "program_changed": "text outside the declarations differs from the original",
    "trivial_spec": "no requires/ensures says anything (all absent or trivially true) where the original has some",
}
_ATTRIBUTE_KINDS = {"axiom": "axiom", "verify": "verify_false", "extern": "extern", "only": "only",
                    "options": "options"}
_TRIVIAL = re.compile(r"^(.+?)(==>|<==>|==|<=|>=)\1$")


@dataclass(frozen=True)
class Integrity:
    status: str                  # ok | cheat | unchecked
    kinds: tuple[str, ...] = ()  # keys of CHEAT_KINDS, sorted
    details: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class _Program:
    tokens: list[Token]          # without comments
    decls: list[Declaration]
    starts: list[int]            # token start offsets, for bisection


def _read(text: str) -> _Program:
    tokens = tokenize(text, comments=False)
    return _Program(tokens, declarations(text, tokens), [t.start for t in tokens])


def _attribute_kind(attr: str) -> str | None:
    m = re.match(r"\{:\s*([A-Za-z_]+)\s*(.*)\}$", attr, re.DOTALL)
    if not m:
        return None
    kind = _ATTRIBUTE_KINDS.get(m.group(1))
    if kind == "verify_false" and m.group(2).strip() != "false":
        return None
    return kind


def _constructs(p: _Program) -> Counter[str]:
    c: Counter[str] = Counter()
    for t in p.tokens:
        if t.kind == "ident" and t.text in ("assume", "expect"):
            c[t.text] += 1
        elif t.kind == "attr" and (kind := _attribute_kind(t.text)):
            c[kind] += 1
    return c


def _decl_end(d: Declaration) -> int:
    return d.body[1] if d.body else max([d.signature_end, *(c.end for c in d.clauses)])


def _span_text(p: _Program, start: int, end: int) -> str:
    lo = bisect.bisect_left(p.starts, start)
    hi = bisect.bisect_left(p.starts, end)
    return " ".join(t.text for t in p.tokens[lo:hi] if t.end <= end)


def _outside(p: _Program) -> str:
    """The tokens outside every declaration, in order."""
    kept, pos = [], 0
    for a, b in sorted((d.start, _decl_end(d)) for d in p.decls):
        kept += [t.text for t in p.tokens[bisect.bisect_left(p.starts, pos):bisect.bisect_left(p.starts, a)]]
        pos = max(pos, b)
    kept += [t.text for t in p.tokens[bisect.bisect_left(p.starts, pos):]]
    return " ".join(kept)


def _says_something(clause_text: str, keyword: str) -> bool:
    expr = re.sub(r"\{:[^}]*\}", "", clause_text[len(keyword):])
    expr = re.sub(r"\s+", "", expr).rstrip(";")
    while expr.startswith("(") and expr.endswith(")"):
        expr = expr[1:-1]
    return bool(expr) and expr != "true" and not _TRIVIAL.match(expr)


def _has_spec(p: _Program) -> bool:
    return any(_says_something(c.text, c.keyword) for d in p.decls for c in d.clauses
               if c.keyword in ("requires", "ensures"))


def check(original: str, candidate: str) -> Integrity:
    """Whether `candidate` (a model's whole program) is `original` with only contracts changed."""
    try:
        cand = _read(candidate)
    except DafnySyntaxError as e:
        return Integrity("unchecked", (), (f"the program could not be read: {e}",))
    orig = _read(original)  # the benchmark's own program: a failure here is a data error
    kinds: set[str] = set()
    details: list[str] = []

    have, want = _constructs(cand), _constructs(orig)
    for kind in ("assume", "expect", "axiom", "verify_false", "extern", "only", "options"):
        if have[kind] > want[kind]:
            kinds.add(kind)
            details.append(f"{kind}: {have[kind]} in the answer, {want[kind]} in the original")

    o_by = {d.name: d for d in orig.decls}
    c_by = {d.name: d for d in cand.decls}
    if len(c_by) < len(cand.decls):
        kinds.add("added")
        details.append("a declaration name is used twice")
    removed = [n for n in o_by if n not in c_by]
    added = [n for n in c_by if n not in o_by]

    def body(p: _Program, d: Declaration) -> str:
        return _span_text(p, *d.body) if d.body else ""

    for name in list(removed):
        twin = next((a for a in added if body(cand, c_by[a]) == body(orig, o_by[name])
                     and c_by[a].kind == o_by[name].kind), None)
        if twin is not None:
            kinds.add("renamed")
            details.append(f"renamed: {name} → {twin}")
            removed.remove(name)
            added.remove(twin)
    if removed:
        kinds.add("removed")
        details.append("removed: " + ", ".join(removed))
    if added:
        kinds.add("added")
        details.append("added: " + ", ".join(added))
    for name, od in o_by.items():
        cd = c_by.get(name)
        if cd is None:
            continue
        if cd.signature != od.signature:
            kinds.add("signature_changed")
            details.append(f"signature of {name}: {od.signature!r} → {cd.signature!r}")
        if cd.bodyless and not od.bodyless:
            kinds.add("bodyless")
            details.append(f"{name} has no body")
        elif body(cand, cd) != body(orig, od):
            kinds.add("body_changed")
            details.append(f"body of {name} differs")
        star = any(c.keyword == "decreases" and c.text.split()[1:] == ["*"] for c in cd.clauses)
        if star and not any(c.keyword == "decreases" and c.text.split()[1:] == ["*"] for c in od.clauses):
            kinds.add("decreases_star")
            details.append(f"decreases * on {name}")
    if _outside(cand) != _outside(orig):
        kinds.add("program_changed")
        details.append("text outside the declarations differs")
    if _has_spec(orig) and not _has_spec(cand):
        kinds.add("trivial_spec")
        details.append("no requires/ensures with content")
    if kinds:
        return Integrity("cheat", tuple(sorted(kinds)), tuple(details))
    return Integrity("ok")
