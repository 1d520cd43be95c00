"""A non-editable install must carry what `launch` looks up beside its packages: the SLURM
profiles, the nightly suites and every task's shipped sample (an editable install finds
them in the checkout, which hides their absence from every other test)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_wheel_ships_profiles_suites_and_samples(tmp_path: Path) -> None:
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    src = tmp_path / "src"
    for f in files:
        if (REPO / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, src / f)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    wanted = [f for f in files if f.startswith(("veribatch/slurm_profiles/", "veribatch/nightly/"))
              or (f.startswith("veribatch/tasks/") and "/sample/" in f)]
    assert any(f.startswith("veribatch/slurm_profiles/") for f in wanted)
    assert any(f.startswith("veribatch/nightly/") for f in wanted)
    assert sorted(set(wanted) - shipped) == []
