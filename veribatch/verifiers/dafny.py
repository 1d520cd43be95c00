"""Dafny 4 (DafnyComp's verifier): `dafny resolve` (syntax) and `dafny verify` (proof).

Properties: ``dafny-resolve`` (the program parses and type-checks: DafnyComp's syntax
metric) and ``dafny-verify`` (every proof obligation proved: its verified metric).

The verdict is read from Dafny's text, never from its exit code alone (an exit of 2 means
warnings as well as errors, time-outs exit 4 with ``0 errors``), and every error comes
back with its kind and the proof obligation it is about, and every warning classified:
DafnyComp's failure-mode table and its integrity check are built from them.  The command
lines, the output format and how each case maps to a verdict are in docs/dafnycomp.md
("How the adapter reads Dafny"); every rule is tested on Dafny's own recorded outputs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from veribatch.verifiers.base import (
    FinishedRun,
    Query,
    Tool,
    ToolNotFoundError,
    ToolVerdict,
    UnsupportedQueryError,
    find_executable,
)
from veribatch.verifiers.result import Limits, Status

PROPERTIES = ("dafny-verify", "dafny-resolve")
OBLIGATION_TIME_LIMIT_S = 30
"""Default ``--verification-time-limit`` (Dafny 4.10's own default), clipped to the wall limit."""
BASE_OPTIONS = ("--use-basename-for-filename", "--show-snippets:false")

_DIAG = re.compile(
    r"^(?P<file>\S.*?)\((?P<line>\d+),(?P<col>\d+)\): "
    r"(?P<level>Error|Warning|Info|Related location|Related message): ?(?P<msg>.*)$"
)
_PLAIN_ERROR = re.compile(r"^Error: (?P<msg>.+)$")
_CONTINUATION = re.compile(r"^\s+Related (?:message|location): (?P<msg>.+)$")
_PARSE = re.compile(r"^(\d+) parse errors? detected in (.+)$")
_RESOLVE = re.compile(r"^(\d+) resolution/type errors? detected in (.+)$")
_SUMMARY = re.compile(r"^Dafny program verifier finished with (\d+) verified, (\d+) errors?(.*)$")
_RESOLVED = "Dafny program verifier did not attempt verification"
_WARNINGS_FAILED = "Compilation failed because warnings were found"
_EXTRA_COUNT = re.compile(
    r"(\d+) (time outs?|out of resource|out of memory|inconclusives?|solver exceptions?)")
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)\S*")

# (substring of the lower-cased message, obligation).  First match wins, so the specific
# phrases come before the general ones.  Both wordings are listed where they differ: Dafny
# 4.10 says "assertion might not hold" / "decreases clause might not decrease", the newest
# builds "could not be proved"; 4.0 said "might not hold" everywhere.
OBLIGATIONS: tuple[tuple[str, str], ...] = (
    ("postcondition could not be proved", "postcondition"),
    ("postcondition might not hold", "postcondition"),
    ("precondition for this call", "precondition"),
    ("function precondition", "precondition"),
    ("precondition could not be proved", "precondition"),
    ("precondition might not hold", "precondition"),
    ("could not be proved on entry", "invariant_entry"),
    ("might not hold on entry", "invariant_entry"),
    ("maintained by the loop", "invariant_maintained"),
    ("assertion could not be proved", "assertion"),
    ("assertion might not hold", "assertion"),
    ("cannot prove termination", "termination"),
    ("decreases clause", "decreases"),
    ("decreases expression", "decreases"),
    # Well-formedness of the implementation's own operations.
    ("index out of range", "well_formedness"),
    ("division by zero", "well_formedness"),
    ("subset constraint", "well_formedness"),
    ("might be null", "well_formedness"),
    ("could be null", "well_formedness"),
    # Frames (from Dafny's message texts; no recorded case shows them).
    ("modifies clause", "frame"),
    ("reads clause", "frame"),
    ("insufficient reads", "frame"),
)

# Warnings that matter to an integrity check, by a phrase of their text (both wordings).
WARNING_KINDS: tuple[tuple[str, str], ...] = (
    # --warn-contradictory-assumptions: "ensures clause proved using contradictory
    # assumptions", "proved using contradictory assumptions: assertion always holds"
    ("contradictory assumptions", "contradictory"),
    ("assume statement", "assume"),          # 4.10: "assume statement has no {:axiom} annotation"
    ("assume keyword", "assume"),            # "assume keyword in assign-such-that statement ..."
    ("{:verify false}", "verify_false"),     # (its text also says "bodyless": checked first)
    ("{:extern}", "extern"),
    ("bodyless", "bodyless_ensures"),        # "This ensures clause is part of a bodyless method"
    ("loop has no body", "bodyless_loop"),
    ("could not find a trigger", "trigger"),
)


def obligation_of(message: str) -> str:
    """The proof obligation a verification error is about ("unclassified" if none matches,
    e.g. a custom ``{:error "..."}`` message)."""
    low = message.lower()
    for needle, name in OBLIGATIONS:
        if needle in low:
            return name
    return "unclassified"


def warning_kind(message: str) -> str:
    low = message.lower()
    for needle, name in WARNING_KINDS:
        if needle.lower() in low:
            return name
    return "other"


class DafnyTool(Tool):
    """Dafny 4: ``dafny resolve`` (syntax and types) and ``dafny verify`` (every proof obligation)."""

    name = "dafny"
    description = "Dafny 4 (DafnyComp's verifier): dafny resolve (syntax) and dafny verify (proof)"
    properties = PROPERTIES
    languages = ("Dafny",)
    memory_mb = 4096
    query_cores = 1
    certified_verdicts = False
    container_executable = "/opt/dafny/dafny"
    container_network = False

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

    def cmdline(self, executable: str, query: Query, limits: Limits, workdir: Path) -> list[str]:
        if query.property not in PROPERTIES:
            raise UnsupportedQueryError(f"dafny: unknown property {query.property!r}; "
                                        f"known: {', '.join(PROPERTIES)}")
        files = [str(f) for f in query.files]
        opts = list(query.options)
        if query.property == "dafny-resolve":
            return [executable, "resolve", *BASE_OPTIONS, *opts, *files]
        if not any(o.startswith("--verification-time-limit") for o in opts):
            per_obligation = max(1, int(min(OBLIGATION_TIME_LIMIT_S, limits.wall_s)))
            opts = [f"--verification-time-limit:{per_obligation}", *opts]
        return [executable, "verify", *BASE_OPTIONS, *opts, *files]

    def determine_result(self, run: FinishedRun) -> ToolVerdict:
        return interpret(run.output, run.returncode)


def _position(m: re.Match[str]) -> dict[str, Any]:
    return {"file": m.group("file"), "line": int(m.group("line")), "col": int(m.group("col"))}


def _kind(message: str, phase: str) -> str:
    if phase in ("parse", "resolution"):
        return phase
    low = message.lower()
    if "timed out" in low:
        return "timeout"
    if "out of resource" in low:
        return "out_of_resource"
    return "verification"


def interpret(output: str, returncode: int | None) -> ToolVerdict:
    """The verdict from the text Dafny printed (docs/dafnycomp.md); `returncode` is
    recorded, never trusted alone."""
    errors: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []
    parse_errors = resolve_errors = None
    summary: tuple[int, int, dict[str, int]] | None = None
    resolved = warnings_failed = False
    for raw in output.splitlines():
        line = raw.rstrip()
        if m := _DIAG.match(line):
            level, msg = m.group("level"), m.group("msg").strip()
            if level == "Error":
                errors.append({**_position(m), "message": msg})
            elif level == "Warning":
                warnings.append({**_position(m), "message": msg, "kind": warning_kind(msg)})
            elif level.startswith("Related") and errors:
                errors[-1].setdefault("related", []).append(
                    {"line": int(m.group("line")), "col": int(m.group("col")), "message": msg})
        elif (m := _CONTINUATION.match(raw)) and errors:
            errors[-1].setdefault("related", []).append(
                {"line": None, "col": None, "message": m.group("msg").strip()})
        elif m := _PLAIN_ERROR.match(line):
            errors.append({"file": None, "line": None, "col": None, "message": m.group("msg")})
        elif m := _PARSE.match(line):
            parse_errors = int(m.group(1))
        elif m := _RESOLVE.match(line):
            resolve_errors = int(m.group(1))
        elif m := _SUMMARY.match(line):
            extra: dict[str, int] = {}
            for n, k in _EXTRA_COUNT.findall(m.group(3)):
                key = k.rstrip("s").replace(" ", "_")
                extra[key] = extra.get(key, 0) + int(n)
            summary = (int(m.group(1)), int(m.group(2)), extra)
        elif line.startswith(_RESOLVED):
            resolved = True
        elif line.startswith(_WARNINGS_FAILED):
            warnings_failed = True
    phase = "parse" if parse_errors is not None else "resolution" if resolve_errors is not None \
        else "verification"
    for e in errors:
        e["kind"] = _kind(e["message"], phase)
        e["obligation"] = obligation_of(e["message"]) if e["kind"] == "verification" else None
    extras: dict[str, Any] = {
        "errors": errors,
        "warnings": warnings,
        "parse_ok": parse_errors is None,
        "resolve_ok": parse_errors is None and resolve_errors is None,
        "warnings_failed_compilation": warnings_failed,
        "exit_code": returncode,
    }
    if parse_errors is not None or resolve_errors is not None:
        count = parse_errors if parse_errors is not None else resolve_errors
        what = "parse" if parse_errors is not None else "resolution/type"
        extras["phase"] = "parse" if parse_errors is not None else "resolution"
        if parse_errors is not None:  # not a Dafny program Dafny can read: no verdict
            return ToolVerdict(Status.ERROR, f"{count} {what} error(s): Dafny cannot read the input",
                               extras)
        return ToolVerdict(Status.FALSE, f"{count} {what} error(s)", extras)
    if summary is not None:
        verified, n_errors, extra = summary
        extras.update(phase="verification", verified=verified, error_count=n_errors,
                      timeouts=extra.get("time_out", 0),
                      out_of_resource=extra.get("out_of_resource", 0),
                      out_of_memory=extra.get("out_of_memory", 0),
                      inconclusive=extra.get("inconclusive", 0),
                      solver_exceptions=extra.get("solver_exception", 0))
        if n_errors:
            return ToolVerdict(Status.FALSE, f"{n_errors} verification error(s)", extras)
        undecided = {k: v for k, v in extra.items() if v}
        if undecided:
            why = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in undecided.items())
            return ToolVerdict(Status.UNKNOWN, f"not all obligations decided: {why}", extras)
        return ToolVerdict(Status.TRUE, None, extras)
    if resolved:
        extras["phase"] = "resolved"
        return ToolVerdict(Status.TRUE, None, extras)
    extras["phase"] = "none"
    tail = "\n".join(output.strip().splitlines()[-5:])
    return ToolVerdict(Status.ERROR, f"Dafny printed no verdict (exit {returncode}): {tail!r}",
                       extras)
