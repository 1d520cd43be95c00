"""A verifier in a package of its own (tests/plugins/toy_verifier), pip-installed into a
fresh venv, is a veribatch verifier with no edit in this repository: `launch verify --tool`
lists it and runs a query with it, and the conformance test checks it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PLUGINS = REPO / "tests" / "plugins"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real venv seeing this environment's packages (a .pth: no network), with this
    checkout and the toy plug-in installed in it (their entry points are its own)."""
    root = tmp_path_factory.mktemp("plugin-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    py = root / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    ours = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "outer-env.pth").write_text(ours + "\n")
    for folder in (REPO, PLUGINS / "toy_verifier"):
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--no-index", "-e", str(folder)], check=True, cwd=root)
    return py


def _run(py: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(py), *args], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=300)


def test_the_toy_verifier_is_listed_and_runs_a_query(venv: Path, tmp_path: Path) -> None:
    r = _run(venv, "-m", "veribatch", "verify", "--help")
    assert r.returncode == 0, r.stderr
    assert "gcc-syntax" in r.stdout
    good, bad = tmp_path / "good.c", tmp_path / "bad.c"
    good.write_text("int main(void) { return 0; }\n")
    bad.write_text("int main(void) { return 0 }\n")
    r = _run(venv, "-m", "veribatch", "verify", "--tool", "gcc-syntax", str(good))
    assert "TRUE" in r.stdout, r.stdout + r.stderr
    r = _run(venv, "-m", "veribatch", "verify", "--tool", "gcc-syntax", str(bad))
    assert "FALSE" in r.stdout, r.stdout + r.stderr


def test_the_toy_verifier_passes_the_conformance_test(venv: Path) -> None:
    r = _run(venv, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "tests/verifiers/test_conformance.py", "-k", "gcc-syntax")
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
