"""Fixtures for verifier tests: a real, tiny shell-script verifier to drive the runner."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from veribatch.verifiers.base import FinishedRun, Query, Tool, ToolVerdict
from veribatch.verifiers.result import Limits, Status


@pytest.fixture
def write(tmp_path: Path):
    """`write(name, text)` → a file of that text in the test's temp dir (programs to judge)."""
    def _write(name: str, text: str) -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p

    return _write


class ShellTool(Tool):
    name = "shell"
    container_executable = "/bin/sh"
    calls = 0

    def executable(self) -> str:
        return "/bin/sh"

    def version(self, executable: str) -> str:
        return "sh-test-1"

    def cmdline(self, executable: str, query: Query, limits: Limits, workdir: Path) -> list[str]:
        return [executable, str(query.files[0]), *query.options]

    def determine_result(self, run: FinishedRun) -> ToolVerdict:
        if "RAISE" in run.output:
            raise RuntimeError("adapter bug")
        m = re.search(r"VERDICT (TRUE|FALSE|UNKNOWN)", run.output)
        if not m:
            return ToolVerdict(Status.UNKNOWN, "no verdict")
        return ToolVerdict(Status(m.group(1)), None, {"seen": m.group(1)})


@pytest.fixture
def shell_tool() -> ShellTool:
    return ShellTool()


# Sum of cubes: needs a non-linear invariant (4s = i²(i+1)²) and 1000 unrollings, so the
# embedded verifier's portfolio keeps its members busy far longer than a test takes.
HARD_C = """\
extern int __VERIFIER_nondet_int(void);
extern void reach_error(void);
int main() {
  int n = __VERIFIER_nondet_int();
  if (n < 0 || n > 1000) return 0;
  long long s = 0;
  int i = 0;
  while (i < n) { i++; s += (long long)i * i * i; }
  if (4 * s != (long long)n * n * (n + 1) * (n + 1)) reach_error();
  return 0;
}
"""


@pytest.fixture(scope="session")
def hard_c() -> str:
    """A C program no verifier query here finishes quickly (for tests that kill one mid-run)."""
    return HARD_C
