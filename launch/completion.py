"""When is a shard done?  The DONE marker and the input hash it must match.

A shard of stage s is complete iff its DONE marker exists, holds the hash of the
shard's *inputs*, and the records file it describes is intact.  The input hash
covers the run identity, the stage, the shard index and count, the shard's
instance ids, and the *output digests* of the upstream shards it read — so when
an upstream shard is redone (and may now hold different records), every
downstream shard built on the old output stops being complete by itself.

Two strengths of check: `cheap` (marker + file size + parquet magic bytes; what
`status` and `resume` use, fast enough for 10,000 shards) and `deep` (sha256 of
the parquet file; what the shard loop uses before skipping a shard, and what
aggregation uses before reading one).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

from .instances import ShardSpan
from .rundir import RunDir, atomic_write_json

PARQUET_MAGIC = b"PAR1"


def input_hash(identity: str, stage: str, shard: int, shards: int, span: ShardSpan,
               upstream: list[tuple[str, str]]) -> str:
    blob = json.dumps([identity, stage, shard, shards, span.count, span.ids_sha256, upstream],
                      separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def file_sha256(path: Any) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def read_done(rd: RunDir, stage: str, shard: int) -> dict[str, Any] | None:
    return _read_marker(str(rd.done(stage, shard)))


def _read_marker(path: str) -> dict[str, Any] | None:
    try:
        fd = os.open(path, os.O_RDONLY)  # raw fd: no buffered text wrapper per marker
        try:
            obj = json.loads(os.read(fd, 1 << 16))
        finally:
            os.close(fd)
        return obj if isinstance(obj, dict) else None
    except (OSError, ValueError):
        return None


def write_done(rd: RunDir, stage: str, shard: int, *, input_hash: str, records: int,
               finished: str) -> dict[str, Any]:
    path = rd.records(stage, shard)
    marker = {"input_hash": input_hash, "output_sha256": file_sha256(path),
              "parquet_bytes": path.stat().st_size, "records": records, "finished": finished}
    atomic_write_json(rd.done(stage, shard), marker)
    return marker


def check_output(rd: RunDir, stage: str, shard: int, marker: dict[str, Any], *,
                 deep: bool) -> str | None:
    """None when the records file matches its marker, else why not."""
    return _check_file(str(rd.records(stage, shard)), marker, deep)


def _check_file(path: str, marker: dict[str, Any], deep: bool) -> str | None:
    # Plain string paths on purpose: pathlib costs more than the syscalls at 10,000 shards.
    try:
        size = os.stat(path).st_size
    except OSError:
        return "records.parquet missing"
    if size != marker.get("parquet_bytes"):
        return f"records.parquet has {size} bytes, DONE says {marker.get('parquet_bytes')}"
    if deep:
        if file_sha256(path) != marker.get("output_sha256"):
            return "records.parquet content does not match the DONE digest"
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        head = os.pread(fd, 4, 0)
        tail = os.pread(fd, 4, max(0, size - 4))
    finally:
        os.close(fd)
    if head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
        return "records.parquet is not a parquet file (bad magic bytes)"
    return None


@dataclass
class ShardCompletion:
    complete: bool
    reason: str                  # why not complete ("" when complete)
    output_sha256: str | None    # for downstream input hashes
    records: int = 0
    started: bool = False        # a DONE, ledger or attempt exists


def completion_map(rd: RunDir, manifest: dict[str, Any], spans: list[ShardSpan], *,
                   deep: bool = False, only: tuple[str, int] | None = None,
                   ) -> dict[str, list[ShardCompletion]]:
    """Completion of every shard of every task stage, upstream first.

    With `only=(stage, shard)`, evaluates just that shard and its upstream chain.
    """
    identity = manifest["identity"]
    shards = manifest["shards"]
    stages = [s for s in manifest["stages"] if s.get("added_by") != "launch"]
    out: dict[str, list[ShardCompletion]] = {}
    wanted = range(shards) if only is None else [only[1]]
    for st in stages:
        name = st["name"]
        col: list[ShardCompletion] = [ShardCompletion(False, "not evaluated", None)] * shards
        for k in wanted:
            ups = []
            blocked = ""
            for need in st["needs"]:
                u = out[need][k]
                if not u.complete or u.output_sha256 is None:
                    blocked = f"upstream {need}/{k} not complete"
                    break
                ups.append((need, u.output_sha256))
            col[k] = _one(rd, name, k, identity, shards, spans[k], ups, blocked, deep)
        out[name] = col
        if only is not None and name == only[0]:
            break
    return out


def _one(rd: RunDir, stage: str, k: int, identity: str, shards: int, span: ShardSpan,
         ups: list[tuple[str, str]], blocked: str, deep: bool) -> ShardCompletion:
    d = f"{rd.root}/shards/{stage}/{k}"
    marker = _read_marker(d + "/DONE")
    started = marker is not None or os.path.exists(d + "/ledger.jsonl") or \
        os.path.exists(d + "/attempt.json")
    if blocked:
        return ShardCompletion(False, blocked, None, started=started)
    if marker is None:
        return ShardCompletion(False, "no DONE marker", None, started=started)
    if marker.get("input_hash") != input_hash(identity, stage, k, shards, span, ups):
        return ShardCompletion(False, "DONE marker is for other inputs", None, started=True)
    bad = _check_file(d + "/records.parquet", marker, deep)
    if bad:
        return ShardCompletion(False, bad, None, started=True)
    return ShardCompletion(True, "", str(marker.get("output_sha256")),
                           int(marker.get("records", 0)), True)


def expected_input_hash(rd: RunDir, manifest: dict[str, Any], spans: list[ShardSpan],
                        stage: str, shard: int) -> tuple[str | None, str]:
    """The input hash the shard's DONE must hold, or (None, reason) if upstream is incomplete.

    Upstream shards are checked deeply: a shard never builds on a damaged input.
    """
    entry = next(s for s in manifest["stages"] if s["name"] == stage)
    comp = completion_map(rd, manifest, spans, deep=True, only=(stage, shard))
    ups = []
    for need in entry["needs"]:
        u = comp[need][shard]
        if not u.complete or u.output_sha256 is None:
            return None, f"upstream shard {need}/{shard} is not complete ({u.reason})"
        ups.append((need, u.output_sha256))
    return input_hash(manifest["identity"], stage, shard, manifest["shards"], spans[shard], ups), ""
