"""A verifier and a benchmark in packages of their own (tests/plugins/toy_verifier,
tests/plugins/toy_benchmark), pip-installed into a fresh venv, are a veribatch verifier and
a `launch` command with no edit in this repository: `launch verify --tool` lists the verifier
and runs a query with it, `launch --help` lists the benchmark and a local run of it ends
with its table, and the conformance tests check both."""

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
    checkout and the toy plug-ins installed in it (their entry points are its own)."""
    root = tmp_path_factory.mktemp("plugin-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    py = root / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    ours = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "outer-env.pth").write_text(ours + "\n")
    for folder in (REPO, PLUGINS / "toy_verifier", PLUGINS / "toy_benchmark"):
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--no-index", "-e", str(folder)], check=True, cwd=root)
    return py


def _run(py: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | extra_env
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


def test_the_toy_benchmark_is_a_launch_command_with_its_own_commands(venv: Path) -> None:
    r = _run(venv, "-m", "veribatch", "--help")
    assert r.returncode == 0 and "toyarith" in r.stdout, r.stdout + r.stderr
    r = _run(venv, "-m", "veribatch", "toyarith", "--help")
    assert r.returncode == 0 and "show" in r.stdout, r.stdout + r.stderr  # its cli_module
    r = _run(venv, "-m", "veribatch", "toyarith", "show")
    assert r.returncode == 0 and "toyarith/sample/d\t2 ** 10 = 1000" in r.stdout, r.stdout + r.stderr


@pytest.mark.slow
def test_the_toy_benchmark_passes_the_task_conformance_test(venv: Path, shared_data: Path) -> None:
    # the conformance module's fixture reads the shared data (REFUTE's templates): the same
    # copy as here, so its tests run instead of being skipped
    r = _run(venv, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "tests/tasks/test_task_conformance.py", "-k", "toyarith",
             VERIBATCH_SHARED_DATA=str(shared_data))
    assert r.returncode == 0 and "3 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]


def test_a_local_run_of_the_toy_benchmark_completes_with_its_table(venv: Path, tmp_path: Path) -> None:
    r = _run(venv, "-m", "veribatch", "toyarith", "--runs-dir", str(tmp_path), "--quiet")
    assert r.returncode == 0, r.stdout + r.stderr
    [run_dir] = tmp_path.iterdir()
    table = (run_dir / "tables" / "toyarith.csv").read_text().splitlines()
    # five shipped instances: three claims hold, 2 ** 10 is not 1000, 10 / 0 has no value
    assert table == ["dataset,covered,missing,correct,wrong,error,accuracy",
                     "sample,5,0,3,1,1,60.0"], table
