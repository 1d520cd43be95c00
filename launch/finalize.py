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

from aggregate.build import build

from .completion import completion_map
from .instances import read_spans
from .manifest import load_manifest
from .rundir import RunDir, atomic_write_json


@dataclass
class AggregateOutcome:
    complete: bool
    paths: list[Path] = field(default_factory=list)
    markdown: str = ""
    message: str = ""


def aggregate_run(rd: RunDir, formats: tuple[str, ...] = ("md", "csv")) -> AggregateOutcome:
    manifest = load_manifest(rd)
    comp = completion_map(rd, manifest, read_spans(rd), deep=True)
    missing = [f"{st}/{k}" for st, col in comp.items() for k, c in enumerate(col) if not c.complete]
    result = build(rd.root, formats)
    msg = (f"{len(missing)} shard(s) incomplete: {', '.join(missing[:10])}"
           + (" ..." if len(missing) > 10 else "")) if missing else ""
    atomic_write_json(rd.aggregate_status, {
        "status": "partial" if missing else "complete", "missing_shards": missing,
        "tables": [str(p.relative_to(rd.root)) for p in result.paths],
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    })
    return AggregateOutcome(not missing, result.paths, result.markdown, msg)
