"""The embedded C verifier (this package, `verifiers.z3c`) as a tool adapter, registry name ``z3``.

The name ``z3`` is the user-visible one (``--verifier z3``, ``--tool z3``, every run id and
record); the code calls it what it is.  The adapter lives with the verifier it adapts, so
the package is one unit: the verifier, its command line (``__main__``) and its adapter.

It runs wherever veribatch is installed: the executable is this Python, the
command ``python -m veribatch.verifiers.z3c FILE --timeout S --data-model M --json``.
Natively that command is not exec-ed per query: the runner's fork server has
`verifiers.z3c` imported and warmed up, and runs its ``main`` in a fresh fork
(`warm_module`) — a separate process with the same limits, minus ~0.5 s of start-up.  The
tool's own time budget is set a little below the hard wall/CPU limit so that it
can still print its answer (TIMEOUT or UNKNOWN with the portfolio's reasons)
before the runner kills it; the runner's limits remain the real enforcement.
"""

from __future__ import annotations

import importlib.util
import json
import sys
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

MODULE = "veribatch.verifiers.z3c"
DATA_MODELS = ("ILP32", "LP64")
SAFETY_MARGIN_S = 1.0  # left between the tool's own budget and the hard limit


class EmbeddedZ3Tool(Tool):
    """The embedded C verifier: Horn clauses + Spacer portfolio and BMC on z3, in-process."""

    name = "z3"
    description = ("z3 — the embedded C verifier (package z3c): Horn clauses + Spacer and BMC on "
                   "z3, FALSE replayed with gcc, TRUE from a re-checked proof")
    properties = ("unreach-call",)
    languages = ("C",)
    memory_mb = 4096
    query_cores = 1
    certified_verdicts = True  # FALSE: a gcc-replayed trace; TRUE: a re-checked proof (or UNKNOWN)
    container_executable = None  # pure Python + z3-solver: runs natively everywhere
    version_args = ("-m", MODULE, "--version")
    warm_module = MODULE  # forked from the runner's warm fork server (no start-up per query)

    def executable(self) -> str:
        if importlib.util.find_spec("z3") is None or importlib.util.find_spec(MODULE) is None:
            raise ToolNotFoundError(
                f"z3: module {MODULE} or z3-solver not importable by {sys.executable}"
            )
        return sys.executable

    def cmdline(self, executable: str, query: Query, limits: Limits, workdir: Path) -> list[str]:
        if query.property not in self.properties:
            raise UnsupportedQueryError(f"z3: unsupported property {query.property!r}; "
                                        f"known: {', '.join(self.properties)}")
        if len(query.files) != 1:
            raise UnsupportedQueryError(f"z3 verifies exactly one C file, got {len(query.files)}")
        if query.data_model not in DATA_MODELS:
            raise UnsupportedQueryError(f"z3: unknown data model {query.data_model!r}; "
                                        f"known: {', '.join(DATA_MODELS)}")
        budget = min(limits.wall_s, limits.cpu_cap)
        budget = max(0.5, budget - SAFETY_MARGIN_S)
        return [
            executable, "-m", MODULE, str(query.files[0]),
            "--timeout", f"{budget:g}", "--data-model", query.data_model, "--json",
            *query.options,
        ]

    def determine_result(self, run: FinishedRun) -> ToolVerdict:
        payload = None
        for line in reversed(run.output.strip().splitlines()):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                got = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(got, dict) and "status" in got:
                payload = got
                break
        if payload is None:
            tail = run.output.strip().splitlines()[-1:] or ["no output"]
            return ToolVerdict(Status.ERROR, f"z3: no JSON verdict in the output ({tail[0][:300]})")
        try:
            status = Status(payload["status"])
        except ValueError:
            return ToolVerdict(Status.ERROR, f"z3: unknown status {payload['status']!r}")
        extras = {k: payload[k] for k in ("invariants", "counterexample", "proof", "proof_checked", "portfolio")
                  if payload.get(k) is not None}
        return ToolVerdict(status, payload.get("reason"), extras)
