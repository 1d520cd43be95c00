"""Fixtures for verifier tests: a real, tiny shell-script verifier to drive the runner."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from verifiers.base import FinishedRun, Query, Tool, ToolVerdict
from verifiers.result import Limits, Status


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
