"""The portfolio's members, each a function from program text to a JSON-able answer.

* ``spacer`` / ``spacer-nla`` / ``spacer-global``: Horn clauses → Spacer (default /
  non-linear arithmetic solver / global guidance).
  "safe" answers carry the re-checked proof and the loop invariants as C text;
  a proof the plain solver cannot re-check (no time left, or a non-linear clause
  it cannot decide) is answered "unknown" with the reason, never "safe".
  An "unsafe" answer is only a hint (no input sequence), never a FALSE verdict.
* ``templates``: polynomial equalities and bounds guessed from concrete runs of the
  clauses, kept when inductive (`templates`), alone or strengthening Spacer's clauses;
  "safe" only with the final interpretation re-checked on the program's clauses.
* ``bmc``: bounded unrolling with iterative deepening.  A satisfiable error path
  is replayed under gcc (`replay`); only a confirmed one is "false".  An
  unrolling that leaves no path behind and no error is a complete proof ("safe").

Each member runs in its own process (see `portfolio`), so a member stuck inside
Z3 is killed from outside; `timeout_ms` is also passed to Z3 itself.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import z3
from pycparser import c_ast

from veribatch.verifiers import cfront
from veribatch.verifiers.z3c import bvcheck, cexpr, chc, replay, slicing, templates
from veribatch.verifiers.z3c.encode import Encoding, encode
from veribatch.verifiers.z3c.memory import never_written_pointer_fields
from veribatch.verifiers.z3c.summaries import summary_terms

ENCODING_VERSION = "7"  # 2: a Spacer proof that does not re-check is UNKNOWN, never TRUE;
# 3: the heap in the Horn encoding (Spacer proves memory programs, NULL dereference ends a run);
# 4: the templates member (polynomial invariants from sampled states);
# 5: recursive summaries, bit-wise and floating-point abstractions, never-written pointer members
# in the Horn encoding (verdicts a run with 4 recorded may differ: resume must not mix them);
# 6: bounds on the program's own products among the templates' guesses (UNKNOWN -> TRUE);
# 7: BMC's bit-wise queries decided over bit-vectors (bvcheck); BMC first on clauses with products
MEMBERS = ("spacer", "spacer-nla", "bmc", "spacer-global", "templates")
# Z3's Python API shares one context per process and is not thread-safe: every
# in-process use of Z3 (encoding, candidate checks, in-process members) holds this.
Z3_LOCK = threading.RLock()
RECHECK_GRACE_S = 0.6
# BMC's share of a depth's time for the bit-vector query (rule 23) before the bit-blasted trace
# search gets 3/4 of the rest: at rest, soft_float_4-3's depth-0 trace takes the bit-blasted
# search 0.4-0.75 s while the exact query stays undecided; with half of a 2 s slice each,
# the search got 0.67 s and the trace came only in round 3 (11.5 s instead of 1.6 s).
# interleave_bits' exact proof and its twin's trace take 0.6-1.3 s within the share.
EXACT_SHARE = 0.35


_PROGRAMS: OrderedDict[tuple[str, str], tuple[c_ast.FileAST, Encoding]] = OrderedDict()
_PARSED: dict[str, c_ast.FileAST] = {}  # ASTs kept across `fresh_context` (pure Python)
_PROGRAMS_MAX = 64


def remember(text: str, data_model: str, ast: c_ast.FileAST, enc: Encoding) -> None:
    """Keep an encoding made elsewhere (the portfolio's up-front check) for `program`."""
    _PROGRAMS[(text, data_model)] = (ast, enc)
    _PROGRAMS.move_to_end((text, data_model))
    while len(_PROGRAMS) > _PROGRAMS_MAX:
        _PROGRAMS.popitem(last=False)


def remember_parsed(text: str, ast: c_ast.FileAST) -> None:
    """Keep a program parsed elsewhere whose Horn encoding failed (BMC-only programs)."""
    if len(_PARSED) >= _PROGRAMS_MAX:
        _PARSED.clear()
    _PARSED[text] = ast


def parsed(text: str) -> c_ast.FileAST:
    """The program's AST, parsed once per process (the C preprocessor is a subprocess)."""
    for (t, _), (ast, _) in _PROGRAMS.items():
        if t == text:
            return ast
    if text not in _PARSED:
        if len(_PARSED) >= _PROGRAMS_MAX:
            _PARSED.clear()
        _PARSED[text] = cfront.parse(text)
    return _PARSED[text]


def program(text: str, data_model: str = "ILP32") -> tuple[c_ast.FileAST, Encoding]:
    """Parse and encode once per text (candidate checks and forked members reuse it)."""
    got = _PROGRAMS.get((text, data_model))
    if got is not None:
        _PROGRAMS.move_to_end((text, data_model))
        return got
    ast = parsed(text)
    enc = encode(ast, mode="chc", data_model=data_model)
    remember(text, data_model, ast, enc)
    return ast, enc


_SLICED: OrderedDict[tuple[str, str], tuple[c_ast.FileAST, Encoding]] = OrderedDict()


def spacer_program(text: str, data_model: str = "ILP32") -> tuple[c_ast.FileAST, Encoding]:
    """The Horn encoding Spacer solves: the program's, sliced to its cone of influence.

    Variables that never reach a branch, call or return (`slicing`) get arbitrary
    values; with none, this is `program`'s encoding.  Candidate checks keep `program`.
    """
    ast, enc = program(text, data_model)
    havoc = slicing.irrelevant_names(ast)
    if not havoc:
        return ast, enc
    got = _SLICED.get((text, data_model))
    if got is None:
        got = (ast, encode(ast, mode="chc", data_model=data_model, havoc=havoc))
        _SLICED[(text, data_model)] = got
        while len(_SLICED) > _PROGRAMS_MAX:
            _SLICED.popitem(last=False)
    return got


_DIV: OrderedDict[tuple[str, str], tuple[c_ast.FileAST, Encoding]] = OrderedDict()


def templates_program(text: str, data_model: str = "ILP32") -> tuple[c_ast.FileAST, Encoding]:
    """The clauses the templates member solves: `spacer_program`'s, but `/` and `%` by a
    variable kept as `div`/`mod`: its concrete runs and Houdini's checks handle those well,
    while the fresh quotient's non-linear definition Spacer needs made them time out
    (training 6321_2, a gcd by `a % b`: proved in 5 s with `mod`, not in 30 s without)."""
    ast, enc = spacer_program(text, data_model)
    if not enc.fresh_divisions:
        return ast, enc
    got = _DIV.get((text, data_model))
    if got is None:
        got = (ast, encode(ast, mode="chc", data_model=data_model,
                           havoc=slicing.irrelevant_names(ast), fresh_division=False))
        _DIV[(text, data_model)] = got
        while len(_DIV) > _PROGRAMS_MAX:
            _DIV.popitem(last=False)
    return got


def fresh_context() -> None:
    """Give this process a new, empty Z3 context, keeping parsed programs.

    Called at the end of the fork server's warm-up (`verifiers.z3c.__main__.warm_up`):
    Spacer's heuristics depend on the history of the context it runs in (the ids of its
    terms), so members forked from a process whose context holds the warm-up's terms
    solve differently from members in a fresh process — measured on InvBench easy,
    ps3-ll_1 is proved by spacer-nla seed 1 in 0.4 s from a fresh context and not in 8 s
    after the warm-up.  In a context holding only this program's encoding, each forked
    member starts from exactly the state a fresh `--member` process had after parsing
    and encoding, without encoding again.
    """
    from veribatch.verifiers.z3c import cexpr

    for (text, _), (ast, _) in _PROGRAMS.items():
        _PARSED[text] = ast
    _PROGRAMS.clear()
    _SLICED.clear()
    _DIV.clear()
    cexpr._expr_encoder.cache_clear()
    z3.z3._main_ctx = None  # the next z3 call makes a new main context


def invariants_from(
    ast: c_ast.FileAST,
    enc: Encoding,
    interps: dict[str, z3.BoolRef],
    *,
    data_model: str = "ILP32",
    timeout_ms: int = 5000,
    deadline: float | None = None,
) -> list[dict[str, Any]]:
    """C invariants per loop label from a validated model, each re-parsed and re-checked.

    A loop whose invariant cannot be written in C (quantifiers, hidden variables)
    or whose C form does not re-check is left out rather than reported wrongly.
    """
    by_label: dict[int, list] = {}
    for p in enc.preds:
        if p.label:
            by_label.setdefault(p.label, []).append(p)
    texts: dict[int, str] = {}
    c_interps = dict(interps)
    for label, preds in sorted(by_label.items()):
        parts: list[str] = []
        try:
            for p in preds:
                parts.append(cexpr.to_c(z3.simplify(interps[p.decl.name()]), p))
            text = parts[0] if len(parts) == 1 else " || ".join(parts)
            trial = dict(c_interps)
            for p in preds:
                trial[p.decl.name()] = cexpr.to_formula(text, p, ast, data_model=data_model)
        except (cexpr.NotExpressible, cexpr.CandidateError):
            continue
        # the C text means what the validated interpretation means: the clauses are the
        # same up to equivalence; else re-check the clauses at this loop's predicates (the
        # others were validated with the same interpretations: the proof's, or an earlier
        # loop's accepted text)
        ok = all(_equivalent(p, c_interps[p.decl.name()], trial[p.decl.name()]) for p in preds)
        if not ok:
            ok, _ = chc.validate(enc, trial, timeout_ms=timeout_ms, deadline=deadline,
                                 changed={p.decl.name() for p in preds})
        if ok is True:
            c_interps = trial
            texts[label] = text
    sites = {s.label: s for s in enc.loop_sites}
    return [
        {"loop": label, "line": sites[label].line, "invariant": _strip_outer(text)}
        for label, text in sorted(texts.items())
    ]


EQUIVALENT_MS = 200  # `_equivalent`: a C text is usually the interpretation rendered back


def _equivalent(p: Any, a: z3.BoolRef, b: z3.BoolRef) -> bool:
    """Whether two bodies of predicate `p` (over `Var(i)`) are shown equivalent in time."""
    args = [z3.FreshConst(p.decl.domain(i), "eq") for i in range(p.decl.arity())]
    s = z3.Solver()
    s.set("timeout", EQUIVALENT_MS)
    s.add(chc.apply_interp(a, args) != chc.apply_interp(b, args))
    return s.check() == z3.unsat


def _strip_outer(text: str) -> str:
    if text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i < len(text) - 1:
                return text
        return text[1:-1]
    return text


def run_spacer(
    text: str,
    timeout_s: float,
    *,
    global_guidance: bool = False,
    nonlinear: bool = False,
    data_model: str = "ILP32",
    seed: int = 0,
    recheck_grace_s: float | None = None,
    on_proof: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Spacer on the program's Horn clauses; "safe" only with a re-checked proof.

    Re-checking the proof and reading invariants may run `recheck_grace_s` past the
    slice (default RECHECK_GRACE_S; the portfolio waits that long for the answer).
    `on_proof` is called as soon as Spacer has a proof, before the re-check: a forked
    member tells the portfolio so, which then extends its slice for the re-check
    (`portfolio.RECHECK_FACTOR`).  A proof whose re-check does not finish is answered
    "unknown" (with "ran out of time" when that is why: a later round may do better).
    """
    ast, enc = spacer_program(text, data_model)
    grace = RECHECK_GRACE_S if recheck_grace_s is None else recheck_grace_s
    t0 = time.monotonic()
    deadline = t0 + timeout_s + grace
    ans = chc.solve(enc, timeout_ms=int(timeout_s * 1000), global_guidance=global_guidance,
                    nonlinear=nonlinear, seed=seed)
    if ans.status == "unsafe" and enc.over_approximate:
        # maybe spurious (`bitabs`, floats): BMC keeps its own schedule (`portfolio`)
        return {"answer": "unsafe", "over_approximate": True}
    if ans.status != "safe":
        return {"answer": ans.status, "reason": ans.reason}
    assert ans.interps is not None
    if on_proof is not None:
        on_proof()
    interps: dict[str, z3.BoolRef] = {}
    for name, body in ans.interps.items():
        qf = chc.eliminate_quantifiers(body, timeout_ms=500)
        interps[name] = qf if qf is not None else body
    t1 = time.monotonic()
    ok, why = chc.validate(enc, interps, timeout_ms=10_000, deadline=deadline)
    t2 = time.monotonic()
    timing = {"solve_s": round(t1 - t0, 3), "recheck_s": round(t2 - t1, 3)}
    if ok is False:
        return {"answer": "unknown", "reason": f"Spacer's proof did not re-check: {why}",
                "timing": timing}
    if ok is None:
        return {"answer": "unknown", "unchecked_proof": True, "timing": timing,
                "reason": f"Spacer found a proof that could not be re-checked ({why})"}
    invs = invariants_from(ast, enc, interps, data_model=data_model, timeout_ms=2000,
                           deadline=deadline)
    timing["invariants_s"] = round(time.monotonic() - t2, 3)
    out: dict[str, Any] = {"answer": "safe", "proof": "spacer", "proof_checked": True,
                           "invariants": invs, "timing": timing}
    if enc.heap:
        wild = never_written_pointer_fields(ast)
        out["assumes"] = HEAP_ASSUMPTION + (WILD_ASSUMPTION.format(", ".join(sorted(wild))) if wild else "")
        out["invariants_smt"] = smt_invariants(enc, interps, {i["loop"] for i in invs})
    if any(p.function for p in enc.preds):  # recursive functions' summaries: no loop invariants
        out["summaries"] = summary_terms(enc.preds, interps)
    return out


WILD_ASSUMPTION = (
    "; pointer members the program never writes ({}) hold NULL or an indeterminate value, "
    "and a dereference of the latter (undefined behaviour) ends the execution"
)
HEAP_ASSUMPTION = (
    "memory model of unreach-call (as UAutomizer's): a NULL dereference ends the execution; "
    "other undefined accesses (freed, dead, out of bounds, double free) are not checked and "
    "act on the model's per-object cells; memory safety itself is not proved"
)


def smt_invariants(enc: Encoding, interps: dict[str, z3.BoolRef], in_c: set[int]) -> list[dict[str, Any]]:
    """The re-checked invariants C cannot state (over the heap's arrays), as SMT-LIB terms.

    Each predicate's body over its arguments, named by the C variables (`name#k` for a
    shadowing one) and the memory model's ``$mem`` (integer contents), ``$pmem``
    (pointer members), ``$size`` (object sizes, 0: not allocated) and ``$next`` (the
    next object's base); a pointer is ``(ptr base offset)``.
    """
    sites = {s.label: s for s in enc.loop_sites}
    out = []
    for p in enc.preds:
        if not p.label or p.label in in_c:
            continue
        args = [z3.Const(v.uid, p.decl.domain(i)) for i, v in enumerate(p.sig)]
        body = z3.simplify(chc.apply_interp(interps[p.decl.name()], args))
        out.append({"loop": p.label, "line": sites[p.label].line, "predicate": p.decl.name(),
                    "smt": body.sexpr()})
    return out


def run_templates(
    text: str,
    timeout_s: float,
    *,
    data_model: str = "ILP32",
    seed: int = 0,
    recheck_grace_s: float | None = None,
    on_proof: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Template invariants (`templates.prove`) on the clauses Spacer solves; "safe" only when
    their conjunction (with Spacer's, if it needed Spacer) re-checks on those clauses."""
    ast, enc = templates_program(text, data_model)
    grace = RECHECK_GRACE_S if recheck_grace_s is None else recheck_grace_s
    deadline = time.monotonic() + timeout_s
    t0 = time.monotonic()
    proof, why = templates.prove(enc, deadline=deadline, seed=seed, recheck_s=grace,
                                 on_proof=on_proof)
    t1 = time.monotonic()
    if proof is None:
        return {"answer": "unknown", "reason": why}
    invs = invariants_from(ast, enc, proof.interps, data_model=data_model, timeout_ms=2000,
                           deadline=max(deadline, time.monotonic()) + grace)
    out: dict[str, Any] = {"answer": "safe", "proof": proof.how, "proof_checked": True,
                           "invariants": invs,
                           "timing": {"prove_s": round(t1 - t0, 3),
                                      "invariants_s": round(time.monotonic() - t1, 3)}}
    if any(p.function for p in enc.preds):  # recursive functions' summaries: no loop invariants
        out["summaries"] = summary_terms(enc.preds, proof.interps)
    return out


def run_bmc(
    text: str, timeout_s: float, *, data_model: str = "ILP32", start_depth: int = 0
) -> dict[str, Any]:
    """`_run_bmc`; an unrolling nested deeper than Python's stack (deep recursion
    inlined) is an UNKNOWN naming it, never a crash or a verdict."""
    try:
        return _run_bmc(text, timeout_s, data_model=data_model, start_depth=start_depth)
    except (RecursionError, ctypes.ArgumentError) as exc:
        if not isinstance(exc, RecursionError) and "RecursionError" not in str(exc):
            raise
        return {"answer": "unknown",
                "reason": "unrolling nested too deeply for the encoder (deep recursion inlined)"}


def _run_bmc(
    text: str, timeout_s: float, *, data_model: str = "ILP32", start_depth: int = 0
) -> dict[str, Any]:
    """Iterative deepening from `start_depth` (a later slice continues where one stopped).

    Unrolling a loop `depth` times keeps every path that leaves it earlier, so a
    deeper bound covers all shallower ones.  Answers that are not a decision
    carry ``next_depth`` for the next slice.
    """
    ast = parsed(text)
    deadline = time.monotonic() + timeout_s
    depth = start_depth
    last_reason = "timeout: no error path within the bound"

    def stopped(where: str) -> dict[str, Any]:
        # A trace gcc rejected on the way is said wherever the deadline fell (encoding, the
        # search, the solver): which step it hits is timing, the rejected trace is a finding.
        unconfirmed = last_reason.startswith("timeout; ")
        return {"answer": "unknown", "next_depth": depth,
                "reason": f"{where}; {last_reason.removeprefix('timeout; ')}" if unconfirmed else where}

    while time.monotonic() < deadline:
        try:
            enc = encode(
                ast, mode="unroll", depth=depth, data_model=data_model,
                should_stop=lambda: time.monotonic() > deadline,
            )
        except TimeoutError:
            return stopped(f"timeout encoding depth {depth}")
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            return stopped(f"timeout at depth {depth}")
        errors_unsat = not enc.errors
        exact = enc.bit_level and enc.nd_kind is None  # rule 23: the query over bit-vectors
        if enc.errors and exact:
            found = _exact_bits(enc, list(_guards(enc)), time.monotonic() + left_ms * EXACT_SHARE * 1e-3)
            if found is True:
                errors_unsat = True
            elif found is not None:
                values, line = found
                rep = replay.replay(ast, values, data_model=data_model)
                if rep.confirmed:
                    return _replayed_false(values, line, depth, rep, search="bit-vectors")
                last_reason = f"timeout; unconfirmed counterexample at depth {depth}: {rep.detail}"
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                return stopped(f"timeout at depth {depth}")
        if not errors_unsat and enc.errors and (enc.bit_level or enc.nd_kind is not None):
            # bitwise operators or floating point: the default solver rarely decides
            # these queries in a slice, so the search gets 3/4 of what is left; each
            # trace gcc rejects is blocked and the search goes on
            for values, line in _bit_blasted_traces(enc, time.monotonic() + left_ms * 0.75e-3):
                rep = replay.replay(ast, values, data_model=data_model)
                if rep.confirmed:
                    return _replayed_false(values, line, depth, rep, search="bit-blast")
                last_reason = f"timeout; unconfirmed counterexample at depth {depth}: {rep.detail}"
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                return stopped(f"timeout at depth {depth}")
        if enc.errors and not errors_unsat:
            s = z3.Solver()
            s.add(*enc.definitions)
            s.set("timeout", left_ms)
            s.add(z3.Or(*[e.guard for e in enc.errors]))
            r = s.check()
            if r == z3.sat:
                m = s.model()
                path = next(
                    e for e in enc.errors if z3.is_true(m.eval(e.guard, model_completion=True))
                )
                n = m.eval(path.nd, model_completion=True).as_long()
                values = [_input(m, enc, i) for i in range(n)]
                rep = replay.replay(ast, values, data_model=data_model)
                if rep.confirmed:
                    return _replayed_false(values, path.line, depth, rep)
                last_reason = f"timeout; unconfirmed counterexample at depth {depth}: {rep.detail}"
            elif r == z3.unknown:
                why = s.reason_unknown()
                if why in ("timeout", "canceled"):  # a trace gcc rejected earlier stays said
                    return stopped(f"BMC at depth {depth}: {why}")
                return {"answer": "unknown", "reason": f"BMC at depth {depth}: {why}",
                        "next_depth": depth}
            else:
                errors_unsat = True
        # No error within the bound and no execution longer than the bound: a proof.
        if errors_unsat and (not enc.cut or _cut_infeasible(enc, deadline, exact=exact)):
            return {"answer": "safe", "proof": "complete-unrolling", "invariants": []}
        depth = depth * 2 + 1
    return {"answer": "unknown", "reason": last_reason, "next_depth": depth}


def _replayed_false(values: list[int], line: int, depth: int, rep: replay.Replay,
                    search: str | None = None) -> dict[str, Any]:
    """BMC's FALSE answer: only ever built from a trace the replay confirmed (rule 4);
    `search` names the bit-level search that found it, if one did."""
    cex: dict[str, Any] = {"inputs": values, "error_line": line, "depth": depth,
                           "replay": rep.detail, "replay_sandbox": rep.sandbox}
    if search is not None:
        cex["search"] = search
    return {"answer": "false", "counterexample": cex}


def _bit_blasted_traces(enc: Encoding, deadline: float) -> Iterator[tuple[list[int], int]]:
    """Error paths' inputs found by bit-blasting the query (counterexamples only).

    Bitwise operators (Boolean bits summed into integers) and IEEE arithmetic defeat
    z3's default solver on mixed integer/float queries but not a SAT solver:
    ``nla2bv`` turns the bounded integers into bit-vectors (every input has its
    type's range), ``fpa2bv`` the floats.  ``nla2bv``'s "unsat" is not trusted (an
    under-approximation where bounds are missing), so only satisfying models are
    used, each a candidate trace that `replay` must still confirm; each trace handed
    out is blocked before the next search, and the search assumes no undefined
    behaviour on the trace (`Encoding.no_ub`, collected where bitwise operators
    are), which the replay would reject.  Inputs
    read at a non-constant position (the tactics take no uninterpreted function): no
    search.
    """
    # simplified first, so every input read has its constant position (ND(0 + 1) → ND(1))
    guards = [z3.simplify(e.guard) for e in enc.errors]
    query = z3.And(*[z3.simplify(d) for d in (*enc.definitions, *enc.no_ub)], z3.Or(*guards))
    seqs = {"nd": enc.nd_func}
    if enc.nd_kind is not None:
        seqs["kind"] = enc.nd_kind
        seqs.update({f"bits{w}": f for w, f in enc.nd_bits.items()})
    reads: dict[tuple[str, int], z3.ExprRef] = {}
    for e in chc.subterms(query):
        if z3.is_app(e):
            name = next((n for n, f in seqs.items() if e.decl().eq(f)), None)
            if name is not None:
                if not z3.is_int_value(e.arg(0)):
                    return
                reads[name, e.arg(0).as_long()] = e
    consts = {key: z3.Const(f"{key[0]}!{key[1]}", app.sort()) for key, app in reads.items()}
    subs = [(app, consts[key]) for key, app in reads.items()]

    def sub(e: z3.ExprRef) -> z3.ExprRef:
        return z3.substitute(e, *subs) if subs else e

    prep = ["simplify", "propagate-values", "solve-eqs"]
    solver = z3.OrElse(
        z3.Then(*prep, "purify-arith", "nla2bv", "bit-blast", "sat"),
        z3.Then(*prep, "fpa2bv", "simplify", "bit-blast", "smt"),
    ).solver()
    solver.add(sub(query))
    while (left_ms := int((deadline - time.monotonic()) * 1000)) > 100:
        solver.set("timeout", left_ms)
        if solver.check() != z3.sat:
            return
        m = solver.model()

        def value(key: tuple[str, int], m: z3.ModelRef = m) -> int:
            c = consts.get(key)
            return m.eval(c, model_completion=True).as_long() if c is not None else 0

        found = None
        for path, guard in zip(enc.errors, guards, strict=True):
            if z3.is_true(m.eval(sub(guard), model_completion=True)):
                n = m.eval(sub(z3.simplify(path.nd)), model_completion=True)
                if z3.is_int_value(n):
                    found = ([value((f"bits{value(('kind', i))}", i))
                              if f"bits{value(('kind', i))}" in seqs else value(("nd", i))
                              for i in range(n.as_long())], path.line)
                break
        if found is None:
            return
        yield found
        solver.add(z3.Or([c != m.eval(c, model_completion=True) for c in consts.values()]
                         or [z3.BoolVal(False)]))


def _input(m: z3.ModelRef, enc: Encoding, i: int) -> int:
    """Input i of a BMC model: an integer, or a float's bits (`floats.float_nondet`)."""
    idx = z3.IntVal(i)
    if enc.nd_kind is not None:
        kind = m.eval(enc.nd_kind(idx), model_completion=True).as_long()
        if kind in enc.nd_bits:
            return m.eval(enc.nd_bits[kind](idx), model_completion=True).as_long()
    return m.eval(enc.nd_func(idx), model_completion=True).as_long()


def _guards(enc: Encoding) -> Iterator[tuple[z3.BoolRef, int]]:
    for e in enc.errors:
        yield e.guard, e.line


def _exact_bits(
    enc: Encoding, guards: list[tuple[z3.BoolRef, int]], deadline: float
) -> bool | tuple[list[int], int] | None:
    """Rule 23: is some guard satisfiable with the unrolling's definitions, decided over
    bit-vectors (`bvcheck`)?  True: none is (as the integer solver's "unsat"); a model
    (searched first with no undefined behaviour on the path, `Encoding.no_ub`, as gcc's
    replay requires): the inputs it reads in index order and the guard's line, a
    candidate trace rule 4 must confirm; None: no rewrite, undecided in time, or
    satisfiable only with undefined behaviour."""
    if int((deadline - time.monotonic()) * 1000) <= 0:
        return None
    terms = [*enc.definitions, *(g for g, _ in guards), *enc.no_ub]
    rw = bvcheck.translate(terms, enc.nd_func, enc.joins, enc.nd_ranges)
    if rw is None:
        return None
    nd, ng = len(enc.definitions), len(guards)
    defs, gs, no_ub = rw.terms[:nd], rw.terms[nd:nd + ng], rw.terms[nd + ng:]
    s = z3.SolverFor("QF_BV")
    s.add(*defs, *rw.ranges(), z3.Or(*gs))
    for extra in (no_ub, []) if no_ub else ([],):
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            return None
        s.set("timeout", left_ms)
        r = s.check(*extra)
        if r == z3.unsat and not extra:
            return True
        if r == z3.sat:
            m = s.model()
            line = next(ln for g, (_, ln) in zip(gs, guards, strict=True)
                        if z3.is_true(m.eval(g, model_completion=True)))
            n = max(rw.nd, default=-1) + 1
            return [rw.input_value(m, i) for i in range(n)], line
        if r == z3.unknown:
            return None
    return None


def _cut_infeasible(enc: Encoding, deadline: float, *, exact: bool = False) -> bool:
    if exact:  # rule 23: decided over bit-vectors where the rewrite applies
        found = _exact_bits(enc, [(g, 0) for g in enc.cut_guards], deadline)
        if found is not None:
            return found is True
    s = z3.Solver()
    s.set("timeout", max(1, int((deadline - time.monotonic()) * 1000)))
    s.add(*enc.definitions)
    s.add(z3.Or(*enc.cut_guards))
    return s.check() == z3.unsat


def run_member(
    member: str,
    text: str,
    timeout_s: float,
    data_model: str = "ILP32",
    bmc_depth: int = 0,
    seed: int = 0,
    recheck_grace_s: float | None = None,
    on_proof: Callable[[], None] | None = None,
) -> dict[str, Any]:
    if member == "spacer":
        return run_spacer(text, timeout_s, data_model=data_model, seed=seed,
                          recheck_grace_s=recheck_grace_s, on_proof=on_proof)
    if member == "spacer-nla":
        return run_spacer(text, timeout_s, nonlinear=True, data_model=data_model, seed=seed,
                          recheck_grace_s=recheck_grace_s, on_proof=on_proof)
    if member == "spacer-global":
        return run_spacer(text, timeout_s, global_guidance=True, data_model=data_model, seed=seed,
                          recheck_grace_s=recheck_grace_s, on_proof=on_proof)
    if member == "templates":
        return run_templates(text, timeout_s, data_model=data_model, seed=seed,
                             recheck_grace_s=recheck_grace_s, on_proof=on_proof)
    if member == "bmc":
        return run_bmc(text, timeout_s, data_model=data_model, start_depth=bmc_depth)
    raise ValueError(f"unknown portfolio member {member!r}; known: {', '.join(MEMBERS)}")
