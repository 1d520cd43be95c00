"""A model's answer → GENUINE / SPURIOUS, or the named reason there is none.

The shared `tasks.extract.extract_label` reads the label (an explicit ``Answer: X`` line
wins, else the label words of the last line; two different labels there are a conflict),
and never guesses.  Outcomes recorded per answer:

``ok`` (a label), ``none`` (no label word), ``conflict`` (both labels in the final
answer), ``empty`` (a blank answer), ``engine_error`` (the engine failed on the request),
``truncated`` is not an outcome: a completion cut by ``max_tokens`` is parsed like any other
(its label may still be there), its ``finish_reason`` is kept in the record, and RQ1 counts
cut answers in a column of their own.

An answer without a label counts as *wrong* in accuracy (it is not a correct
classification) and is counted in its own column, so a reader sees how many there were.
"""

from __future__ import annotations

from dataclasses import dataclass

from veribatch.tasks.cebench.prompt import LABELS
from veribatch.tasks.extract import extract_label

PARSER_VERSION = "extract_label-v1"
OUTCOMES = ("ok", "none", "conflict", "empty", "engine_error")


@dataclass(frozen=True)
class Parsed:
    outcome: str
    label: str | None


def parse_answer(text: str | None, *, engine_error: str | None = None) -> Parsed:
    if engine_error:
        return Parsed("engine_error", None)
    got = extract_label(text, LABELS)
    return Parsed(got.outcome, got.label)
