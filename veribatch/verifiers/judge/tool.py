"""`JudgeTool`: one judged program run as a verifier query (registry name "judge").

Query files: ``(program.cpp|program.py, input[, expected_output])``.  Options are
passed to the judge CLI (``--time 2 --memory 256`` for the program's own limits);
the query's `Limits` bound the whole call, compilation included.

Status: TRUE when the program ran OK and (if an expected output was given) its
output matches; FALSE when it ran but the output differs, or the program itself
failed (CE/RE/TLE/MLE/OLE; the judge verdict is in ``extras["verdict"]``); ERROR
only when the judge could not run it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from veribatch.verifiers.base import (
    FinishedRun,
    Query,
    Tool,
    ToolVerdict,
    UnsupportedQueryError,
    read_version,
)
from veribatch.verifiers.judge.toolchain import compiler, compiler_version, judge_python
from veribatch.verifiers.result import Limits, Status

MARKER = "VERIBATCH-JUDGE "


class JudgeTool(Tool):
    """One program run on one input in the judge's sandbox, its output compared."""

    name = "judge"
    description = ("the REFUTE judge: one C++/Python program run on one input in the sandbox, "
                   "its output compared with the expected one")
    properties = ("judge",)
    languages = ("C++", "Python")
    memory_mb = 4096
    query_cores = 1
    certified_verdicts = False
    text_files = 1  # the program; its input and expected output may be any bytes
    container_executable = "/usr/local/bin/python3"  # judge.def: PYTHONPATH=/opt/veribatch
    container_network = False  # untrusted programs: no network inside the image either

    def executable(self) -> str:
        return sys.executable

    def version(self, executable: str) -> str:
        """Not the executable's own: the compiler and interpreter that run the programs."""
        py = judge_python()
        return f"{compiler_version(compiler())}; {read_version([py, '--version']).strip()}"

    def cmdline(self, executable: str, query: Query, limits: Limits, workdir: Path) -> list[str]:
        if query.property not in self.properties:
            raise UnsupportedQueryError(f"judge: unsupported property {query.property!r}; "
                                        f"known: {', '.join(self.properties)}")
        if len(query.files) not in (2, 3):
            raise UnsupportedQueryError("judge query files: (program, input[, expected output])")
        argv = [executable, "-m", "veribatch.verifiers.judge", "--program", str(query.files[0]),
                "--input", str(query.files[1])]
        if len(query.files) == 3:
            argv += ["--expected", str(query.files[2])]
        return argv + list(query.options)

    def determine_result(self, run: FinishedRun) -> ToolVerdict:
        lines = [ln for ln in run.output.splitlines() if ln.startswith(MARKER)]
        if not lines:
            tail = run.output.strip()[-300:]
            return ToolVerdict(Status.ERROR, f"judge printed no report: {tail or 'no output'}")
        report = json.loads(lines[-1][len(MARKER):])
        verdict = report.get("verdict")
        if verdict == "OK":
            if report.get("matches_expected", True):
                return ToolVerdict(Status.TRUE, None, report)
            return ToolVerdict(Status.FALSE, "output differs from the expected output", report)
        if verdict == "ERROR":
            return ToolVerdict(Status.ERROR, report.get("reason"), report)
        return ToolVerdict(Status.FALSE, f"{verdict}: {report.get('reason')}", report)
