"""Failure modes (Table 2) from real Dafny output: every recorded case, both wordings, and
the mapping table in docs/dafnycomp.md is the one the code uses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from veribatch.tasks.dafnycomp.failure_modes import (
    FRAGILITY,
    INSTABILITY,
    MISALIGNMENT,
    MODE_OF,
    OTHER,
    TITLES,
    classify,
)
from veribatch.verifiers.base import FinishedRun
from veribatch.verifiers.dafny import OBLIGATIONS, DafnyTool

DOCS = Path(__file__).resolve().parents[3] / "docs" / "dafnycomp.md"
FR, MI, IN, OT = FRAGILITY, MISALIGNMENT, INSTABILITY, OTHER

# case → (primary mode, every error's mode in output order); None: the program verified
EXPECTED: dict[str, tuple[str | None, list[str]]] = {
    "verified_ok": (None, []),
    "postcondition": (FR, [FR]),
    "precondition_call": (FR, [FR] * 4),
    "invariant_entry": (MI, [MI, MI]),
    "assertion": (MI, [MI, MI]),
    "index_out_of_range": (MI, [MI]),
    "invariant_maintained": (IN, [IN, IN]),
    "termination": (IN, [IN]),
    "decreases": (MI, [MI]),  # a measure given that does not decrease: §1(ii)
    "multiple_errors": (MI, [MI, FR, FR, MI, MI]),
    "custom_error_attr": (OT, [OT, OT, OT, FR, FR, FR, MI, IN, IN]),
    "default_snippets": (MI, [MI, FR]),
    "parse_error_resolve": (OT, [OT]),
    "parse_error_verify": (OT, [OT] * 3),
    "parse_function_method": (OT, [OT] * 2),
    "resolution_type_error": (OT, [OT] * 3),
    "resolution_method_in_expr": (MI, [MI, MI, OT]),  # App. H.4; the unresolved identifier: Other
    "timeout": (OT, [OT]),
    "out_of_resource": (OT, [OT]),
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
