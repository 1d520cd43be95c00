"""The writing side of the DONE marker: the marker itself, and the input hash a shard about
to run must hold.

The reading side — when a shard counts as complete — is `aggregate/completeness.py`, so
that `status`, `resume`, the shard loop and aggregation (which reads only files and
imports nothing of `launch/`) use one and the same definition.
"""

from __future__ import annotations

import os
from typing import Any

from veribatch.aggregate.completeness import (
    check_records,
    completeness_map,
    file_sha256,
    input_hash,
    read_marker,
)

from .instances import ShardSpan
from .rundir import RunDir, atomic_write_json


def read_done(rd: RunDir, stage: str, shard: int) -> dict[str, Any] | None:
    return read_marker(str(rd.done(stage, shard)))


def write_done(rd: RunDir, stage: str, shard: int, *, input_hash: str, records: int,
               finished: str, code_version: str | None = None) -> dict[str, Any]:
    path = rd.records(stage, shard)
    st = os.stat(path)
    marker = {"input_hash": input_hash, "output_sha256": file_sha256(path),
              "parquet_bytes": st.st_size, "parquet_mtime_ns": st.st_mtime_ns,
              "records": records, "finished": finished}
    if code_version is not None:
        marker["code_version"] = code_version
    atomic_write_json(rd.done(stage, shard), marker)
    return marker


def check_output(rd: RunDir, stage: str, shard: int, marker: dict[str, Any], *,
                 deep: bool) -> str | None:
    """None when the records file matches its marker, else why not."""
    return check_records(str(rd.records(stage, shard)), marker, deep)


def expected_input_hash(rd: RunDir, manifest: dict[str, Any], spans: list[ShardSpan],
                        stage: str, shard: int) -> tuple[str | None, str]:
    """The input hash the shard's DONE must hold, or (None, reason) if upstream is incomplete.

    Upstream shards are checked deeply: a shard never builds on a damaged input.
    """
    entry = next(s for s in manifest["stages"] if s["name"] == stage)
    comp = completeness_map(rd.root, manifest, spans, deep=True, only=(stage, shard))
    ups = []
    for need in entry["needs"]:
        u = comp[need][shard]
        if not u.complete or u.output_sha256 is None:
            return None, f"upstream shard {need}/{shard} is not complete ({u.reason})"
        ups.append((need, u.output_sha256))
    return input_hash(manifest["identity"], stage, shard, manifest["shards"], spans[shard], ups), ""
