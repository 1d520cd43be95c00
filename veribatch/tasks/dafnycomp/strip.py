"""Spec stripping (DafnyComp §3.3): remove every contract clause before a body, keep the rest.

For each method, function, predicate, lemma and constructor, the ``requires``, ``ensures``,
``reads``, ``modifies`` and ``decreases`` clauses between its signature and its opening
brace (or the end of a bodyless declaration) are removed together with the whitespace
before them, so a header keeps its own lines and the body follows it unchanged.  Loop
invariants, loop ``decreases``/``modifies``, asserts and bodies are inside the braces and
are never touched.  Comments outside clauses stay.

Properties the tests check over the 125 real programs: ``strip(strip(p)) == strip(p)``,
every body is byte-identical, and no contract keyword is left before any body.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from veribatch.tasks.dafnycomp.syntax import declarations, tokenize

STRIP_VERSION = "dafnycomp-strip-v1"


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
    for d in decls:
        for c in d.clauses:
            # from the end of whatever precedes the clause (signature, clause or comment)
            k = bisect.bisect_right(ends, c.start)
            prev_end = ends[k - 1] if k else 0
            cuts.append((prev_end, c.end))
            removed[c.keyword] += 1
    cuts.sort()
    parts, pos = [], 0
    for a, b in cuts:
        a = max(a, pos)
        parts.append(program[pos:a])
        pos = b
    parts.append(program[pos:])
    return StripResult("".join(parts), len(decls), removed, Counter(d.kind for d in decls))


def strip(program: str) -> str:
    return strip_specs(program).text
