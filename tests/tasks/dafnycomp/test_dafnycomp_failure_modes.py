"""Failure modes (Table 2) from real Dafny output: every recorded case, both wordings, and
the mapping table in docs/dafnycomp.md is the one the code uses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tasks.dafnycomp.failure_modes import (
    FRAGILITY,
    INSTABILITY,
    MISALIGNMENT,
    MODE_OF,
    OTHER,
    TITLES,
    classify,
)
from verifiers.base import FinishedRun
from verifiers.dafny import OBLIGATIONS, DafnyTool

DOCS = Path(__file__).resolve().parents[3] / "docs" / "dafnycomp.md"
F, M, I, O = FRAGILITY, MISALIGNMENT, INSTABILITY, OTHER

# case → (primary mode, every error's mode in output order); None: the program verified
EXPECTED: dict[str, tuple[str | None, list[str]]] = {
    "verified_ok": (None, []),
    "postcondition": (F, [F]),
    "precondition_call": (F, [F] * 4),
    "invariant_entry": (M, [M, M]),
    "assertion": (M, [M, M]),
    "index_out_of_range": (M, [M]),
    "invariant_maintained": (I, [I, I]),
    "termination": (I, [I]),
    "decreases": (I, [I]),
    "multiple_errors": (I, [I, F, F, M, M]),
    "custom_error_attr": (O, [O, O, O, F, F, F, M, I, I]),
    "default_snippets": (M, [M, F]),
    "parse_error_resolve": (O, [O]),
    "parse_error_verify": (O, [O] * 3),
    "parse_function_method": (O, [O] * 2),
    "resolution_type_error": (O, [O] * 3),
    "resolution_method_in_expr": (O, [O] * 3),
    "timeout": (O, [O]),
    "out_of_resource": (O, [O]),
    "assume_warning": (None, []),
    "trigger_warning": (None, []),
}


@pytest.mark.parametrize("wording", ("v4.10.0", "head"))
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_modes_of_recorded_cases(recorded_dafny, case: str, wording: str) -> None:
    verdict = DafnyTool().determine_result(FinishedRun(4, None, recorded_dafny(case, wording), "exit"))
    assert classify(verdict.extras["errors"]) == EXPECTED[case]


def test_every_obligation_has_a_mode() -> None:
    assert {name for _, name in OBLIGATIONS} | {"unclassified"} <= set(MODE_OF)


def test_docs_table_is_the_mapping() -> None:
    """docs/dafnycomp.md's mapping table lists exactly MODE_OF."""
    text = DOCS.read_text()
    section = text[text.index("## Failure modes"):]
    rows = re.findall(r"^\| `([a-z_]+)` \| [^|]*\| ([^|]+?) \|", section, re.MULTILINE)
    titles = {v: k for k, v in TITLES.items()}
    assert {label: titles[mode.strip()] for label, mode in rows} == dict(MODE_OF)
