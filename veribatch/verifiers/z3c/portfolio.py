"""The portfolio: Spacer (default, non-linear arithmetic, global guidance) and BMC in time slices.

notes.md: no single Spacer setting wins (global guidance helps some programs and
hurts others) and deep counterexamples need BMC.  Members run one after another
in rounds of growing slices (0.5 s, 1 s, 2 s, ... each), so an easy program is
decided in the first second whatever member solves it, and a hard one still gets
long runs.  Each slice is a separate process in its own process group, killed with
the whole group when the slice ends: Z3 is never trusted to stop itself.  A slice is
a fork of this (single-threaded) process, which has already parsed and encoded the
program, so it starts solving at once; only a multi-threaded caller (where forking is
unsafe) starts ``python -m veribatch.verifiers.z3c --member`` instead.  Round r runs Spacer
with random seed r: restarts then also vary its heuristics.

Decisions: TRUE from a re-checked Spacer proof or a complete unrolling; FALSE
only from a BMC trace confirmed by a gcc replay.  A Spacer "unsafe" is a hint
that moves the remaining time to BMC.  A forked Spacer member that has a proof
says so at once, and its slice is then extended for the re-check (by
max(RECHECK_MIN_S, RECHECK_FACTOR x slice), within the query's budget: growing with
the rounds, like the slices, so one hard-to-check proof cannot starve the other
members); a proof that cannot be re-checked is no verdict: the members go on (a
later round may find a proof that checks), and if none decides the outcome is
UNKNOWN (or TIMEOUT) with the reason ("Spacer found a proof that could not be
re-checked (clause ...)").
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import z3

from veribatch.verifiers import cfront
from veribatch.verifiers.forkserver import set_parent_death_signal
from veribatch.verifiers.z3c import engines, expressions, templates
from veribatch.verifiers.z3c.encode import BmcOnly, Unsupported

GRACE_S = 1.0  # beyond its slice a member gets this long to print its answer
RECHECK_MIN_S = 2.0  # a forked member that has a proof may re-check it this long past its slice,
RECHECK_FACTOR = 4.0  # or this many times its slice if longer (within the query's budget)
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
        sys.executable, "-m", "veribatch.verifiers.z3c", path, "--member", member,
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


def _run_forked(
    member: str,
    text: str,
    slice_s: float,
    data_model: str,
    bmc_depth: int,
    seed: int = 0,
    grace_s: float | None = None,
    proof_deadline: float | None = None,
) -> dict[str, Any]:
    """The member in a fork of this process: answers as JSON on a pipe, killed at the deadline.

    A Spacer member writes ``P`` first when it has a proof; its deadline then moves to
    `proof_deadline` (the query's), so the re-check is not cut short by the slice.
    """
    r, w = os.pipe2(os.O_CLOEXEC)
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the member
        try:
            os.close(r)
            os.setpgid(0, 0)
            set_parent_death_signal(signal.SIGKILL, parent)
            sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
            recheck = None
            if proof_deadline is not None:
                recheck = max(0.0, proof_deadline - time.monotonic() - slice_s)
            said: list[bool] = []

            def proof_found() -> None:
                """Say "P" once: a member may find several proofs to re-check (templates'
                stages), and the parent reads only a first "P" as the mark."""
                if not said:
                    said.append(True)
                    os.write(w, b"P")

            got = run_member_safely(member, text, slice_s, data_model, bmc_depth, seed,
                                    recheck_grace_s=recheck, on_proof=proof_found)
            data = json.dumps(got).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
        finally:
            os._exit(0)
    os.close(w)
    deadline = time.monotonic() + slice_s + (GRACE_S if grace_s is None else grace_s)
    buf = b""
    timed_out = False
    try:
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([r], [], [], max(0.0, left))
            if not ready:
                timed_out = True
                break
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            if not buf and chunk.startswith(b"P"):
                chunk = chunk[1:]
                if proof_deadline is not None:
                    deadline = max(deadline, proof_deadline)
                buf = b" "  # the "P" was seen; JSON follows
            buf += chunk
    finally:
        os.close(r)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # also whatever the member started (gcc replay)
        _, status = os.waitpid(pid, 0)
    if timed_out:
        return {"answer": "timeout"}
    try:
        got = json.loads(buf)
    except ValueError:
        got = None
    if isinstance(got, dict) and "answer" in got:
        return got
    how = (f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
           else f"exit {os.WEXITSTATUS(status)}")
    return {"answer": "error", "reason": f"member {member} crashed ({how}) without an answer"}


def _can_fork() -> bool:
    """Forking is safe only while this process has one thread (see the module doc)."""
    return threading.active_count() == 1 and hasattr(os, "fork")


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
    on_proof: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """A member in this process (worker mode and in-process tests); never raises."""
    try:
        with engines.Z3_LOCK:
            return engines.run_member(
                member, text, timeout_s, data_model, bmc_depth, seed, recheck_grace_s, on_proof
            )
    except Unsupported as exc:
        return {"answer": "unsupported", "reason": str(exc)}
    except TimeoutError:
        return {"answer": "timeout"}
    except z3.Z3Exception as exc:
        return {"answer": "unknown", "reason": f"z3: {exc}"}
    except Exception as exc:  # noqa: BLE001 - a member's bug must become a recorded status
        return {"answer": "error", "reason": f"member {member} crashed: {type(exc).__name__}: {exc}"}


def _repairs(text: str) -> dict[str, str]:
    """A verdict on a damaged input says what the front end repaired (`cfront.close_lost_comment`)."""
    _, note = cfront.close_lost_comment(text)
    return {"input_repaired": note} if note else {}


def check_supported(text: str, data_model: str, filename: str) -> Outcome | None:
    """Parse and encode up front: UNKNOWN naming the construct when outside the subset,
    ERROR when the text does not parse as C (the tool cannot read it)."""
    return _support(text, data_model, filename)[0]


def _support(text: str, data_model: str, filename: str) -> tuple[Outcome | None, str | None]:
    """(UNKNOWN naming the construct outside the subset or None, why only BMC applies or None).

    A floating-point construct (`ir.BmcOnly`) is outside the Horn encoding but inside
    the bounded unrolling: such a program is checked by the `bmc` member alone.
    """
    try:
        ast = cfront.parse(text, filename=filename)
        with engines.Z3_LOCK:
            try:
                enc = engines.encode(ast, mode="chc", data_model=data_model)
            except BmcOnly as exc:
                engines.encode(ast, mode="unroll", depth=0, data_model=data_model)
                engines.remember_parsed(text, ast)
                return None, str(exc)
            engines.remember(text, data_model, ast, enc)  # members reuse it
            engines.spacer_program(text, data_model)  # and the sliced one
    except cfront.CParseError as exc:  # cannot read it: ERROR, as for every verifier (result.py)
        return Outcome("ERROR", f"parse error: {exc}"), None
    except Unsupported as exc:
        return Outcome("UNKNOWN", f"unsupported: {exc}"), None
    except RecursionError:
        return Outcome("UNKNOWN", "unsupported: program too deeply nested"), None
    except Exception as exc:  # noqa: BLE001 - an encoder bug is an ERROR, never a verdict
        return Outcome("ERROR", f"internal error while encoding: {type(exc).__name__}: {exc}"), None
    return None, None


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

    Members run as forks of this process or, from a multi-threaded process, as
    subprocesses reading `path` (the file `text` came from) or, without one, a
    temporary copy; `in_process=True` runs them here instead.
    """
    start = time.monotonic()
    deadline = start + timeout_s
    fork = not in_process and _can_fork()
    bits = False  # bit-wise operators in clauses that over-approximate them: longer BMC slices
    bad, bmc_only = _support(text, data_model, filename)
    if bad is not None:
        return bad
    products = bmc_only is None and _products(text, data_model)
    if bmc_only is not None:
        members = tuple(m for m in members if m == "bmc")
    elif "bmc" in members and (products or _over_approximate(text, data_model)):
        members = ("bmc", *(m for m in members if m != "bmc"))
        bits = _bit_level(text)
    first_round = _templates_round(text, data_model, members)
    if products:
        members = _poly_order(members)
    log: list[dict[str, Any]] = []
    active = list(members)
    reasons: dict[str, str] = {}
    unsafe_hint = False
    bmc_depth = 0  # BMC continues from the depth its previous slice reached
    grace = min(GRACE_S, max(0.1, 0.2 * timeout_s))  # a slice's time to answer after its end
    crashed: set[str] = set()
    tmp = None
    if not in_process and not fork and path is None:
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
                elif member == "bmc" and bits:
                    slice_s = min(left, max(slice_s, BMC_SLICE_POLY_S))
                elif member == "bmc" and products:
                    slice_s = min(left, max(slice_s, BMC_SLICE_POLY_S if rnd else BMC_FIRST_POLY_S))
                if member == "templates":
                    if rnd < first_round:
                        continue
                    slice_s = min(left, max(slice_s, _templates_slice(timeout_s)
                                            * 2 ** (rnd - first_round)))
                t0 = time.monotonic()
                if in_process:
                    # nobody kills an in-process member: let it finish re-checking
                    got = run_member_safely(member, text, slice_s, data_model, bmc_depth, rnd,
                                            recheck_grace_s=IN_PROCESS_RECHECK_S)
                elif fork:
                    recheck = max(RECHECK_MIN_S, RECHECK_FACTOR * slice_s)
                    got = _run_forked(member, text, slice_s, data_model, bmc_depth, rnd,
                                      grace_s=grace,
                                      proof_deadline=min(deadline - grace,
                                                         time.monotonic() + slice_s + recheck))
                else:
                    assert path is not None
                    got = _run_subprocess(member, path, slice_s, data_model, bmc_depth, rnd,
                                          grace_s=grace)
                if member == "bmc" and isinstance(got.get("next_depth"), int):
                    bmc_depth = got["next_depth"]
                log.append({"member": member, "slice_s": round(slice_s, 3),
                            "answer": got.get("answer"), "wall_s": round(time.monotonic() - t0, 3)})
                if "timing" in got:  # where a deciding member's time went (solve, re-check)
                    log[-1]["timing"] = got["timing"]
                ans = got.get("answer")
                if ans == "safe":
                    extras = {"proof": got.get("proof"), "invariants": got.get("invariants", []),
                              "proof_checked": True, "portfolio": log}
                    for key in ("assumes", "invariants_smt", "summaries"):  # Spacer only
                        if key in got:
                            extras[key] = got[key]
                    return Outcome("TRUE", None, {**extras, **_repairs(text)})
                if ans == "false":
                    return Outcome("FALSE", None, {"counterexample": got.get("counterexample"),
                                                   "portfolio": log, **_repairs(text)})
                if ans == "unsafe":
                    # an error reachable in an over-approximation (`bitabs`) may be spurious:
                    # BMC then keeps its doubling slices instead of all the time at once
                    # (one long slice spent it in the bit-blasted search at a shallow depth)
                    unsafe_hint = not got.get("over_approximate")
                    reasons[member] = ("Spacer found the error reachable" + (
                        "" if unsafe_hint else " in the over-approximation of bit-wise "
                        "operators or floating point")
                        + " (no confirmed trace yet)")
                    active = [m for m in active if m == "bmc"]
                    break
                if ans == "error":
                    crashed.add(member)
                if ans in ("unknown", "unsupported", "error"):
                    said = got.get("reason") or ans
                    # a later slice that only ran out of time does not erase a trace an
                    # earlier one found and gcc rejected
                    before = reasons.get(member, "")
                    if UNCONFIRMED not in said and UNCONFIRMED in before:
                        said = f"{said}; earlier: {before[before.index(UNCONFIRMED):]}"
                    reasons[member] = said
                    if ans != "unknown" or not _may_improve(got.get("reason")):
                        active.remove(member)
            if deadline - time.monotonic() < 0.05:
                break
            rnd += 1
        why = "; ".join(f"{m}: {r}" for m, r in reasons.items())
        if bmc_only is not None and not (crashed and crashed == set(members)):
            return Outcome("UNKNOWN", f"unsupported: {bmc_only} in the Horn encoding; bounded "
                           f"model checking alone decided nothing in {timeout_s:g} s"
                           + (f" ({why})" if why else ""), {"portfolio": log})
        if not active and crashed and crashed == set(members):
            return Outcome("ERROR", why, {"portfolio": log})
        if active:
            return Outcome("TIMEOUT", f"no decision within {timeout_s:g} s" + (f" ({why})" if why else ""),
                           {"portfolio": log})
        return Outcome("UNKNOWN", why or "no member decided", {"portfolio": log})
    finally:
        if tmp is not None:
            os.unlink(tmp)


TEMPLATES_ROUND_POLY = 0  # the round the templates member first runs in: clauses with products,
TEMPLATES_ROUND_LINEAR = 2  # and without
# BMC's slices on clauses with products are at least this long from round 1 on: Spacer rarely
# proves those, and when the loops are bounded (InvBench's `_unwindbound`/`_valuebound`
# variants) a complete unrolling is the other proof; 0.5 s reached it at load 1, not at load 5
# (egcd2-ll_unwindbound5_2: depth 7, 0.5-1 s; cohencu-ll_valuebound100_8: depth 127)
BMC_SLICE_POLY_S = 2.0
# ... and its first slice there (it runs first: `_poly_order`) at least this long: 0.5 s left
# InvBench-Easy's egcd2-ll_unwindbound5_2 and egcd-ll_valuebound10_3 (0.6-0.7 s of BMC at load
# 3.5) undecided until after the templates member's 7.5 s slice (11.1 s and 6.6 s in all)
BMC_FIRST_POLY_S = 1.0


def _poly_order(members: tuple[str, ...]) -> tuple[str, ...]:
    """On clauses with products: `bmc` first (its slices at least `BMC_FIRST_POLY_S` in
    round 0, `BMC_SLICE_POLY_S` from round 1), `spacer-nla` before `spacer`, and `templates`
    right before `spacer-global` (else last).

    Measured on InvBench-Easy's seeded sample of 20 (`bench/verifier.py --sample 20 --seed 7`;
    17 with products), each member alone in a round-0 slice (load 1.7-2.4): BMC decided 13
    of the 17 in 0.03-0.39 s (bounded loops: a complete unrolling or a replayed trace),
    `spacer-nla` 8 (0.13-1.7 s with the re-check), `spacer` 1; of the 4 BMC left,
    `spacer-nla` decided one, `spacer` one, templates two (0.3-1.7 s).  Behind two Spacer
    slices BMC's verdicts came after 1.1-1.5 s instead.  On Easy's 88 polynomial programs `spacer-global` decided none in its round-0
    slice, templates decided 5 right after it, so templates goes first of the two; not
    before BMC or the other Spacer members: templates alone, on the 30 that BMC or
    templates decided, left 17 undecided, 9 of them after its whole 7.5 s slice.
    """
    order = [m for m in members if m != "templates"]
    if "spacer" in order and "spacer-nla" in order:
        order.remove("spacer-nla")
        order.insert(order.index("spacer"), "spacer-nla")
    if "bmc" in order:
        order.remove("bmc")
        order.insert(0, "bmc")
    if "templates" in members:
        k = order.index("spacer-global") if "spacer-global" in order else len(order)
        order.insert(k, "templates")
    return tuple(order)


def _templates_slice(timeout_s: float) -> float:
    """The templates member's first slice: sampling states, Houdini and Spacer need a few
    seconds together (measured: 0.9-5 s for InvBench's egcd/cohendiv/prod4br/ps4 at load 5)."""
    return min(8.0, timeout_s / 4)


def _over_approximate(text: str, data_model: str) -> bool:
    """Whether Spacer's clauses over-approximate the program (bit-wise `x & y`, floating
    point): BMC then runs first in each round.  Such programs were BMC's alone before,
    and the ones a complete unrolling proves in a second or two (InvBench training
    130_1, 2293_3, 4961_2) took 1.5-3.5x as long behind three Spacer slices."""
    with engines.Z3_LOCK:
        return engines.spacer_program(text, data_model)[1].over_approximate


def _bit_level(text: str) -> bool:
    """Whether the program has bit-wise operators: with clauses that over-approximate them,
    BMC's exact bit-vector check (rule 23) is the one proof, and an unrolling of a
    16-iteration bit loop (`interleave_bits`) takes 1-2 s to encode and check."""
    return expressions.uses_bitwise(engines.parsed(text))


def _templates_round(text: str, data_model: str, members: tuple[str, ...]) -> int:
    """The round the `templates` member first runs in (last in a round, or where
    `_poly_order` puts it).

    Behind Spacer and BMC: measured on InvBench-Easy's polynomial programs, they decide
    most of them in their first slices, and a templates slice before them delayed those
    by its 6 s.  Round 0 when the clauses multiply or divide variables
    (polynomial updates: Spacer alone rarely proves those; from round 1 on, under load 10,
    the egcd programs were left too little time), else round 2.
    """
    if "templates" not in members:
        return 0
    return TEMPLATES_ROUND_POLY if _products(text, data_model) else TEMPLATES_ROUND_LINEAR


def _products(text: str, data_model: str) -> bool:
    """Whether the clauses Spacer solves multiply or divide variables (`templates.nonlinear`)."""
    with engines.Z3_LOCK:
        return templates.nonlinear(engines.spacer_program(text, data_model)[1])


UNCONFIRMED = "unconfirmed counterexample"


def _may_improve(reason: str | None) -> bool:
    """An unknown caused by the time limit may go away with a longer slice."""
    if reason is None:
        return True
    r = reason.lower()
    return any(k in r for k in ("timeout", "canceled", "cancelled", "unconfirmed", "no error path",
                                "ran out of time"))
