"""Run state from the run directory (the truth), with SLURM's live view as detail.

A shard is `done` when its DONE marker matches its inputs (see completion.py);
`running` while a process holds its lock or SLURM says its job runs; `failed`
when it was started (or its job ended) without finishing; otherwise `pending`.
This works without `squeue`/`sacct`: they can only refine running/pending/failed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .completion import completion_map
from .instances import ShardSpan, read_spans
from .jobs import latest_jobs, live_states
from .manifest import load_manifest
from .rundir import RunDir, read_json
from .shard_loop import is_locked

ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING",
          "SUSPENDED", "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT"}
QUEUED = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING"}


@dataclass
class ShardState:
    stage: str
    shard: int
    state: str          # done | running | pending | failed
    reason: str
    instances: int
    recorded: int       # instances in the ledger (all, when done)
    job: str | None = None
    job_state: str | None = None


@dataclass
class RunState:
    rd: RunDir
    manifest: dict[str, Any]
    shards: dict[str, list[ShardState]]
    aggregate: dict[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return all(s.state == "done" for col in self.shards.values() for s in col)

    def counts(self, stage: str) -> Counter[str]:
        return Counter(s.state for s in self.shards[stage])

    def incomplete(self) -> dict[str, list[int]]:
        return {st: [s.shard for s in col if s.state != "done"] for st, col in self.shards.items()}

    def failed(self) -> list[ShardState]:
        return [s for col in self.shards.values() for s in col if s.state == "failed"]


def _ledger_lines(path: Any) -> int:
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return 0


def _error_message(rd: RunDir, stage: str, shard: int) -> str | None:
    try:
        e = read_json(rd.error(stage, shard))
        return f"{e.get('type')}: {e.get('message')}"
    except (OSError, ValueError):
        return None


def _requeued(rd: RunDir, stage: str, shard: int) -> bool:
    try:
        return bool(read_json(rd.attempt(stage, shard)).get("requeued"))
    except (OSError, ValueError):
        return False


def run_state(rd: RunDir, *, live: bool = True, deep: bool = False) -> RunState:
    """`deep` verifies every records file by digest (resume does; status only checks sizes and
    magic bytes, which is enough to see a truncated or half-written file)."""
    manifest = load_manifest(rd)
    spans: list[ShardSpan] = read_spans(rd)
    comp = completion_map(rd, manifest, spans, deep=deep)
    jobs = latest_jobs(rd)
    pending_jobs = [j for (st, k), j in jobs.items() if st in comp and not comp[st][k].complete]
    states = live_states(pending_jobs) if live and pending_jobs else {}
    out: dict[str, list[ShardState]] = {}
    for stage, col in comp.items():
        rows = []
        for k, c in enumerate(col):
            job = jobs.get((stage, k))
            js = states.get(job) if job else None
            n = spans[k].count
            if c.complete:
                rows.append(ShardState(stage, k, "done", "", n, n, job, js))
                continue
            recorded = _ledger_lines(rd.ledger(stage, k)) if c.started else 0
            err = _error_message(rd, stage, k) if c.started else None
            if c.started and is_locked(rd.lock(stage, k)):
                state, reason = "running", "shard lock held"
            elif js in ACTIVE and js not in QUEUED:
                state, reason = "running", f"SLURM {js}"
            elif js in QUEUED:
                state, reason = "pending", f"SLURM {js}" + (f"; {c.reason}" if c.started else "")
            elif err:
                state, reason = "failed", err
            elif c.reason not in ("no DONE marker",) and not c.reason.startswith("upstream"):
                state, reason = "failed", f"output rejected: {c.reason}"
            elif c.started and js is None and _requeued(rd, stage, k):
                # USR2 requeue: the same job waits in the queue; without squeue/sacct we
                # cannot see it, but the shard told us before it exited.
                state, reason = "pending", "requeued by SLURM (USR2); resumes from its ledger"
            elif c.started:
                state = "failed"
                reason = (f"SLURM {js}; " if js else "") + \
                    "stopped without finishing (killed: SIGKILL, OOM, node loss or scancel)"
            elif js:
                state, reason = "failed", f"SLURM {js} before the shard started"
            else:
                state, reason = "pending", c.reason
            rows.append(ShardState(stage, k, state, reason, n, min(recorded, n), job, js))
        out[stage] = rows
    try:
        agg = read_json(rd.aggregate_status)
    except (OSError, ValueError):
        agg = {}
    return RunState(rd, manifest, out, agg)
