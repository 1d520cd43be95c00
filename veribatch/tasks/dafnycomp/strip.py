"""Spec stripping (DafnyComp §3.3): remove every contract clause before a body, keep the rest.

For each method, function, predicate, lemma and constructor, the ``requires``, ``ensures``,
``reads``, ``modifies`` and ``decreases`` clauses between its signature and its opening
brace (or the end of a bodyless declaration) are removed together with the whitespace
before them, so a header keeps its own lines and the body follows it unchanged.  Loop
invariants, loop ``decreases``/``modifies``, asserts and bodies are inside the braces and
are never touched.  Comments among the removed clauses go with them (an end-of-line
``// Upper bound estimate`` after an ``ensures`` is a hint about the removed spec, and
would otherwise move up onto the signature line); comments elsewhere stay.

Properties the tests check over the 125 real programs: ``strip(strip(p)) == strip(p)``,
every body is byte-identical, and no contract keyword is left before any body.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from veribatch.tasks.dafnycomp.syntax import Declaration, declarations, tokenize

STRIP_VERSION = "dafnycomp-strip-v2"


@dataclass(frozen=True)
class StripResult:
    text: str                                   # the stripped program
    declarations: int                           # methods, functions, predicates, lemmas...
    removed: Counter[str] = field(default_factory=Counter)  # contract keyword → clauses removed
    kinds: Counter[str] = field(default_factory=Counter)    # declaration kind → count

    @property
    def clauses_removed(self) -> int:
        return sum(self.removed.values())


def strip_specs(program: str) -> StripResult:
    """The program without contract clauses (raises `DafnySyntaxError` on a program the
    scanner cannot read)."""
    all_tokens = tokenize(program)
    decls = declarations(program, all_tokens)
    ends = [t.end for t in all_tokens]  # token ends, comments included, in order
    cuts: list[tuple[int, int]] = []
    removed: Counter[str] = Counter()
    comments = [t for t in all_tokens if t.kind == "comment"]
    for d in decls:
        spans = [(c.start, c.end) for c in d.clauses]
        for c in d.clauses:
            removed[c.keyword] += 1
        if d.clauses:
            spans += [(t.start, t.end) for t in comments if _in_contract(program, d, t.start)]
        for start, end in spans:
            # from the end of whatever precedes the span (signature, clause or comment)
            k = bisect.bisect_right(ends, start)
            prev_end = ends[k - 1] if k else 0
            cuts.append((prev_end, end))
    cuts.sort()
    parts, pos = [], 0
    for a, b in cuts:
        a = max(a, pos)
        parts.append(program[pos:a])
        pos = b
    parts.append(program[pos:])
    return StripResult("".join(parts), len(decls), removed, Counter(d.kind for d in decls))


def _in_contract(program: str, d: Declaration, pos: int) -> bool:
    """Whether a comment at `pos` sits among `d`'s contract clauses: between the signature
    and the body, or (bodyless) before the last clause ends or on that clause's line."""
    if pos < d.signature_end:
        return False
    if d.body is not None:
        return pos < d.body[0]
    last = max(c.end for c in d.clauses)
    return pos < last or "\n" not in program[last:pos]


def strip(program: str) -> str:
    return strip_specs(program).text
