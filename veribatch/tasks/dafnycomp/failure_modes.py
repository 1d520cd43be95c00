"""DafnyComp's failure modes (Table 2, §5) from Dafny's own error messages.

The paper names the modes and their symptoms (§1, §5, App. H) but publishes no mapping from
Dafny's messages: the one here is ours, following the paper's words where they place a
message — specification fragility (contracts that do not carry across a call: postcondition
and call-precondition failures, frames; §1(i)), implementation–proof misalignment
(annotations that do not match what the code does: invariants false on entry, failing
asserts, out-of-range accesses, a decreases measure that does not match the control flow —
§1(ii) "termination metrics that do not match control flow" —, a method called in an
expression — App. H.4's "expression is not allowed to invoke a method"), reasoning instability
(the inductive thread lost: invariants not maintained, a missing termination measure — §1(iii)
"missing well-founded decreases measures", App. H.3.2) and the rest.  The adapter
(`verifiers.dafny`) names the obligation of every error; this module maps obligations to
modes.  The mapping is the table in docs/dafnycomp.md and is tested on Dafny's real outputs
(../shared/data/recorded/dafny).

A candidate with several errors gets the mode of the first error Dafny printed as its
*primary* mode (Table 2 counts candidates) and keeps all of them for the per-error count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

FAILURE_MODES_VERSION = "dafnycomp-failure-modes-v2"
"""2: `decreases` and `method_in_expression` are misalignment (§1(ii), App. H.4)."""

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
    "method_in_expression": MISALIGNMENT,
    "decreases": MISALIGNMENT,
    "termination": INSTABILITY,
    "unclassified": OTHER,
    "parse": OTHER,
    "resolution": OTHER,
    "timeout": OTHER,
    "out_of_resource": OTHER,
}


METHOD_IN_EXPRESSION = "is not allowed to invoke a method"


def error_label(error: Mapping[str, Any]) -> str:
    """An error's obligation (verification errors) or its kind (parse, resolution, ...); a
    resolution error calling a method inside an expression is `method_in_expression`."""
    if error.get("kind") == "resolution" and METHOD_IN_EXPRESSION in str(error.get("message", "")):
        return "method_in_expression"
    return str(error.get("obligation") or error.get("kind") or "unclassified")


def mode_of(error: Mapping[str, Any]) -> str:
    return MODE_OF.get(error_label(error), OTHER)


def classify(errors: Iterable[Mapping[str, Any]]) -> tuple[str | None, list[str]]:
    """(primary mode, the mode of every error in order); (None, []) when there is no error."""
    modes = [mode_of(e) for e in errors]
    return (modes[0] if modes else None), modes
