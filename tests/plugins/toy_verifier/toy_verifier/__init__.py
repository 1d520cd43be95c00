"""`gcc -fsyntax-only` as a veribatch verifier: TRUE when a C file compiles, FALSE when gcc
reports an error.  It is installed as an entry point (pyproject.toml), so veribatch lists it
in `launch verify --tool` and its conformance test checks it, with no edit in veribatch."""

from __future__ import annotations

import shutil
from pathlib import Path

from veribatch.verifiers.base import (
    FinishedRun,
    Query,
    Tool,
    ToolNotFoundError,
    ToolVerdict,
    UnsupportedQueryError,
)
from veribatch.verifiers.result import Limits, Status

OK = "gcc-syntax: compiles"


class GccSyntaxTool(Tool):
    name = "gcc-syntax"
    description = "gcc -fsyntax-only: does the C program compile (a toy plug-in verifier)"
    properties = ("c-syntax",)
    languages = ("C",)
    memory_mb = 1024
    query_cores = 1
    certified_verdicts = False

    def executable(self) -> str:
        found = shutil.which("gcc")
        if found is None:
            raise ToolNotFoundError("gcc-syntax: gcc is not on PATH (apt-get install gcc)")
        return found

    def cmdline(self, executable: str, query: Query, limits: Limits, workdir: Path) -> list[str]:
        if query.property not in self.properties:
            raise UnsupportedQueryError(f"gcc-syntax checks {self.properties[0]!r}, "
                                        f"not {query.property!r}")
        # gcc says nothing when the program compiles: the line after it is the positive
        # answer, so a run that exits 0 without it (killed shell, no gcc) is no verdict
        script = f'"$0" -fsyntax-only "$@" && echo "{OK}"'
        return ["/bin/sh", "-c", script, executable, *query.options, *map(str, query.files)]

    def determine_result(self, run: FinishedRun) -> ToolVerdict:
        if run.returncode == 0 and OK in run.output.splitlines():
            return ToolVerdict(Status.TRUE)
        if run.returncode == 1 and "error:" in run.output:
            first = next(line for line in run.output.splitlines() if "error:" in line)
            return ToolVerdict(Status.FALSE, reason=first.strip())
        return ToolVerdict(Status.ERROR, reason=f"gcc exited {run.returncode}")
