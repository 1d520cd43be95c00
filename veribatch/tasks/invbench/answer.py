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

Under ``-o prompt=wonda`` the answer is wonda's JSON object instead, read by
`parse_json_answer` (one request per marker, so the marker is known in advance).

The reading is linear in the answer's length (string methods, and regular expressions only
where they cannot backtrack over a long run), and an answer over `MAX_ANSWER_CHARS` is
unparsable without being read: a model's answer never stalls the verify stage.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

MAX_ANSWER_CHARS = 65_536  # two short lines are asked for; prose around them is allowed

_FENCE = re.compile(r"^\s*```[\w+-]*\s*$")
_LOC_KEYS = ("location", "marker", "label", "loc")
_INV_KEYS = ("loop invariant", "invariant", "predicate")
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


def _field(line: str, keys: tuple[str, ...]) -> str | None:
    """The value of a ``key: value`` (or ``key = value``) line, or None when the line is not
    one.  Before the key: spaces, list or quote markers, then emphasis; between key and
    colon: spaces and emphasis.  Each run is skipped once, left to right (a regular
    expression with these adjacent optional runs backtracks quadratically on a long one)."""
    i = _skip(line, 0, str.isspace)
    i = _skip(line, i, lambda c: c in "-*>")
    i = _skip(line, i, str.isspace)
    i = _skip(line, i, lambda c: c == "*")
    i = _skip(line, i, str.isspace)
    low = line[i:i + 16].lower()
    for key in keys:
        if low.startswith(key):
            j = _skip(line, i + len(key), str.isspace)
            j = _skip(line, j, lambda c: c == "*")
            j = _skip(line, j, str.isspace)
            if line[j:j + 1] in (":", "=") and line[j + 1:]:
                return line[j + 1:].strip()
            return None
    return None


def _skip(line: str, i: int, within: Callable[[str], bool]) -> int:
    while i < len(line) and within(line[i]):
        i += 1
    return i


def _strip_markup(value: str) -> str:
    i, j = 0, len(value)
    while True:  # peel emphasis, backticks and a trailing ';' in any order (one pass: linear)
        before = (i, j)
        while i < j and (value[i] == "*" or value[i].isspace()):
            i += 1
        while j > i and (value[j - 1] in "*;" or value[j - 1].isspace()):
            j -= 1
        if j - i >= 2 and value[i] == value[j - 1] == "`":
            i, j = i + 1, j - 1
        if (i, j) == before:
            break
    v = value[i:j]
    m = _ASSERT.match(v)
    if m:
        v = m.group("e").strip()
    return v


def parse_answer(text: str, labels: list[int]) -> Answer | Unparsable:
    """Find exactly one (location, invariant) pair in `text`; `labels` are the valid markers."""
    if len(text) > MAX_ANSWER_CHARS:
        return Unparsable(f"answer of {len(text)} characters (at most {MAX_ANSWER_CHARS} are read)")
    locs: list[str] = []
    invs: list[str] = []
    for line in text.splitlines():
        if _FENCE.match(line):
            continue
        value = _field(line, _LOC_KEYS)
        if value is not None:
            locs.append(_strip_markup(value))
            continue
        value = _field(line, _INV_KEYS)
        if value is not None:
            invs.append(_strip_markup(value))
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


# wonda's answer: one object on one line; its two values are a marker name and one C
# expression, so a line longer than this is not an answer (checked before json.loads)
MAX_JSON_CHARS = 8_192
_JSON_FENCE = "```json"
JSON_KEYS = frozenset({"marker", "content"})


def parse_json_answer(text: str, target: int) -> Answer | Unparsable:
    """wonda's answer format for marker `target`: a ```json fenced block holding one line, a
    JSON object with exactly the keys ``marker`` and ``content`` (strings), ``marker`` equal
    to ``INVARIANT_MARKER_<target>``.  Prose around the block is allowed, as wonda's own
    reader allows it; anything else is `Unparsable` with the reason, never an exception."""
    if len(text) > MAX_ANSWER_CHARS:
        return Unparsable(f"answer of {len(text)} characters (at most {MAX_ANSWER_CHARS} are read)")
    start = text.find(_JSON_FENCE)
    if start < 0:
        return Unparsable("no ```json block")
    body_at = start + len(_JSON_FENCE)
    end = text.find("```", body_at)
    if end < 0:
        return Unparsable("the ```json block is not closed")
    body = text[body_at:end].strip()
    if not body:
        return Unparsable("the ```json block is empty")
    if "\n" in body:
        return Unparsable("the ```json block holds more than one line")
    if len(body) > MAX_JSON_CHARS:
        return Unparsable(f"JSON object of {len(body)} characters (at most {MAX_JSON_CHARS})")
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError) as e:
        return Unparsable(f"not JSON: {e}")
    if not isinstance(obj, dict):
        return Unparsable(f"JSON {type(obj).__name__}, not an object")
    if set(obj) != JSON_KEYS:
        return Unparsable(f"keys {sorted(obj)}: expected exactly {sorted(JSON_KEYS)}")
    marker, content = obj["marker"], obj["content"]
    if not isinstance(marker, str) or not isinstance(content, str):
        return Unparsable("marker and content must be strings")
    want = f"INVARIANT_MARKER_{target}"
    if marker.strip() != want:
        return Unparsable(f"marker {marker[:80]!r} is not the target {want}")
    if not content.strip():
        return Unparsable("empty content")
    return Answer(target, content.strip())
