"""How a `RUN` argument finds its run directory: a path, or a run id / run name under the
runs dir (`--runs-dir`, else $VERIBATCH_RUNS_DIR, else ./runs).

The directory's format itself is `veribatch.rundir`; this is launch's configuration of
where runs live.
"""

from __future__ import annotations

import os
from pathlib import Path

from veribatch.rundir.paths import MANIFEST, RunDir

RUNS_DIR_ENV = "VERIBATCH_RUNS_DIR"


class RunNotFoundError(FileNotFoundError):
    """`RUN` names neither a run directory nor a run id under the runs dir."""


def default_runs_dir() -> Path:
    return Path(os.environ.get(RUNS_DIR_ENV, "runs"))


def resolve_run(run: str, runs_dir: Path | None = None) -> RunDir:
    """`RUN` may be a path to a run directory, or a run id / run name under the runs dir."""
    candidates = [Path(run)]
    base = runs_dir if runs_dir is not None else default_runs_dir()
    candidates.append(base / run)
    for c in candidates:
        if (c / MANIFEST).is_file():
            return RunDir(c)
    looked = ", ".join(str(c) for c in candidates)
    raise RunNotFoundError(f"no run {run!r}: no {MANIFEST} in {looked}")
