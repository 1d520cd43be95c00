"""CE-Bench test fixtures: the shared LaM4Inv copy."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def lam4inv_root(shared_data: Path) -> Path:
    return shared_data / "lam4inv"


@pytest.fixture
def slurm_env() -> None:
    """The cluster of `.ci/cluster.sh start` (skip without one; in CI a missing one fails)."""
    import os
    import re
    import shutil
    import subprocess

    env_file = Path(os.environ.get("VERIBATCH_SLURM_DIR", "/tmp/veribatch-slurm")) / "slurm.env"
    m = re.search(r"SLURM_CONF=(\S+)", env_file.read_text()) if env_file.is_file() else None
    conf = os.environ.get("SLURM_CONF") or (m.group(1) if m else None)
    ok = bool(conf and shutil.which("sinfo")) and subprocess.run(
        ["sinfo", "-h"], env={**os.environ, "SLURM_CONF": str(conf)}, capture_output=True, timeout=10
    ).returncode == 0
    if not ok:
        if os.environ.get("CI"):
            pytest.fail(f"CI: no reachable SLURM cluster ({env_file})")
        pytest.skip(f"no reachable SLURM cluster ({env_file}); start one: bash .ci/cluster.sh start")
    os.environ["SLURM_CONF"] = str(conf)
