"""Tables of the `selftest` task: did every instance work, and does `check` agree with it?"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from veribatch.aggregate.table import Metric, Table
from veribatch.rundir.instances import planned_instances
from veribatch.rundir.manifest import Manifest


def build_tables(run_dir: Path, manifest: Manifest,
                 stages: dict[str, pd.DataFrame]) -> list[Table]:
    expected = len(planned_instances(run_dir, manifest) or ())
    work = stages.get("work", pd.DataFrame(columns=["instance_id", "status"]))
    check = stages.get("check", pd.DataFrame(columns=["instance_id", "verdict"]))
    verdicts = check["verdict"].value_counts() if "verdict" in check else pd.Series(dtype=int)
    statuses = work["status"].value_counts() if "status" in work else pd.Series(dtype=int)
    covered = int(check["instance_id"].nunique()) if len(check) else 0
    row = {
        "dataset": manifest.config["dataset"],
        "options": json.dumps(manifest.config["options"], sort_keys=True),
        "work_ok": int(statuses.get("ok", 0)), "work_error": int(statuses.get("error", 0)),
        "agree": int(verdicts.get("agree", 0)), "disagree": int(verdicts.get("disagree", 0)),
        "no_value": int(verdicts.get("no-value", 0)),
        "covered": covered, "missing": expected - covered,
    }
    return [Table(key="selftest", title="Self-test: work and check agreement",
                  frame=pd.DataFrame([row]), index=("dataset",),
                  metrics={"work_ok": Metric("count"),
                           "work_error": Metric("count", higher_is_better=False),
                           "agree": Metric("count"),
                           "disagree": Metric("count", higher_is_better=False),
                           "no_value": Metric("count", higher_is_better=False)},
                  caption="agree: `check` recomputed the value `work` recorded. "
                          "Any `disagree` means records were lost or mixed up between stages.")]
