"""The manifest: what a run is, written once at plan time, checked on every reuse.

The run id is ``<task>-<first 12 hex of RunConfig.identity()>``; the identity is a
hash of everything that changes results (dataset content, model, sampling,
strategy, verifier + version, limits, shard count, options).  The code version
is *recorded* here but is deliberately *not* part of the identity: a bug-fix
release should be able to resume a half-finished run.  Comparing results across
code versions is what `code_version` in the manifest is for.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import fields
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veribatch.rundir.manifest import Manifest
from veribatch.rundir.paths import (
    AGGREGATE_STAGE,
    INSTANCES,
    MANIFEST,
    SHARDS,
    RunDir,
    RunDirError,
    atomic_write_json,
)
from veribatch.tasks.base import RunConfig

from .instances import write_instances

if TYPE_CHECKING:
    from .plan import Plan

MANIFEST_VERSION = 1


class RunConflictError(RuntimeError):
    """A run directory exists and belongs to another configuration; nothing is overwritten."""


@lru_cache(maxsize=1)
def code_version() -> str:
    """`git describe` of the source tree when it is a checkout, else the package version.

    Recorded in the manifest (who planned), in every ledger header, stats.json and DONE
    (who wrote each shard), so a resume across code versions can say what it mixes."""
    src = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(
            ["git", "-C", str(src), "describe", "--always", "--dirty", "--tags"],
            capture_output=True, text=True, timeout=5,
        )
        if out.returncode == 0 and out.stdout.strip():
            return f"git:{out.stdout.strip()}"
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        from importlib.metadata import version

        return f"veribatch {version('veribatch')}"
    except Exception:  # noqa: BLE001  (metadata missing in odd installs: still record something)
        return "unknown"


def stage_entries(plan: Plan) -> list[dict[str, Any]]:
    entries = [
        {"name": s.name, "resource": s.resource, "needs": list(s.needs),
         "cpus_per_task": s.cpus_per_task, "gpus_per_task": s.gpus_per_task,
         "mem_gb": s.mem_gb, "seconds_per_instance": s.seconds_per_instance,
         # what `launch regress` compares per instance (read from this file, not from task code)
         "verdict_column": s.verdict_column, "time_column": s.time_column,
         "time_limit_column": s.time_limit_column, "record_key": list(s.record_key),
         "record_filter": dict(s.record_filter)}
        for s in plan.stages
    ]
    entries.append({"name": AGGREGATE_STAGE, "resource": "cpu",
                    "needs": [s.name for s in plan.stages], "cpus_per_task": 1,
                    "gpus_per_task": 0, "mem_gb": 4, "seconds_per_instance": 0.0,
                    "added_by": "launch"})
    return entries


def build_manifest(plan: Plan) -> dict[str, Any]:
    return {
        "manifest_version": MANIFEST_VERSION,
        "run_id": plan.run_id,
        "identity": plan.config.identity(),
        "config": plan.config.to_json(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "code_version": code_version(),
        "hostname": socket.gethostname(),
        "stages": stage_entries(plan),
        "instances_file": INSTANCES,
        "instance_count": len(plan.instances),
        "shards_file": SHARDS,
        "shards": plan.shards,
    }


# What an interrupted plan may leave behind (plus temp files of atomic writes, and the
# lock and probe files of launch itself): such a directory is planned again, not refused.
PLANNING_FILES = {INSTANCES, SHARDS, "launch.lock"}
PLANNING_TEMP_PREFIXES = (f".{INSTANCES}.", f".{SHARDS}.", f".{MANIFEST}.", ".lockprobe-")


def _interrupted_plan(root: Path) -> bool:
    return all(p.name in PLANNING_FILES or p.name.startswith(PLANNING_TEMP_PREFIXES)
               for p in root.iterdir())


def check_reusable(plan: Plan, root: Path) -> None:
    """Raise RunConflictError when `root` cannot hold this plan; touches nothing.

    Run before anything is created, so a foreign directory never gets even a lock file."""
    rd = RunDir(root)
    if rd.manifest.exists():
        old = load_manifest(rd)
        if old.identity != plan.config.identity():
            diff = _config_diff(old.config, plan.config.to_json())
            raise RunConflictError(
                f"run directory {root} belongs to run {old.run_id} with a different "
                f"configuration ({diff}); nothing was overwritten — pick another --run-name "
                f"or --runs-dir"
            )
        return
    if root.exists() and not root.is_dir():
        raise RunConflictError(f"{root} exists and is not a directory; nothing was overwritten")
    if root.exists() and not _interrupted_plan(root):
        raise RunConflictError(f"{root} exists, is not empty and holds no manifest.json; "
                               "nothing was overwritten")


def create_or_reuse(plan: Plan, root: Path) -> tuple[RunDir, bool]:
    """Write a new run directory, or reuse one holding the same identity.

    Returns (run dir, created).  A directory of another configuration, or a
    non-empty directory without a manifest (other than an interrupted plan of this
    launch's own files), raises `RunConflictError` before any file is touched.
    Callers that may race with another launch hold the run lock (`launch.locks`).
    """
    check_reusable(plan, root)
    rd = RunDir(root)
    if rd.manifest.exists():
        return rd, False
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RunConflictError(f"cannot create run directory {root}: {e.strerror}") from None
    if not os.access(root, os.W_OK):
        raise RunConflictError(f"run directory {root} is not writable")
    write_instances(rd, plan)
    # Manifest last: a directory without one is an unfinished plan and may be replanned.
    atomic_write_json(rd.manifest, build_manifest(plan))
    return rd, True


def _config_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return "differs in " + ", ".join(keys) if keys else "same fields, different identity"


def load_manifest(rd: RunDir) -> Manifest:
    """Read and sanity-check a manifest; a hand-edited config no longer matches its identity."""
    m = Manifest.read(rd)
    try:
        config = config_from_manifest(m)
    except (ValueError, KeyError, TypeError) as e:
        raise RunDirError(f"{rd.manifest}: unreadable manifest ({e})") from None
    if config.identity() != m.raw.get("identity"):
        raise RunDirError(f"{rd.manifest}: config does not hash to the recorded identity "
                          "(edited by hand?)")
    return m


def config_from_manifest(m: Manifest) -> RunConfig:
    names = {f.name for f in fields(RunConfig)}
    return RunConfig(**{k: v for k, v in m.config.items() if k in names})
