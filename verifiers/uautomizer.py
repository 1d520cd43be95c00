"""Ultimate Automizer through its SV-COMP wrapper `Ultimate.py` (InvBench's reference verifier).

Command line (the one SV-COMP and InvBench use):

    Ultimate.py --spec unreach-call.prp --file F.c --architecture 32bit|64bit
                --full-output --witness-dir WORKDIR [options...]

The wrapper prints a ``Result:`` line followed by the verdict line (``TRUE``,
``FALSE``, ``FALSE(valid-deref)``, ``UNKNOWN: Overapproximated counterexample``,
``ERROR: INCORRECT SYNTAX`` ...), and with ``--full-output`` Ultimate's own log,
whose results block holds one ``InvariantResult [Line: N]: Loop Invariant`` /
``Derived loop invariant: EXPR`` pair per loop of a proof.  A proof also leaves a
correctness witness (``witness.yml``, SV-COMP format 2.0; older releases
``witness.graphml``) in the witness directory.  Invariants are taken from the
YAML witness when there is one (it carries line *and* column), else from the log;
they come back as ``extras["invariants"] = [{"line": N, "invariant": "<C expr>"}]``.
Ultimate writes them in C syntax but may use ``\\old``, quantifiers or 64-bit
literals; consumers re-parse and re-check them before use.

The version is read with ``Ultimate.py --ultversion`` ("This is Ultimate
0.3.1-dev-35a8436538"): it names the Ultimate build, whereas ``--version`` (``--ver``)
prints only the wrapper script's short hash.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

from verifiers.base import FinishedRun, Query, Tool, ToolVerdict, find_executable, read_version
from verifiers.result import Limits, Status

PROPERTIES = {
    "unreach-call": "CHECK( init(main()), LTL(G ! call(reach_error())) )\n",
}
ARCHITECTURES = {"ILP32": "32bit", "LP64": "64bit"}
_VERSION = re.compile(r"This is Ultimate (\S+)")
_INVARIANT_HEADER = re.compile(r"InvariantResult \[Line: (\d+)\]: Loop Invariant")
_DERIVED = "Derived loop invariant:"
_COUNTEREXAMPLE = "UltimateCounterExample.errorpath"
_EXCERPT = 20000


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
        return self.parse_version(read_version([executable, *self.version_args]))

    def support_files(self, query: Query) -> dict[str, str]:
        if query.property not in PROPERTIES:
            raise ValueError(f"uautomizer: unsupported property {query.property!r}; "
                             f"known: {', '.join(PROPERTIES)}")
        return {f"{query.property}.prp": PROPERTIES[query.property]}

    def cmdline(self, executable: str, query: Query, limits: Limits, workdir: Path) -> list[str]:
        if len(query.files) != 1:
            raise ValueError(f"uautomizer verifies exactly one C file, got {len(query.files)}")
        try:
            arch = ARCHITECTURES[query.data_model]
        except KeyError:
            raise ValueError(f"uautomizer: unknown data model {query.data_model!r}; "
                             f"known: {', '.join(ARCHITECTURES)}") from None
        return [
            executable,
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
                break
        extras: dict[str, Any] = {}
        if verdict_line is None:
            tail = "\n".join(ln for ln in lines[-5:] if ln.strip())
            return ToolVerdict(Status.ERROR, f"no Result: block in Ultimate's output: {tail!r}")
        extras["result_line"] = verdict_line
        if verdict_line == "TRUE":
            extras["invariants"] = self.invariants(run)
            return ToolVerdict(Status.TRUE, None, extras)
        if verdict_line.startswith("FALSE"):
            cex = run.workdir / _COUNTEREXAMPLE if run.workdir else None
            if cex is not None and cex.is_file():
                extras["counterexample"] = cex.read_text(errors="replace")[:_EXCERPT]
            m = re.match(r"FALSE\((.*)\)", verdict_line)
            return ToolVerdict(Status.FALSE, m.group(1) if m else None, extras)
        if verdict_line.startswith("UNKNOWN"):
            reason = verdict_line.partition(":")[2].strip() or _unknown_reason(run.output)
            return ToolVerdict(Status.UNKNOWN, reason, extras)
        if verdict_line.startswith("ERROR"):
            return ToolVerdict(Status.ERROR, verdict_line.partition(":")[2].strip() or verdict_line,
                               extras)
        return ToolVerdict(Status.UNKNOWN, f"unrecognised result {verdict_line!r}", extras)

    def invariants(self, run: FinishedRun) -> list[dict[str, Any]]:
        """Loop invariants of a proof: witness YAML, else GraphML, else the log's results block."""
        if run.workdir is not None:
            for path in sorted(Path(run.workdir).glob("*.yml")):
                found = _from_yaml_witness(path)
                if found:
                    return found
            for path in sorted(Path(run.workdir).glob("*.graphml")):
                found = _from_graphml_witness(path)
                if found:
                    return found
        return _from_log(run.output)


def _unknown_reason(output: str) -> str | None:
    for marker in ("TimeoutResultAtElement", "UnprovableResult", "Timeout", "Cannot interpret"):
        for line in output.splitlines():
            if marker in line:
                return line.strip().lstrip("- ")
    return None


def _from_log(output: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    lines = output.splitlines()
    for i, line in enumerate(lines):
        m = _INVARIANT_HEADER.search(line)
        if not m:
            continue
        for nxt in lines[i + 1:i + 3]:
            if _DERIVED in nxt:
                inv = nxt.split(_DERIVED, 1)[1].strip()
                entry = {"line": int(m.group(1)), "invariant": inv}
                if inv and entry not in found:
                    found.append(entry)
                break
    return found


def _from_yaml_witness(path: Path) -> list[dict[str, Any]]:
    try:
        doc = yaml.safe_load(path.read_text(errors="replace"))
    except yaml.YAMLError:
        return []
    found: list[dict[str, Any]] = []
    for entry in doc or []:
        if not isinstance(entry, dict) or entry.get("entry_type") != "invariant_set":
            continue
        for item in entry.get("content") or []:
            inv = (item or {}).get("invariant") or {}
            loc = inv.get("location") or {}
            if inv.get("type") == "loop_invariant" and "line" in loc and inv.get("value"):
                rec = {"line": int(loc["line"]), "invariant": str(inv["value"])}
                if "column" in loc:
                    rec["column"] = int(loc["column"])
                if rec not in found:
                    found.append(rec)
    return found


def _from_graphml_witness(path: Path) -> list[dict[str, Any]]:
    """GraphML correctness witnesses: invariants on nodes, source lines on incoming edges."""
    ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return []
    node_inv: dict[str, str] = {}
    for node in root.iterfind(".//g:node", ns):
        for data in node.iterfind("g:data", ns):
            if data.get("key") == "invariant" and data.text and data.text.strip() not in ("", "1"):
                node_inv[node.get("id", "")] = data.text.strip()
    found: list[dict[str, Any]] = []
    for edge in root.iterfind(".//g:edge", ns):
        target = edge.get("target", "")
        if target not in node_inv:
            continue
        for data in edge.iterfind("g:data", ns):
            if data.get("key") == "startline" and data.text:
                rec = {"line": int(data.text), "invariant": node_inv[target]}
                if rec not in found:
                    found.append(rec)
    return found
