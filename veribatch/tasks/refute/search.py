"""RandSearch: run a random input generator against the wrong solution and a reference
(the model's brute force, or the correct solution for the oracle), until they differ.

The authors' harness (``stress.bat``) loops generator → wrong → brute and stops at the
first input whose outputs differ (``fc /w``) or when the wrong solution exits non-zero;
the found input is then judged like any other (`counterexample.judge_input`).  Its
default limit is 60 s; the paper reports 2 minutes.  Here, also:

- every program is compiled once before the clock starts and runs in the sandbox;
- the wrong solution and the reference run in parallel on each input;
- inputs are counted by content: after `STALL_AFTER` draws in a row without a new input
  (a generator with a tiny input space, or one that ignores randomness) the search stops
  as ``no_new_inputs`` instead of spinning until the deadline.  A repeated input is still
  run, as the harness does: a nondeterministic wrong solution may fail on a later run;
- a generator or brute force that fails `GIVE_UP_AFTER` times in a row ends the search
  with that reason, instead of counting as "different outputs" (the harness compared a
  crashed brute force's partial output);
- `validator` (optional) checks each input before it is run: the reference arms use it
  so that an invalid input never ends their search; model arms leave it off, as the
  harness did, so "the search stopped on an invalid input" stays a measurable failure.

`generator` is a `Program` (model-written, sandboxed) or a callable ``draw(i) -> bytes``
(the toolkit's own trivial generator, run in-process).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from veribatch.tasks.refute.counterexample import JudgeLimits, run_generator, validate
from veribatch.tasks.refute.counterexample import Judgement as _Judgement
from veribatch.verifiers.judge import (
    CompileError,
    Program,
    Sandbox,
    Verdict,
    compile_cpp,
    first_difference,
    run_program,
)

STALL_AFTER = 50
GIVE_UP_AFTER = 5
Draw = Callable[[int], bytes]


@dataclass
class SearchResult:
    reason: str            # found | nothing_found | no_new_inputs | generator_* | brute_* | ...
    found: bytes | None
    iterations: int        # inputs drawn
    distinct: int          # distinct inputs run
    invalid_skipped: int   # inputs the in-loop validator rejected
    elapsed_s: float
    detail: str = ""
    found_by: str = ""     # "differs" or the wrong solution's failing verdict


def _precompile(p: Program, cache_dir: Path | None, sandbox: Sandbox) -> None:
    if p.lang == "cpp":
        compile_cpp(p.source, cache_dir, sandbox=sandbox)


def random_search(
    wrong: Program,
    reference: Program,
    generator: Program | Draw,
    *,
    time_s: float,
    limits: JudgeLimits,
    cache_dir: Path | None,
    sandbox: Sandbox,
    validator: Program | None = None,
    stall_after: int = STALL_AFTER,
) -> SearchResult:
    """Search for an input on which `wrong` and `reference` differ, for at most `time_s`."""
    for prog, fail in ((wrong, "wrong_compile_error"), (reference, "brute_compile_error"),
                       (generator, "generator_compile_error")):
        if isinstance(prog, Program):
            try:
                _precompile(prog, cache_dir, sandbox)
            except CompileError as e:
                return SearchResult(fail, None, 0, 0, 0, 0.0, str(e)[-2000:])
    t0 = time.monotonic()
    seen: set[str] = set()
    iterations = invalid = since_new = gen_fail = brute_fail = 0
    last_fail = ""

    def left() -> float:
        return time_s - (time.monotonic() - t0)

    def result(reason: str, found: bytes | None = None, detail: str = "", by: str = "") -> SearchResult:
        return SearchResult(reason, found, iterations, len(seen), invalid,
                            time.monotonic() - t0, detail, by)

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="randsearch") as pool:
        while left() > 0:
            iterations += 1
            if isinstance(generator, Program):
                out = run_generator(generator, limits, cache_dir=cache_dir, sandbox=sandbox,
                                    time_s=max(0.5, min(limits.generator_s, left())))
                if isinstance(out, _Judgement):
                    if left() <= 0:
                        break
                    gen_fail += 1
                    last_fail = f"{out.reason}: {out.detail}"
                    if gen_fail >= GIVE_UP_AFTER:
                        return result(out.reason, detail=last_fail)
                    continue
                data = out
            else:
                data = generator(iterations)
            gen_fail = 0
            digest = hashlib.sha256(data).hexdigest()
            if digest in seen:
                since_new += 1
                if since_new >= stall_after:
                    return result("no_new_inputs", detail=f"{len(seen)} distinct input(s) in "
                                  f"{iterations} draws")
            else:
                seen.add(digest)
                since_new = 0
            if validator is not None:
                rejected = validate(validator, data, limits, cache_dir=cache_dir,
                                    sandbox=sandbox)
                if rejected is not None:
                    invalid += 1
                    continue
            run_s = min(limits.run_s, max(0.5, left()))
            capped = run_s < limits.run_s
            wall = run_s + (0 if capped else 1)
            fw, fr = (pool.submit(run_program, p, data, time_s=run_s, wall_s=wall,
                                  memory_mb=limits.memory_mb, cache_dir=cache_dir, sandbox=sandbox)
                      for p in (wrong, reference))
            w, r = fw.result(), fr.result()
            if w.verdict is Verdict.ERROR or r.verdict is Verdict.ERROR:
                return result("judge_error", detail=str(w.reason or r.reason))
            if w.verdict is not Verdict.OK:
                if w.verdict is Verdict.TLE and capped:
                    break  # killed by the search deadline, not by its own limit
                return result("found", data, f"wrong solution {w.verdict}: {w.reason}", str(w.verdict))
            if r.verdict is not Verdict.OK:
                if r.verdict is Verdict.TLE and capped:
                    break
                brute_fail += 1
                last_fail = f"{r.verdict}: {r.reason}; {r.stderr[-500:]}"
                if brute_fail >= GIVE_UP_AFTER:
                    return result("brute_timeout" if r.verdict is Verdict.TLE else "brute_crash",
                                  detail=last_fail)
                continue
            brute_fail = 0
            diff = first_difference(r.output, w.output, limits.compare)
            if diff is not None:
                return result("found", data, diff, "differs")
    return result("nothing_found", detail=f"{len(seen)} distinct input(s) in {time_s:g} s"
                  + (f"; last failure {last_fail}" if last_fail else ""))
