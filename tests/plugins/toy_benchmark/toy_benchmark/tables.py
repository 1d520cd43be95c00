"""The table of `launch toyarith`: how many claimed answers hold.  It reads the run's files
only: the records (one DataFrame per stage) and the run directory, read through
`veribatch.rundir` (the typed manifest, the planned instances)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from veribatch.aggregate.table import Metric, Table
from veribatch.rundir.instances import instance_ids
from veribatch.rundir.manifest import Manifest


def build_tables(run_dir: Path, manifest: Manifest,
                 stages: dict[str, pd.DataFrame]) -> list[Table]:
    expected = len(instance_ids(run_dir))
    check = stages.get("check", pd.DataFrame(columns=["instance_id", "outcome"]))
    outcomes = check["outcome"].value_counts()
    covered = int(check["instance_id"].nunique())
    correct = int(outcomes.get("correct", 0))
    row = {"dataset": manifest.config["dataset"], "covered": covered,
           "missing": expected - covered, "correct": correct,
           "wrong": int(outcomes.get("wrong", 0)), "error": int(outcomes.get("error", 0)),
           "accuracy": round(100 * correct / covered, 2) if covered else 0.0}
    return [Table(key="toyarith", title="Toy arithmetic: claimed answers that hold",
                  frame=pd.DataFrame([row]), index=("dataset",),
                  metrics={"accuracy": Metric("rate", unit="%"), "correct": Metric("count"),
                           "wrong": Metric("count", higher_is_better=False),
                           "error": Metric("count", higher_is_better=False)},
                  caption="error: the expression has no value (division by zero, syntax).")]
