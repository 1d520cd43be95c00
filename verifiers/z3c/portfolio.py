"""The portfolio: Spacer (default, non-linear arithmetic, global guidance) and BMC in time slices.

notes.md: no single Spacer setting wins (global guidance helps some programs and
hurts others) and deep counterexamples need BMC.  Members run one after another
in rounds of growing slices (0.5 s, 1 s, 2 s, ... each), so an easy program is
decided in the first second whatever member solves it, and a hard one still gets
long runs.  Each slice is a separate process in its own session, killed with its
whole process group when the slice ends: Z3 is never trusted to stop itself.
Round r runs Spacer with random seed r: restarts then also vary its heuristics.

Decisions: TRUE from a re-checked Spacer proof or a complete unrolling; FALSE
only from a BMC trace confirmed by a gcc replay.  A Spacer "unsafe" is a hint
that moves the remaining time to BMC.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import z3

from verifiers import cfront
from verifiers.z3c import engines
from verifiers.z3c.encode import Unsupported

GRACE_S = 1.0  # beyond its slice a member gets this long to print its answer
IN_PROCESS_RECHECK_S = 5.0  # in-process members may re-check a proof this long past their slice


def tool_version() -> str:
    return f"veribatch-z3c/{engines.ENCODING_VERSION}+z3-{z3.get_version_string()}"


@dataclass
class Outcome:
    status: str  # TRUE | FALSE | UNKNOWN | TIMEOUT | ERROR (every member crashed)
    reason: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, **self.extras}


def _slices(timeout_s: float) -> float:
    return 0.5 if timeout_s >= 6 else max(0.2, timeout_s / 8)


def _run_subprocess(
    member: str,
    path: str,
    slice_s: float,
    data_model: str,
    bmc_depth: int,
    seed: int = 0,
    grace_s: float | None = None,
) -> dict[str, Any]:
    argv = [
        sys.executable, "-m", "verifiers.z3c", path, "--member", member,
        "--timeout", f"{slice_s:.3f}", "--data-model", data_model, "--json",
        "--bmc-depth", str(bmc_depth), "--seed", str(seed),
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        start_new_session=True, text=True,
    )
    try:
        out, err = proc.communicate(timeout=slice_s + (GRACE_S if grace_s is None else grace_s))
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return {"answer": "timeout"}
    finally:
        _kill_group(proc)  # also reaps anything the member left behind
    for line in reversed(out.strip().splitlines()):
        try:
            got = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(got, dict) and "answer" in got:
            return got
    tail = (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    return {"answer": "error", "reason": f"member {member} crashed: {tail}"}


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait()


def run_member_safely(
    member: str,
    text: str,
    timeout_s: float,
    data_model: str,
    bmc_depth: int = 0,
    seed: int = 0,
    recheck_grace_s: float | None = None,
) -> dict[str, Any]:
    """A member in this process (worker mode and in-process tests); never raises."""
    try:
        with engines.Z3_LOCK:
            return engines.run_member(
                member, text, timeout_s, data_model, bmc_depth, seed, recheck_grace_s
            )
    except Unsupported as exc:
        return {"answer": "unsupported", "reason": str(exc)}
    except TimeoutError:
        return {"answer": "timeout"}
    except z3.Z3Exception as exc:
        return {"answer": "unknown", "reason": f"z3: {exc}"}
    except Exception as exc:  # noqa: BLE001 - a member's bug must become a recorded status
        return {"answer": "error", "reason": f"member {member} crashed: {type(exc).__name__}: {exc}"}


def check_supported(text: str, data_model: str, filename: str) -> Outcome | None:
    """Parse and encode up front: UNKNOWN naming the construct when outside the subset."""
    try:
        ast = cfront.parse(text, filename=filename)
        with engines.Z3_LOCK:
            engines.encode(ast, mode="chc", data_model=data_model)
    except cfront.CParseError as exc:
        return Outcome("UNKNOWN", f"parse error: {exc}")
    except Unsupported as exc:
        return Outcome("UNKNOWN", f"unsupported: {exc}")
    except RecursionError:
        return Outcome("UNKNOWN", "unsupported: program too deeply nested")
    except Exception as exc:  # noqa: BLE001 - an encoder bug is an ERROR, never a verdict
        return Outcome("ERROR", f"internal error while encoding: {type(exc).__name__}: {exc}")
    return None


def verify_text(
    text: str,
    timeout_s: float,
    *,
    data_model: str = "ILP32",
    members: tuple[str, ...] = engines.MEMBERS,
    in_process: bool = False,
    filename: str = "<program>",
    path: str | None = None,
) -> Outcome:
    """Run the portfolio on one program within `timeout_s` seconds.

    Members run as subprocesses reading `path` (the file `text` came from) or,
    without one, a temporary copy; `in_process=True` runs them here instead.
    """
    start = time.monotonic()
    deadline = start + timeout_s
    bad = check_supported(text, data_model, filename)
    if bad is not None:
        return bad
    log: list[dict[str, Any]] = []
    active = list(members)
    reasons: dict[str, str] = {}
    unsafe_hint = False
    bmc_depth = 0  # BMC continues from the depth its previous slice reached
    grace = min(GRACE_S, max(0.1, 0.2 * timeout_s))  # a slice's time to answer after its end
    crashed: set[str] = set()
    tmp = None
    if not in_process and path is None:
        fd, tmp = tempfile.mkstemp(suffix=".c", prefix="vb-z3c-")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        path = tmp
    try:
        base = _slices(timeout_s)
        rnd = 0
        while active:
            for member in list(active):
                # keep the grace a slice may take for its answer inside the budget
                left = deadline - time.monotonic() - (0.0 if in_process else grace)
                if left < 0.05:
                    break
                slice_s = min(left, base * (2**rnd))
                if unsafe_hint and member == "bmc":
                    slice_s = left
                t0 = time.monotonic()
                if in_process:
                    # nobody kills an in-process member: let it finish re-checking
                    got = run_member_safely(member, text, slice_s, data_model, bmc_depth, rnd,
                                            recheck_grace_s=IN_PROCESS_RECHECK_S)
                else:
                    assert path is not None
                    got = _run_subprocess(member, path, slice_s, data_model, bmc_depth, rnd,
                                          grace_s=grace)
                if member == "bmc" and isinstance(got.get("next_depth"), int):
                    bmc_depth = got["next_depth"]
                log.append({"member": member, "slice_s": round(slice_s, 3),
                            "answer": got.get("answer"), "wall_s": round(time.monotonic() - t0, 3)})
                ans = got.get("answer")
                if ans == "safe":
                    extras = {"proof": got.get("proof"), "invariants": got.get("invariants", []),
                              "proof_checked": got.get("proof_checked", True), "portfolio": log}
                    return Outcome("TRUE", None, extras)
                if ans == "false":
                    return Outcome("FALSE", None, {"counterexample": got.get("counterexample"),
                                                   "portfolio": log})
                if ans == "unsafe":
                    unsafe_hint = True
                    reasons[member] = "Spacer found the error reachable (no confirmed trace yet)"
                    active = [m for m in active if m == "bmc"]
                    break
                if ans == "error":
                    crashed.add(member)
                if ans in ("unknown", "unsupported", "error"):
                    reasons[member] = got.get("reason") or ans
                    if ans != "unknown" or not _may_improve(got.get("reason")):
                        active.remove(member)
            if deadline - time.monotonic() < 0.05:
                break
            rnd += 1
        why = "; ".join(f"{m}: {r}" for m, r in reasons.items())
        if not active and crashed and crashed == set(members):
            return Outcome("ERROR", why, {"portfolio": log})
        if active:
            return Outcome("TIMEOUT", f"no decision within {timeout_s:g} s" + (f" ({why})" if why else ""),
                           {"portfolio": log})
        return Outcome("UNKNOWN", why or "no member decided", {"portfolio": log})
    finally:
        if tmp is not None:
            os.unlink(tmp)


def _may_improve(reason: str | None) -> bool:
    """An unknown caused by the time limit may go away with a longer slice."""
    if reason is None:
        return True
    r = reason.lower()
    return any(k in r for k in ("timeout", "canceled", "cancelled", "unconfirmed", "no error path"))
