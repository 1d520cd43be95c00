"""Reading a model's answer: which loop (marker) and which predicate.

The prompt (`tasks.invbench.prompt`) asks for two lines::

    location: INVARIANT_MARKER_2
    invariant: x % 7 == 3

The parser tolerates what models wrap around that (code fences, markdown emphasis,
backticks, prose before and after, a trailing ``;``, ``assert(...)`` around the
predicate) but never guesses: a missing predicate, a location that names no marker,
or two different answers in one completion make the answer *unparsable*, recorded as
such.  The one inference it makes is a missing location when the program has exactly
one marker — there is nothing to choose then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^\s*```[\w+-]*\s*$")
_LOC = re.compile(
    r"^\s*[-*>]*\s*\**\s*(?:location|loc|marker|label)\s*\**\s*[:=]\s*(?P<v>.+?)\s*$",
    re.IGNORECASE,
)
_INV = re.compile(
    r"^\s*[-*>]*\s*\**\s*(?:invariant|predicate|loop invariant)\s*\**\s*[:=]\s*(?P<v>.+?)\s*$",
    re.IGNORECASE,
)
_MARKER_REF = re.compile(r"^(?:INVARIANT_MARKER_)?(?P<k>\d+)(?:\s*\(\s*\))?\s*;?$", re.IGNORECASE)
_ASSERT = re.compile(r"^(?:assert|__VERIFIER_assert)\s*\((?P<e>.*)\)\s*;?$", re.DOTALL)


@dataclass(frozen=True)
class Answer:
    """A parsed candidate q = ⟨ψ, ℓ⟩: `label` is the loop's marker number, `predicate` ψ."""

    label: int
    predicate: str


@dataclass(frozen=True)
class Unparsable:
    reason: str


def _strip_markup(value: str) -> str:
    v = value.strip()
    while True:  # peel emphasis, backticks and a trailing ';' in any order
        before = v
        v = v.strip("*").strip().rstrip(";").strip()
        if len(v) >= 2 and v[0] == v[-1] == "`":
            v = v[1:-1].strip()
        if v == before:
            break
    m = _ASSERT.match(v)
    if m:
        v = m.group("e").strip()
    return v


def parse_answer(text: str, labels: list[int]) -> Answer | Unparsable:
    """Find exactly one (location, invariant) pair in `text`; `labels` are the valid markers."""
    locs: list[str] = []
    invs: list[str] = []
    for line in text.splitlines():
        if _FENCE.match(line):
            continue
        m = _LOC.match(line)
        if m:
            locs.append(_strip_markup(m.group("v")))
            continue
        m = _INV.match(line)
        if m:
            invs.append(_strip_markup(m.group("v")))
    invs = [v for v in invs if v]
    if not invs:
        return Unparsable("no 'invariant:' line found")
    if len(set(invs)) > 1:
        return Unparsable(f"ambiguous: {len(set(invs))} different invariants given")
    if not locs:
        if len(labels) == 1:
            return Answer(labels[0], invs[0])
        return Unparsable(f"no 'location:' line and the program has {len(labels)} markers")
    found: set[int] = set()
    for loc in locs:
        m = _MARKER_REF.match(loc)
        if not m:
            return Unparsable(f"location {loc!r} is not a marker name")
        found.add(int(m.group("k")))
    if len(found) > 1:
        return Unparsable(f"ambiguous: {len(found)} different locations given")
    label = found.pop()
    if label not in labels:
        return Unparsable(f"location {locs[0]!r} names no marker (markers: {labels})")
    return Answer(label, invs[0])
