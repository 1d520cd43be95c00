"""DafnyComp's failure modes (Table 2, §5) from Dafny's own error messages.

The paper sorts failed verification attempts into specification fragility (contracts that
do not carry across a call: postcondition and call-precondition failures, and frames),
implementation–proof misalignment (annotations that do not match what the code does:
invariants false on entry, failing asserts, out-of-range accesses), reasoning instability
(the inductive thread lost: invariants not maintained, termination, decreases) and the
rest.  The adapter (`verifiers.dafny`) names the obligation of every error; this module
maps obligations to modes.  The mapping is the table in docs/dafnycomp.md and is tested on
Dafny's real outputs (../shared/data/recorded/dafny).

A candidate with several errors gets the mode of the first error Dafny printed as its
*primary* mode (Table 2 counts candidates) and keeps all of them for the per-error count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

FAILURE_MODES_VERSION = "dafnycomp-failure-modes-v1"

FRAGILITY = "specification_fragility"
MISALIGNMENT = "implementation_proof_misalignment"
INSTABILITY = "reasoning_instability"
OTHER = "other"
MODES = (FRAGILITY, MISALIGNMENT, INSTABILITY, OTHER)
TITLES = {
    FRAGILITY: "Specification fragility",
    MISALIGNMENT: "Implementation–proof misalignment",
    INSTABILITY: "Reasoning instability",
    OTHER: "Other",
}

# obligation (verifiers.dafny.OBLIGATIONS) or error kind → mode
MODE_OF: Mapping[str, str] = {
    "postcondition": FRAGILITY,
    "precondition": FRAGILITY,
    "frame": FRAGILITY,
    "invariant_entry": MISALIGNMENT,
    "assertion": MISALIGNMENT,
    "well_formedness": MISALIGNMENT,
    "invariant_maintained": INSTABILITY,
    "termination": INSTABILITY,
    "decreases": INSTABILITY,
    "unclassified": OTHER,
    "parse": OTHER,
    "resolution": OTHER,
    "timeout": OTHER,
    "out_of_resource": OTHER,
}


def error_label(error: Mapping[str, Any]) -> str:
    """An error's obligation (verification errors) or its kind (parse, resolution, ...)."""
    return str(error.get("obligation") or error.get("kind") or "unclassified")


def mode_of(error: Mapping[str, Any]) -> str:
    return MODE_OF.get(error_label(error), OTHER)


def classify(errors: Iterable[Mapping[str, Any]]) -> tuple[str | None, list[str]]:
    """(primary mode, the mode of every error in order); (None, []) when there is no error."""
    modes = [mode_of(e) for e in errors]
    return (modes[0] if modes else None), modes
