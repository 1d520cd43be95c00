"""The DONE marker of a shard: written and read here, and nowhere else.

A shard's DONE holds the hash of the inputs it was computed from and the digest, size and
mtime of its records.parquet; `completeness.py` decides from it whether the shard still
counts.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from .paths import RunDir, atomic_write_json
from .shards import ShardSpan, file_sha256

PARQUET_MAGIC = b"PAR1"

Marker = dict[str, Any]


def input_hash(identity: str, stage: str, shard: int, shards: int, span: ShardSpan,
               upstream: list[tuple[str, str]]) -> str:
    """What a shard's output depends on: run identity, stage, shard index and count, its
    instance ids, and the output digests of the upstream shards it read."""
    blob = json.dumps([identity, stage, shard, shards, span.count, span.ids_sha256, upstream],
                      separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def write_done(rd: RunDir, stage: str, shard: int, *, input_hash: str, records: int,
               finished: str, code_version: str | None = None) -> Marker:
    path = rd.records(stage, shard)
    st = os.stat(path)
    marker = {"input_hash": input_hash, "output_sha256": file_sha256(path),
              "parquet_bytes": st.st_size, "parquet_mtime_ns": st.st_mtime_ns,
              "records": records, "finished": finished}
    if code_version is not None:
        marker["code_version"] = code_version
    atomic_write_json(rd.done(stage, shard), marker)
    return marker


def read_marker(path: str) -> Marker | None:
    """The marker at `path`, or None when it is missing or unreadable (then not done)."""
    try:
        fd = os.open(path, os.O_RDONLY)  # raw fd: no buffered text wrapper per marker
        try:
            obj = json.loads(os.read(fd, 1 << 16))
        finally:
            os.close(fd)
        return obj if isinstance(obj, dict) else None
    except (OSError, ValueError):
        return None


def read_done(rd: RunDir, stage: str, shard: int) -> Marker | None:
    return read_marker(str(rd.done(stage, shard)))


def check_records(path: str, marker: Marker, deep: bool) -> str | None:
    """None when the records file matches its DONE marker, else why not."""
    # Plain string paths on purpose: pathlib costs more than the syscalls at 10,000 shards.
    try:
        st = os.stat(path)
    except OSError:
        return "records.parquet missing"
    if st.st_size != marker.get("parquet_bytes"):
        return f"records.parquet has {st.st_size} bytes, DONE says {marker.get('parquet_bytes')}"
    if deep or st.st_mtime_ns != marker.get("parquet_mtime_ns"):
        if file_sha256(path) != marker.get("output_sha256"):
            return "records.parquet content does not match the DONE digest"
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        head = os.pread(fd, 4, 0)
        tail = os.pread(fd, 4, max(0, st.st_size - 4))
    finally:
        os.close(fd)
    if head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
        return "records.parquet is not a parquet file (bad magic bytes)"
    return None


def check_output(rd: RunDir, stage: str, shard: int, marker: Marker, *,
                 deep: bool) -> str | None:
    """None when the shard's records file matches its marker, else why not."""
    return check_records(str(rd.records(stage, shard)), marker, deep)
