"""Merge the shard records of one stage into one DataFrame, with coverage.

Only shards whose DONE marker exists and whose records.parquet matches the
digest in it are read; anything else counts as missing, never as data.
`aggregate` reads files only: it shares the run-directory format with `launch`
(docs/run-directory.md), not its code.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


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


def read_manifest(run_dir: Path) -> dict[str, Any]:
    with open(run_dir / "manifest.json", encoding="utf-8") as f:
        return json.load(f)


def instance_ids(run_dir: Path) -> list[str]:
    with open(run_dir / "instances.jsonl", "rb") as f:
        return [json.loads(line)["id"] for line in f]


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def shard_table(run_dir: Path, stage: str, shard: int) -> pa.Table | None:
    """The shard's records, or None when it is not (verifiably) complete."""
    d = run_dir / "shards" / stage / str(shard)
    try:
        with open(d / "DONE", encoding="utf-8") as f:
            marker = json.load(f)
        if _sha256(d / "records.parquet") != marker.get("output_sha256"):
            return None
        return pq.read_table(d / "records.parquet")
    except (OSError, ValueError, pa.ArrowException):
        return None


def load_stage(run_dir: Path, stage: str, manifest: dict[str, Any] | None = None,
               ids: list[str] | None = None) -> StageRecords:
    manifest = manifest or read_manifest(run_dir)
    ids = ids if ids is not None else instance_ids(run_dir)
    frames, missing = [], []
    for k in range(int(manifest["shards"])):
        t = shard_table(run_dir, stage, k)
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


def load_run(run_dir: Path) -> tuple[dict[str, Any], dict[str, StageRecords]]:
    manifest = read_manifest(run_dir)
    ids = instance_ids(run_dir)
    stages = [s["name"] for s in manifest["stages"] if s.get("added_by") != "launch"]
    return manifest, {s: load_stage(run_dir, s, manifest, ids) for s in stages}
