"""Where everything of a run lives on disk, and the two file-level primitives every writer
needs (atomic write, JSON read).

The run directory is the single source of truth (DESIGN.md): no process needs to stay alive
for `status`, `resume`, `logs` or `cancel` to work, from any shell on any node that sees the
file system.  What the files mean is documented in docs/run-directory.md.
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
INSTANCES = "instances.jsonl"
SHARDS = "shards.json"
JOBS = "jobs.json"
AGGREGATE_STAGE = "aggregate"


class RunDirError(ValueError):
    """The run directory is damaged or was written by a different plan (the message names
    the file)."""


PRIVATE_UMASK = 0o077


def make_files_private() -> None:
    """From now on this process — and every process it starts: local workers, serve jobs,
    and SLURM jobs (sbatch hands its umask to the job as ``SLURM_UMASK``) — creates files
    0600 and folders 0700, as SLURM's own spool and BenchExec do: a run's records, logs and
    error files can quote model answers, prompts and endpoints, and are the user's alone.

    Called once, first thing in the CLI's main (the one entry point of every run)."""
    os.umask(os.umask(PRIVATE_UMASK) | PRIVATE_UMASK)
    _umask.cache_clear()


@lru_cache(maxsize=1)
def _umask() -> int:
    """The process umask (reading it means setting it; done once, before any thread writes)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a temp file in the same directory + fsync + rename: readers see old or new, never half.

    mkstemp creates the file 0600; it gets the mode any other new file would (0666 less the
    umask; under the CLI that is 0600, see `make_files_private`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode())


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class RunDir:
    """Path arithmetic for one run directory (no I/O)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"RunDir({str(self.root)!r})"

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST

    @property
    def instances(self) -> Path:
        return self.root / INSTANCES

    @property
    def shards_file(self) -> Path:
        return self.root / SHARDS

    @property
    def jobs(self) -> Path:
        return self.root / JOBS

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    @property
    def slurm_logs(self) -> Path:
        return self.root / "slurm"

    @property
    def aggregate_status(self) -> Path:
        return self.root / "aggregate.json"

    def shard_dir(self, stage: str, shard: int) -> Path:
        return self.root / "shards" / stage / str(shard)

    # Files inside a shard directory.
    def ledger(self, stage: str, shard: int) -> Path:
        return self.shard_dir(stage, shard) / "ledger.jsonl"

    def records(self, stage: str, shard: int) -> Path:
        return self.shard_dir(stage, shard) / "records.parquet"

    def stats(self, stage: str, shard: int) -> Path:
        return self.shard_dir(stage, shard) / "stats.json"

    def done(self, stage: str, shard: int) -> Path:
        return self.shard_dir(stage, shard) / "DONE"

    def error(self, stage: str, shard: int) -> Path:
        return self.shard_dir(stage, shard) / "error.json"

    def attempt(self, stage: str, shard: int) -> Path:
        return self.shard_dir(stage, shard) / "attempt.json"

    @property
    def run_lock(self) -> Path:
        return self.root / "launch.lock"

    @property
    def jobs_lock(self) -> Path:
        return self.root / "jobs.json.lock"

    def lock(self, stage: str, shard: int) -> Path:
        return self.shard_dir(stage, shard) / "lock"

    def log(self, stage: str, shard: int) -> Path:
        return self.shard_dir(stage, shard) / "log.txt"

    def scratch(self, stage: str, shard: int) -> Path:
        return self.shard_dir(stage, shard) / "scratch"
