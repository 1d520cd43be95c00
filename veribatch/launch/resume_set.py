"""What a `launch` or `launch resume` must (re)run, and why — decided once, from the run state.

One resume must always be enough.  So besides the incomplete shards nobody is running,
the resume set takes in every shard downstream of a resubmitted one — also when SLURM
still shows it queued: that queued job waits on the *old* upstream job (failed or
cancelled), so SLURM will cancel it or it will start on nothing; it is superseded
(scancelled) and submitted again behind the new upstream job.  An upstream shard that
is running or queued, and not resubmitted, is waited on (`waiting_on`), never run twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .status import RunState, ShardState

Key = tuple[str, int]


@dataclass
class ResumeSet:
    shards: dict[str, list[int]]                               # stage → shards to (re)run
    why: dict[Key, str] = field(default_factory=dict)          # reason per shard in `shards`
    supersede: dict[Key, str] = field(default_factory=dict)    # shard → queued job to scancel
    waiting_on: dict[Key, str] = field(default_factory=dict)   # busy upstream shard → its job
    busy: list[ShardState] = field(default_factory=list)       # running or queued, left alone

    def __bool__(self) -> bool:
        return any(self.shards.values())

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.shards.values())

    @property
    def live_jobs(self) -> list[str]:
        """Jobs of earlier submissions that still run or queue work of the run and are not
        superseded: what the run's aggregation must also wait for."""
        return sorted(set(self.waiting_on.values()) | {s.job for s in self.busy if s.job})


def resume_set_for(state: RunState) -> ResumeSet:
    needs = {s.name: list(s.needs) for s in state.manifest.stages}
    rs = ResumeSet({stage: [] for stage in state.shards})
    chosen: set[Key] = set()
    by_key = {(s.stage, s.shard): s for col in state.shards.values() for s in col}

    def take(s: ShardState, why: str) -> None:
        rs.shards[s.stage].append(s.shard)
        rs.why[(s.stage, s.shard)] = why
        chosen.add((s.stage, s.shard))

    for stage, col in state.shards.items():  # upstream first
        for s in col:
            ups = [(u, s.shard) for u in needs[stage]]
            redone = [f"{u}/{k}" for u, k in ups if (u, k) in chosen]
            if s.state == "done":
                continue
            if s.state == "running":
                rs.busy.append(s)
                continue
            if s.queued:
                if redone and s.job:
                    rs.supersede[(stage, s.shard)] = s.job
                    take(s, f"its queued job {s.job} waits on the old job of "
                            f"{', '.join(redone)}, which is resubmitted")
                else:
                    rs.busy.append(s)
                continue
            for u, k in ups:
                up = by_key[(u, k)]
                if (u, k) not in chosen and up.state != "done" and up.job and \
                        (up.state == "running" or up.queued):
                    rs.waiting_on[(u, k)] = up.job
            if s.state == "failed":
                take(s, s.reason)
            elif redone:
                take(s, f"after {', '.join(redone)}, which is redone first")
            else:
                take(s, s.reason or "never ran")
    return rs
