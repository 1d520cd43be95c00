"""shards.json, the shard index of the frozen instance list: one entry type, one parser.

`instances.jsonl` holds every instance exactly as planned, shard by shard (each shard's
sorted by id; with the default contiguous assignment the whole file is); `shards.json`
holds, per shard, the byte range of its lines and a digest of its instance ids.  A shard
reads only its own byte range (a 10,000-shard run never parses the whole list 10,000
times), and completeness is decided from the digests alone, without touching payloads.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .paths import INSTANCES, SHARDS, RunDir, RunDirError, atomic_write_json, read_json


@dataclass(frozen=True)
class ShardSpan:
    """One row of shards.json."""

    start: int       # byte offset of the shard's first line in instances.jsonl
    end: int         # byte offset just past its last line
    count: int
    ids_sha256: str  # digest of the shard's instance ids, in order


def ids_digest(ids: list[str]) -> str:
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def file_sha256(path: Path | str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def write_shards(rd: RunDir, spans: list[ShardSpan], instances_blob: bytes, *,
                 sharding: str = "contiguous-by-sorted-id",
                 costs: dict[str, Any] | None = None) -> None:
    """shards.json for an instances.jsonl holding `instances_blob`; `sharding` names how
    instances were assigned, `costs` the measured-costs file (path, sha256) an assignment
    by cost was computed from."""
    atomic_write_json(rd.shards_file, {
        "count": len(spans), "sharding": sharding,
        **({"costs": costs} if costs else {}),
        "instances_bytes": len(instances_blob),
        "instances_sha256": hashlib.sha256(instances_blob).hexdigest(),
        "shards": [[s.start, s.end, s.count, s.ids_sha256] for s in spans],
    })


def shard_of_ids(run_dir: RunDir | Path | str) -> dict[str, int]:
    """Instance id -> its shard, as frozen at plan time (whatever the assignment method):
    shard k's ids are its byte range of instances.jsonl."""
    import json

    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    spans = read_spans(rd)
    out: dict[str, int] = {}
    with open(rd.instances, "rb") as f:
        for k, span in enumerate(spans):
            f.seek(span.start)
            for line in f.read(span.end - span.start).splitlines():
                out[json.loads(line)["id"]] = k
    return out


def read_spans(run_dir: RunDir | Path | str, *, deep: bool = False) -> list[ShardSpan]:
    """The shard index, after checking that instances.jsonl is still what was planned
    (size always; sha256 too with `deep`): an emptied or edited instance list must not
    read as a complete run with negative "missing" counts.  Raises RunDirError naming
    the file."""
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    try:
        data = read_json(rd.shards_file)
        spans = [ShardSpan(int(a), int(b), int(c), str(d)) for a, b, c, d in data["shards"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RunDirError(f"{rd.shards_file}: unreadable shard index ({e})") from None
    problem = check_instances_file(rd, spans, deep=deep)
    if problem:
        raise RunDirError(problem)
    return spans


def check_instances_file(rd: RunDir, spans: list[ShardSpan], *,
                         deep: bool = False) -> str | None:
    """None when instances.jsonl is still what planning wrote, else why not.

    Cheap: one stat, enough to catch an emptied or truncated instance list, which would
    otherwise make every coverage figure wrong while each shard still looks complete.
    `deep` also compares the sha256 that shards.json records (runs planned since it does)."""
    path = rd.root / INSTANCES
    want = spans[-1].end if spans else 0
    try:
        size = os.stat(path).st_size
    except OSError:
        return f"{path} is missing"
    if size != want:
        return (f"{path} has {size} bytes but {SHARDS} says {want} "
                "(modified after planning?)")
    if deep:
        try:
            digest = read_json(rd.shards_file).get("instances_sha256")
        except (OSError, ValueError, AttributeError):
            digest = None
        if digest and file_sha256(path) != digest:
            return f"{path} does not match the sha256 in {SHARDS} (modified after planning?)"
    return None

