"""Solving the Horn clauses of an `Encoding` with Z3 Spacer, and checking its answer.

Spacer's "sat" (the clauses have a model: the error is unreachable) is re-checked
clause by clause with a plain SMT solver (initiation, consecution, safety) under
the model's interpretations.  A violated clause means the proof is wrong and the
answer is dropped; a clause the plain solver cannot decide (non-linear
arithmetic, or no time left) leaves the proof unchecked, which the engines
report as "unknown" — never as a verdict (`engines.run_spacer`).
That catches solver bugs and anything lost in reading the model (notes.md: `model.eval(Inv(x))` silently gives True; the interpretation
must be read with `else_value()` and its `Var(i)` substituted).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import z3

from veribatch.verifiers.z3c.encode import Clause, Encoding, Pred


def subterms(e: z3.ExprRef) -> Iterator[z3.ExprRef]:
    """Each distinct subterm of `e` once (a formula is a DAG: a tree walk can be
    exponential in it)."""
    stack, seen = [e], set()
    while stack:
        x = stack.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        yield x
        stack.extend(x.children())


def free_consts(e: z3.ExprRef) -> list[z3.ExprRef]:
    """Uninterpreted constants of `e` (the universally quantified clause variables)."""
    return [x for x in subterms(e)
            if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED]


def clause_formula(c: Clause) -> z3.BoolRef:
    body = z3.And(*c.body, c.constraint)
    head = c.head if c.head is not None else z3.BoolVal(False)
    rule = z3.Implies(body, head)
    vs = free_consts(rule)
    return z3.ForAll(vs, rule) if vs else rule


@dataclass
class SpacerAnswer:
    status: str  # "safe" | "unsafe" | "unknown"
    interps: dict[str, z3.BoolRef] | None = None  # predicate name → body over Var(i)
    reason: str | None = None


def solve(
    enc: Encoding,
    *,
    timeout_ms: int,
    global_guidance: bool = False,
    nonlinear: bool = False,
    seed: int = 0,
    rlimit: int = 0,
) -> SpacerAnswer:
    """Run Spacer on the clauses of `enc`.

    `nonlinear` selects Z3's newer arithmetic solver inside Spacer
    (``fp.spacer.arith.solver=6``): measured here it proves polynomial-invariant
    programs (cohencu, egcd, geo) in seconds where the default times out.
    `seed` varies Spacer's heuristics between restarts: measured here, the same
    query times out with one seed and is solved in under a second with another.
    `rlimit` (Z3 resource units, 0: none) bounds the run by steps, whatever the load.
    """
    clauses = enc.clauses
    if enc.heap:
        clauses = [c for c in clauses if c.head is not None or not _infeasible(c.constraint)]
    if not any(c.head is None for c in clauses):
        # No path reaches an error at all (`validate` re-checks it on every clause).
        return SpacerAnswer("safe", {p.decl.name(): z3.BoolVal(True) for p in enc.preds})
    s = z3.SolverFor("HORN")
    s.set("timeout", max(1, int(timeout_ms)))
    if global_guidance:
        s.set("fp.spacer.global", True)
    if nonlinear:
        s.set("fp.spacer.arith.solver", 6)
    if seed:
        s.set("fp.spacer.random_seed", seed)
    if rlimit:
        s.set("rlimit", rlimit)
    for c in clauses:
        s.add(clause_formula(c))
    r = s.check()
    if r == z3.sat:
        m = s.model()
        interps: dict[str, z3.BoolRef] = {}
        for p in enc.preds:
            fi = m[p.decl]
            if fi is None:
                interps[p.decl.name()] = z3.BoolVal(False)
            elif isinstance(fi, z3.FuncInterp):
                interps[p.decl.name()] = fi.else_value()
            else:
                interps[p.decl.name()] = fi  # type: ignore[assignment]
        return SpacerAnswer("safe", interps)
    if r == z3.unsat:
        return SpacerAnswer("unsafe")
    why = (s.reason_unknown().strip().splitlines() or ["unknown"])[0]
    return SpacerAnswer("unknown", reason=why[:200])


def _infeasible(constraint: z3.BoolRef, timeout_ms: int = 200) -> bool:
    """An error path infeasible on its own, whatever holds at the loop heads before it.

    Over the heap such paths are common (an assertion `p != NULL` right after `p->f`,
    which a NULL `p` does not survive) and Spacer, given the whole heap-carrying system,
    can time out on them; dropping them is sound (`validate` checks every clause).
    """
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    s.add(constraint)
    return s.check() == z3.unsat


def apply_interp(body: z3.BoolRef, args: list[z3.ExprRef]) -> z3.BoolRef:
    return z3.substitute_vars(body, *args) if args else body


def instantiate(app: z3.BoolRef, interps: dict[str, z3.BoolRef]) -> z3.BoolRef:
    return apply_interp(interps[app.decl().name()], list(app.children()))


def eliminate_quantifiers(e: z3.BoolRef, timeout_ms: int = 2000) -> z3.BoolRef | None:
    """`e` without quantifiers (qe tactic), or None when that fails."""
    if not _has_quantifier(e):
        return e
    g = z3.Goal()
    g.add(e)
    try:
        t = z3.TryFor(z3.Then("qe", "simplify"), timeout_ms)
        r = t(g)
    except z3.Z3Exception:
        return None
    out = r.as_expr()
    return None if _has_quantifier(out) else out


def _has_quantifier(e: z3.ExprRef) -> bool:
    return any(z3.is_quantifier(x) for x in subterms(e))


def validate(
    enc: Encoding,
    interps: dict[str, z3.BoolRef],
    *,
    timeout_ms: int = 5000,
    deadline: float | None = None,
    changed: set[str] | None = None,
) -> tuple[bool | None, str | None]:
    """Check every clause under `interps` with a plain solver.

    Returns (True, None) when all clauses are valid, (False, why) when one is
    violated (the proof is wrong), (None, why) when a clause could not be
    decided (typically non-linear arithmetic the plain solver cannot handle) or
    the `deadline` (a `time.monotonic()` value) passed first.

    `changed` (predicate names): only the clauses reading or defining one of them are
    checked — for an interpretation that differs from one already validated in those
    predicates alone (`engines.invariants_from` trying each loop's C text), the other
    clauses are the same formulas, already shown valid.
    """
    undecided: str | None = None

    def budget() -> int:
        if deadline is None:
            return timeout_ms
        return min(timeout_ms, int((deadline - time.monotonic()) * 1000))

    for i, c in enumerate(enc.clauses):
        if changed is not None and not any(
                app.decl().name() in changed for app in (*c.body, *([c.head] if c.head is not None else []))):
            continue
        if budget() < 20:
            return None, undecided or "re-check ran out of time"
        hyps = [instantiate(app, interps) for app in c.body] + [c.constraint]
        # The head one conjunct at a time: the same validity, but a conjunction of
        # polynomial equalities (`templates`) is decided per conjunct and not as a whole.
        goals = [z3.BoolVal(False)] if c.head is None else _conjuncts(instantiate(c.head, interps))
        flat = [h for x in hyps for h in _conjuncts(x)]
        linear_hyps: list[z3.BoolRef] | None = None
        for goal in goals:
            if budget() < 20:
                return None, undecided or "re-check ran out of time"
            if linear_hyps is None:
                linear_hyps = [h for h in flat if is_linear(h)]
            if len(linear_hyps) < len(flat) and is_linear(goal) and _unsat_quickly(
                    [*linear_hyps, z3.Not(goal)], budget):
                continue  # valid under fewer hypotheses, so under all of them
            r, why, _ = check_arith([*hyps, z3.Not(goal)], budget, share=True)
            if r == z3.sat:
                return False, f"clause {i} ({c.kind}, line {c.line}) is violated"
            if r == z3.unknown and undecided is None:
                undecided = f"clause {i} ({c.kind}, line {c.line}): {why}"
    return (None, undecided) if undecided else (True, None)


def check_arith(
    assertions: list[z3.BoolRef], budget_ms: Callable[[], int], *, share: bool = False
) -> tuple[z3.CheckSatResult, str, z3.ModelRef | None]:
    """`assertions` checked by Z3's default arithmetic solver, then, if undecided, by each
    of its others (`other_arith_solvers`), each in a fresh solver (the arithmetic solver is
    chosen when a solver first checks: setting it later changes nothing) and within what
    `budget_ms()` says is left (with `share`, split evenly between the solvers).  Returns
    the result, the last reason when unknown, and the model when sat.

    Each solver first gets a short probe (`ARITH_PROBE_MS`), then the long turns: measured
    here, one solver often decides in milliseconds a clause the other does not decide in
    seconds (prod4br's consecution: the old solver 0.01 s, the default not in 20 s), and
    without the probes the default's share of the budget was spent waiting (2.6 s of
    prod4br's 3.4 s under load).  A solver that gives up for another reason than its time
    gets no long turn (more time would not change its answer).
    """
    why = "no time left"
    solvers = (None, *other_arith_solvers())
    gave_up: set[int | None] = set()
    turns = [(arith, probe) for arith, probe in zip(solvers, ARITH_PROBE_MS, strict=False)]
    turns += [(arith, None) for arith in solvers]
    for n, (arith, probe) in enumerate(turns):
        if arith in gave_up:
            continue
        left = budget_ms()
        if probe is not None:
            left = min(left, probe)
        elif share:
            left //= len(turns) - n
        if left < 20:
            if probe is not None:
                continue
            break
        s = z3.Solver()
        if arith is not None:
            s.set("smt.arith.solver", arith)
        s.set("timeout", max(1, left))
        s.add(*assertions)
        r = s.check()
        if r == z3.sat:
            return r, "", s.model()
        if r == z3.unsat:
            return r, "", None
        why = s.reason_unknown()
        if why not in ("timeout", "canceled"):
            gave_up.add(arith)
    return z3.unknown, why, None


ARITH_PROBE_MS = (50, 100)  # `check_arith`'s short first try of the default solver, of the other


def other_arith_solvers() -> tuple[int, ...]:
    """Z3's arithmetic solvers other than its default, for a query the default left undecided.

    Measured here (z3 4.15/5.x, default 6): the consecution of prod4br's
    ``q + a*b*p == x*y`` across its `%`/`/` branches is decided by the old solver (2)
    in 0.01 s and by the default not in 20 s; the reverse happens on other queries.
    """
    default = default_arith_solver()
    return tuple(x for x in (6, 2) if x != default)


def default_arith_solver() -> int:
    try:
        return int(z3.get_param("smt.arith.solver"))
    except (z3.Z3Exception, ValueError):
        return 0


LINEAR_FIRST_MS = 300  # `validate`: a linear goal is first tried under the linear hypotheses alone


def _unsat_quickly(assertions: list[z3.BoolRef], budget_ms: Callable[[], int]) -> bool:
    """Whether the default solver shows `assertions` unsatisfiable within LINEAR_FIRST_MS.

    `validate` checks the linear conjuncts of a head (bounds) with the linear hypotheses
    only: dropping hypotheses is sound for unsat, and a template invariant's non-linear
    equalities among the hypotheses cost every such query 0.1-0.3 s (training 3624_2:
    38 conjuncts, 9 s, beyond the re-check's time).
    """
    left = min(LINEAR_FIRST_MS, budget_ms())
    if left < 20:
        return False
    s = z3.Solver()
    s.set("timeout", left)
    s.add(*assertions)
    return s.check() == z3.unsat


_LINEAR = z3.Probe("is-lira")  # linear integer/real arithmetic (Booleans, ite), no arrays
_QUANTIFIED = z3.Probe("has-quantifiers")


def is_linear(*roots: z3.ExprRef) -> bool:
    """No product, quotient or remainder of two non-constant terms, no quantifier, no array.

    By Z3's own probes, one call into C per query: a walk over the terms through the
    Python API cost `validate` more than the linear-first check saved on the quick
    programs (about 40 ms a program, 2,500 calls on 30 quick training programs)."""
    g = z3.Goal()
    g.add(*roots)
    return _LINEAR(g) == 1.0 and _QUANTIFIED(g) == 0.0


def _conjuncts(e: z3.BoolRef) -> list[z3.BoolRef]:
    """The top-level conjuncts of `e` (`e` itself when it is no conjunction)."""
    if z3.is_and(e):
        return [g for x in e.children() for g in _conjuncts(x)]
    return [e]


def loop_preds(enc: Encoding, label: int) -> list[Pred]:
    return [p for p in enc.preds if p.label == label]
