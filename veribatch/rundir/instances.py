"""instances.jsonl, the frozen instance list, as its readers below the task layer see it:
ids and plain rows (launch turns a shard's lines into tasks' `Instance`s itself).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .manifest import Manifest
from .paths import RunDir
from .shards import read_spans


def instance_ids(run_dir: RunDir | Path | str) -> list[str]:
    """Every instance id of the run, in order; an instance list that no longer matches the
    plan is a RunDirError naming the file (an emptied file would otherwise read as
    "missing -24")."""
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    read_spans(rd)
    with open(rd.instances, "rb") as f:
        return [json.loads(line)["id"] for line in f]


def planned_instances(run_dir: RunDir | Path | str,
                      manifest: Manifest) -> list[dict[str, Any]] | None:
    """The rows of the run's instance list (id, split, meta...), or None where the run
    directory has none: task tables count what was planned — per split, per attribute —
    so that an instance without records shows as missing, never as absent."""
    root = run_dir.root if isinstance(run_dir, RunDir) else Path(run_dir)
    path = root / manifest.instances_file
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
