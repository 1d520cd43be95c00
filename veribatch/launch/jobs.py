"""jobs.json: every SLURM submission of a run, and which job last ran each (stage, shard).

Written by the submitting process — one entry per array as soon as sbatch accepted it,
so a submission that fails half-way still leaves every job it did submit visible to
`status`, `resume` and `cancel` — and read by those from any later shell.  Every
read-modify-write holds `jobs.json.lock`.  It records intent only; whether a shard is
done is decided by the shard's DONE marker, never by a job state.

A hand-edited or damaged entry is skipped with a warning naming it (`JobsFile.problems`),
never a traceback: the run directory, not this file, is the truth.
"""

from __future__ import annotations

import getpass
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from veribatch.rundir.paths import RunDir, atomic_write_json, read_json

from .locks import file_lock
from .slurm_calls import run_slurm


@dataclass
class JobsFile:
    data: dict[str, Any]
    problems: list[str] = field(default_factory=list)

    @property
    def submissions(self) -> list[dict[str, Any]]:
        return self.data["submissions"]


def _valid(sub: Any, n: int, path: Any) -> str | None:
    if not isinstance(sub, dict):
        return f"{path}: submission #{n} is not an object (ignored)"
    for key, kind in (("stage", str), ("jobs", dict)):
        if not isinstance(sub.get(key), kind):
            return (f"{path}: submission #{n} has no {key!r} "
                    f"({kind.__name__} expected; ignored)")
    for shard, job in sub["jobs"].items():
        if not str(shard).isdigit() or not isinstance(job, str | int):
            return f"{path}: submission #{n}, jobs entry {shard!r}: {job!r} is not a job (ignored)"
    return None


def load_jobs(rd: RunDir) -> JobsFile:
    """jobs.json with malformed submissions left out (and named in `problems`)."""
    try:
        data = read_json(rd.jobs)
    except FileNotFoundError:
        return JobsFile({"submissions": []})
    except (OSError, ValueError) as e:
        return JobsFile({"submissions": []}, [f"{rd.jobs}: unreadable ({e}); ignored"])
    if not isinstance(data, dict) or not isinstance(data.get("submissions", []), list):
        return JobsFile({"submissions": []},
                        [f"{rd.jobs}: expected an object with a 'submissions' list; ignored"])
    out = JobsFile({**data, "submissions": []})
    for n, sub in enumerate(data.get("submissions", []), start=1):
        problem = _valid(sub, n, rd.jobs)
        if problem:
            out.problems.append(problem)
        else:
            out.submissions.append(sub)
    return out


def update_jobs(rd: RunDir, change: Callable[[dict[str, Any]], None]) -> None:
    """Read-modify-write jobs.json under its lock (malformed entries are kept as they are)."""
    with file_lock(rd.jobs_lock):
        try:
            data = read_json(rd.jobs)
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        if not isinstance(data.get("submissions"), list):
            data["submissions"] = []
        change(data)
        atomic_write_json(rd.jobs, data)


def add_submissions(rd: RunDir, entries: list[dict[str, Any]]) -> None:
    update_jobs(rd, lambda data: data["submissions"].extend(entries))


def latest_jobs(rd: RunDir, jobs: JobsFile | None = None) -> dict[tuple[str, int], str]:
    """(stage, shard) → job id of its latest submission ("123_4" for array elements)."""
    out: dict[tuple[str, int], str] = {}
    for sub in (jobs or load_jobs(rd)).submissions:
        for shard, job in sub["jobs"].items():
            out[(sub["stage"], int(shard))] = str(job)
    return out


def _expand(job: str) -> list[str]:
    """'12_[0-2,5%4]' → ['12_0', '12_1', '12_2', '12_5']; plain ids unchanged."""
    m = re.fullmatch(r"(\d+)_\[([^\]]+)\]", job)
    if not m:
        return [job]
    base, spec = m.group(1), m.group(2).split("%")[0]
    out = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out += [f"{base}_{i}" for i in range(int(a), int(b or a) + 1)]
    return out


def _run(cmd: list[str]) -> str | None:
    """stdout of a SLURM command that succeeded, else None; an unreachable controller is
    waited for (`slurm_calls.run_slurm`), then `SlurmUnreachable`: an empty queue read
    from a controller that did not answer would make running shards look failed."""
    out = run_slurm(cmd)
    return out.stdout if out is not None and out.returncode == 0 else None


LIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING",
        "SUSPENDED", "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT"}
GONE = "GONE"  # accounting says queued or running, the queue no longer has it


def parse_states(lines: str) -> dict[str, str]:
    """`JOBID|STATE` lines → element id → state.

    A line for one element beats a line for a range that includes it, in whatever order
    they come: sacct prints an array's not-yet-started range (`49_[0-3%4]|PENDING`) next
    to the elements that already ended (`49_1|CANCELLED by 0`), and the range must not
    turn a cancelled element back into a pending one."""
    ranged: dict[str, str] = {}
    single: dict[str, str] = {}
    for line in lines.splitlines():
        jid, _, state = line.partition("|")
        jid = jid.strip()
        if not jid:
            continue
        word = state.split()[0] if state.strip() else "UNKNOWN"
        if "[" in jid:
            for j in _expand(jid):
                ranged[j] = word
        else:
            single[jid] = word
    return {**ranged, **single}


def live_states(job_ids: list[str]) -> dict[str, str]:
    """Job states from squeue (live) and sacct (finished), where those commands work.

    When squeue answers, it alone says what is queued or running: an element that sacct
    still calls PENDING but the queue does not list has left it (cancelled while pending
    leaves no accounting record of its own) and reads as GONE, so `resume` redoes it.
    Missing commands or a cluster without accounting give an empty answer, never an
    error: this only adds detail to what the run directory says.  A controller that does
    not answer is waited for, then `slurm_calls.SlurmUnreachable` (exit 3): not knowing
    what runs is not the same as nothing running.
    """
    bases = sorted({j.split("_")[0] for j in job_ids})
    if not bases:
        return {}
    states = parse_states(_run(["sacct", "-n", "-P", "-X", "-o", "JobID,State", "-j",
                                ",".join(bases)]) or "")
    queue = _run(["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(bases)])
    if queue is None:
        # squeue refuses ids it no longer knows; ask for the user's whole queue instead.
        queue = _run(["squeue", "-h", "-r", "-o", "%i|%T", "-u", getpass.getuser()])
    if queue is not None:
        live = parse_states(queue)
        for j in set(states) | set(job_ids):
            if j in live:
                states[j] = live[j]
            elif states.get(j) in LIVE:
                states[j] = GONE
    return states
