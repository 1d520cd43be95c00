"""Ultimate Automizer through its SV-COMP wrapper `Ultimate.py` (InvBench's reference verifier).

Command line: SV-COMP's (the InvBench repository publishes none of its own)::

    Ultimate.py --spec unreach-call.prp --file F.c --architecture 32bit|64bit
                --full-output --witness-dir WORKDIR --data WORKDIR/ultimate-data [options...]

``--data``: Ultimate writes its settings (the OSGi configuration area, the platform's
metadata) into ``data/`` beside ``Ultimate.py`` unless told otherwise, which fails before
any verdict where the tool is installed read-only (a cluster's software share, an apptainer
image).  Each query gets its own folder in its work directory (`Tool.scratch_dirs`: made
before the run, removed after it); a fresh one costs no measurable start-up time.  The
version is read from a short run with the same option (`version_argv`), because the
wrapper's ``--ultversion`` starts Ultimate before it reads ``--data``.

with two environment settings (`environment`): ``PATH`` starting with the directory of
``Ultimate.py``, because Ultimate runs the SMT solvers it finds on PATH and the release's
own z3 is part of the tool (the version records it), and ``_JAVA_OPTIONS=-Xmx<heap>m``,
because the wrapper hard-codes the heap and the JVM reads that variable after its command
line, so the heap follows the query's memory limit (`jvm_heap_mb`).

The verdict is read from the wrapper's ``Result:`` block, the reasons and invariants from
the results block of Ultimate's own output (``--full-output``), every case tested on real
recorded output.  The output format, how each case is read, and the measurements behind
the choices above are in docs/invbench.md ("UAutomizer").
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veribatch.verifiers.base import (
    FinishedRun,
    Query,
    Tool,
    ToolEnvironment,
    ToolVerdict,
    UnsupportedQueryError,
    find_executable,
    read_version,
)
from veribatch.verifiers.result import Limits, Status

PROPERTIES = {
    "unreach-call": "CHECK( init(main()), LTL(G ! call(reach_error())) )\n",
}
ARCHITECTURES = {"ILP32": "32bit", "LP64": "64bit"}
LOOPS_FILE = "veribatch-loops.json"
COUNTEREXAMPLE_FILE = "UltimateCounterExample.errorpath"
DATA_DIR = "ultimate-data"  # --data: Ultimate's settings, per query (see the module docstring)
# What the version is read from: a program without a specification, the shortest full run
# (it prints "This is Ultimate <version>" like --ultversion, which ignores --data).
VERSION_PROGRAM = "int main(void) { return 0; }\n"
# Ultimate starts its z3 with ``-memory:2024`` (MB); the JVM needs ~0.5 GB beyond its heap.
SOLVER_RESERVE_MB = 2560

_VERSION = re.compile(r"This is Ultimate (\S+)")
_Z3_VERSION = re.compile(r"Z3 version (\S+)")
_RUN_START = "--- Real Ultimate output ---"
_RUN_END = "--- End real Ultimate output ---"
_LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d[ T]")
_ENTRY = re.compile(r"^  - (\w+)(?: \[Line: (\d+)\])?: ?(.*)$")
_DERIVED = "Derived loop invariant:"
_SOLVER_CMD = re.compile(r"\[MP (\S+) ")
_EXCERPT = 20000
# Entries that say how a run ended (the reason of an UNKNOWN/ERROR), in the order tried.
_ENDINGS = ("SyntaxErrorResult", "UnsupportedSyntaxResult", "TypeErrorResult", "ExceptionOrErrorResult",
            "TimeoutResultAtElement", "TimeoutResult", "UnprovableResult", "GenericResultAtElement")


def jvm_heap_mb(memory_mb: int) -> int:
    """The JVM heap under a query memory limit: the limit less room for the solver processes
    and the JVM's own off-heap memory (the runner counts the whole tree's resident memory),
    but never less than half of it."""
    return max(memory_mb - SOLVER_RESERVE_MB, memory_mb // 2)


@dataclass
class ResultEntry:
    """One ``  - KindResult [Line: N]: short`` entry of a results block, with its details."""

    kind: str
    line: int | None
    short: str
    details: list[str] = field(default_factory=list)

    def summary(self) -> str:
        where = f" [Line: {self.line}]" if self.line is not None else ""
        text = f"{self.kind}{where}: {self.short}".rstrip(": ")
        reason = next((d.strip() for d in self.details if d.strip().startswith("Reason:")), None)
        return f"{text} ({reason})" if reason else text


def split_runs(output: str) -> list[list[str]]:
    """The lines of each Ultimate run in the wrapper's output (one list per run)."""
    runs: list[list[str]] = []
    current: list[str] | None = None
    for line in output.splitlines():
        if line.strip() == _RUN_START:
            current = []
            runs.append(current)
        elif line.strip() == _RUN_END:
            current = None
        elif current is not None:
            current.append(line)
    return runs or [output.splitlines()]


def results_block(lines: list[str]) -> list[ResultEntry]:
    """The entries of a run's `` --- Results ---`` block, log lines between them skipped."""
    entries: list[ResultEntry] = []
    inside = False
    for line in lines:
        if line.strip() == "--- Results ---":
            inside, entries = True, []  # a run prints one block; keep the last
            continue
        if not inside or _LOG_LINE.match(line):
            continue
        if line.startswith("RESULT:"):
            inside = False
            continue
        m = _ENTRY.match(line)
        if m:
            entries.append(ResultEntry(m.group(1), int(m.group(2)) if m.group(2) else None, m.group(3).strip()))
        elif entries and not line.startswith(" * "):
            entries[-1].details.append(line)
    return entries


def _run_ending(entries: list[ResultEntry]) -> str | None:
    for kind in _ENDINGS:
        for e in entries:
            if e.kind == kind:
                return e.summary()
    return None


def _loops(workdir: Path | None) -> dict[int, int | None] | None:
    """Input line → loop label from the support file (None when two loops share the line)."""
    if workdir is None or not (Path(workdir) / LOOPS_FILE).is_file():
        return None
    try:
        doc = json.loads((Path(workdir) / LOOPS_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    out: dict[int, int | None] = {}
    for site in doc.get("loops") or []:
        line = int(site["line"])
        out[line] = None if line in out else int(site["loop"])
    return out


def loop_map(program: Path) -> dict[str, Any]:
    """The loop heads of `program` by line, as the support file stores them."""
    from veribatch.verifiers import cfront

    try:
        ast = cfront.parse(program.read_text(errors="replace"), filename=program.name)
    except (cfront.CParseError, OSError) as e:
        return {"file": program.name, "loops": [], "error": str(e)}
    return {"file": program.name,
            "loops": [{"loop": s.label, "line": s.line, "kind": s.kind} for s in cfront.loop_sites(ast)]}


def invariants(entries: list[ResultEntry], loops: dict[int, int | None] | None) -> list[dict[str, Any]]:
    """``InvariantResult`` entries → ``{"line", "loop", "invariant"}`` (first per line kept)."""
    found: list[dict[str, Any]] = []
    seen: set[int] = set()
    for e in entries:
        if e.kind != "InvariantResult" or e.line is None or e.line in seen:
            continue
        text = next((d.split(_DERIVED, 1)[1].strip() for d in e.details if _DERIVED in d), None)
        if not text:
            continue
        seen.add(e.line)
        found.append({"line": e.line, "loop": loops.get(e.line) if loops is not None else None,
                      "invariant": text})
    return found


_CALL = re.compile(r"\breach_error\s*\(")
_DECLARED = re.compile(r"\b(?:void|extern|int)\s+$")
NO_SPECIFICATION = "does not contain any specification"


def _code_only(text: str) -> str:
    """`text` with its comments blanked as a C compiler reads them: a ``/*`` without its
    ``*/`` runs to the end of the file, as it does for gcc and for Ultimate's parser."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text[i] in "\"'":
            j = i + 1
            while j < n and text[j] != text[i] and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def checks_no_specification(program: str) -> str | None:
    """Why UAutomizer would check nothing of ``unreach-call`` in `program`, or None.

    The property is "no call of reach_error is reachable"; a program whose code (comments
    removed as C removes them) calls reach_error nowhere — a header comment that lost its
    ``*/`` swallowing the whole file, an assertion through an undefined ``__VERIFIER_assert``
    or ``<assert.h>``'s ``assert`` — has nothing to check, and UAutomizer answers TRUE with
    "...the program does not contain any specification".  Such a run is no verdict
    (`UAutomizerTool.determine_result` makes it UNKNOWN), and a dataset label from one is
    marked (InvBench: the quirk ``label_without_specification``)."""
    code = _code_only(program)
    for m in _CALL.finditer(code):
        if not _DECLARED.search(code[max(0, m.start() - 12):m.start()]):
            return None
    if "reach_error" not in code:
        return "no code: the program text is all comment" if not code.strip(" \n\t") else \
            "no reach_error in the program's code"
    return "reach_error is declared but called nowhere in the program's code"


def z3_path(executable: str, path: str | None = None) -> str | None:
    """The ``z3`` Ultimate will run: the one beside ``Ultimate.py`` first, as `environment` sets PATH."""
    search = os.pathsep.join([str(Path(executable).parent), os.environ.get("PATH", "") if path is None else path])
    return shutil.which("z3", path=search)


class UAutomizerTool(Tool):
    """Ultimate Automizer 0.2.x/0.3.x through `Ultimate.py`; verdicts trusted, not certified."""

    name = "uautomizer"
    description = "Ultimate Automizer through its SV-COMP wrapper Ultimate.py (InvBench's reference verifier)"
    properties = tuple(PROPERTIES)
    languages = ("C",)
    memory_mb = 16384  # InvBench's harness allowed 16 GB; the easy split peaks at 3.5 GB
    # JVM threads + solver processes: 1.0-2.3x as much CPU as wall time on the easy split
    # (wonda's runlim data), so one core would slow it below the times it is compared with.
    query_cores = 2
    certified_verdicts = False
    container_executable = "/opt/UAutomizer-linux/Ultimate.py"
    # What the wrapper offers for its version (recorded in ../shared); `version_argv` runs a
    # short query with --data instead, since --ultversion writes beside the tool.
    version_args = ("--ultversion",)
    scratch_dirs = (DATA_DIR,)
    # the version is a short run (~9 s of CPU), which a loaded 2-core node stretched past 120 s
    version_timeout_s = 600.0

    def executable(self) -> str:
        return find_executable("Ultimate.py", "VERIBATCH_UAUTOMIZER",
                               extra_dirs=("/opt/UAutomizer-linux",))

    def parse_version(self, output: str) -> str:
        m = _VERSION.search(output)
        if not m:
            raise ValueError(f"uautomizer: no 'This is Ultimate <version>' in: {output[-300:]!r}")
        return m.group(1)

    def version_argv(self, executable: str, scratch: Path) -> list[str]:
        """A specification-less program verified with ``--data`` in `scratch` (see `VERSION_PROGRAM`)."""
        (scratch / DATA_DIR).mkdir(exist_ok=True)
        (scratch / "unreach-call.prp").write_text(PROPERTIES["unreach-call"])
        (scratch / "version.c").write_text(VERSION_PROGRAM)
        return [executable, "--spec", str(scratch / "unreach-call.prp"), "--file", str(scratch / "version.c"),
                "--architecture", "32bit", "--full-output", "--witness-dir", str(scratch),
                "--data", str(scratch / DATA_DIR)]

    def version(self, executable: str) -> str:
        """Ultimate's version and the z3 it will use: ``0.2.3-release-863304a+z3-4.12.0``."""
        ultimate = super().version(executable)
        z3 = z3_path(executable)
        if z3 is None:
            return f"{ultimate}+z3-none"
        m = _Z3_VERSION.search(read_version([z3, "-version"]))
        return f"{ultimate}+z3-{m.group(1) if m else 'unknown'}"

    def support_files(self, query: Query) -> dict[str, str]:
        if query.property not in PROPERTIES:
            raise UnsupportedQueryError(f"uautomizer: unsupported property {query.property!r}; "
                                        f"known: {', '.join(PROPERTIES)}")
        files = {f"{query.property}.prp": PROPERTIES[query.property]}
        if len(query.files) == 1:
            files[LOOPS_FILE] = json.dumps(loop_map(Path(query.files[0])))
        return files

    def environment(self, executable: str, limits: Limits) -> ToolEnvironment:
        """The release's solvers first on PATH; the JVM heap under the query's memory limit."""
        return ToolEnvironment(variables={"_JAVA_OPTIONS": f"-Xmx{jvm_heap_mb(limits.memory_mb)}m"},
                               path_prepend=(os.path.dirname(executable),))

    def cmdline(self, executable: str, query: Query, limits: Limits, workdir: Path) -> list[str]:
        if len(query.files) != 1:
            raise UnsupportedQueryError(f"uautomizer verifies exactly one C file, got {len(query.files)}")
        try:
            arch = ARCHITECTURES[query.data_model]
        except KeyError:
            raise UnsupportedQueryError(f"uautomizer: unknown data model {query.data_model!r}; "
                                        f"known: {', '.join(ARCHITECTURES)}") from None
        return [
            executable,
            "--spec", str(workdir / f"{query.property}.prp"),
            "--file", str(query.files[0]),
            "--architecture", arch,
            "--full-output",
            "--witness-dir", str(workdir),
            "--data", str(workdir / DATA_DIR),
            *query.options,
        ]

    def determine_result(self, run: FinishedRun) -> ToolVerdict:
        lines = run.output.splitlines()
        verdict_line = None
        for i, line in enumerate(lines):
            if line.strip() == "Result:":
                rest = [ln.strip() for ln in lines[i + 1:] if ln.strip()]
                verdict_line = rest[0] if rest else None
        runs = [results_block(r) for r in split_runs(run.output)]
        extras: dict[str, Any] = {"ultimate_runs": len(runs)}
        solvers = sorted(set(_SOLVER_CMD.findall(run.output)))
        if solvers:
            extras["solver_commands"] = solvers
        if verdict_line is None:
            tail = next((ln.strip() for ln in reversed(lines) if ln.strip()), "no output")
            return ToolVerdict(Status.ERROR, f"no Result: block in the wrapper's output (last line: {tail[:300]!r})",
                               extras)
        extras["result_line"] = verdict_line
        last = runs[-1]
        syntax = next((e for e in last if e.kind in ("SyntaxErrorResult", "UnsupportedSyntaxResult")), None)
        if syntax is not None:
            detail = next((d.strip() for d in syntax.details if d.strip()), "")
            where = f"line {syntax.line}" if syntax.line is not None else "unknown line"
            return ToolVerdict(Status.ERROR, f"{syntax.short} at {where}: {detail}".rstrip(": "), extras)
        if verdict_line == "TRUE":
            vacuous = next((d.strip() for e in last if e.kind == "AllSpecificationsHoldResult"
                            for d in e.details if NO_SPECIFICATION in d), None)
            if vacuous is not None:
                # "All specifications hold" of none: nothing was checked (`checks_no_specification`)
                extras["no_specification"] = True
                return ToolVerdict(Status.UNKNOWN, f"no specification checked (the wrapper printed TRUE): {vacuous}",
                                   extras)
            extras["invariants"] = invariants(last, _loops(run.workdir))
            return ToolVerdict(Status.TRUE, None, extras)
        if verdict_line.startswith("FALSE"):
            cex = Path(run.workdir) / COUNTEREXAMPLE_FILE if run.workdir else None
            if cex is not None and cex.is_file():
                extras["counterexample"] = cex.read_text(errors="replace")[:_EXCERPT]
            m = re.match(r"FALSE\((.*)\)", verdict_line)
            # the error the run found, with the input's line: "a call to reach_error is
            # reachable at line 8" (the result line says at most which property)
            found = next((e for e in last if e.kind == "CounterExampleResult"), None)
            what = f"{found.short} at line {found.line}".replace(" at line None", "") if found else None
            said = m.group(1) if m else None
            return ToolVerdict(Status.FALSE, "; ".join(x for x in (what, said) if x) or None, extras)
        endings = [_run_ending(r) for r in runs]
        names = ["integer run", "bit-precise run"] if len(runs) == 2 else [f"run {i + 1}" for i in range(len(runs))]
        story = "; ".join(f"{n}: {e}" for n, e in zip(names, endings, strict=True) if e)
        if verdict_line.startswith("UNKNOWN"):
            said = verdict_line.partition(":")[2].strip()
            return ToolVerdict(Status.UNKNOWN, "; ".join(x for x in (said, story) if x) or None, extras)
        if verdict_line.startswith("ERROR"):
            said = verdict_line.partition(":")[2].strip() or verdict_line
            context = [f"{n}: {e}" for n, e in zip(names[:-1], endings[:-1], strict=True) if e]
            return ToolVerdict(Status.ERROR, "; ".join([said, *context]), extras)
        return ToolVerdict(Status.UNKNOWN, f"unrecognised result {verdict_line!r}", extras)
