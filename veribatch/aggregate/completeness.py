"""When is a shard complete?  The one definition, read from the run directory's files alone.

`launch status`, `launch resume`, the shard loop and aggregation must agree on it, or
one of them counts what another redoes (a stale shard read into a table, a complete
run shown as failed).  It lives here, in `aggregate/`, because aggregation reads only
files and imports nothing of `launch/`, while `launch/` may import `aggregate/`
(`launch/done_marker.py` is the writing side: the DONE marker and the input hash a shard
about to run must hold).

A shard of stage s is complete iff

1. its DONE marker exists,
2. the marker's `input_hash` equals the hash of the shard's inputs *now*: the run
   identity, stage, shard index and count, the shard's instance ids, and the output
   digests of the upstream shards it read — which are themselves complete, so a redone
   upstream invalidates everything built on it, transitively;
3. `records.parquet` matches the marker.  Two strengths: `deep` (sha256 of the file;
   resume, the shard loop and aggregation) and the default (size, then — when the file
   is untouched since DONE was written, same mtime — the magic bytes, else the sha256
   too: an in-place corruption of the same size changes the mtime and is caught; a
   copied run directory pays for one digest per shard).

Anything else is incomplete and says why (`ShardCompleteness.reason`); a shard whose
upstream is incomplete is `blocked`, which is not a failure of its own.
The format of every file read here is documented in docs/run-directory.md.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

PARQUET_MAGIC = b"PAR1"
AGGREGATE_STAGE = "aggregate"


class Span(Protocol):
    """What completeness needs of a shard's entry in shards.json."""

    count: int
    ids_sha256: str


@dataclass(frozen=True)
class ShardEntry:
    """One row of shards.json: byte range in instances.jsonl, instance count, id digest."""

    start: int
    end: int
    count: int
    ids_sha256: str


def read_shard_entries(run_dir: Path | str) -> list[ShardEntry]:
    """shards.json → its rows.  Raises ValueError naming the file when it is unreadable."""
    path = Path(run_dir) / "shards.json"
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return [ShardEntry(int(a), int(b), int(c), str(d)) for a, b, c, d in data["shards"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: unreadable shard index ({e})") from None


def check_instances_file(run_dir: Path | str, entries: list[Any], *,
                         deep: bool = False) -> str | None:
    """None when instances.jsonl is still what planning wrote, else why not.

    Cheap: one stat, enough to catch an emptied or truncated instance list, which would
    otherwise make every coverage figure wrong while each shard still looks complete.
    `deep` also compares the sha256 that shards.json records (runs planned since it does)."""
    path = Path(run_dir) / "instances.jsonl"
    want = entries[-1].end if entries else 0
    try:
        size = os.stat(path).st_size
    except OSError:
        return f"{path} is missing"
    if size != want:
        return (f"{path} has {size} bytes but shards.json says {want} "
                "(modified after planning?)")
    if deep:
        try:
            with open(Path(run_dir) / "shards.json", encoding="utf-8") as f:
                digest = json.load(f).get("instances_sha256")
        except (OSError, ValueError, AttributeError):
            digest = None
        if digest and file_sha256(path) != digest:
            return f"{path} does not match the sha256 in shards.json (modified after planning?)"
    return None


def input_hash(identity: str, stage: str, shard: int, shards: int, span: Span,
               upstream: list[tuple[str, str]]) -> str:
    blob = json.dumps([identity, stage, shard, shards, span.count, span.ids_sha256, upstream],
                      separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def file_sha256(path: Any) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def read_marker(path: str) -> dict[str, Any] | None:
    try:
        fd = os.open(path, os.O_RDONLY)  # raw fd: no buffered text wrapper per marker
        try:
            obj = json.loads(os.read(fd, 1 << 16))
        finally:
            os.close(fd)
        return obj if isinstance(obj, dict) else None
    except (OSError, ValueError):
        return None


def check_records(path: str, marker: dict[str, Any], deep: bool) -> str | None:
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


@dataclass
class ShardCompleteness:
    complete: bool
    reason: str                  # why not complete ("" when complete)
    output_sha256: str | None    # for downstream input hashes
    records: int = 0
    started: bool = False        # a DONE, ledger or attempt exists
    blocked: bool = False        # an upstream shard is incomplete (not this shard's fault)
    expected: str | None = None  # the input hash a DONE (and the ledger header) must hold
    code_version: str | None = None  # what wrote the DONE marker, when it says


Completeness = dict[str, list[ShardCompleteness]]
"""Stage → the completeness of each of its shards (`completeness_map`, `run_completeness`)."""


def task_stages(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The task's stages, upstream first (without the aggregate stage launch adds)."""
    return [s for s in manifest["stages"] if s.get("added_by") != "launch"
            and s["name"] != AGGREGATE_STAGE]


def completeness_map(run_dir: Path | str, manifest: dict[str, Any], spans: list[Any], *,
                   deep: bool = False, only: tuple[str, int] | None = None,
                   ) -> Completeness:
    """Completeness of every shard of every task stage, upstream first.

    With `only=(stage, shard)`, evaluates just that shard and its upstream chain.
    """
    identity = manifest["identity"]
    shards = int(manifest["shards"])
    out: Completeness = {}
    wanted = range(shards) if only is None else [only[1]]
    root = str(run_dir)
    for st in task_stages(manifest):
        name = st["name"]
        col: list[ShardCompleteness] = [ShardCompleteness(False, "not evaluated", None)] * shards
        for k in wanted:
            ups = []
            blocked = ""
            for need in st["needs"]:
                u = out[need][k]
                if not u.complete or u.output_sha256 is None:
                    blocked = f"upstream {need}/{k} not complete"
                    break
                ups.append((need, u.output_sha256))
            col[k] = _one(root, name, k, identity, shards, spans[k], ups, blocked, deep)
        out[name] = col
        if only is not None and name == only[0]:
            break
    return out


def _one(root: str, stage: str, k: int, identity: str, shards: int, span: Span,
         ups: list[tuple[str, str]], blocked: str, deep: bool) -> ShardCompleteness:
    d = f"{root}/shards/{stage}/{k}"
    marker = read_marker(d + "/DONE")
    started = marker is not None or os.path.exists(d + "/ledger.jsonl") or \
        os.path.exists(d + "/attempt.json")
    if blocked:
        return ShardCompleteness(False, blocked, None, started=started, blocked=True)
    expected = input_hash(identity, stage, k, shards, span, ups)
    if marker is None:
        return ShardCompleteness(False, "no DONE marker", None, started=started, expected=expected)
    version = marker.get("code_version")
    if marker.get("input_hash") != expected:
        return ShardCompleteness(False, "DONE marker is for other inputs", None, started=True,
                               expected=expected, code_version=version)
    bad = check_records(d + "/records.parquet", marker, deep)
    if bad:
        return ShardCompleteness(False, bad, None, started=True, expected=expected,
                               code_version=version)
    return ShardCompleteness(True, "", str(marker.get("output_sha256")),
                           int(marker.get("records", 0)), True, expected=expected,
                           code_version=version)


def shards_fingerprint(comp: Completeness) -> str:
    """A digest of which shards are complete with which output: what a table was built from.

    aggregate.json keeps it; when it no longer equals the run directory's, the tables are
    stale (a shard was redone, damaged or added since), whatever aggregate.json's status."""
    rows = [[stage, k, c.output_sha256 if c.complete else None]
            for stage, col in comp.items() for k, c in enumerate(col)]
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


def run_completeness(run_dir: Path | str, manifest: dict[str, Any], *,
                     deep: bool = True) -> Completeness:
    """`completeness_map` for a reader that has only the directory (aggregation)."""
    entries = read_shard_entries(run_dir)
    return completeness_map(run_dir, manifest, entries, deep=deep)
