"""jobs.json: which SLURM job (array element) last ran each (stage, shard).

Written by the submitting process, read by `status`, `logs` and `cancel` from any
later shell.  It records intent only; whether a shard is done is decided by the
shard's DONE marker, never by a job state.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

from .rundir import RunDir, atomic_write_json, read_json


def read_jobs(rd: RunDir) -> dict[str, Any]:
    try:
        data = read_json(rd.jobs)
        if isinstance(data, dict) and isinstance(data.get("submissions"), list):
            return data
    except (OSError, ValueError):
        pass
    return {"submissions": []}


def add_submissions(rd: RunDir, entries: list[dict[str, Any]]) -> None:
    data = read_jobs(rd)
    data["submissions"].extend(entries)
    atomic_write_json(rd.jobs, data)


def latest_jobs(rd: RunDir) -> dict[tuple[str, int], str]:
    """(stage, shard) → job id of its latest submission ("123_4" for array elements)."""
    out: dict[tuple[str, int], str] = {}
    for sub in read_jobs(rd)["submissions"]:
        for shard, job in (sub.get("jobs") or {}).items():
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
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def live_states(job_ids: list[str]) -> dict[str, str]:
    """Job states from squeue (live) and sacct (finished), where those commands work.

    Missing commands, a cluster without accounting, or a timeout give an empty
    answer, never an error: this only adds detail to what the run directory says.
    """
    bases = sorted({j.split("_")[0] for j in job_ids})
    if not bases:
        return {}
    states: dict[str, str] = {}
    out = _run(["sacct", "-n", "-P", "-X", "-o", "JobID,State", "-j", ",".join(bases)])
    for line in (out or "").splitlines():
        jid, _, state = line.partition("|")
        for j in _expand(jid.strip()):
            states[j] = state.split()[0] if state else "UNKNOWN"
    out = _run(["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(bases)])
    for line in (out or "").splitlines():
        jid, _, state = line.partition("|")
        for j in _expand(jid.strip()):
            states[j] = state.strip()
    return states


def queue_available() -> bool:
    return _run(["squeue", "-h", "-o", "%i", "-u", "root"]) is not None or \
        _run(["squeue", "-h", "-o", "%i"]) is not None
