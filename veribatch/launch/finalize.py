"""The `aggregate` stage launch adds to every run: check completeness, then build tables.

It runs after every other stage whatever their outcome (SLURM ``afterany``), so
it must not trust that they succeeded: shards are checked by digest first, and
tables built from an incomplete run say so (coverage columns, aggregate.json,
non-zero exit), rather than looking like final results.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from veribatch.rundir.completeness import completeness_map, shards_fingerprint
from veribatch.rundir.paths import RunDir, atomic_write_json, read_json
from veribatch.rundir.shards import read_spans

from .manifest import load_manifest


@dataclass
class AggregateOutcome:
    complete: bool
    paths: list[Path] = field(default_factory=list)
    markdown: str = ""
    message: str = ""


def merged_stats(rd: RunDir, stages: list[str], shards: int) -> dict[str, dict[str, float]]:
    """Per stage: the shards' stats.json summed up (datatrove's merge-stats step)."""
    out: dict[str, dict[str, float]] = {}
    for st in stages:
        acc = {"shards_with_stats": 0, "instances": 0, "records": 0, "resumed_from_ledger": 0,
               "wall_s_sum": 0.0, "wall_s_max": 0.0, "attempts_max": 0}
        for k in range(shards):
            try:
                s = read_json(rd.stats(st, k))
            except (OSError, ValueError):
                continue
            acc["shards_with_stats"] += 1
            for key in ("instances", "records", "resumed_from_ledger"):
                acc[key] += int(s.get(key, 0))
            acc["wall_s_sum"] += float(s.get("wall_s", 0.0))
            acc["wall_s_max"] = max(acc["wall_s_max"], float(s.get("wall_s", 0.0)))
            acc["attempts_max"] = max(acc["attempts_max"], int(s.get("attempt", 0)))
        acc["wall_s_sum"] = round(acc["wall_s_sum"], 3)
        out[st] = acc
    return out


def _tables_of(task: str):  # noqa: ANN202
    """The task's `build_tables`, from its `Task.tables_module`; None when it has none."""
    import importlib

    from veribatch.tasks.base import task_class

    module = task_class(task).tables_module
    return importlib.import_module(module).build_tables if module else None


def aggregate_run(rd: RunDir, formats: tuple[str, ...] = ("md", "csv")) -> AggregateOutcome:
    manifest = load_manifest(rd)
    comp = completeness_map(rd.root, manifest, read_spans(rd, deep=True), deep=True)
    missing = [f"{st}/{k}" for st, col in comp.items() for k, c in enumerate(col) if not c.complete]
    # pandas is imported here, not at start-up: `launch status` must stay fast.
    from veribatch.aggregate.build import build

    result = build(rd.root, formats, comp, tables_fn=_tables_of(manifest.task))
    msg = (f"{len(missing)} shard(s) incomplete: {', '.join(missing[:10])}"
           + (" ..." if len(missing) > 10 else "")) if missing else ""
    atomic_write_json(rd.aggregate_status, {
        "status": "partial" if missing else "complete", "missing_shards": missing,
        # which shards (and outputs) the tables were built from: status calls them stale
        # as soon as the run directory's complete shards differ
        "shards_fingerprint": shards_fingerprint(comp),
        "stages": merged_stats(rd, list(comp), len(next(iter(comp.values()), []))),
        "tables": [str(p.relative_to(rd.root)) for p in result.paths],
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    })
    return AggregateOutcome(not missing, result.paths, result.markdown, msg)
