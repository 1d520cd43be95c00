"""Dataset construction (InvBench §4): split a pool by the baseline verifier's solve time.

The paper runs UAutomizer with a 600 s budget on a pool of SV-COMP programs and calls a
program *easy* when it is solved within 30 s and *hard* when solved within 30-600 s;
unsolved programs are left out.  Here the pool is any run's ``baseline`` stage, so the
same construction can be redone with another verifier, budget or machine.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def build_splits(baseline: Iterable[dict[str, Any]], *, threshold_s: float = 30.0) -> dict[str, Any]:
    """{"easy": [...], "hard": [...], "unsolved": [...], "verdicts": {...}} from baseline records."""
    easy: list[str] = []
    hard: list[str] = []
    unsolved: list[str] = []
    verdicts: dict[str, str] = {}
    budget = None
    for rec in baseline:
        iid = rec["instance_id"]
        budget = rec.get("budget_s", budget)
        if rec.get("solved"):
            verdicts[iid] = rec["status"]
            (easy if float(rec["baseline_time_s"]) < threshold_s else hard).append(iid)
        else:
            unsolved.append(iid)
    return {
        "threshold_s": threshold_s,
        "budget_s": budget,
        "easy": sorted(easy),
        "hard": sorted(hard),
        "unsolved": sorted(unsolved),
        "verdicts": dict(sorted(verdicts.items())),
    }
