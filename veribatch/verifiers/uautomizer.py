"""Ultimate Automizer through its SV-COMP wrapper `Ultimate.py` (InvBench's reference verifier).

Command line (SV-COMP's; the InvBench repository publishes none of its own)::

    /bin/sh -c LAUNCH Ultimate.py HEAP_MB --spec unreach-call.prp --file F.c
                --architecture 32bit|64bit --full-output --witness-dir WORKDIR [options...]

`LAUNCH` is a three-line shell prologue, not a wrapper with logic of its own:

- ``PATH`` starts with the directory of ``Ultimate.py``.  Ultimate runs the SMT solvers it
  finds on PATH (``z3``, ``cvc4``, ``mathsat``); the release ships them beside the script,
  but under a Python venv the z3 of PyPI's z3-solver (5.4.1) came first and was used
  silently.  With Debian's z3 4.8.12 two easy programs did not finish in 300 s that the
  bundled 4.12 solves, so the solver is part of the tool: `version` records the z3 that
  this PATH resolves to (``0.2.3-release-863304a+z3-4.12.0``), and the log's solver
  commands are kept in ``extras["solver_commands"]``.
- ``_JAVA_OPTIONS=-Xmx<HEAP_MB>m``: the wrapper hard-codes ``-Xmx15G``; the JVM reads
  ``_JAVA_OPTIONS`` after its command line, so the heap follows the query's memory limit
  (`jvm_heap_mb`) instead of outgrowing it.  The wrapper's Java probe skips the
  ``Picked up _JAVA_OPTIONS`` line it causes (it only looks for a version pattern).

What the output looks like (captured from 0.2.3, ``../shared/data/recorded/uautomizer``):
with ``--full-output`` every Ultimate run is printed between ``--- Real Ultimate output
---`` and ``--- End real Ultimate output ---``; its results block (`` --- Results ---``)
lists entries ``  - <Kind>Result [Line: N]: <short>`` with indented details, e.g.
``  - InvariantResult [Line: 34]: Loop Invariant`` / ``    Derived loop invariant: EXPR``.
Log lines (``[2026-... WARN ...]``) may sit between an entry and its details.  When the
first (integer) run ends in UNKNOWN or ERROR the wrapper retries bit-precisely, so the
output may hold two runs; the wrapper's verdict (``Result:`` then ``TRUE``/``FALSE``/
``UNKNOWN``/``ERROR: ...``) is the last run's.

How verdicts and reasons are read (each case is tested on a real recording):

- ``SyntaxErrorResult [Line: N]`` → ERROR naming the line.  0.2.3's wrapper looks for a
  string 0.2.3 does not print, keeps UNKNOWN and retries; the input is still not C.
- TRUE → invariants from the last run's ``InvariantResult`` entries, the truth about
  where they hold: ``[{"line": N, "loop": k | None, "invariant": "<C expr>"}]``.  ``loop``
  is the input's loop whose keyword is on line N (`verifiers.cfront.loop_sites`
  numbering, computed before the run into ``veribatch-loops.json`` in the work
  directory); Ultimate also reports entries at function heads (``1`` at ``int main()``),
  which get ``loop: None``.  The GraphML witness is not read: its invariant nodes carry
  the lines of the edges *entering* the loop head (31, 39, 41 for a loop on line 34) and
  function-entry nodes at call sites, so it can only disagree with the log.  The
  invariants are Ultimate's back-translation: they may contain ``\\exists``, ``%`` with
  2^32 moduli, or variables of inlined callees; consumers re-parse and re-check them.
- A TRUE for a program without any specification (e.g. a file that is one unclosed
  comment) keeps Ultimate's words as the reason.
- FALSE → the error path (``UltimateCounterExample.errorpath``, written into the work
  directory, which is the wrapper's working directory).
- UNKNOWN / ERROR → the reason names what each run ended with, e.g. ``integer run:
  TimeoutResultAtElement [Line: 17]: Timeout (TraceAbstraction); bit-precise run:
  TimeoutResult: ...``, so a reason cites the input's own line numbers.
- No ``Result:`` block (the tool was killed, or the wrapper could not start Java) →
  ERROR with the output's last line; the runner turns a kill by its own limit into
  TIMEOUT/OOM.

Versions: 0.2.3 (the recordings) and 0.2.4 (pinned in ``containers/uautomizer.def``, the
release of the SV-COMP 2024 contribution the InvBench paper cites) print this format; the
0.3 line (Java 21, also a YAML witness) keeps the same results block and ``Result:``
protocol, and the version line ``This is Ultimate 0.3.1-...`` parses the same way.  No
0.3 output was captured, so nothing 0.3-specific is relied on.
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
    ToolVerdict,
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
# Ultimate starts its z3 with ``-memory:2024`` (MB); the JVM needs ~0.5 GB beyond its heap.
SOLVER_RESERVE_MB = 2560
# The prologue run by /bin/sh: $0 = Ultimate.py, $1 = heap in MB, the rest = its arguments.
LAUNCH = ('heap=$1; shift; PATH="${0%/*}:$PATH"; _JAVA_OPTIONS="-Xmx${heap}m"; '
          'export PATH _JAVA_OPTIONS; exec "$0" "$@"')

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


def z3_path(executable: str, path: str | None = None) -> str | None:
    """The ``z3`` Ultimate will run: the one beside ``Ultimate.py`` first, as `LAUNCH` sets PATH."""
    search = os.pathsep.join([str(Path(executable).parent), os.environ.get("PATH", "") if path is None else path])
    return shutil.which("z3", path=search)


class UAutomizerTool(Tool):
    name = "uautomizer"
    container_executable = "/opt/UAutomizer-linux/Ultimate.py"
    version_args = ("--ultversion",)

    def executable(self) -> str:
        return find_executable("Ultimate.py", "VERIBATCH_UAUTOMIZER",
                               extra_dirs=("/opt/UAutomizer-linux",))

    def parse_version(self, output: str) -> str:
        m = _VERSION.search(output)
        if not m:
            raise ValueError(f"uautomizer: no 'This is Ultimate <version>' in: {output[-300:]!r}")
        return m.group(1)

    def version(self, executable: str) -> str:
        """Ultimate's version and the z3 it will use: ``0.2.3-release-863304a+z3-4.12.0``."""
        ultimate = self.parse_version(read_version([executable, *self.version_args]))
        z3 = z3_path(executable)
        if z3 is None:
            return f"{ultimate}+z3-none"
        m = _Z3_VERSION.search(read_version([z3, "-version"]))
        return f"{ultimate}+z3-{m.group(1) if m else 'unknown'}"

    def support_files(self, query: Query) -> dict[str, str]:
        if query.property not in PROPERTIES:
            raise ValueError(f"uautomizer: unsupported property {query.property!r}; "
                             f"known: {', '.join(PROPERTIES)}")
        files = {f"{query.property}.prp": PROPERTIES[query.property]}
        if len(query.files) == 1:
            files[LOOPS_FILE] = json.dumps(loop_map(Path(query.files[0])))
        return files

    def cmdline(self, executable: str, query: Query, limits: Limits, workdir: Path) -> list[str]:
        if len(query.files) != 1:
            raise ValueError(f"uautomizer verifies exactly one C file, got {len(query.files)}")
        try:
            arch = ARCHITECTURES[query.data_model]
        except KeyError:
            raise ValueError(f"uautomizer: unknown data model {query.data_model!r}; "
                             f"known: {', '.join(ARCHITECTURES)}") from None
        return [
            "/bin/sh", "-c", LAUNCH, executable, str(jvm_heap_mb(limits.memory_mb)),
            "--spec", str(workdir / f"{query.property}.prp"),
            "--file", str(query.files[0]),
            "--architecture", arch,
            "--full-output",
            "--witness-dir", str(workdir),
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
            extras["invariants"] = invariants(last, _loops(run.workdir))
            vacuous = next((d.strip() for e in last if e.kind == "AllSpecificationsHoldResult"
                            for d in e.details if "does not contain any specification" in d), None)
            return ToolVerdict(Status.TRUE, vacuous, extras)
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
