"""Is this input a counterexample?  REFUTE's judgement, every program in the sandbox.

The rules are the authors' harness's (``refute/eval.py``, ``utils/code_exec.py``) where
they are right, and better where they are not:

1. the model's program runs once (at most `generator_s`, a minute) and its stdout is the
   input x;
2. the problem's validator (Python) must exit 0 on x, else the attempt fails as
   ``invalid_input``; so does an x that Python and C++ would read differently
   (`reading.two_readings`: ``0_5``, Unicode digits, a leading ``+``...), which the
   harness passed on;
3. the correct solution runs on x; if it fails (crash, time limit, compile error) the
   attempt is an ERROR — never a success.  The harness ran it *after* the wrong solution
   and counted a wrong-solution crash as success before ever asking the correct one;
4. the wrong solution runs on x up to `runs` times (5: some wrong solutions are
   nondeterministic) and the attempt succeeds at the first run that differs token-wise
   (`compare`), or that crashes / exceeds the time or memory limit — recorded with that
   reason (``differs``, ``wrong_crash``, ``wrong_timeout``...).  The correct solution runs
   once: REFUTE keeps only problems with a unique answer, so its output cannot change.
   ``wrong_timeout`` needs the CPU limit: a run the wall clock stopped while it had used
   less CPU than its limit is *inconclusive* (load on the node slows a correct program
   too), run once more `alone` (no other judged run of the user on the node meanwhile,
   `RETRY_WALL` times the CPU limit on the wall clock),
   and when that is inconclusive again the attempt is ``wrong_inconclusive``, never a
   success.  The correct solution's inconclusive run is retried alone the same way.

Every outcome has a named reason (`REASONS`); a record never says just "failed".
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from veribatch.verifiers.judge import (
    CompileError,
    Program,
    ProgramRun,
    Sandbox,
    Verdict,
    first_difference,
    run_program,
    two_readings,
)

SUCCESS, FAILURE, ERROR = "success", "failure", "error"
RETRY_WALL = 4
"""The wall limit of an inconclusive run's retry, in multiples of its CPU limit (+ 1 s)."""
EXCERPT = 300

REASONS: dict[str, tuple[str, str]] = {
    # reason: (outcome, meaning)
    "differs": (SUCCESS, "the wrong solution's output differs from the correct one's"),
    "wrong_crash": (SUCCESS, "the wrong solution crashed (non-zero exit, signal) on a valid input"),
    "wrong_timeout": (SUCCESS, "the wrong solution exceeded the time limit on a valid input"),
    "wrong_memory": (SUCCESS, "the wrong solution exceeded the memory limit on a valid input"),
    "wrong_output_limit": (SUCCESS, "the wrong solution printed more than the output cap"),
    "wrong_inconclusive": (ERROR, "the wrong solution hit the wall-clock limit under its CPU "
                                  "limit, twice (the second time alone): load, not a verdict"),
    "no_program": (FAILURE, "the answer holds no usable program"),
    "generator_compile_error": (FAILURE, "the model's program does not compile"),
    "generator_crash": (FAILURE, "the model's program crashed"),
    "generator_timeout": (FAILURE, "the model's program ran past its time limit"),
    "generator_memory": (FAILURE, "the model's program exceeded the memory limit"),
    "generator_output_limit": (FAILURE, "the model's program printed more than the input cap"),
    "empty_input": (FAILURE, "the model's program printed nothing"),
    "invalid_input": (FAILURE, "the validator rejected the input"),
    "validator_timeout": (FAILURE, "the validator ran past its time limit on the input"),
    "same_output": (FAILURE, "wrong and correct solution agree on the input (every run)"),
    "nothing_found": (FAILURE, "the search ended without a differing input"),
    "no_new_inputs": (FAILURE, "the search's generator stopped producing new inputs"),
    "brute_compile_error": (FAILURE, "the model's brute force does not compile"),
    "brute_crash": (FAILURE, "the model's brute force kept crashing"),
    "brute_timeout": (FAILURE, "the model's brute force kept exceeding the time limit"),
    "correct_failed": (ERROR, "the correct solution failed on a valid input (data or judge fault)"),
    "correct_compile_error": (ERROR, "the dataset's correct solution does not compile"),
    "wrong_compile_error": (ERROR, "the dataset's wrong solution does not compile"),
    "validator_error": (ERROR, "the validator could not be run"),
    "sandbox_refused": (ERROR, "no sandbox on this node and unsafe runs were not allowed"),
    "judge_error": (ERROR, "the judge could not run a program"),
}


@dataclass(frozen=True)
class Solutions:
    """The three programs of a REFUTE problem."""

    wrong: Program
    correct: Program
    validator: Program


@dataclass(frozen=True)
class JudgeLimits:
    """Limits of the harness: 20 s per solution/validator run, a minute for the model's
    program.  The harness set no memory limit; `memory_mb` only protects the node."""

    run_s: float = 20.0
    generator_s: float = 60.0
    memory_mb: int = 2048
    runs: int = 5
    input_cap: int = 64 * 2**20
    compare: str = "per-token"  # `compare.RULES`: per-token | harness


@dataclass
class Judgement:
    outcome: str
    reason: str
    detail: str = ""
    runs: int = 0
    input_sha256: str | None = None
    input_bytes: int | None = None
    input_excerpt: str | None = None
    generator_verdict: str | None = None
    validator_verdict: str | None = None
    correct_verdict: str | None = None
    wrong_verdict: str | None = None
    wrong_output_excerpt: str | None = None
    correct_output_excerpt: str | None = None
    judge_s: float = 0.0
    sandbox: str = ""
    sandbox_unsafe: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        return self.outcome == SUCCESS

    def to_record(self) -> dict[str, Any]:
        d = asdict(self)
        extra = d.pop("extra")
        return {**d, **extra}


def judgement(reason: str, detail: str = "", **kw: Any) -> Judgement:
    outcome, _ = REASONS[reason]
    return Judgement(outcome, reason, detail[:2000], **kw)


def describe_input(data: bytes) -> dict[str, Any]:
    return {"input_sha256": hashlib.sha256(data).hexdigest(), "input_bytes": len(data),
            "input_excerpt": data[:EXCERPT].decode(errors="replace")}


_GEN_FAIL = {Verdict.RE: "generator_crash", Verdict.TLE: "generator_timeout",
             Verdict.MLE: "generator_memory", Verdict.OLE: "generator_output_limit"}
_WRONG_FAIL = {Verdict.RE: "wrong_crash", Verdict.TLE: "wrong_timeout",
               Verdict.MLE: "wrong_memory", Verdict.OLE: "wrong_output_limit"}


def run_generator(
    program: Program, limits: JudgeLimits, *, cache_dir: Path | None, sandbox: Sandbox,
    time_s: float | None = None,
) -> bytes | Judgement:
    """The input the model's program prints (one run, no stdin), or why there is none."""
    try:
        run = run_program(program, b"", time_s=time_s or limits.generator_s,
                          wall_s=(time_s or limits.generator_s) + 1, memory_mb=limits.memory_mb,
                          cache_dir=cache_dir, output_cap=limits.input_cap, sandbox=sandbox)
    except CompileError as e:
        return judgement("generator_compile_error", str(e))
    if run.verdict is Verdict.ERROR:
        return judgement("judge_error", f"generator: {run.reason}", generator_verdict="ERROR")
    if run.verdict is not Verdict.OK:
        return judgement(_GEN_FAIL[run.verdict], f"{run.reason}; stderr: {run.stderr[-1000:]}",
                         generator_verdict=str(run.verdict))
    data = run.output.encode()
    if not data.strip():
        return judgement("empty_input", "the program printed only whitespace",
                         generator_verdict="OK")
    return data


def validate(
    validator: Program, data: bytes, limits: JudgeLimits, *, cache_dir: Path | None,
    sandbox: Sandbox,
) -> Judgement | None:
    """None when the validator accepts `data`, else the failing `Judgement`.  An input
    that Python and C++ would read differently is refused before the validator runs
    (`reading.two_readings`): the validator would vouch for another instance."""
    why = two_readings(data)
    if why is not None:
        return judgement("invalid_input", f"read two ways: {why}", **describe_input(data))
    try:
        run = run_program(validator, data, time_s=limits.run_s, wall_s=limits.run_s + 1,
                          memory_mb=limits.memory_mb, cache_dir=cache_dir, sandbox=sandbox)
    except CompileError as e:
        return judgement("validator_error", str(e), **describe_input(data))
    if run.verdict is Verdict.OK:
        return None
    if run.verdict is Verdict.ERROR:
        return judgement("validator_error", str(run.reason), validator_verdict="ERROR",
                         **describe_input(data))
    reason = "validator_timeout" if run.verdict is Verdict.TLE else "invalid_input"
    why = (run.stderr.strip().splitlines() or [run.reason or ""])[-1]
    return judgement(reason, f"validator: {why}", validator_verdict=str(run.verdict),
                     **describe_input(data))


def judge_input(
    solutions: Solutions, data: bytes, limits: JudgeLimits, *, cache_dir: Path | None,
    sandbox: Sandbox, validated: bool = False,
) -> Judgement:
    """Steps 2–4 of the module docstring on input `data`."""
    t0 = time.monotonic()
    out = _judge_input(solutions, data, limits, cache_dir=cache_dir, sandbox=sandbox,
                       validated=validated)
    out.judge_s = time.monotonic() - t0
    out.sandbox, out.sandbox_unsafe = sandbox.kind, sandbox.unsafe
    return out


def _run(program: Program, data: bytes, limits: JudgeLimits, cache_dir: Path | None,
         sandbox: Sandbox) -> ProgramRun:
    """One judged run; an inconclusive one (wall clock under the CPU limit) once more alone,
    with `RETRY_WALL` times the CPU limit on the wall clock: on a node whose other jobs leave
    a program a quarter of a core, a loop still reaches its CPU limit; a sleeper does not."""
    run = run_program(program, data, time_s=limits.run_s, wall_s=limits.run_s + 1,
                      memory_mb=limits.memory_mb, cache_dir=cache_dir, sandbox=sandbox)
    if run.inconclusive:
        run = run_program(program, data, time_s=limits.run_s,
                          wall_s=RETRY_WALL * limits.run_s + 1,
                          memory_mb=limits.memory_mb, cache_dir=cache_dir, sandbox=sandbox,
                          alone=True)
    return run


def _judge_input(
    solutions: Solutions, data: bytes, limits: JudgeLimits, *, cache_dir: Path | None,
    sandbox: Sandbox, validated: bool,
) -> Judgement:
    info = describe_input(data)
    if not data.strip():
        return judgement("empty_input", "the input is empty", **info)
    why = two_readings(data)
    if why is not None:  # also where the caller validated: a validator's OK does not cover it
        return judgement("invalid_input", f"read two ways: {why}", **info)
    if not validated:
        rejected = validate(solutions.validator, data, limits, cache_dir=cache_dir, sandbox=sandbox)
        if rejected is not None:
            return rejected
    info["validator_verdict"] = "OK"
    try:
        correct = _run(solutions.correct, data, limits, cache_dir, sandbox)
    except CompileError as e:
        return judgement("correct_compile_error", str(e), **info)
    info["correct_verdict"] = str(correct.verdict)
    info["correct_output_excerpt"] = correct.output[:EXCERPT]
    if correct.verdict is not Verdict.OK:
        return judgement("correct_failed", f"{correct.reason}; stderr: {correct.stderr[-1000:]}",
                         **info)
    runs = 0
    for _ in range(max(1, limits.runs)):
        runs += 1
        try:
            wrong = _run(solutions.wrong, data, limits, cache_dir, sandbox)
        except CompileError as e:
            return judgement("wrong_compile_error", str(e), runs=runs, **info)
        info["wrong_verdict"] = str(wrong.verdict)
        info["wrong_output_excerpt"] = wrong.output[:EXCERPT]
        if wrong.verdict is Verdict.ERROR:
            return judgement("judge_error", f"wrong solution: {wrong.reason}", runs=runs, **info)
        if wrong.inconclusive:
            return judgement("wrong_inconclusive", f"{wrong.reason}; again when run alone",
                             runs=runs, **info)
        if wrong.verdict is not Verdict.OK:
            return judgement(_WRONG_FAIL[wrong.verdict], str(wrong.reason), runs=runs, **info)
        diff = first_difference(correct.output, wrong.output, limits.compare)
        if diff is not None:
            return judgement("differs", diff, runs=runs, **info)
    return judgement("same_output", f"identical outputs in {runs} run(s)", runs=runs, **info)


def judge_generator(
    solutions: Solutions, generator: Program, limits: JudgeLimits, *, cache_dir: Path | None,
    sandbox: Sandbox,
) -> Judgement:
    """Steps 1–4: run the model's program, then judge what it printed."""
    t0 = time.monotonic()
    data = run_generator(generator, limits, cache_dir=cache_dir, sandbox=sandbox)
    if isinstance(data, Judgement):
        data.judge_s = time.monotonic() - t0
        data.sandbox, data.sandbox_unsafe = sandbox.kind, sandbox.unsafe
        return data
    out = judge_input(solutions, data, limits, cache_dir=cache_dir, sandbox=sandbox)
    out.generator_verdict = "OK"
    out.judge_s = time.monotonic() - t0
    return out
