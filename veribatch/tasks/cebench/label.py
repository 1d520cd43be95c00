"""§3.2.2: a verifier's verdict on the instrumented program → the counterexample's label.

FALSE ⇒ GENUINE (the state is reached), TRUE ⇒ SPURIOUS (it is not), anything else —
timeout, unknown, out of memory, a crash — ⇒ UNKNOWN (kept in the build statistics,
excluded from evaluation).

A label is only as good as its evidence, so each carries it.  Which kind a tool gives is
its declared fact (`verifiers.base.Tool.certified_verdicts`), not its name:

* a tool whose verdicts are certified (the embedded ``z3``): a FALSE comes with the
  concrete input sequence that gcc replayed to ``reach_error`` (``replayed-trace``); a TRUE
  with a proof the verifier re-checked (``checked-proof:spacer``: its invariants, kept
  here so anyone can re-check them; ``checked-proof:complete-unrolling``).  A verdict
  without that evidence is not trusted: the label is UNKNOWN, with the reason.
* any other tool (UAutomizer): its verdict is trusted, as the paper assumes
  (``trusted-verdict:<tool>``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from veribatch.tasks.verifier import tool_facts

GENUINE, SPURIOUS, UNKNOWN = "GENUINE", "SPURIOUS", "UNKNOWN"


@dataclass(frozen=True)
class Label:
    label: str
    evidence: str          # replayed-trace | checked-proof:<kind> | trusted-verdict:<tool> | none
    evidence_json: str     # the trace or proof, JSON
    note: str | None = None


def label_of(result: Any) -> Label:
    """`result` is a `verifiers.result.VerifierResult`."""
    status = str(result.status)
    tool = result.tool
    extras = result.extras or {}
    certified = status in ("TRUE", "FALSE") and tool_facts(tool).certified_verdicts
    if status == "FALSE":
        if not certified:
            return Label(GENUINE, f"trusted-verdict:{tool}", "{}")
        cex = extras.get("counterexample") or {}
        if isinstance(cex, dict) and cex.get("replay") is not None and cex.get("inputs") is not None:
            return Label(GENUINE, "replayed-trace", json.dumps(cex, sort_keys=True))
        return Label(UNKNOWN, "none", "{}", "FALSE without a replayed counterexample: not trusted")
    if status == "TRUE":
        if not certified:
            return Label(SPURIOUS, f"trusted-verdict:{tool}", "{}")
        proof = extras.get("proof")
        if proof and extras.get("proof_checked") is True:
            body = {"proof": proof, "invariants": extras.get("invariants") or []}
            return Label(SPURIOUS, f"checked-proof:{proof}", json.dumps(body, sort_keys=True))
        return Label(UNKNOWN, "none", "{}", f"TRUE from an unchecked proof ({proof or 'none'}): not trusted")
    return Label(UNKNOWN, "none", "{}", None)
