"""Merge the shard records of one stage into one DataFrame, with coverage.

Only complete shards are read — complete as `veribatch.rundir.completeness` defines it for
`status` and `resume` too: a DONE marker for the shard's current inputs (a stale
downstream shard of a redone upstream is *not* complete, even with an intact file)
and a records file matching its digest.  Anything else counts as missing, never as
data.  `aggregate` reads files only, through the run directory's one format module
(`veribatch.rundir`, docs/run-directory.md), as `launch` writes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from veribatch.rundir.completeness import Completeness, run_completeness
from veribatch.rundir.instances import instance_ids
from veribatch.rundir.manifest import Manifest


@dataclass
class StageRecords:
    stage: str
    frame: pd.DataFrame
    expected: list[str]                        # every instance id of the run
    missing_shards: list[int] = field(default_factory=list)

    @property
    def covered(self) -> int:
        return int(self.frame["instance_id"].nunique()) if len(self.frame) else 0

    @property
    def missing(self) -> int:
        return len(self.expected) - self.covered


def column(df: pd.DataFrame, name: str, default: Any = None) -> pd.Series:
    """A column of merged records, or `default` on every row where no record has it (shards
    whose stage never wrote it, or every record of that kind refused before it)."""
    return df[name] if name in df else pd.Series([default] * len(df), index=df.index)


def shard_table(run_dir: Path, stage: str, shard: int,
                completeness: Completeness | None = None) -> pa.Table | None:
    """The shard's records, or None when it is not (verifiably) complete."""
    if completeness is None:
        completeness = run_completeness(run_dir, Manifest.read(run_dir))
    if stage not in completeness or not completeness[stage][shard].complete:
        return None
    try:
        return pq.read_table(run_dir / "shards" / stage / str(shard) / "records.parquet")
    except (OSError, pa.ArrowException):
        return None


def load_stage(run_dir: Path, stage: str, manifest: Manifest | None = None,
               ids: list[str] | None = None, completeness: Completeness | None = None,
               ) -> StageRecords:
    manifest = manifest or Manifest.read(run_dir)
    ids = ids if ids is not None else instance_ids(run_dir)
    if completeness is None:
        completeness = run_completeness(run_dir, manifest)
    frames, missing = [], []
    for k in range(manifest.shards):
        t = shard_table(run_dir, stage, k, completeness)
        if t is None:
            missing.append(k)
        elif t.num_rows:
            frames.append(t.to_pandas(types_mapper=_nullable))
    frame = (pd.concat(frames, ignore_index=True) if frames
             else pd.DataFrame({"instance_id": pd.Series(dtype="string"),
                                "stage": pd.Series(dtype="string"),
                                "shard": pd.Series(dtype="Int64")}))
    return StageRecords(stage, frame, ids, missing)


def _nullable(t: pa.DataType) -> Any:
    """Keep ints as ints when some records lack a value (pandas would make them floats)."""
    if pa.types.is_integer(t):
        return pd.Int64Dtype()
    if pa.types.is_boolean(t):
        return pd.BooleanDtype()
    return None


def load_run(run_dir: Path, completeness: Completeness | None = None,
             ) -> tuple[Manifest, dict[str, StageRecords]]:
    """Manifest and the records of every stage's complete shards.  `completeness` (from
    `veribatch.rundir.completeness.run_completeness`) saves a second digest pass when the caller
    has already checked the shards."""
    run_dir = Path(run_dir)
    manifest = Manifest.read(run_dir)
    ids = instance_ids(run_dir)
    if completeness is None:
        completeness = run_completeness(run_dir, manifest)
    stages = [s.name for s in manifest.task_stages]
    return manifest, {s: load_stage(run_dir, s, manifest, ids, completeness) for s in stages}
