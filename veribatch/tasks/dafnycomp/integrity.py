"""Integrity of a candidate program under the *strict* protocol: nothing that makes Dafny
accept a wrong program.

The paper scores Dafny's verdict on the model's output as is (App. G: "all model outputs
are used directly for Dafny verification"; App. H's answers add loop invariants and helper
code and count as ordinary results): that is the *paper protocol* of Table 1, and it needs
no integrity check.  Beside it we report a *strict protocol* that refuses exactly what lets
Dafny say "verified" about a program that is not the task's program or whose proof is not
a proof.  Refused (`CHEAT_KINDS`):

- switches that make Dafny skip or trust something: more ``assume``/``expect`` than the
  original, ``{:axiom}`` outside a declaration that keeps its body, ``{:verify false}``,
  ``{:extern}``, ``{:only}``, ``{:options}``, a declaration without the body the original
  gives it, an added bodyless declaration (an axiom), ``decreases *`` in any spelling;
- a different program: a declaration removed or renamed, a changed signature (attributes
  aside), an implementation change in a body, other text outside the declarations;
- a contract that makes the proof vacuous or empty: ``requires`` that cannot all hold
  (``false``, ``0 > 1``, ``x > 10`` with ``x < 5``, ``forall k :: k < x``, a helper
  predicate whose body is false, a helper function whose value breaks a required equation)
  where the original's can, or no ``requires``/``ensures`` that says anything (``true``,
  ``1 > 0``, ``x == x``, a helper predicate that is true) where the original has some.  z3
  decides, through the program's functions and predicates (`contracts`, `expressions`):
  a helper is read for what it says, not for its name.

Allowed, as the paper allows them (recorded as ``notes``): added or changed loop
invariants, loop ``decreases``/``modifies``, ``assert`` (also ``assert ... by {...}``),
``calc``, ``reveal``, ghost variables and lemma calls in bodies; added helper lemmas,
functions, predicates and methods *with* bodies (Dafny proves them); ``{:axiom}`` on a
declaration that keeps its body (Dafny still proves the body against its contract; the
attribute only matters for a bodyless one); the program wrapped in a ``module`` (the same
declarations are verified).  Which contracts are *as strong as the original's* is a
separate question, answered by Dafny on generated lemmas (`strength`), and whether a proof
used contradictory assumptions by Dafny's ``--warn-contradictory-assumptions`` (the verify
stage): neither can be decided from the text in general.

Constructs the original itself uses (several DafnyComp programs contain ``assume
{:axiom}`` or ``decreases *``) are allowed up to the original's count.  ``unchecked``: not
trusted under the strict protocol, while Dafny's verdict still counts under the paper's —
a program the scanner cannot read, or one whose contract leaves a question z3 cannot
settle (whether a changed declaration's requires can all hold, or whether any clause says
something, when a clause leaves the fragment or z3 answers unknown: recursive helpers,
quantifiers over sequences).  A cheat found elsewhere still makes it a ``cheat``.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections import Counter
from dataclasses import dataclass

from veribatch.tasks.dafnycomp.contracts import Answer, Judge, is_decreases_star
from veribatch.tasks.dafnycomp.expressions import FunctionDef, definitions, recursive
from veribatch.tasks.dafnycomp.syntax import (
    DafnySyntaxError,
    Declaration,
    Token,
    _ends_operand,
    _first_on_line,
    _matching,
    declarations,
    tokenize,
)

# Also versions `contracts` (vacuous / trivial contracts): its answers are integrity
# verdicts, so a change to its rules bumps this string.
INTEGRITY_VERSION = "dafnycomp-integrity-v3-through-helpers"

CHEAT_KINDS: dict[str, str] = {
    "assume": "more `assume` statements than the original",
    "expect": "more `expect` statements than the original (the verifier assumes them)",
    "axiom": "more `{:axiom}` attributes than the original (outside declarations that keep their body)",
    "verify_false": "`{:verify false}`: the member is skipped by the verifier",
    "extern": "`{:extern}`: contracts trusted, not proved",
    "only": "`{:only}`: every other member is skipped",
    "options": "`{:options ...}`: command-line options (e.g. --allow-axioms) from inside the program",
    "decreases_star": "`decreases *` (any spelling) where the original's declaration has none (termination not proved)",
    "bodyless": "a declaration without the body it has in the original, or an added bodyless one (an axiom)",
    "removed": "a declaration of the original is missing",
    "renamed": "a declaration of the original under another name",
    "signature_changed": "a declaration's signature differs from the original (attributes aside)",
    "body_changed": "a body's implementation differs (proof annotations, comments and whitespace aside)",
    "program_changed": "text outside the declarations differs (a module wrapper aside)",
    "vacuous": "requires clauses that cannot all hold (every body verifies vacuously) where the original's can "
               "(read through the program's functions and predicates)",
    "trivial_spec": "no requires/ensures says anything (all absent or trivially true, helpers unfolded) where the "
                    "original has some",
}
NOTES: dict[str, str] = {
    "proof_annotations": "a body's loop invariants, asserts, calc, reveal, ghost variables or lemma calls differ",
    "helpers_added": "declarations with bodies added (helper lemmas, functions...)",
    "axiom_on_body": "`{:axiom}` on a declaration that keeps its body",
    "module_wrapped": "the program is wrapped in a module",
    "attributes_changed": "a signature's attributes differ (e.g. {:induction}, {:vcs_split_on_every_assert})",
}
_ATTRIBUTE_KINDS = {"axiom": "axiom", "verify": "verify_false", "extern": "extern", "only": "only",
                    "options": "options"}
_LOOP_SPEC = frozenset(("invariant", "decreases", "modifies"))
_PROOF_STATEMENTS = frozenset(("assert", "assume", "expect", "reveal", "ghost"))


@dataclass(frozen=True)
class Integrity:
    status: str                  # ok | cheat | unchecked
    kinds: tuple[str, ...] = ()  # keys of CHEAT_KINDS, sorted
    details: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # keys of NOTES: allowed edits the answer made

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class _Program:
    text: str
    tokens: list[Token]          # without comments
    decls: list[Declaration]
    starts: list[int]            # token start offsets, for bisection


@functools.lru_cache(maxsize=256)
def _read(text: str) -> _Program:
    tokens = tokenize(text, comments=False)
    return _Program(text, tokens, declarations(text, tokens), [t.start for t in tokens])


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
    header_axioms = sum(1 for d in p.decls if d.body is not None for a in d.attributes
                        if _attribute_kind(a) == "axiom")
    for t in p.tokens:
        if t.kind == "ident" and t.text in ("assume", "expect"):
            c[t.text] += 1
        elif t.kind == "attr" and (kind := _attribute_kind(t.text)):
            c[kind] += 1
    c["axiom"] -= header_axioms
    c["axiom_on_body"] = header_axioms
    return c


def _decl_end(d: Declaration) -> int:
    return d.body[1] if d.body else max([d.signature_end, *(c.end for c in d.clauses)])


def _span(p: _Program, start: int, end: int) -> list[Token]:
    lo = bisect.bisect_left(p.starts, start)
    hi = bisect.bisect_left(p.starts, end)
    return [t for t in p.tokens[lo:hi] if t.end <= end]


def _statement_start(toks: list[Token], i: int) -> bool:
    if i == 0:
        return True
    prev = toks[i - 1].text
    return prev in (";", "{", "}") or (prev == ">" and i > 1 and toks[i - 2].text == "=")


def implementation(p: _Program, d: Declaration, lemmas: set[str]) -> tuple[str, str]:
    """(the body's implementation tokens, its proof annotations), each joined by spaces: loop
    invariant/decreases/modifies clauses, assert (with `by` blocks), assume, expect, reveal,
    ghost declarations, calc blocks and lemma-call statements are proof, the rest is code."""
    if d.body is None:
        return "", ""
    toks = _span(p, *d.body)
    ghosts = {toks[k + 2].text for k in range(len(toks) - 2)
              if toks[k].text == "ghost" and toks[k + 1].text == "var" and toks[k + 2].kind == "ident"}
    code: list[str] = []
    proof: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        j = i
        if t.kind == "ident" and t.text in _LOOP_SPEC and (i == 0 or toks[i - 1].text != "."):
            j = _skip_loop_clause(toks, i, p.text)
        elif t.kind == "ident" and _statement_start(toks, i) and (
                t.text in _PROOF_STATEMENTS or t.text == "calc"
                or (t.text in lemmas and i + 1 < len(toks) and toks[i + 1].text == "(")
                or (t.text in ghosts and i + 2 < len(toks) and toks[i + 1].text == ":"
                    and toks[i + 2].text == "=")):
            j = _skip_statement(toks, i, p.text)
        elif t.kind == "ident" and t.text == "forall" and _statement_start(toks, i):
            j = _skip_proof_forall(toks, i, p.text)
        if j > i:
            proof += [x.text for x in toks[i:j]]
            i = j
            continue
        code.append(t.text)
        i += 1
    return " ".join(code), " ".join(proof)


def _skip_loop_clause(toks: list[Token], i: int, text: str) -> int:
    """Index after a loop specification clause starting at `i` (up to the next clause or the
    loop body's `{`, decided as for a declaration's clauses)."""
    j, bars = i + 1, 0
    while j < len(toks):
        t = toks[j]
        if t.kind == "ident" and t.text in _LOOP_SPEC and toks[j - 1].text != ".":
            return j
        if t.kind == "punct" and t.text in "([":
            j = _matching(toks, j, text) + 1
            continue
        if t.kind == "punct" and t.text == "{":
            if _first_on_line(text, t) or _ends_operand(toks, j - 1, bars):
                return j
            j = _matching(toks, j, text) + 1
            continue
        if t.kind == "punct" and t.text == "}":
            return j
        if t.text == "|" and toks[j - 1].text != "|" and (j + 1 == len(toks) or toks[j + 1].text != "|"):
            bars += 1
        j += 1
    return j


def _skip_proof_forall(toks: list[Token], i: int, text: str) -> int:
    """Index after a `forall` *proof* statement (one with an `ensures` before its block),
    else `i` (an aggregate assignment `forall i | P { a[i] := 0; }` is code)."""
    j = i + 1
    while j < len(toks):
        t = toks[j]
        if t.kind == "punct" and t.text in "([":
            j = _matching(toks, j, text) + 1
            continue
        if t.kind == "punct" and t.text == "{":
            return i
        if t.kind == "ident" and t.text == "ensures":
            break
        if t.kind == "punct" and t.text in ";}":
            return i
        j += 1
    while j < len(toks):
        if toks[j].kind == "punct" and toks[j].text == "{" and (
                _first_on_line(text, toks[j]) or _ends_operand(toks, j - 1, 0)):
            return _matching(toks, j, text) + 1
        if toks[j].kind == "punct" and toks[j].text in "([{":
            j = _matching(toks, j, text) + 1
            continue
        j += 1
    return i


def _skip_statement(toks: list[Token], i: int, text: str) -> int:
    """Index after a statement starting at `i`: its `;` at depth 0, or the block of a `by`
    (assert ... by {...}) or of `calc {...}`."""
    j = i + 1
    while j < len(toks):
        t = toks[j]
        if t.kind == "punct" and t.text in "([{":
            close = _matching(toks, j, text)
            if t.text == "{" and (toks[i].text == "calc" or toks[j - 1].text == "by"):
                j = close + 1
                return j + 1 if j < len(toks) and toks[j].text == ";" else j
            j = close + 1
            continue
        if t.kind == "punct" and t.text == ";":
            return j + 1
        if t.kind == "punct" and t.text == "}":
            return j
        j += 1
    return j


def _outside(p: _Program) -> tuple[list[str], bool]:
    """The tokens outside every declaration, in order, without module wrappers (and whether
    there was one)."""
    kept: list[str] = []
    pos = 0
    for a, b in sorted((d.start, _decl_end(d)) for d in p.decls):
        kept += [t.text for t in p.tokens[bisect.bisect_left(p.starts, pos):bisect.bisect_left(p.starts, a)]]
        pos = max(pos, b)
    kept += [t.text for t in p.tokens[bisect.bisect_left(p.starts, pos):]]
    out: list[str] = []
    stack: list[bool] = []  # per open brace: is it a module's?
    wrapped = False
    i = 0
    while i < len(kept):
        if kept[i] == "module":
            j = i + 1
            while j < len(kept) and kept[j] not in ("{", "module"):
                j += 1
            if j < len(kept) and kept[j] == "{":
                stack.append(True)
                wrapped = True
                i = j + 1
                continue
        if kept[i] == "{":
            stack.append(False)
        elif kept[i] == "}" and stack and stack.pop():
            i += 1
            continue
        out.append(kept[i])
        i += 1
    return out, wrapped


def _requires(d: Declaration) -> list[str]:
    return [re.sub(r"\s+", " ", c.text) for c in d.clauses if c.keyword == "requires"]


def _vacuous(d: Declaration) -> bool:
    """The requires of `d` cannot all hold, read without the program's definitions."""
    return Judge(d).vacuous()


@functools.lru_cache(maxsize=256)
def _definitions(text: str) -> tuple[dict[str, FunctionDef], frozenset[str]]:
    defs = definitions(text, _read(text).decls)
    return defs, recursive(defs)


@functools.lru_cache(maxsize=4096)
def _vacuity(d: Declaration, text: str, added: frozenset[str] = frozenset()) -> Answer:
    """Whether `d`'s requires can all hold, through the functions and predicates of the
    program `text` (a helper that is `false` is seen as `false`); `added`: the clauses the
    answer wrote, asked first."""
    return Judge(d, *_definitions(text)).vacuity(added)


@functools.lru_cache(maxsize=1024)
def _spec(text: str) -> Answer:
    """Whether some requires/ensures of the program says something: ``says`` (one is not
    valid, decided), ``trivial`` (every one is valid: absent, ``true``, or a helper that
    unfolds to ``true``) or ``unknown`` (none decided to say something, some undecided)."""
    defs, rec = _definitions(text)
    slow = re.compile(r"\b(forall|exists|" + "|".join(map(re.escape, rec)) + r")\b" if rec else r"\b(forall|exists)\b")
    clauses = [(d, c) for d in _read(text).decls
               for c in d.clauses if c.keyword in ("requires", "ensures")]
    clauses.sort(key=lambda dc: bool(slow.search(dc[1].text)))  # z3 answers these first, fast
    judges: dict[Declaration, Judge] = {}
    unknown: list[str] = []
    for d, c in clauses:
        judge = judges.setdefault(d, Judge(d, defs, rec))
        got = judge.triviality(c)
        if got.verdict == "says":
            return got
        if got.verdict == "unknown":
            unknown.append(f"{d.name}: {got.why}")
    return Answer("unknown", "; ".join(unknown)) if unknown else Answer("trivial")


def _signature(d: Declaration) -> tuple[str, str]:
    """(the signature without attributes, its attributes)."""
    toks = tokenize(d.signature, comments=False)
    return (" ".join(t.text for t in toks if t.kind != "attr"),
            " ".join(t.text for t in toks if t.kind == "attr"))


def check(original: str, candidate: str) -> Integrity:
    """Whether `candidate` (a model's whole program) may count under the strict protocol."""
    try:
        cand = _read(candidate)
    except DafnySyntaxError as e:
        return Integrity("unchecked", (), (f"the program could not be read: {e}",))
    orig = _read(original)  # the benchmark's own program: a failure here is a data error
    o_lemmas = {d.name for d in orig.decls if d.kind == "lemma"}
    c_lemmas = {d.name for d in cand.decls if d.kind == "lemma"}
    kinds: set[str] = set()
    notes: set[str] = set()
    details: list[str] = []
    undecided: list[str] = []  # questions z3 could not settle: unchecked unless a cheat is found

    def flag(kind: str, detail: str) -> None:
        kinds.add(kind)
        details.append(detail)

    have, want = _constructs(cand), _constructs(orig)
    for kind in ("assume", "expect", "axiom", "verify_false", "extern", "only", "options"):
        if have[kind] > want[kind]:
            flag(kind, f"{kind}: {have[kind]} in the answer, {want[kind]} in the original")
    if have["axiom_on_body"] > want["axiom_on_body"]:
        notes.add("axiom_on_body")

    o_by = {d.name: d for d in orig.decls}
    c_by: dict[str, Declaration] = {}
    for d in cand.decls:
        if d.name in c_by:
            flag("renamed", f"the name {d.name} is declared twice")
        c_by.setdefault(d.name, d)
    removed = [n for n in o_by if n not in c_by]
    added = [n for n in c_by if n not in o_by]

    def code(p: _Program, d: Declaration, lemmas: set[str]) -> tuple[str, str]:
        return implementation(p, d, lemmas)

    for name in list(removed):
        twin = next((a for a in added if c_by[a].kind == o_by[name].kind
                     and code(cand, c_by[a], c_lemmas)[0] == code(orig, o_by[name], o_lemmas)[0]), None)
        if twin is not None:
            flag("renamed", f"renamed: {name} → {twin}")
            removed.remove(name)
            added.remove(twin)
    if removed:
        flag("removed", "removed: " + ", ".join(removed))
    for name in added:
        if c_by[name].bodyless:
            flag("bodyless", f"added without a body (an axiom): {name}")
        else:
            notes.add("helpers_added")
    for name, od in o_by.items():
        cd = c_by.get(name)
        if cd is None:
            continue
        (o_sig, o_attr), (c_sig, c_attr) = _signature(od), _signature(cd)
        if c_sig != o_sig:
            flag("signature_changed", f"signature of {name}: {od.signature!r} → {cd.signature!r}")
        elif c_attr != o_attr:
            notes.add("attributes_changed")
        if cd.bodyless and not od.bodyless:
            flag("bodyless", f"{name} has no body")
        elif not od.bodyless:
            (c_code, c_proof), (o_code, o_proof) = code(cand, cd, c_lemmas), code(orig, od, o_lemmas)
            if c_code != o_code:
                flag("body_changed", f"the implementation of {name} differs")
            elif c_proof != o_proof:
                notes.add("proof_annotations")
        if any(is_decreases_star(c) for c in cd.clauses) and not any(is_decreases_star(c) for c in od.clauses):
            flag("decreases_star", f"decreases * on {name}")
        if _requires(cd) != _requires(od):
            vac = _vacuity(cd, candidate, frozenset(_requires(cd)) - frozenset(_requires(od)))
            if vac.verdict == "vacuous" and _vacuity(od, original).verdict != "vacuous":
                flag("vacuous", f"the requires clauses of {name} cannot all hold")
            elif vac.verdict == "unknown":
                undecided.append(f"whether the requires of {name} can all hold: {vac.why}")
    for name in added:
        cd = c_by[name]
        if any(is_decreases_star(c) for c in cd.clauses):
            flag("decreases_star", f"decreases * on the added {name}")
    (c_out, c_wrapped), (o_out, _) = _outside(cand), _outside(orig)
    if c_out != o_out:
        flag("program_changed", "text outside the declarations differs")
    elif c_wrapped:
        notes.add("module_wrapped")
    o_spec = _spec(original).verdict
    if o_spec != "trivial":
        spec = _spec(candidate)
        if spec.verdict == "trivial":
            flag("trivial_spec", "no requires/ensures with content")
        elif spec.verdict == "unknown" and o_spec == "says":  # else no worse than the original
            undecided.append(f"whether any requires/ensures says something: {spec.why}")
    if kinds:
        return Integrity("cheat", tuple(sorted(kinds)), tuple(details), tuple(sorted(notes)))
    if undecided:
        return Integrity("unchecked", (), tuple(undecided), tuple(sorted(notes)))
    return Integrity("ok", notes=tuple(sorted(notes)))
