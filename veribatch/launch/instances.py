"""The frozen instance list of a run and its shard index.

`instances.jsonl` holds every instance (sorted by id) exactly as planned;
`shards.json` holds, per shard, the byte range of its lines and a digest of its
instance ids.  A shard reads only its own byte range (a 10,000-shard run never
parses the whole list 10,000 times), and `status` decides completeness from the
digests alone, without touching instance payloads.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from veribatch.aggregate.completeness import check_instances_file
from veribatch.tasks.base import Instance

from .rundir import RunDir, atomic_write_bytes, atomic_write_json, read_json

if TYPE_CHECKING:  # planning (inference specs...) is not needed to read a run
    from .plan import Plan


class RunDirError(RuntimeError):
    """The run directory is damaged or was written by a different plan."""


@dataclass(frozen=True)
class ShardSpan:
    start: int       # byte offset of the shard's first line in instances.jsonl
    end: int         # byte offset just past its last line
    count: int
    ids_sha256: str  # digest of the shard's instance ids, in order


def ids_digest(ids: list[str]) -> str:
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def _instance_line(inst: Instance) -> bytes:
    obj = {"id": inst.id, "task": inst.task, "split": inst.split,
           "payload": dict(inst.payload), "meta": dict(inst.meta)}
    try:
        return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    except TypeError as e:
        raise RunDirError(f"instance {inst.id!r}: payload/meta is not JSON-serializable ({e})") from None


def write_instances(rd: RunDir, plan: Plan) -> list[ShardSpan]:
    lines = [_instance_line(i) for i in plan.instances]
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    spans = []
    for a, b in plan.shard_bounds():
        ids = [i.id for i in plan.instances[a:b]]
        spans.append(ShardSpan(offsets[a], offsets[b], b - a, ids_digest(ids)))
    blob = b"".join(lines)
    atomic_write_bytes(rd.instances, blob)
    atomic_write_json(rd.shards_file, {
        "count": len(spans), "sharding": "contiguous-by-sorted-id",
        "instances_bytes": len(blob), "instances_sha256": hashlib.sha256(blob).hexdigest(),
        "shards": [[s.start, s.end, s.count, s.ids_sha256] for s in spans],
    })
    return spans


def read_spans(rd: RunDir, *, deep: bool = False) -> list[ShardSpan]:
    """The shard index, after checking that instances.jsonl is still what was planned
    (size always; sha256 too with `deep`): an emptied or edited instance list must not
    read as a complete run with negative "missing" counts."""
    try:
        data = read_json(rd.shards_file)
        spans = [ShardSpan(int(a), int(b), int(c), str(d)) for a, b, c, d in data["shards"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RunDirError(f"{rd.shards_file}: unreadable shard index ({e})") from None
    problem = check_instances_file(rd.root, spans, deep=deep)
    if problem:
        raise RunDirError(problem)
    return spans


def _instance_from(obj: dict[str, Any]) -> Instance:
    return Instance(id=obj["id"], task=obj["task"], split=obj["split"],
                    payload=obj["payload"], meta=obj.get("meta", {}))


def read_shard_instances(rd: RunDir, span: ShardSpan, shard: int) -> list[Instance]:
    """The instances of one shard, checked against the digest frozen at plan time."""
    with open(rd.instances, "rb") as f:
        f.seek(span.start)
        blob = f.read(span.end - span.start)
    out = []
    for n, line in enumerate(blob.splitlines(), start=1):
        try:
            out.append(_instance_from(json.loads(line)))
        except (ValueError, KeyError, TypeError) as e:
            raise RunDirError(f"{rd.instances}: shard {shard}, line {n} of its range: {e}") from None
    if len(out) != span.count or ids_digest([i.id for i in out]) != span.ids_sha256:
        raise RunDirError(f"{rd.instances}: shard {shard} does not match its frozen id digest "
                          f"in {rd.shards_file} (file modified after planning?)")
    return out


def read_all_ids(rd: RunDir) -> list[str]:
    ids = []
    with open(rd.instances, "rb") as f:
        for line in f:
            ids.append(json.loads(line)["id"])
    return ids
