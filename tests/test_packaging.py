"""What the wheel installs. A non-editable install must carry what `launch` looks up beside
its packages: the SLURM profiles, the nightly suites and every task's shipped sample (an
editable install finds them in the checkout, which hides their absence from every other
test). And it must install beside the field's other tools: one top-level import name,
`veribatch` — PyPI's `verifiers` (LLM RL environments, used by exactly this tool's users) in
the same fresh venv stays importable and distinct from `veribatch.verifiers`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYPI_VERIFIERS = "verifiers==0.4.0"
"""Pinned so the test is reproducible; its top-level `import verifiers` needs none of its 24
dependencies (anthropic, openai, mcp, ... — too heavy for CI), so it is installed --no-deps."""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from the tracked files (what a release would ship)."""
    tmp = tmp_path_factory.mktemp("wheel")
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    src = tmp / "src"
    for f in files:
        if (REPO / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, src / f)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "-w", str(tmp / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (built,) = (tmp / "dist").glob("*.whl")
    return built


def test_the_wheel_ships_profiles_suites_and_samples(wheel: Path) -> None:
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    shipped = set(zipfile.ZipFile(wheel).namelist())
    wanted = [f for f in files if f.startswith(("veribatch/slurm_profiles/", "veribatch/nightly/"))
              or (f.startswith("veribatch/tasks/") and "/sample/" in f)]
    assert any(f.startswith("veribatch/slurm_profiles/") for f in wanted)
    assert any(f.startswith("veribatch/nightly/") for f in wanted)
    assert sorted(set(wanted) - shipped) == []


def test_the_wheel_has_one_top_level_import_name(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"veribatch"}, sorted(top)
    meta = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(meta).decode().split() == ["veribatch"]
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    scripts = zipfile.ZipFile(wheel).read(entry).decode()
    assert "launch = veribatch.launch.cli:main" in scripts
    assert "veribatch = veribatch.launch.cli:main" in scripts


def _pip(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """pip outside the checkout: with the repository (an editable install's egg-info) on
    sys.path or $PYTHONPATH, pip would take veribatch as already installed."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd, env=env)


def test_installs_beside_pypi_verifiers_in_one_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    """A real venv (no --system-site-packages) holding PyPI's `verifiers` and our wheel."""
    got = _pip("download", "--no-deps", "-q", "-d", str(tmp_path / "pypi"), PYPI_VERIFIERS,
               cwd=tmp_path)
    if got.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"pip download {PYPI_VERIFIERS} failed (CI=true): {got.stderr[-800:]}")
        pytest.skip(f"package registry unreachable: {got.stderr.strip()[-300:]}")
    (theirs,) = (tmp_path / "pypi").glob("verifiers-*.whl")
    venv = tmp_path / "venv"
    # --without-pip: ensurepip costs ~10 s; this process's pip installs into it (--python)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    for whl in (theirs, wheel):  # theirs first: the environment "already holds" verifiers
        r = _pip("--python", str(py), "install", "-q", "--no-deps", "--no-index", str(whl),
                 cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
    probe = (
        "import json, importlib.metadata as md, verifiers, veribatch.verifiers as ours\n"
        "import veribatch.verifiers.result, veribatch.verifiers.base\n"
        "print(json.dumps({'theirs': verifiers.__file__, 'ours': ours.__file__,\n"
        "  'dist': md.packages_distributions().get('verifiers'),\n"
        "  'version': md.version('verifiers'),\n"
        "  'owners': sorted(k for k, v in md.packages_distributions().items() if 'veribatch' in v)}))"
    )
    r = subprocess.run([str(py), "-I", "-c", probe], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout)
    site = venv / "lib"
    assert Path(seen["theirs"]).is_relative_to(site) and Path(seen["ours"]).is_relative_to(site)
    assert Path(seen["theirs"]).parent.name == "verifiers"
    assert Path(seen["ours"]).parent.parent.name == "veribatch"
    assert seen["dist"] == ["verifiers"] and seen["version"] == PYPI_VERIFIERS.split("==")[1]
    assert seen["owners"] == ["veribatch"]  # our distribution owns no other top-level name
