"""Run state from the run directory (the truth), with SLURM's live view as detail.

A shard is `done` when it is complete (`rundir/completeness.py`: the one definition
that resume and aggregation use too); `running` while a process holds its lock or
SLURM says its job runs; `pending` when it never started, waits in the queue, or
waits for an upstream shard (`blocked`: not a failure of its own, whatever it did
before); `failed` when it was started (or its job ended) without finishing.
This works without `squeue`/`sacct`: they can only refine running/pending/failed.

The aggregate's state is judged the same way: `complete` only while the shards it was
built from are still exactly the complete shards of the run (`stale` otherwise).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from veribatch.rundir.completeness import ShardCompleteness, completeness_map, shards_fingerprint
from veribatch.rundir.manifest import Manifest
from veribatch.rundir.paths import RunDir, read_json
from veribatch.rundir.shards import ShardSpan, read_spans

from .jobs import GONE, LIVE, latest_jobs, live_states, load_jobs
from .ledger import count_records, read_header
from .locks import is_locked
from .manifest import load_manifest

ACTIVE = LIVE
QUEUED = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING"}


@dataclass
class ShardState:
    stage: str
    shard: int
    state: str          # done | running | pending | failed
    reason: str
    instances: int
    recorded: int       # instances in the ledger that count (all, when done)
    job: str | None = None
    job_state: str | None = None
    blocked: bool = False   # pending because an upstream shard is incomplete

    @property
    def queued(self) -> bool:
        """Waiting in SLURM's queue: it will run without anyone resubmitting it."""
        return self.state == "pending" and self.job_state in QUEUED


@dataclass
class RunState:
    rd: RunDir
    manifest: Manifest
    shards: dict[str, list[ShardState]]
    aggregate: dict[str, Any] = field(default_factory=dict)
    aggregate_state: str = "not run"     # complete | partial | stale | not run
    problems: list[str] = field(default_factory=list)   # damaged jobs.json entries...
    code_versions: Counter[str] = field(default_factory=Counter)  # of complete shards
    fingerprint: str = ""
    aggregate_job: str | None = None        # its SLURM job's live state while tables are not
                                            # complete (PENDING, RUNNING, ...); None otherwise

    @property
    def aggregating(self) -> bool:
        """An aggregate job is queued or running: the tables are about to be (re)written."""
        return self.aggregate_state != "complete" and (
            self.aggregate_job in QUEUED or self.aggregate_job == "RUNNING")

    @property
    def complete(self) -> bool:
        return all(s.state == "done" for col in self.shards.values() for s in col)

    def counts(self, stage: str) -> Counter[str]:
        return Counter(s.state for s in self.shards[stage])

    def incomplete(self) -> dict[str, list[int]]:
        return {st: [s.shard for s in col if s.state != "done"] for st, col in self.shards.items()}

    def failed(self) -> list[ShardState]:
        return [s for col in self.shards.values() for s in col if s.state == "failed"]


def _recorded(rd: RunDir, stage: str, k: int, c: ShardCompleteness) -> int:
    """Ledger lines that a resume would keep (none when the header names other inputs)."""
    path = rd.ledger(stage, k)
    if c.expected is not None:
        header = read_header(path)
        if header is not None and header.get("input_hash") != c.expected:
            return 0
    return count_records(path)


def _error_message(rd: RunDir, stage: str, shard: int) -> str | None:
    try:
        e = read_json(rd.error(stage, shard))
        return f"{e.get('type')}: {e.get('message')}"
    except (OSError, ValueError, AttributeError):
        return None


def _requeued(rd: RunDir, stage: str, shard: int) -> bool:
    try:
        return bool(read_json(rd.attempt(stage, shard)).get("requeued"))
    except (OSError, ValueError, AttributeError):
        return False


def _shard_state(rd: RunDir, stage: str, k: int, c: ShardCompleteness, n: int,
                 job: str | None, js: str | None,
                 upstream: dict[str, list[ShardState]], needs: list[str]) -> ShardState:
    if c.complete:
        return ShardState(stage, k, "done", "", n, n, job, js)
    recorded = min(_recorded(rd, stage, k, c), n) if c.started else 0
    err = _error_message(rd, stage, k) if c.started else None

    def mk(state: str, reason: str, blocked: bool = False) -> ShardState:
        return ShardState(stage, k, state, reason, n, recorded, job, js, blocked)

    if c.started and is_locked(rd.lock(stage, k)):
        return mk("running", "shard lock held")
    if js in ACTIVE and js not in QUEUED:
        return mk("running", f"SLURM {js}")
    if js in QUEUED:
        return mk("pending", f"SLURM {js}" + (f"; {c.reason}" if c.started else ""), c.blocked)
    if c.blocked:
        # Waiting for upstream is not a failure of this shard, whatever it did before.
        ups = [upstream[u][k] for u in needs if upstream[u][k].state != "done"]
        why = ", ".join(f"{u.stage}/{u.shard} {u.state}" for u in ups) or c.reason
        return mk("pending", f"waiting for upstream ({why})", True)
    if err:
        return mk("failed", err)
    if c.reason != "no DONE marker":
        return mk("failed", f"output rejected: {c.reason}")
    if c.started and js is None and _requeued(rd, stage, k):
        # USR2 requeue: the same job waits in the queue; without squeue/sacct we
        # cannot see it, but the shard told us before it exited.
        return mk("pending", "requeued by SLURM (USR2); resumes from its ledger")
    if c.started:
        gone = "left the queue" if js == GONE else js
        return mk("failed", (f"SLURM {gone}; " if js else "")
                  + "stopped without finishing (killed: SIGKILL, OOM, node loss or scancel)")
    if js == GONE:
        return mk("failed", "its SLURM job left the queue before the shard started "
                  "(cancelled while pending?)")
    if js:
        return mk("failed", f"SLURM {js} before the shard started")
    return mk("pending", c.reason)


def aggregate_state(agg: dict[str, Any], fingerprint: str) -> str:
    status = agg.get("status")
    if not status:
        return "not run"
    if agg.get("shards_fingerprint") not in (None, fingerprint):
        return "stale"
    if status == "complete" and "shards_fingerprint" not in agg:
        return "stale"  # written before fingerprints: cannot tell, so do not vouch for it
    return str(status)


def run_state(rd: RunDir, *, live: bool = True, deep: bool = False) -> RunState:
    """`deep` verifies every records file by digest (resume does; status checks sizes, and the
    digest only of files touched since their DONE — see rundir/completeness.py)."""
    manifest = load_manifest(rd)
    spans: list[ShardSpan] = read_spans(rd, deep=deep)
    comp = completeness_map(rd.root, manifest, spans, deep=deep)
    jobs_file = load_jobs(rd)
    jobs = latest_jobs(rd, jobs_file)
    try:
        agg = read_json(rd.aggregate_status)
        agg = agg if isinstance(agg, dict) else {}
    except (OSError, ValueError):
        agg = {}
    fp = shards_fingerprint(comp)
    agg_state = aggregate_state(agg, fp)
    # ask SLURM only about what is not finished: a complete run costs no squeue/sacct call
    pending_jobs = [j for (st, k), j in jobs.items() if st in comp and not comp[st][k].complete]
    agg_job = jobs.get(("aggregate", 0)) if agg_state != "complete" else None
    if agg_job:
        pending_jobs.append(agg_job)
    states = live_states(pending_jobs) if live and pending_jobs else {}
    needs = {s.name: list(s.needs) for s in manifest.stages}
    out: dict[str, list[ShardState]] = {}
    versions: Counter[str] = Counter()
    for stage, col in comp.items():
        rows = []
        for k, c in enumerate(col):
            job = jobs.get((stage, k))
            rows.append(_shard_state(rd, stage, k, c, spans[k].count, job,
                                     states.get(job) if job else None, out, needs[stage]))
            if c.complete:
                versions[c.code_version or "unknown"] += 1
        out[stage] = rows
    return RunState(rd, manifest, out, agg, agg_state, jobs_file.problems, versions, fp,
                    states.get(agg_job) if agg_job else None)
