"""The package layering of docs/architecture.md, checked with import-linter's contracts in
pyproject.toml (`[tool.importlinter]`), so that `make test` fails on an import against it.

Lazy (function-level) imports count: a layer that reaches upward only inside a function is
still a layer that needs the one above it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` over the `veribatch` found under `root`, with `root`'s pyproject.toml."""
    env = {**os.environ, "PYTHONPATH": str(root), "NO_COLOR": "1"}
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run([sys.executable, "-c", code, "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_layering_holds() -> None:
    res = lint_imports(REPO)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "0 broken" in res.stdout


@pytest.mark.parametrize(("module", "line", "contract"), [
    # aggregate reads files only: not even a lazy import of a task
    ("aggregate/regress.py", "    from veribatch.tasks.base import RunConfig  # noqa\n",
     "aggregate reads only files"),
    # a verifier knows no engine
    ("verifiers/result.py", "    import veribatch.inference.types  # noqa\n", "launch hosts the tasks"),
    # a benchmark's stages never reach up into the CLI host (only its cli.py may)
    ("tasks/invbench/stages.py", "    from veribatch.launch import plan  # noqa\n", "launch hosts the tasks"),
    # a benchmark's tables read files: no verifier, even lazily
    ("tasks/refute/tables.py", "    from veribatch.verifiers import registry  # noqa\n",
     "a benchmark's tables read only files"),
    # the run directory's format is the bottom layer: it reads no table machinery
    ("rundir/completeness.py", "    from veribatch.aggregate import table  # noqa\n", "launch hosts the tasks"),
    # a command prints and exits through launch.console, not the host's module
    ("tasks/cebench/cli.py", "    from veribatch.launch.cli import out  # noqa\n",
     "never through the CLI host"),
    ("launch/commands/report.py", "    from veribatch.launch import cli  # noqa\n",
     "never through the CLI host"),
    # REFUTE uses the judge's public interface, not its internals
    ("tasks/refute/search.py", "    from veribatch.verifiers.judge.sandbox import Sandbox  # noqa\n",
     "only through its public interface"),
    # one benchmark never imports another
    ("tasks/refute/answer.py", "    from veribatch.tasks.invbench import answer  # noqa\n",
     "a benchmark never imports another"),
])
def test_an_import_against_the_layering_is_caught(tmp_path: Path, module: str, line: str,
                                                  contract: str) -> None:
    shutil.copytree(REPO / "veribatch", tmp_path / "veribatch",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "veribatch" / module
    target.write_text(target.read_text() + "\n\ndef _against_the_layering() -> None:\n" + line)
    res = lint_imports(tmp_path)
    assert res.returncode != 0, res.stdout[-2000:]
    broken = res.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, res.stdout[-4000:]
