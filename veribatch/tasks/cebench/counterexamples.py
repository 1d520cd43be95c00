"""The three kinds of counterexample of CE-Bench §3.1, computed with our own Z3 code.

All three are program states at the loop head of the normalised program (`program`), over
the variables visible there, each within its C type's range:

* **Inductive** — every raw candidate ψ of the log is re-checked (`z3c.api.check_candidate`);
  a failed consecution check ``ψ ∧ B ∧ S ⇒ ψ'`` gives a (pre, post) pair: the pre-state is
  the counterexample, the post-state is kept in its origin.  Which failures count is the
  *inductive rule* (`INDUCTIVE_RULES`): by default LaM4Inv's own check order (its
  ``SMT_verifier.verify`` checks initiation, then consecution, then the post-condition and
  returns the first failure only), so a candidate whose initiation fails — or cannot be
  decided — yields no inductive counterexample; ``consecution`` takes every consecution
  failure whatever initiation says (this project's rule before; +31 % states on the full
  build).
* **UNSAT_Pre** — with I the final invariant: for every variable, a state maximising and
  one minimising it subject to ``I ∧ ¬P`` (`z3c.api.omt_boundaries`).
* **SAT_Pre** — the same subject to ``I ∧ P ∧ B``.  P is the *precondition reading*
  (`PRECONDITIONS`): ``exact`` (the code before the loop executed symbolically,
  `program.normalise`) or ``lam4inv`` (LaM4Inv's textual reading, `program.lam4inv_precondition`,
  lossy; closer to the paper's counts).

An objective without optimum in the integers (e.g. ``max i`` under ``i >= 0``) is bounded
by the variable's C type, as in the paper's INT_MAX example; such an origin says
``"bounded_by_type": true`` (found by asking the same objective without type ranges).
States are deduplicated per program and category; every origin of a state is kept
(candidate text and log line, or objective), so a reader can trace where it came from.

What cannot be computed (a candidate outside C, a program outside the solver's subset,
an objective the solver gives up on) is a named `Skip`, never an exception.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from veribatch.tasks.cebench.lam4inv import Candidate, Skip
from veribatch.tasks.cebench.program import TYPE_RANGES, LoopProgram

Category = Literal["Inductive", "UNSAT_Pre", "SAT_Pre"]
CATEGORIES: tuple[Category, ...] = ("Inductive", "UNSAT_Pre", "SAT_Pre")
# The paper's names (Figure 2, Tables 4 and 5).
PAPER_NAMES = {"Inductive": "Inductive_CEs", "UNSAT_Pre": "OMT_UNSAT_Pre_CEs", "SAT_Pre": "OMT_SAT_Pre_CEs"}
# §3.2.1: where ``assert(!(state))`` goes.
SITES = {"Inductive": "body_start", "UNSAT_Pre": "body_end", "SAT_Pre": "body_start"}
LOOP = 1  # LaM4Inv programs have one loop (checked by `program.normalise`)
COLLECTION = "cebench-collect-v3"  # bump when collection's rules change (part of the build run id)
# Which consecution failures give Inductive states (see the module docstring).
INDUCTIVE_RULES = ("lam4inv", "consecution")
# How P is written (see the module docstring).
PRECONDITIONS = ("exact", "lam4inv")
# Which variables get max/min objectives: every variable visible at the loop head (`visible`),
# those the final invariant I mentions (`invariant`), or those of the query's formula
# (`formula`: I, P and, for SAT_Pre, B).  §3.1.2 says "each variable" without saying of what.
OMT_VARIABLES = ("visible", "invariant", "formula")


def collection_version(inductive_rule: str = "lam4inv", precondition: str = "exact",
                       omt_variables: str = "visible") -> str:
    """This module's rules and the construction options, the z3c encoding and the z3 build:
    all change the states found, so all are in the build's run id."""
    from veribatch.verifiers.z3c.portfolio import tool_version

    return (f"{COLLECTION}/inductive={inductive_rule}/P={precondition}/vars={omt_variables}/"
            f"{tool_version()}")


def check_options(inductive_rule: str, precondition: str, omt_variables: str = "visible") -> None:
    """Refuse an unknown construction option at plan time, naming the known ones."""
    if inductive_rule not in INDUCTIVE_RULES:
        raise ValueError(f"-o inductive_rule={inductive_rule!r}: known rules are {', '.join(INDUCTIVE_RULES)}")
    if precondition not in PRECONDITIONS:
        raise ValueError(f"-o precondition={precondition!r}: known readings are {', '.join(PRECONDITIONS)}")
    if omt_variables not in OMT_VARIABLES:
        raise ValueError(f"-o omt_variables={omt_variables!r}: known choices are {', '.join(OMT_VARIABLES)}")


_IDENT = re.compile(r"[A-Za-z_]\w*")


def objective_variables(variables: list[str], choice: str, invariant: str, formula: str) -> list[str]:
    """The variables that get max/min objectives under the `omt_variables` choice, in
    declaration order."""
    if choice == "visible":
        return list(variables)
    used = set(_IDENT.findall(invariant if choice == "invariant" else formula))
    return [v for v in variables if v in used]


@dataclass
class Counterexample:
    category: Category
    state: dict[str, int]
    origins: list[dict[str, Any]] = field(default_factory=list)

    def key(self) -> str:
        return json.dumps(self.state, sort_keys=True)


@dataclass
class Collected:
    """Everything collection found for one program."""

    counterexamples: list[Counterexample] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    candidates_checked: int = 0
    candidates_failing_consecution: int = 0
    candidates_failing_initiation: int = 0   # of those failing consecution: initiation failed or undecided
    precondition: str | None = None          # the P the OMT categories used (per `PRECONDITIONS`)
    invariant_check: str | None = None   # our verdict on the final invariant (see `check_invariant`)
    objectives: dict[str, int] = field(default_factory=dict)  # per category: objectives asked


def _add(found: dict[tuple[str, str], Counterexample], ce: Counterexample) -> None:
    """Deduplicate per (category, state), keeping every origin."""
    key = (ce.category, ce.key())
    if key in found:
        found[key].origins.extend(ce.origins)
    else:
        found[key] = ce


def extremal_variables(state: dict[str, int], variables: dict[str, str]) -> list[str]:
    """Variables whose value is a bound of their C type (Table 1's 'extremal values')."""
    out = []
    for name, value in state.items():
        lo, hi = TYPE_RANGES.get(variables.get(name, "int"), (-(2**31), 2**31 - 1))
        if value in (lo, hi):
            out.append(name)
    return out


def extremal_usage(state: dict[str, int], variables: dict[str, str]) -> str:
    """Table 1's row of a state: all / one / multiple / none of its variables extremal."""
    n, k = len(state), len(extremal_variables(state, variables))
    if k == 0:
        return "none"
    if k == n:
        return "all"
    return "one" if k == 1 else "multiple"


RLIMIT = 5_000_000     # Z3 resource units per query (a few seconds of work)
TIMEOUT_MS = 60_000    # a safety net only: the rlimit is what bounds a query


def collect(prog: LoopProgram, candidates: list[Candidate], final_invariant: str | None, *,
            log_file: str, final_line: int | None = None, timeout_ms: int = TIMEOUT_MS,
            rlimit: int = RLIMIT, inductive_rule: str = "lam4inv",
            precondition: str = "exact", omt_variables: str = "visible") -> Collected:
    """The counterexamples of one program (all three categories), under the construction
    options `inductive_rule` and `precondition` (module docstring).

    Every query is bounded by Z3's deterministic resource limit (`rlimit`), not by time, so
    the states found — and which candidates the solver gives up on — are the same on a
    loaded laptop and on an idle cluster node (the wall timeout is only a safety net)."""
    from veribatch.verifiers.z3c.api import CandidateError, Unsupported, check_candidate

    out = Collected()
    found: dict[tuple[str, str], Counterexample] = {}
    text = prog.text()
    for cand in candidates:
        try:
            res = check_candidate(text, LOOP, cand.expr, timeout_ms, rlimit=rlimit)
        except CandidateError as e:
            out.skips.append(Skip(log_file, cand.line, f"candidate {cand.expr!r}: {e}", "candidate_not_c"))
            continue
        except Unsupported as e:
            out.skips.append(Skip(prog.file, None, f"program outside the solver's C subset: {e}",
                                  "program_unsupported"))
            return out  # no candidate of this program can be checked
        except Exception as e:  # noqa: BLE001 - the front end's errors (CParseError...) too
            out.skips.append(Skip(log_file, cand.line, f"candidate {cand.expr!r}: {type(e).__name__}: {e}",
                                  "candidate_error"))
            continue
        out.candidates_checked += 1
        if res.consecution is None:
            out.skips.append(Skip(log_file, cand.line, f"candidate {cand.expr!r}: solver gave up on "
                                  f"consecution ({'; '.join(res.reasons)[:200]})", "candidate_undecided"))
        elif res.consecution is False and res.pre is not None:
            out.candidates_failing_consecution += 1
            if res.initiation is not True:
                out.candidates_failing_initiation += 1
                if inductive_rule == "lam4inv":
                    continue  # LaM4Inv stops at the first failing check: an initiation counterexample
            _add(found, Counterexample("Inductive", dict(res.pre), [
                {"kind": "candidate", "candidate": cand.expr, "log_line": cand.line, "post": res.post}]))
    if final_invariant is None:
        out.skips.append(Skip(log_file, None, "no final invariant in the log (LaM4Inv did not verify "
                              "the program): no OMT counterexamples", "no_final_invariant"))
    elif precondition == "exact" and prog.precondition is None:
        out.skips.append(Skip(prog.file, None, f"{prog.precondition_note}: no OMT counterexamples",
                              "precondition_unexpressible"))
    else:
        if precondition == "lam4inv":
            from veribatch.tasks.cebench.program import lam4inv_precondition

            pre, _ = lam4inv_precondition(prog.original)
        else:
            pre = str(prog.precondition)
        out.precondition = pre
        out.invariant_check = check_invariant(text, final_invariant, timeout_ms, rlimit)
        formulas = {
            "UNSAT_Pre": f"({final_invariant}) && !({pre})",
            "SAT_Pre": f"({final_invariant}) && ({pre}) && ({prog.guard})",
        }
        for category, formula in formulas.items():
            chosen = objective_variables(list(prog.variables), omt_variables, final_invariant, formula)
            for ce in _omt(prog, text, category, formula, out, log_file, final_line, timeout_ms,  # type: ignore[arg-type]
                           rlimit, chosen):
                _add(found, ce)
    out.counterexamples = list(found.values())
    return out


def check_invariant(text: str, invariant: str, timeout_ms: int, rlimit: int = RLIMIT) -> str:
    """Our own verdict on LaM4Inv's final invariant: ``valid`` (initiation, consecution and
    safety hold), ``fails <condition>``, or why it could not be checked.  Informational:
    the OMT states are taken from I whatever this says, as in the paper."""
    from veribatch.verifiers.z3c.api import check_candidate

    try:
        res = check_candidate(text, LOOP, invariant, timeout_ms, rlimit=rlimit)
    except Exception as e:  # noqa: BLE001
        return f"not checked: {type(e).__name__}: {e}"[:300]
    if res.ok:
        return "valid"
    if res.failed:
        return f"fails {res.failed}"
    return "undecided: " + "; ".join(res.reasons)[:200]


def _omt(prog: LoopProgram, text: str, category: Category, formula: str, out: Collected,
         log_file: str, final_line: int | None, timeout_ms: int, rlimit: int,
         chosen: list[str]) -> list[Counterexample]:
    from veribatch.verifiers.z3c.api import omt_boundaries

    try:
        bounded = omt_boundaries(text, LOOP, formula, timeout_ms=timeout_ms, type_ranges=True, rlimit=rlimit)
        free = omt_boundaries(text, LOOP, formula, timeout_ms=timeout_ms, type_ranges=False, rlimit=rlimit)
    except Exception as e:  # noqa: BLE001 - CandidateError, Unsupported, CParseError
        out.skips.append(Skip(log_file, final_line, f"{category}: OMT over {formula!r} failed: "
                              f"{type(e).__name__}: {e}"[:400], "omt_error"))
        return []
    found: list[Counterexample] = []
    asked = 0
    for var in chosen:
        if var not in bounded.low and var not in bounded.high:
            continue  # not visible at the loop head
        for direction, values, states, unbounded_values in (
            ("max", bounded.high, bounded.argmax, free.high),
            ("min", bounded.low, bounded.argmin, free.low),
        ):
            asked += 1
            state = states.get(var)
            if values.get(var) is None or state is None:
                out.skips.append(Skip(prog.file, None, f"{category}: {direction} {var} subject to "
                                      f"{formula!r}: no optimum (unsatisfiable or solver gave up)", "omt_no_optimum"))
                continue
            found.append(Counterexample(category, dict(state), [{
                "kind": "objective", "objective": f"{direction} {var}", "value": values[var],
                "bounded_by_type": unbounded_values.get(var) is None,
                "formula": formula,
            }]))
    out.objectives[category] = asked
    return found
