"""The frozen instance list of a run: `Instance`s written at plan time, and a shard's own
instances read back.

The byte ranges and id digests this writes and checks are `veribatch.rundir.shards`
(shards.json's one parser); the instances themselves are tasks' `Instance`, which the
bottom layer does not know.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from veribatch.rundir.paths import RunDir, RunDirError, atomic_write_bytes
from veribatch.rundir.shards import ShardSpan, ids_digest, write_shards
from veribatch.tasks.base import Instance

from .assignment import CONTIGUOUS

if TYPE_CHECKING:  # planning (inference specs...) is not needed to read a run
    from .plan import Plan


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
    a = plan.assignment
    write_shards(rd, spans, blob, sharding=a.method if a else CONTIGUOUS,
                 costs=dict(a.source) if a and a.source else None)
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

