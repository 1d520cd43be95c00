"""Which instances go to which shard: contiguous by id, or spread by measured cost.

Without measurements a run's instances, sorted by id, are cut into contiguous slices
``[k*n//S, (k+1)*n//S)``.  Where earlier runs measured what each instance took
(`launch.measured`: ``instance_s`` in the costs file), a contiguous cut can put a cluster
of slow instances (a family of hard programs with neighbouring ids, each a 30 s timeout)
in one shard, whose element then runs long after the others are idle.  Then the
instances are assigned longest-processing-time-first (LPT): by expected cost, largest
first (ties by id), each to the shard with the least expected cost so far (ties: fewer
instances, then the lower index) — Graham's greedy, within 4/3 of the best makespan.
Instances no run measured count as the median of the measured ones.  The spread is used
only where it shortens the expected longest shard by at least `MIN_GAIN` over the
contiguous cut: instances of about equal cost keep the contiguous shards, so that noise in
the measurements does not move instances between shards from one night to the next.

The assignment is a pure function of the sorted ids, the shard count and the costs, and
it is frozen at plan time: instances.jsonl holds each shard's instances together (sorted
by id within the shard) and shards.json their byte ranges, the method and the costs
file's sha256.  Resume, status and aggregation read those files, never re-plan, so a
costs file that changed since does not move an instance to another shard.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CONTIGUOUS = "contiguous-by-sorted-id"
LPT = "lpt-by-measured-cost"
MIN_GAIN = 0.1
"""The spread by cost must make the expected longest shard this much shorter (10 %)."""


@dataclass(frozen=True)
class Assignment:
    """Shard k holds `shards[k]` (ids sorted); `source` says where the costs came from."""

    method: str
    shards: tuple[tuple[str, ...], ...]
    source: Mapping[str, Any] | None = None   # {"file", "sha256", "stages", "measured", ...}

    def bounds(self) -> list[tuple[int, int]]:
        """Each shard's slice of the instance list written in shard order."""
        out, a = [], 0
        for ids in self.shards:
            out.append((a, a + len(ids)))
            a += len(ids)
        return out


def contiguous_bounds(n: int, shards: int) -> list[tuple[int, int]]:
    """Contiguous, deterministic, sizes differing by at most one."""
    return [(k * n // shards, (k + 1) * n // shards) for k in range(shards)]


def contiguous(ids: Sequence[str], shards: int) -> Assignment:
    """The assignment without measurements: `ids` (sorted) cut into contiguous slices."""
    return Assignment(CONTIGUOUS, tuple(tuple(ids[a:b]) for a, b in contiguous_bounds(len(ids), shards)))


def filled_costs(ids: Sequence[str], measured: Mapping[str, float]) -> dict[str, float]:
    """Each id's cost: its measurement, else the median of the measured ids'."""
    known = [float(measured[i]) for i in ids if i in measured]
    default = statistics.median(known) if known else 1.0
    return {i: float(measured.get(i, default)) for i in ids}


def lpt(ids: Sequence[str], cost: Mapping[str, float], shards: int) -> list[list[str]]:
    """Longest processing time first: largest cost first (ties by id), each onto the shard
    with the least total so far (ties: fewer instances, then lower index); each shard's
    ids sorted.  Deterministic: a pure function of its arguments."""
    heap = [(0.0, 0, k) for k in range(shards)]
    out: list[list[str]] = [[] for _ in range(shards)]
    for i in sorted(ids, key=lambda i: (-cost[i], i)):
        load, count, k = heapq.heappop(heap)
        out[k].append(i)
        heapq.heappush(heap, (load + cost[i], count + 1, k))
    return [sorted(s) for s in out]


def assign(ids: Sequence[str], shards: int, measured: Mapping[str, float] | None,
           source: Mapping[str, Any] | None = None) -> Assignment:
    """LPT where any of `ids` has a measured cost, there is more than one shard and the
    expected longest shard gets at least `MIN_GAIN` shorter; else contiguous.  `ids` sorted;
    `source` (where the costs came from) is recorded, with both expected longest shards."""
    hits = sum(1 for i in ids if i in (measured or {}))
    if shards <= 1 or not measured or not hits:
        return contiguous(ids, shards)
    cost = filled_costs(ids, measured)
    cut = contiguous(ids, shards)
    parts = lpt(ids, cost, shards)
    cut_max = max(shard_costs(cut, cost))
    lpt_max = max(sum(cost[i] for i in p) for p in parts)
    info = {**(source or {}), "measured": hits, "instances": len(ids),
            "expected_max_shard_s": {"contiguous": round(cut_max, 3), "lpt": round(lpt_max, 3)}}
    if lpt_max > (1 - MIN_GAIN) * cut_max:
        return Assignment(CONTIGUOUS, cut.shards, info)
    return Assignment(LPT, tuple(tuple(p) for p in parts), info)


def shard_costs(assignment: Assignment, cost: Mapping[str, float]) -> list[float]:
    """Each shard's expected cost under `cost`."""
    return [sum(cost[i] for i in ids) for ids in assignment.shards]
