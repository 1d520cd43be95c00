"""Checking a candidate invariant ⟨ψ, loop⟩ clause by clause, and OMT boundary states.

With the Horn clauses of the program at hand, a candidate ψ for loop k is
checked by putting ψ in place of the loop's predicate:

* initiation:  every clause that enters loop k (head ``inv_k``, no ``inv_k`` in the body);
* consecution: every back edge (``inv_k`` in body and head) — a failure gives an
  inductive counterexample (pre-state, post-state);
* safety:      every path from loop k's head to ``reach_error`` that does not pass
  another loop head — a failure gives a state at the head that leads to the error.

States at loop heads are C states: each variable within its type's range (signed
values beyond it exist only after an overflow, which is undefined behaviour).

Which state a satisfiable query's model holds must not depend on what the process solved
before (Z3's choices follow its term ids, which depend on the context's history): a
CE-Bench build resumed after a killed shard, or sharded differently, would otherwise collect
other states for the same program.  So every model that becomes a state is taken from a
fresh Z3 context holding only that query (`_fresh_model`, `_omt` entirely in one), and an
OMT state is made canonical (`_canonical_optimum`: the other variables as close to 0 as the
optimum allows), since the term order of the formula itself can follow the history.

Predicates of *other* loops on these paths are replaced by ``true`` (any state):
a passed condition is then still a proof, but a failure may be spurious, and the
result says so (`exact=False`).  Each condition is one small SMT query (notes.md:
0.1–8 ms per clause); the program's encoding is cached per text.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import z3

from veribatch.verifiers.z3c import cexpr, chc, engines
from veribatch.verifiers.z3c.cexpr import CandidateError
from veribatch.verifiers.z3c.encode import Clause, Pred
from veribatch.verifiers.z3c.memory import HEAP_KEYS


@dataclass
class CandidateCheck:
    """Verdicts of the three conditions (None: the solver gave up) and an ICE example."""

    loop: int
    initiation: bool | None
    consecution: bool | None
    safety: bool | None
    failed: str | None = None  # first failing condition: "initiation" | "consecution" | "safety"
    state: dict[str, int] | None = None  # initiation/safety counterexample at the loop head
    pre: dict[str, int] | None = None  # consecution: state before one iteration ...
    post: dict[str, int] | None = None  # ... and after it
    exact: bool = True  # False: other loops were over-approximated (a failure may be spurious)
    time_ms: float = 0.0
    reasons: list[str] = field(default_factory=list)

    @property
    def inductive(self) -> bool:
        return self.initiation is True and self.consecution is True

    @property
    def ok(self) -> bool:
        return self.inductive and self.safety is True

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _loop_preds(enc, label: int) -> list[Pred]:
    preds = chc.loop_preds(enc, label)
    if not preds:
        known = sorted({p.label for p in enc.preds if p.label})
        raise CandidateError(
            f"no loop {label} in the program (loops reachable from main: {known or 'none'})"
        )
    return preds


def _fresh_model(assertions: list[z3.BoolRef], apps: list[z3.BoolRef], timeout_ms: int,
                 rlimit: int) -> tuple[z3.ModelRef, list[z3.BoolRef]] | None:
    """The model of `assertions` found in a fresh context (see the module docstring), with
    `apps` translated into it; None when the fresh solver does not answer sat.  (A lexicographic
    closest-to-0 model, as for OMT states, gave up under the rlimit on modular arithmetic.)"""
    ctx = z3.Context()
    s = z3.Solver(ctx=ctx)
    s.set("timeout", max(1, timeout_ms))
    if rlimit:
        s.set("rlimit", rlimit)
    for a in assertions:
        s.add(a.translate(ctx))
    if s.check() != z3.sat:
        return None
    return s.model(), [a.translate(ctx) for a in apps]


def _state(m: z3.ModelRef, app: z3.BoolRef, pred: Pred) -> dict[str, int]:
    args = app.children()
    out: dict[str, int] = {}
    for name, uid in pred.visible.items():
        idx = next((i for i, v in enumerate(pred.sig) if v.uid == uid), None)
        if idx is None:
            continue
        val = m.eval(args[idx], model_completion=True)
        if z3.is_int_value(val):
            out[name] = val.as_long()
    return out


def check_candidate(
    text: str,
    loop_label: int,
    expr: str,
    timeout_ms: int = 1000,
    *,
    data_model: str = "ILP32",
    rlimit: int = 0,
) -> CandidateCheck:
    """Check ψ = `expr` at loop `loop_label` of program `text` (see module docstring).

    Raises `CandidateError` when ψ is not a side-effect-free C expression over the
    variables visible at the loop head, and `CParseError`/`Unsupported` when the
    program itself is outside the verifier's subset.  Thread-safe (Z3 is used
    under `engines.Z3_LOCK`).  `rlimit` (Z3 resource units per query, 0: none) bounds
    each query by work done instead of by time, so that a result does not depend on
    the machine's load (CE-Bench's reproducible builds).
    """
    with engines.Z3_LOCK:
        return _check_candidate(text, loop_label, expr, timeout_ms, data_model, rlimit)


def _check_candidate(
    text: str,
    loop_label: int,
    expr: str,
    timeout_ms: int,
    data_model: str,
    rlimit: int = 0,
) -> CandidateCheck:
    t0 = time.perf_counter()
    ast, enc = engines.program(text, data_model)
    preds = _loop_preds(enc, loop_label)
    names = {p.decl.name(): p for p in preds}
    preds_by_name = {p.decl.name(): p for p in enc.preds}
    psi = {n: cexpr.to_formula(expr, p, ast, data_model=data_model) for n, p in names.items()}
    result = CandidateCheck(loop_label, None, None, None)
    verdicts: dict[str, bool | None] = {"initiation": True, "consecution": True, "safety": True}
    safety_state: dict[str, int] | None = None
    for c in enc.clauses:
        kind = _kind(c, names)
        if kind is None:
            continue
        s = z3.Solver()
        s.set("timeout", max(1, timeout_ms))
        if rlimit:
            s.set("rlimit", rlimit)
        query: list[z3.BoolRef] = []
        for app in c.body:
            n = app.decl().name()
            if n in names:
                query.append(chc.apply_interp(psi[n], list(app.children())))
            else:
                result.exact = False  # another loop's or join's states: over-approximated
            query.append(_in_ranges(app, preds_by_name.get(n)))
        query.append(c.constraint)
        if c.head is not None:
            query.append(z3.Not(chc.apply_interp(psi[c.head.decl().name()], list(c.head.children()))))
        s.add(*query)
        r = s.check()
        if r == z3.unsat:
            continue
        if r == z3.unknown:
            if verdicts[kind] is True:
                verdicts[kind] = None
            result.reasons.append(f"{kind} (line {c.line}): {s.reason_unknown()}")
            continue
        if verdicts[kind] is False:
            continue
        verdicts[kind] = False
        own_body = [a for a in c.body if a.decl().name() in names]
        head_pred = names[c.head.decl().name()] if kind != "safety" else None
        body_pred = names[own_body[0].decl().name()] if own_body else None
        first = c.head if kind != "safety" else own_body[0]
        apps = [first, own_body[0] if own_body else first]
        fresh = _fresh_model(query, apps, timeout_ms, rlimit)
        m, (head_app, body_app) = fresh if fresh is not None else (s.model(), apps)
        if kind == "initiation":
            result.state = _state(m, head_app, head_pred)
        elif kind == "consecution":
            result.pre = _state(m, body_app, body_pred)
            result.post = _state(m, head_app, head_pred)
        else:
            safety_state = _state(m, head_app, body_pred)
    result.initiation = verdicts["initiation"]
    result.consecution = verdicts["consecution"]
    result.safety = verdicts["safety"]
    for k in ("initiation", "consecution", "safety"):
        if verdicts[k] is False:
            result.failed = k
            break
    if result.failed == "safety":
        result.state = safety_state
    result.time_ms = (time.perf_counter() - t0) * 1000
    return result


def _in_ranges(app: z3.BoolRef, pred: Pred | None) -> z3.BoolRef:
    """States at a loop head are C states: every variable within its type's range."""
    if pred is None:
        return z3.BoolVal(True)
    return z3.And(*[
        z3.And(a >= v.ctype.lo, a <= v.ctype.hi)
        for a, v in zip(app.children(), pred.sig, strict=True) if z3.is_int(a) and v.uid not in HEAP_KEYS
    ])


def _kind(c: Clause, names: dict[str, Pred]) -> str | None:
    in_body = any(a.decl().name() in names for a in c.body)
    in_head = c.head is not None and c.head.decl().name() in names
    if in_head:
        return "consecution" if in_body else "initiation"
    if c.head is None and in_body:
        return "safety"
    return None


@dataclass
class Bounds:
    """Per variable: the minimum and maximum (None: unbounded) and a state attaining each."""

    low: dict[str, int | None]
    high: dict[str, int | None]
    argmin: dict[str, dict[str, int]]
    argmax: dict[str, dict[str, int]]


def omt_boundaries(
    text: str,
    loop_label: int,
    formula: str,
    *,
    timeout_ms: int = 2000,
    type_ranges: bool = True,
    data_model: str = "ILP32",
    rlimit: int = 0,
) -> Bounds:
    """Max and min of every variable visible at loop `loop_label`'s head subject to `formula`.

    `formula` is a C expression over those variables (CE-Bench: I ∧ ¬P, or I ∧ P ∧ B).
    With `type_ranges` each variable is confined to its C type's range, which is
    what a concrete program state can hold.  A direction without optimum (or
    where the solver gave up) is None.  `rlimit` as in `check_candidate`.
    """
    with engines.Z3_LOCK:
        return _omt(text, loop_label, formula, timeout_ms, type_ranges, data_model, rlimit)


def _omt(
    text: str, loop_label: int, formula: str, timeout_ms: int, type_ranges: bool, data_model: str,
    rlimit: int = 0,
) -> Bounds:
    ast, enc = engines.program(text, data_model)
    pred = _loop_preds(enc, loop_label)[0]
    body = cexpr.to_formula(formula, pred, ast, data_model=data_model)
    # one fresh context for this program's objectives: the optimal models it returns do not
    # depend on what the process solved before (module docstring)
    ctx = z3.Context()
    xs = [z3.Int(f"v{i}", ctx) for i in range(len(pred.sig))]
    phi = chc.apply_interp(body, [z3.Int(f"v{i}") for i in range(len(pred.sig))]).translate(ctx)
    visible = {name: next(i for i, v in enumerate(pred.sig) if v.uid == uid)
               for name, uid in pred.visible.items() if any(v.uid == uid for v in pred.sig)}
    low: dict[str, int | None] = {}
    high: dict[str, int | None] = {}
    argmin: dict[str, dict[str, int]] = {}
    argmax: dict[str, dict[str, int]] = {}
    for name, i in visible.items():
        for direction in ("max", "min"):
            opt = z3.Optimize(ctx=ctx)
            opt.set("timeout", max(1, timeout_ms))
            if rlimit:
                opt.set("rlimit", rlimit)
            opt.add(phi)
            if type_ranges:
                for j, v in enumerate(pred.sig):
                    opt.add(xs[j] >= v.ctype.lo, xs[j] <= v.ctype.hi)
            h = opt.maximize(xs[i]) if direction == "max" else opt.minimize(xs[i])
            r = opt.check()
            target, states = (high, argmax) if direction == "max" else (low, argmin)
            if r != z3.sat:
                target[name] = None
                continue
            val = opt.upper(h) if direction == "max" else opt.lower(h)
            if not z3.is_int_value(val):  # ±oo or an epsilon term: unbounded
                target[name] = None
                continue
            target[name] = val.as_long()
            m = _canonical_optimum(ctx, phi, xs, pred, i, val, visible, timeout_ms, rlimit,
                                   type_ranges) or opt.model()
            states[name] = {
                n: m.eval(xs[k], model_completion=True).as_long() for n, k in visible.items()
            }
    return Bounds(low, high, argmin, argmax)


def _closeness_to_zero(x: z3.ArithRef) -> z3.ArithRef:
    """0, 1, -1, 2, -2, … ↦ 0, 1, 2, 3, 4, …: an order on the integers with one value per rank."""
    return z3.If(x > 0, 2 * x - 1, -2 * x)


def _canonical_optimum(ctx: z3.Context, phi: z3.BoolRef, xs: list[z3.ArithRef], pred: Pred, i: int,
                       val: z3.ArithRef, visible: dict[str, int], timeout_ms: int, rlimit: int,
                       type_ranges: bool) -> z3.ModelRef | None:
    """The optimal state with every other visible variable as close to 0 as it can be, in
    declaration order (lexicographically): one state per objective, whatever the solver's
    history or the formula's term order (which Z3's own model choice follows, so the same
    program could give other states after other programs in the same process — a resumed or
    re-sharded CE-Bench build would differ).  None when the solver gives up (the plain
    optimum's model is then used)."""
    opt = z3.Optimize(ctx=ctx)
    opt.set("timeout", max(1, timeout_ms))
    if rlimit:
        opt.set("rlimit", rlimit)
    opt.add(phi, xs[i] == val)
    if type_ranges:
        for j, v in enumerate(pred.sig):
            opt.add(xs[j] >= v.ctype.lo, xs[j] <= v.ctype.hi)
    for k in visible.values():
        if k != i:
            opt.minimize(_closeness_to_zero(xs[k]))
    return opt.model() if opt.check() == z3.sat else None


def omt_bounds(
    text: str, loop_label: int, formula: str, **kwargs: Any
) -> dict[str, tuple[int | None, int | None]]:
    """`{variable: (min, max)}` subject to `formula` at the loop head (None: unbounded)."""
    b = omt_boundaries(text, loop_label, formula, **kwargs)
    return {name: (b.low.get(name), b.high.get(name)) for name in b.low.keys() | b.high.keys()}
