"""Is the candidate's contract as strong as the original's?  Dafny answers, on generated lemmas.

A verified answer can still say less than the benchmark's specification (``ensures result
>= 0`` where the original pins ``result * result <= x``) or ask more (``requires n == 3``
where the original allows ``1 <= n <= 250``).  Per declaration of the original, the
*strength file* holds up to two lemmas, proved by Dafny against the candidate program
(``include``d, so its functions are the candidate's and it is not verified again — Dafny
verifies only the file it is given unless ``--verify-included-files``):

- requires: the original's requires imply the candidate's (the candidate accepts every
  input the task allows)::

      lemma __strength_requires_F(<parameters>) requires <original> ensures <candidate> {}

- ensures: under the original's requires, the candidate's ensures imply the original's::

      lemma __strength_ensures_F(<parameters>, <results>)
        requires <original requires> requires <candidate ensures> ensures <original ensures> {}

A declaration whose ensures talk about two states (``old``, ``fresh``, ``unchanged``,
``allocated``) or that has ``modifies`` gets no ensures lemma (one state cannot express it):
it is reported as not compared, never as strong.  The verdict per lemma is read from
Dafny's output by line (`failed_lemmas`); a lemma that fails or times out means "not as
strong".  ``spec as strong as the original`` (Table 1's ``strong_at_k``) = strictly
verified and every generated lemma proved.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veribatch.tasks.dafnycomp.contracts import expression_tokens, split_parameters
from veribatch.tasks.dafnycomp.syntax import Declaration, _matching, declarations, tokenize

STRENGTH_VERSION = "dafnycomp-strength-v1"
PREFIX = "__strength_"
STRENGTH_FILE = "strength.dfy"
_TWO_STATE = re.compile(r"\b(old|fresh|unchanged|allocated)\s*\(")


@dataclass(frozen=True)
class StrengthFile:
    text: str                     # the Dafny program to verify
    lemmas: tuple[str, ...]       # generated lemma names
    not_compared: tuple[str, ...]  # declarations (or their ensures) that got no lemma, with why


@dataclass(frozen=True)
class _Header:
    generics: str        # "<T>" or ""
    params: list[str]    # "x: int" pieces, in order
    args: list[str]      # parameter names
    results: list[str]   # "r: int" pieces of named results


def _header(program: str, d: Declaration) -> _Header | None:
    toks = tokenize(program[d.start:d.signature_end], comments=False)
    texts = [t.text for t in toks]
    try:
        i = texts.index(d.name)
    except ValueError:
        return None
    sig = program[d.start:d.signature_end]
    generics = ""
    j = i + 1
    if j < len(toks) and toks[j].text == "<":
        depth, k = 0, j
        while k < len(toks):
            depth += {"<": 1, ">": -1}.get(toks[k].text, 0)
            if depth == 0:
                break
            k += 1
        generics = sig[toks[j].start:toks[k].end]
        j = k + 1
    if j >= len(toks) or toks[j].text != "(":
        return None
    close = _matching(toks, j, sig)
    params = split_parameters(sig[toks[j].end:toks[close].start])
    results: list[str] = []
    rest = toks[close + 1:]
    if len(rest) > 1 and rest[0].text in ("returns", ":") and rest[1].text == "(":
        k = close + 2
        results = split_parameters(sig[toks[k].end:toks[_matching(toks, k, sig)].start])
    args = [p.split(":")[0].split()[-1] for p in params]
    return _Header(generics, params, args, results)


def _conj(d: Declaration, keyword: str) -> str | None:
    parts = []
    for c in d.clauses:
        if c.keyword != keyword:
            continue
        toks = expression_tokens(c)
        if not toks:
            continue
        parts.append("(" + c.text[toks[0].start:toks[-1].end] + ")")
    return " && ".join(parts) if parts else None


def strength_file(original: str, candidate: str, include: str = "program.dfy") -> StrengthFile:
    """The lemmas comparing `candidate`'s contracts with `original`'s (`include`: the file
    name the candidate is written to beside the strength file)."""
    cand_by = {d.name: d for d in declarations(candidate)}
    lemmas: list[str] = []
    skipped: list[str] = []
    # the included candidate is part of the question: its hash keeps a result cache honest
    digest = hashlib.sha256(candidate.encode()).hexdigest()
    chunks = [f'// candidate sha256 {digest}\ninclude "{include}"\n']
    for od in declarations(original):
        cd = cand_by.get(od.name)
        if cd is None:
            skipped.append(f"{od.name}: not in the answer")
            continue
        head = _header(original, od)
        if head is None:
            skipped.append(f"{od.name}: signature not understood")
            continue
        o_req, c_req = _conj(od, "requires"), _conj(cd, "requires")
        o_ens, c_ens = _conj(od, "ensures"), _conj(cd, "ensures")
        params = ", ".join(head.params)
        if c_req is not None:
            name = f"{PREFIX}requires_{od.name}"
            lemmas.append(name)
            chunks.append(f"\nlemma {name}{head.generics}({params})\n"
                          + (f"  requires {o_req}\n" if o_req else "") + f"  ensures {c_req}\n{{\n}}\n")
        if o_ens is None:
            continue
        if _TWO_STATE.search(o_ens + " " + (c_ens or "")) or any(
                c.keyword == "modifies" for c in (*od.clauses, *cd.clauses)):
            skipped.append(f"{od.name}: ensures about two states (old/fresh/modifies)")
            continue
        if od.kind in ("function", "predicate") and head.results:
            skipped.append(f"{od.name}: named function result")
            continue
        name = f"{PREFIX}ensures_{od.name}"
        lemmas.append(name)
        all_params = ", ".join([*head.params, *head.results])
        chunks.append(f"\nlemma {name}{head.generics}({all_params})\n"
                      + (f"  requires {o_req}\n" if o_req else "")
                      + (f"  requires {c_ens}\n" if c_ens else "") + f"  ensures {o_ens}\n{{\n}}\n")
    return StrengthFile("".join(chunks), tuple(lemmas), tuple(skipped))


def declarations_hit(program: str, file_name: str, items: list[dict[str, Any]]) -> Counter[str]:
    """How many of Dafny's diagnostics (`items`: errors or warnings from
    `verifiers.dafny.interpret`, each with file and line) point into each declaration of
    `program`, which Dafny printed as `file_name` (their own line, not related locations)."""
    decls = declarations(program)
    spans = [(program.count("\n", 0, d.start) + 1,
              program.count("\n", 0, max([d.signature_end, *(c.end for c in d.clauses), *(d.body or ())])) + 1)
             for d in decls]
    out: Counter[str] = Counter()
    for e in items:
        if e.get("line") is None or Path(str(e.get("file") or "")).name != file_name:
            continue
        for d, (a, b) in zip(decls, spans, strict=True):
            if a <= int(e["line"]) <= b:
                out[d.name] += 1
    return out


def newly_vacuous(candidate: Counter[str], original: Counter[str]) -> list[str]:
    """Declarations with more "proved using contradictory assumptions" warnings in the answer
    than in the original (whose own `assume false` warns too: judged against itself)."""
    return sorted(n for n, c in candidate.items() if c > original.get(n, 0))


def failed_lemmas(program: str, file_name: str, errors: list[dict[str, Any]]) -> set[str]:
    """Names of the declarations of `program` an error of Dafny's points into."""
    return set(declarations_hit(program, file_name, errors))


def strength_verdict(sf: StrengthFile, verdict: Any, file_name: str = STRENGTH_FILE) -> dict[str, Any]:
    """Record fields from Dafny's verdict (`verifiers` result) on the strength file."""
    errors = list(verdict.extras.get("errors") or [])
    phase = verdict.extras.get("phase")
    if phase in ("parse", "resolution", "none") or str(verdict.status) == "ERROR":
        return {"spec_as_strong": None, "strength_status": f"not_checked ({phase})",
                "strength_failed": "[]"}
    failed = failed_lemmas(sf.text, file_name, errors)
    undecided = bool(verdict.extras.get("timeouts") or verdict.extras.get("out_of_resource"))
    strong = not failed and not undecided and str(verdict.status) == "TRUE"
    return {"spec_as_strong": strong, "strength_status": "as_strong" if strong else "weaker_or_undecided",
            "strength_failed": json.dumps(sorted(failed))}
