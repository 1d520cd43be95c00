"""When is a shard complete?  The one definition, read from the run directory's files alone.

`launch status`, `launch resume`, the shard loop and aggregation must agree on it, or
one of them counts what another redoes (a stale shard read into a table, a complete
run shown as failed).  The DONE marker it reads is written in `done.py`, beside it.

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

from .done import check_records, input_hash, read_marker
from .manifest import Manifest
from .paths import RunDir
from .shards import ShardSpan, read_spans


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


def completeness_map(run_dir: Path | str, manifest: Manifest, spans: list[ShardSpan], *,
                   deep: bool = False, only: tuple[str, int] | None = None,
                   ) -> Completeness:
    """Completeness of every shard of every task stage, upstream first.

    With `only=(stage, shard)`, evaluates just that shard and its upstream chain.
    """
    identity = manifest.identity
    shards = manifest.shards
    out: Completeness = {}
    wanted = range(shards) if only is None else [only[1]]
    root = str(run_dir)
    for st in manifest.task_stages:
        name = st.name
        col: list[ShardCompleteness] = [ShardCompleteness(False, "not evaluated", None)] * shards
        for k in wanted:
            ups = []
            blocked = ""
            for need in st.needs:
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


def _one(root: str, stage: str, k: int, identity: str, shards: int, span: ShardSpan,
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


def run_completeness(run_dir: Path | str, manifest: Manifest, *,
                     deep: bool = True) -> Completeness:
    """`completeness_map` for a reader that has only the directory (aggregation)."""
    return completeness_map(run_dir, manifest, read_spans(RunDir(run_dir)), deep=deep)


def expected_input_hash(rd: RunDir, manifest: Manifest, spans: list[ShardSpan],
                        stage: str, shard: int) -> tuple[str | None, str]:
    """The input hash the shard's DONE must hold, or (None, reason) if upstream is incomplete.

    Upstream shards are checked deeply: a shard never builds on a damaged input.
    """
    entry = manifest.task_stage(stage)
    if entry is None:
        raise KeyError(f"run {manifest.run_id} has no task stage {stage!r}")
    comp = completeness_map(rd.root, manifest, spans, deep=True, only=(stage, shard))
    ups = []
    for need in entry.needs:
        u = comp[need][shard]
        if not u.complete or u.output_sha256 is None:
            return None, f"upstream shard {need}/{shard} is not complete ({u.reason})"
        ups.append((need, u.output_sha256))
    return input_hash(manifest.identity, stage, shard, manifest.shards, spans[shard], ups), ""
