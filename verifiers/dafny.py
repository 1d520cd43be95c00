"""Dafny 4 (DafnyComp's verifier): `dafny verify` and the parse/resolve-only `dafny resolve`.

Properties: ``dafny-verify`` (all proof obligations proved) and ``dafny-resolve``
(the program parses and type-checks: DafnyComp's syntax metric).

Dafny 4 reports each diagnostic as ``FILE(LINE,COL): Error: MESSAGE``, followed by
``Related location:``/``Related message:`` lines and a source snippet, and ends
with one summary line:

- ``N parse errors detected in F`` — the program does not parse;
- ``N resolution/type errors detected in F`` — it parses but does not resolve;
- ``Dafny program verifier finished with V verified, E errors[, T time outs]...``.

Each error comes back in ``extras["errors"]`` with file, line, col, message, its
*kind* (parse / resolution / verification / timeout) and, for verification
failures, the *obligation* that failed (postcondition, precondition,
invariant_entry, invariant_maintained, assertion, termination, other) — what
DafnyComp's failure-mode table is built from.  The program is TRUE iff every
obligation was proved; FALSE when any failed (or it did not parse/resolve);
UNKNOWN when nothing failed but some obligation timed out / ran out of resources;
ERROR when Dafny printed none of the above (a crash, a missing solver).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from verifiers.base import (
    FinishedRun,
    Query,
    Tool,
    ToolNotFoundError,
    ToolVerdict,
    find_executable,
    read_version,
)
from verifiers.result import Limits, Status

PROPERTIES = ("dafny-verify", "dafny-resolve")
OBLIGATION_TIME_LIMIT_S = 20
"""Per-obligation limit passed as --verification-time-limit (clipped to the query's wall limit)."""

_DIAG = re.compile(
    r"^(?P<file>.+?)\((?P<line>\d+),(?P<col>\d+)\): "
    r"(?P<level>Error|Warning|Info|Related location|Related message): ?(?P<msg>.*)$"
)
_PLAIN_ERROR = re.compile(r"^Error: (?P<msg>.+)$")
_BARE_RELATED = re.compile(r"^Related (?:message|location): (?P<msg>.+)$")
_PARSE = re.compile(r"^(\d+) parse errors? detected in (.+)$")
_RESOLVE = re.compile(r"^(\d+) resolution/type errors? detected in (.+)$")
_SUMMARY = re.compile(r"Dafny program verifier finished with (\d+) verified, (\d+) errors?(.*)$")
_EXTRA_COUNT = re.compile(r"(\d+) (time outs?|out of resource|out of memory|inconclusive)")
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)\S*")

_OBLIGATIONS = (
    ("timed out", "timeout"),
    ("postcondition could not be proved", "postcondition"),
    ("postcondition might not hold", "postcondition"),
    ("precondition for this call", "precondition"),
    ("function precondition", "precondition"),
    ("precondition could not be proved", "precondition"),
    ("could not be proved on entry", "invariant_entry"),
    ("might not hold on entry", "invariant_entry"),
    ("maintained by the loop", "invariant_maintained"),
    ("assertion could not be proved", "assertion"),
    ("assertion might not hold", "assertion"),
    ("decrease", "termination"),
    ("termination", "termination"),
)


def obligation_of(message: str) -> str:
    low = message.lower()
    for needle, name in _OBLIGATIONS:
        if needle in low:
            return name
    return "other"


class DafnyTool(Tool):
    name = "dafny"
    container_executable = "/opt/dafny/dafny"

    def executable(self) -> str:
        return find_executable("dafny", "VERIBATCH_DAFNY", extra_dirs=("/opt/dafny",))

    def parse_version(self, output: str) -> str:
        m = _VERSION.search(output)
        if not m:
            raise ValueError(f"dafny: no version in {output[-300:]!r}")
        if int(m.group(1)) < 4:
            raise ToolNotFoundError(
                f"dafny {m.group(0)} found, but Dafny 4.x is required (DafnyComp uses 4.10); "
                "set $VERIBATCH_DAFNY or use the apptainer image containers/dafny.def"
            )
        return m.group(0)

    def version(self, executable: str) -> str:
        return self.parse_version(read_version([executable, *self.version_args]))

    def cmdline(self, executable: str, query: Query, limits: Limits, workdir: Path) -> list[str]:
        if query.property not in PROPERTIES:
            raise ValueError(f"dafny: unknown property {query.property!r}; "
                             f"known: {', '.join(PROPERTIES)}")
        files = [str(f) for f in query.files]
        if query.property == "dafny-resolve":
            return [executable, "resolve", *query.options, *files]
        per_obligation = max(1, int(min(OBLIGATION_TIME_LIMIT_S, limits.wall_s)))
        opts = list(query.options)
        if "--verification-time-limit" not in " ".join(opts):
            opts = ["--verification-time-limit", str(per_obligation), *opts]
        return [executable, "verify", *opts, *files]

    def determine_result(self, run: FinishedRun) -> ToolVerdict:
        return interpret(run.output, run.returncode)


def interpret(output: str, returncode: int | None) -> ToolVerdict:
    """The verdict from Dafny's output (mode told apart by the summary it printed)."""
    errors: list[dict[str, Any]] = []
    warnings = 0
    parse_failed = resolve_failed = False
    summary: tuple[int, int, dict[str, int]] | None = None
    for raw in output.splitlines():
        line = raw.rstrip()
        if m := _DIAG.match(line):
            level = m.group("level")
            if level == "Error":
                errors.append({"file": m.group("file"), "line": int(m.group("line")),
                               "col": int(m.group("col")), "message": m.group("msg").strip()})
            elif level.startswith("Related") and errors:
                errors[-1].setdefault("related", []).append(
                    {"line": int(m.group("line")), "col": int(m.group("col")),
                     "message": m.group("msg").strip()})
            elif level == "Warning":
                warnings += 1
        elif (m := _BARE_RELATED.match(line)) and errors:
            errors[-1].setdefault("related", []).append(
                {"line": None, "col": None, "message": m.group("msg").strip()})
        elif m := _PLAIN_ERROR.match(line):
            errors.append({"file": None, "line": None, "col": None, "message": m.group("msg")})
        elif _PARSE.match(line):
            parse_failed = True
        elif _RESOLVE.match(line):
            resolve_failed = True
        elif m := _SUMMARY.search(line):
            extra = {k.rstrip("s") if k.startswith("time") else k: int(n)
                     for n, k in _EXTRA_COUNT.findall(m.group(3))}
            summary = (int(m.group(1)), int(m.group(2)), extra)
    for e in errors:
        if parse_failed:
            e["kind"] = "parse"
        elif resolve_failed:
            e["kind"] = "resolution"
        elif "timed out" in e["message"]:
            e["kind"] = "timeout"
        else:
            e["kind"] = "verification"
        e["obligation"] = obligation_of(e["message"]) if e["kind"] in ("verification",
                                                                        "timeout") else None
    extras: dict[str, Any] = {
        "errors": errors,
        "parse_ok": not parse_failed,
        "resolve_ok": not parse_failed and not resolve_failed,
        "warnings": warnings,
    }
    if parse_failed or resolve_failed:
        phase = "parse" if parse_failed else "resolution/type"
        extras["verified"] = 0
        return ToolVerdict(Status.FALSE, f"{len(errors)} {phase} error(s)", extras)
    if summary is not None:
        verified, n_errors, extra = summary
        extras.update(verified=verified, error_count=n_errors,
                      timeouts=extra.get("time out", 0),
                      out_of_resource=extra.get("out of resource", 0),
                      out_of_memory=extra.get("out of memory", 0),
                      inconclusive=extra.get("inconclusive", 0))
        if n_errors:
            return ToolVerdict(Status.FALSE, f"{n_errors} verification error(s)", extras)
        undecided = {k: v for k, v in extra.items() if v}
        if undecided:
            why = ", ".join(f"{v} {k}" for k, v in undecided.items())
            return ToolVerdict(Status.UNKNOWN, f"not all obligations decided: {why}", extras)
        return ToolVerdict(Status.TRUE, None, extras)
    # No summary line: `dafny resolve` on a good program, or a crash.
    real = [e for e in errors if e["file"] is not None]
    if not real and (returncode == 0 or (warnings and not errors)):
        return ToolVerdict(Status.TRUE, None, extras)
    tail = "\n".join(ln for ln in output.strip().splitlines()[-5:])
    return ToolVerdict(Status.ERROR, f"Dafny printed no verdict (exit {returncode}): {tail!r}",
                       extras)
