"""Polynomial invariants guessed from the program's own executions, kept only when inductive.

Spacer times out on loops whose updates are polynomial (InvBench's `egcd`, `cohendiv`,
`prod4br`, `ps4`/`ps5`): their invariants are polynomial equalities such as
``b == x*q + y*s``, which its interpolation over linear arithmetic does not find.  The
classic remedy (guess-and-check: Sharma et al., "A Data Driven Approach for Algebraic
Loop Invariants", ESOP 2013; Nguyen et al.'s DIG) is used here on the Horn clauses:

1. **Samples.** The clauses are executed concretely (`reachable_states`): each init clause
   with random small inputs, then each step clause from a known state; one tiny SMT query
   per step.  Every state found is reachable, so any equality false on one of them is no
   invariant.
2. **Candidates.** Per predicate: the null space of the samples' monomials up to degree
   2 or 3 (`equalities`: exact integer elimination, no floating point), the octagon-like
   bounds ``v >= w``, ``v >= c`` and ``v <= c`` true on every sample (`bounds`), and, in a
   later stage, ``x*y <= v`` / ``x*y >= v`` for the products the program itself computes
   (`product_bounds`: a square root's ``guess*guess <= n``).
3. **Houdini.** Candidates that are not inductive (initiation / consecution, each
   conjunct under all the others) are dropped until the rest is (`houdini`).
4. **Proof.** When the inductive conjunction also makes every error clause unsatisfiable,
   `chc.validate` re-checks it clause by clause on the program's clauses: that re-checked
   inductive invariant is the certificate (``proof: "templates"``).  Otherwise Spacer solves
   the clauses strengthened by it (every body predicate application conjoined with its
   invariant: sound because the invariant holds on every reachable state) and the final
   interpretation, Spacer's ∧ the templates', is re-checked on the *original* clauses.

Nothing is trusted that `chc.validate` has not re-checked; a guess that is wrong costs
time, never a verdict.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import z3

from veribatch.verifiers.z3c import chc
from veribatch.verifiers.z3c.encode import Clause, Encoding
from veribatch.verifiers.z3c.summaries import without_summaries

MAX_STATES = 300  # samples kept per predicate
MAX_STEPS = 2000  # concrete clause executions per query
DEEP_RUNS = 4  # long runs after the breadth-first sampling (`reachable_states`),
DEEP_LENGTH = 60  # each at most this many clause executions,
DEEP_STATES = 120  # adding at most this many states per predicate
MAX_GAP = 2  # difference bounds v - w <= c are guessed for |c| up to this (`bounds`)
INIT_RUNS = 20  # input draws per init clause and round
INPUT_RANGES = (3, 10, 40, 300)  # random inputs are drawn from [-R, R] for one of these R
MAX_MONOMIALS = 120
MAX_PRODUCTS = 4  # products of a predicate's arguments bounded by its other arguments (`products`)
MAX_TERMS = 6  # equalities tried first have at most this many monomials (`prove`)
# What `prove` guesses, in turn: the sparse equalities and linear bounds, all equalities,
# then the sparse ones with the bounds on the program's products (last: those are non-linear
# guesses Houdini checks one by one, 0.5-4 s more on the egcd/cohendiv programs the first
# stage proves, and a stage that times out never reaches them)
STAGES: tuple[tuple[int | None, bool], ...] = ((MAX_TERMS, False), (None, False), (MAX_TERMS, True))
STRENGTHENED_SPACER_S = 3.0  # Spacer on the strengthened clauses at most this long (fail fast:
# the member's next slice samples with another seed)
CHECK_MS = 2000  # a candidate whose consecution is undecided in this time is dropped


@dataclass
class Templates:
    """An inductive invariant per predicate (``Var(i)`` = argument i) and what it cost."""

    interps: dict[str, z3.BoolRef]
    candidates: int
    kept: int
    states: int
    equalities: int = 0  # of the kept conjuncts


def _int_value(v: z3.ExprRef) -> int | None:
    return v.as_long() if z3.is_int_value(v) else None


def reachable_states(
    enc: Encoding, *, seed: int = 0, deadline: float | None = None
) -> dict[str, list[tuple[z3.ExprRef, ...]]]:
    """Concrete states of each predicate reached by running the clauses forwards.

    Breadth first from the init clauses, so the states come from many inputs rather than
    one long run.  Inputs (the free variables of a clause) are pulled towards random small
    values; where an input must take another value (an assumption, a range), it does.
    """
    rng = random.Random(seed)
    states: dict[str, list[tuple[z3.ExprRef, ...]]] = {p.decl.name(): [] for p in enc.preds}
    seen: dict[str, set[tuple[str, ...]]] = {n: set() for n in states}
    queue: list[tuple[str, tuple[z3.ExprRef, ...]]] = []
    by_body: dict[str, list[Clause]] = {}
    for c in enc.clauses:
        if c.head is not None and len(c.body) == 1:
            by_body.setdefault(c.body[0].decl().name(), []).append(c)
    steps = 0

    solvers: dict[int, tuple[z3.Solver, list[z3.ArithRef]]] = {}
    ground: dict[int, tuple[_Substitution | None, list[z3.ExprRef]]] = {}

    def run(c: Clause, fixed: list[z3.BoolRef], tries: int) -> None:
        """Execute clause `c` from the state `fixed` pins its body to, `tries` input draws."""
        nonlocal steps
        assert c.head is not None
        if id(c) not in solvers:
            free = {v.get_id(): v for e in (c.constraint, *c.head.children())
                    for v in chc.free_consts(e) if z3.is_int(v)}
            bound = {a.get_id() for app in c.body for a in app.children()}
            s = z3.Solver()
            s.set("timeout", 200)
            s.add(c.constraint)
            solvers[id(c)] = (s, [v for k, v in free.items() if k not in bound])
        s, inputs = solvers[id(c)]
        marks = [z3.Bool(f"vb_pull_{i}") for i in range(len(inputs))]
        for _ in range(tries if inputs else 1):
            steps += 1
            r = rng.choice(INPUT_RANGES)
            s.push()
            s.add(*fixed)
            for mark, v in zip(marks, inputs, strict=True):
                s.add(z3.Implies(mark, v == rng.randint(-r, r)))
            assumed = list(marks)
            res = s.check(*assumed)
            while res == z3.unsat and assumed:
                core = {x.get_id() for x in s.unsat_core()}
                assumed = [a for a in assumed if a.get_id() not in core] if core else []
                res = s.check(*assumed)
            if res == z3.sat:
                m = s.model()
                add(c.head.decl().name(),
                    tuple(m.eval(a, model_completion=True) for a in c.head.children()))
            s.pop()
            if res != z3.sat:
                break

    cap = MAX_STATES

    def add(name: str, head: tuple[z3.ExprRef, ...]) -> None:
        key = tuple(v.sexpr() for v in head)
        if key not in seen[name] and len(states[name]) < cap:
            seen[name].add(key)
            states[name].append(head)
            queue.append((name, head))

    def step_ground(c: Clause, app: z3.BoolRef, values: tuple[z3.ExprRef, ...]) -> bool:
        """A clause that reads no input, executed by substitution (no solver); False when
        it reads one (then `run` draws it)."""
        nonlocal steps
        assert c.head is not None
        if id(c) not in ground:
            args = app.children()
            ground[id(c)] = (_Substitution(args) if all(z3.is_const(a) for a in args) else None,
                             c.head.children())
        sub, head_args = ground[id(c)]
        if sub is None:
            return False
        cond = sub.apply(c.constraint, values)
        if z3.is_false(cond):
            steps += 1
            return True
        if not z3.is_true(cond):
            return False
        head = tuple(sub.apply(a, values) for a in head_args)
        if not all(z3.is_int_value(v) or z3.is_true(v) or z3.is_false(v) for v in head):
            return False
        steps += 1
        add(c.head.decl().name(), head)
        return True

    wanted = {p.decl.name(): _enough(p.decl) for p in enc.preds if p.label}

    def enough() -> bool:
        return all(len(states[n]) >= k for n, k in wanted.items())

    inits = [c for c in enc.clauses if c.head is not None and not c.body]
    i = 0
    while steps < MAX_STEPS and (deadline is None or time.monotonic() < deadline):
        # a round: fresh inputs, then everything they reach (breadth first)
        before = sum(map(len, states.values()))
        for c in inits:
            run(c, [], INIT_RUNS)
        while i < len(queue) and steps < MAX_STEPS:
            if deadline is not None and time.monotonic() > deadline or enough():
                break
            name, values = queue[i]
            i += 1
            for c in by_body.get(name, []):
                app = c.body[0]
                if not step_ground(c, app, values):
                    run(c, [a == v for a, v in zip(app.children(), values, strict=True)], 2)
        if sum(map(len, states.values())) == before or enough():
            break
    # Deep runs: breadth first from many inputs, every loop counter stays small (cohencu's
    # n <= 4 among 168 states), and a polynomial in it of a higher degree vanishes on all of
    # them by chance; each such guess costs Houdini a non-linear query it may not decide.
    # A few long runs from the states with the largest values add the missing depth.
    cap = MAX_STATES + DEEP_STATES
    starts = sorted(queue, key=lambda q: -sum(abs(_int_value(v) or 0) for v in q[1]))
    for name, values in starts[:DEEP_RUNS]:
        for _ in range(DEEP_LENGTH):
            if deadline is not None and time.monotonic() > deadline:
                return states
            before_q = len(queue)
            for c in by_body.get(name, []):
                app = c.body[0]
                if not step_ground(c, app, values):
                    run(c, [a == v for a, v in zip(app.children(), values, strict=True)], 1)
            if len(queue) == before_q:
                break
            name, values = queue[rng.randrange(before_q, len(queue))]
    return states


class _Substitution:
    """`z3.substitute` of fixed constants, through the C API: the Python wrapper checks every
    pair's sorts on each call, which was most of the sampling time (egcd: 2.6 of 7 s)."""

    def __init__(self, consts: Sequence[z3.ExprRef]) -> None:
        self.ctx = consts[0].ctx if consts else z3.main_ctx()
        self.n = len(consts)
        self.src = (z3.Ast * self.n)(*[a.as_ast() for a in consts])

    def apply(self, e: z3.ExprRef, values: Sequence[z3.ExprRef]) -> z3.ExprRef:
        dst = (z3.Ast * self.n)(*[v.as_ast() for v in values])
        got = z3.Z3_substitute(self.ctx.ref(), e.as_ast(), self.n, self.src, dst)
        return z3.simplify(z3.z3._to_expr_ref(got, self.ctx))


def _enough(decl: z3.FuncDeclRef) -> int:
    """States wanted at a predicate: 3 x the monomials of the degree `equalities` can use."""
    n = sum(decl.domain(i) == z3.IntSort() for i in range(decl.arity()))
    for degree in (3, 2, 1):
        monos = math.comb(n + degree, degree)
        if monos <= MAX_MONOMIALS:
            return min(MAX_STATES, 3 * monos)
    return MAX_STATES


def _monomials(n: int, degree: int) -> list[tuple[int, ...]]:
    """Exponent vectors of the monomials over n variables up to `degree` (1 first)."""
    out: list[tuple[int, ...]] = []
    for d in range(degree + 1):
        for combo in itertools.combinations_with_replacement(range(n), d):
            e = [0] * n
            for j in combo:
                e[j] += 1
            out.append(tuple(e))
    return out


def _null_space(rows: list[list[int]], ncols: int) -> list[list[int]]:
    """An integer basis of {c : row·c = 0 for every row} (fraction-free Gauss–Jordan)."""
    pivots: list[tuple[int, list[int]]] = []  # (pivot column, row), rows kept reduced
    for row in rows:
        r = list(row)
        for col, prow in pivots:
            if r[col]:
                a, b = prow[col], r[col]
                r = [a * x - b * y for x, y in zip(r, prow, strict=True)]
        col = next((j for j, x in enumerate(r) if x), None)
        if col is None:
            continue
        g = math.gcd(*r)
        r = [x // g for x in r]
        for k, (pc, prow) in enumerate(pivots):  # keep earlier rows free of the new pivot
            if prow[col]:
                a, b = r[col], prow[col]
                nr = [a * x - b * y for x, y in zip(prow, r, strict=True)]
                g = math.gcd(*nr) or 1
                pivots[k] = (pc, [x // g for x in nr])
        pivots.append((col, r))
        if len(pivots) == ncols:
            return []
    pivot_cols = {c: r for c, r in pivots}
    basis: list[list[int]] = []
    for free in range(ncols):
        if free in pivot_cols:
            continue
        # c[free] = L, c[pc] = -prow[free] * L / prow[pc] for each pivot row
        lcm = 1
        for pc, prow in pivots:
            if prow[free]:
                lcm = lcm * abs(prow[pc]) // math.gcd(lcm, abs(prow[pc]))
        vec = [0] * ncols
        vec[free] = lcm
        for pc, prow in pivots:
            if prow[free]:
                vec[pc] = -prow[free] * lcm // prow[pc]
        g = math.gcd(*vec) or 1
        basis.append([x // g for x in vec])
    return basis


def equalities(samples: Sequence[Sequence[int]], args: Sequence[z3.ArithRef],
               max_terms: int | None = None) -> list[z3.BoolRef]:
    """Polynomial equalities over `args` that every sample satisfies (degree 3, 2 or 1).

    The highest degree whose monomials are fewer than two thirds of the distinct samples
    (fewer samples would let equalities true by chance absorb the real ones).
    """
    distinct = sorted({tuple(s) for s in samples})
    n = len(args)
    if not distinct or n == 0:
        return []
    for degree in (3, 2, 1):
        monos = _monomials(n, degree)
        if len(monos) <= MAX_MONOMIALS and 3 * len(monos) <= 2 * len(distinct):
            break
    else:
        return []
    rows = [[math.prod(v**e for v, e in zip(s, mono, strict=True)) for mono in monos]
            for s in distinct]
    out: list[z3.BoolRef] = []
    for vec in _new_by_degree(rows, monos, n, degree):
        if max_terms is not None and sum(1 for x in vec if x) > max_terms:
            continue
        terms = []
        for coef, mono in zip(vec, monos, strict=True):
            if coef:
                factors = [a for a, e in zip(args, mono, strict=True) for _ in range(e)]
                terms.append(coef * math.prod(factors, start=z3.IntVal(1)) if factors
                             else z3.IntVal(coef))
        out.append(z3.simplify(z3.Sum(*terms) == 0))
    return out


def _new_by_degree(rows: list[list[int]], monos: list[tuple[int, ...]], n: int,
                   degree: int) -> list[list[int]]:
    """A basis of the samples' relations up to `degree`, lowest degree first, without the
    ones the lower degrees generate (a relation p times 1 or a variable).

    At degree 3 the null space also holds v*p and the sums of such products for every
    degree-2 relation p: all implied by p, but each a non-linear query for Houdini and a
    conjunct for `chc.validate` (cohencu: 3.7 s of Houdini for three such cubics).
    """
    index = {m: i for i, m in enumerate(monos)}
    out: list[list[int]] = []
    span: list[tuple[int, list[int]]] = []  # echelon rows of what is already said
    lower: list[list[int]] = []  # the relations of degree < d found so far, all of them
    for d in range(1, degree + 1):
        cols = [i for i, m in enumerate(monos) if sum(m) <= d]
        basis = _null_space([[r[i] for i in cols] for r in rows], len(cols))
        for vec in lower:  # products of the lower relations with 1 and each variable
            for j in range(-1, n):
                prod = [0] * len(monos)
                for i, c in enumerate(vec):
                    if c:
                        m = list(monos[i])
                        if j >= 0:
                            m[j] += 1
                        if sum(m) > d:
                            break
                        prod[index[tuple(m)]] = c
                else:
                    _echelon_add(span, prod)
        lower = []
        for small in basis:
            vec = [0] * len(monos)
            for i, c in zip(cols, small, strict=True):
                vec[i] = c
            lower.append(vec)
            if _echelon_add(span, vec):
                out.append(vec)
    return out


def _echelon_add(span: list[tuple[int, list[int]]], vec: list[int]) -> bool:
    """Add `vec` to the echelon rows `span` (fraction-free); False when already in their span."""
    r = list(vec)
    for col, prow in span:
        if r[col]:
            a, b = prow[col], r[col]
            r = [a * x - b * y for x, y in zip(r, prow, strict=True)]
            g = math.gcd(*r)
            if g > 1:
                r = [x // g for x in r]
    col = next((j for j, x in enumerate(r) if x), None)
    if col is None:
        return False
    span.append((col, r))
    return True


def bounds(samples: Sequence[Sequence[int]], args: Sequence[z3.ArithRef]) -> list[z3.BoolRef]:
    """``v >= w``, ``v >= lo``, ``v <= hi`` (lo, hi the samples' extremes) true on every sample."""
    out: list[z3.BoolRef] = []
    if not samples:
        return out
    cols = list(zip(*samples, strict=True))
    for i, a in enumerate(args):
        out.append(a >= min(cols[i]))
        out.append(a <= max(cols[i]))
    for i, j in itertools.permutations(range(len(args)), 2):
        if all(x >= y for x, y in zip(cols[i], cols[j], strict=True)):
            out.append(args[i] >= args[j])
        # v - w <= c: a loop's exit pins its counter to the bound (cohencu's n <= a + 1,
        # which with n > a at the exit gives n == a + 1; v >= w alone cannot say it); only
        # small c, as loop guards and their steps give (all pairs: 90 more conjuncts for
        # egcd's 10 variables, 2 s more of Houdini)
        gap = max(x - y for x, y in zip(cols[i], cols[j], strict=True))
        if 0 < abs(gap) <= MAX_GAP and len(set(cols[i])) > 1 and len(set(cols[j])) > 1:
            out.append(args[i] - args[j] <= gap)
    return out


def _key(e: z3.ExprRef) -> str:
    """A polynomial equality's left side minus its right, in sum-of-monomials normal form."""
    t = z3.simplify(e.arg(0) - e.arg(1), som=True)
    return " ".join(sorted(x.sexpr() for x in (t.children() if z3.is_add(t) else [t])))


def _without_multiples(eqs: list[z3.BoolRef]) -> list[z3.BoolRef]:
    """`eqs` less the products of another one with a factor.

    The null space at degree 3 holds v*p == 0 beside p == 0 for every degree-2 invariant
    p == 0; Z3's simplifier factors those into ``Or(v == 0, p == 0)``, implied by p == 0,
    which only cost Houdini non-linear queries and `chc.validate` time (cohencu: 4 s).
    """
    plain = set()
    for e in eqs:
        if z3.is_eq(e):
            plain.add(_key(e))
            plain.add(_key(e.arg(1) == e.arg(0)))
    return [e for e in eqs
            if not (z3.is_or(e) and any(z3.is_eq(d) and _key(d) in plain for d in e.children()))]


def candidates(enc: Encoding, states: dict[str, list[tuple[z3.ExprRef, ...]]],
               max_terms: int | None = None, with_products: bool = False,
               ) -> dict[str, list[z3.BoolRef]]:
    """Candidate conjuncts per predicate over its integer arguments (as ``Var(i)``);
    with `max_terms`, only the equalities of at most that many monomials (see `infer`);
    `with_products`: also the bounds on the program's own products (`product_bounds`)."""
    out: dict[str, list[z3.BoolRef]] = {}
    for p in enc.preds:
        name = p.decl.name()
        idx = [i for i in range(p.decl.arity()) if p.decl.domain(i) == z3.IntSort()]
        rows = [[_int_value(st[i]) for i in idx] for st in states.get(name, [])]
        rows = [r for r in rows if None not in r]
        if not rows:
            out[name] = []
            continue
        # constant columns are bounds (v >= c and v <= c), not monomials
        varying = [k for k in range(len(idx)) if len({r[k] for r in rows}) > 1]
        args = [z3.Var(i, z3.IntSort()) for i in idx]
        eqs = equalities([[r[k] for k in varying] for r in rows], [args[k] for k in varying],
                         max_terms=max_terms)
        out[name] = _without_multiples([e for e in eqs if not z3.is_true(e)]) + bounds(rows, args)
        if with_products:
            out[name] += product_bounds(rows, args, [(idx.index(i), idx.index(j))
                                                     for i, j in products(enc, name)
                                                     if i in idx and j in idx])
    return out


def products(enc: Encoding, name: str) -> list[tuple[int, int]]:
    """The products of two of predicate `name`'s arguments that its outgoing clauses compute
    (argument positions, ``i <= j``; ``x*x`` as (i, i)), at most MAX_PRODUCTS.

    Bounds on these are what the program's own products need and equalities cannot say
    (InvBench training 6086_1: ``guess*guess <= n`` while the guess grows): every monomial
    of degree 2 against every variable would be hundreds of non-linear guesses."""
    found: list[tuple[int, int]] = []
    for c in enc.clauses:
        for app in c.body:
            if app.decl().name() != name:
                continue
            pos = {a.get_id(): k for k, a in enumerate(app.children()) if z3.is_const(a)}
            roots: list[z3.ExprRef] = [c.constraint]
            if c.head is not None:
                roots += c.head.children()
            seen: set[int] = set()
            while roots:
                e = roots.pop()
                if e.get_id() in seen or not z3.is_app(e):
                    continue
                seen.add(e.get_id())
                if e.decl().kind() == z3.Z3_OP_MUL:
                    ks = [pos.get(x.get_id()) for x in e.children() if not z3.is_int_value(x)]
                    if len(ks) == 2 and None not in ks:
                        a, b = sorted(k for k in ks if k is not None)
                        if (a, b) not in found:
                            found.append((a, b))
                            if len(found) == MAX_PRODUCTS:
                                return found
                roots.extend(e.children())
    return found


def product_bounds(samples: Sequence[Sequence[int]], args: Sequence[z3.ArithRef],
                   prods: Sequence[tuple[int, int]]) -> list[z3.BoolRef]:
    """``x*y <= v`` and ``x*y >= v`` for each product (positions in `args`) and each other
    varying argument v, true on every sample and not equal on all of them (an equality is
    the null space's business).  Guesses like the others: Houdini keeps the inductive ones,
    and only `chc.validate` makes a proof of them."""
    out: list[z3.BoolRef] = []
    if not samples:
        return out
    cols = list(zip(*samples, strict=True))
    varying = [k for k in range(len(args)) if len(set(cols[k])) > 1]
    for i, j in prods:
        mono = [x * y for x, y in zip(cols[i], cols[j], strict=True)]
        if len(set(mono)) < 2:
            continue
        term = args[i] * args[j]
        for k in varying:
            if k in (i, j):  # x*x <= x and the like: sign facts, no polynomial bound
                continue
            le = all(m <= v for m, v in zip(mono, cols[k], strict=True))
            ge = all(m >= v for m, v in zip(mono, cols[k], strict=True))
            if le and ge:
                continue
            if le:
                out.append(term <= args[k])
            if ge:
                out.append(term >= args[k])
    return out


def houdini(
    enc: Encoding, cands: dict[str, list[z3.BoolRef]], *, deadline: float,
    fixed: dict[str, list[z3.BoolRef]] | None = None, batch: bool = False,
) -> dict[str, list[z3.BoolRef]] | None:
    """The largest inductive subset of `cands` (every conjunct re-established by every
    clause that enters its predicate, under all kept conjuncts of the body); a conjunct
    whose check stays undecided within CHECK_MS once a sweep refutes none is dropped
    too (the result is always inductive: the last sweep decided every check).  None when
    time ran out.  `fixed`: conjuncts already known inductive on their own, assumed at
    the body and never re-checked (they stay inductive whatever is added).  `batch`: one
    query for all conjuncts of a clause first (fast on linear ones; on non-linear ones Z3
    would give up on the whole where it decides each)."""
    fixed = fixed or {}
    kept = {n: list(cs) for n, cs in cands.items()}
    changed = True
    while changed:
        changed = False
        undecided: dict[str, set[int]] = {}  # this sweep's: dropped only after a sweep refuting none
        for c in enc.clauses:
            if c.head is None:
                continue
            head = c.head.decl().name()
            if not kept.get(head):
                continue
            left = int((deadline - time.monotonic()) * 1000)
            if left < 20:
                return None
            hyps = [chc.apply_interp(f, list(app.children())) for app in c.body
                    for f in (*fixed.get(app.decl().name(), []), *kept.get(app.decl().name(), []))]
            hyps.append(c.constraint)
            args = list(c.head.children())
            # A model refuting one conjunct refutes every conjunct false in it: the chance
            # equalities of too few samples go without a query each.
            posts = [chc.apply_interp(f, args) for f in kept[head]]
            dead = [False] * len(posts)
            if batch:  # all at once, dropping what each model refutes, until none is
                while not all(dead):
                    left = int((deadline - time.monotonic()) * 1000)
                    if left < 20:
                        return None
                    s = z3.Solver()
                    s.set("timeout", min(left, CHECK_MS))
                    s.add(*hyps, z3.Not(z3.And(*[p for p, d in zip(posts, dead, strict=True)
                                                 if not d])))
                    r = s.check()
                    if r != z3.sat:
                        break
                    m = s.model()
                    for k2, post in enumerate(posts):
                        if not dead[k2] and not z3.is_true(m.eval(post, model_completion=True)):
                            dead[k2] = True
                if r == z3.unsat or all(dead):
                    if any(dead):
                        changed = True
                    kept[head] = [f for f, d in zip(kept[head], dead, strict=True) if not d]
                    continue
            for k, post in enumerate(posts):
                if dead[k]:
                    continue
                if deadline - time.monotonic() < 0.02:
                    return None
                end = min(deadline, time.monotonic() + CHECK_MS / 1000)
                # (prod4br's equality needs Z3's other arithmetic solver: `chc.check_arith`)
                r, _, m = chc.check_arith([*hyps, z3.Not(post)],
                                          lambda e=end: int((e - time.monotonic()) * 1000),
                                          share=True)
                if m is not None:
                    for k2 in range(k + 1, len(posts)):
                        if not dead[k2] and z3.is_false(m.eval(posts[k2], model_completion=True)):
                            dead[k2] = True
                if r == z3.sat:
                    dead[k] = True
                elif r == z3.unknown:
                    undecided.setdefault(head, set()).add(kept[head][k].get_id())
            if any(dead):
                changed = True
            still = [f for f, d in zip(kept[head], dead, strict=True) if not d]
            kept[head] = still
        if not changed and undecided:
            # Nothing refuted this sweep: a conjunct undecided now (under hypotheses without
            # the refuted chance equalities, which make the true ones hard) is dropped.
            for n, ids in undecided.items():
                kept[n] = [f for f in kept[n] if f.get_id() not in ids]
            changed = True
    return kept


def strengthen(enc: Encoding, interps: dict[str, z3.BoolRef]) -> Encoding:
    """`enc` with every body predicate application conjoined with its (inductive) invariant."""
    clauses = []
    for c in enc.clauses:
        extra = [chc.instantiate(app, interps) for app in c.body]
        clauses.append(Clause(c.body, z3.And(c.constraint, *extra) if extra else c.constraint,
                              c.head, c.line, c.kind))
    return Encoding(enc.mode, enc.preds, clauses, enc.errors, enc.nd_func, enc.loop_sites,
                    enc.cut, enc.cut_guards, enc.definitions, enc.nd_kind, enc.nd_bits)


def infer(enc: Encoding, *, seed: int = 0, deadline: float, max_terms: int | None = None,
          with_products: bool = False,
          states: dict[str, list[tuple[z3.ExprRef, ...]]] | None = None) -> Templates | None:
    """An inductive invariant per predicate from sampled states (None: none found in time)."""
    if states is None:
        states = reachable_states(enc, seed=seed, deadline=deadline)
    cands = candidates(enc, states, max_terms, with_products)
    # Linear conjuncts first, among themselves (linear queries: fast, and a wrong bound
    # among the hypotheses would make every non-linear query harder); what survives is
    # inductive on its own, so it is only assumed while the non-linear ones are checked.
    linear = {n: [f for f in cs if _linear(f)] for n, cs in cands.items()}
    kept_linear = houdini(enc, linear, deadline=deadline, batch=True)
    if kept_linear is None:
        return None
    rest = {n: [f for f in cs if not _linear(f)] for n, cs in cands.items()}
    kept_rest = houdini(enc, rest, deadline=deadline, fixed=kept_linear)
    if kept_rest is None:
        return None
    kept = {n: kept_linear.get(n, []) + kept_rest.get(n, []) for n in cands}
    eqs = sum(1 for fs in kept.values() for f in fs if not z3.is_le(f) and not z3.is_ge(f))
    interps = {p.decl.name(): z3.And(*kept.get(p.decl.name(), [])) for p in enc.preds}
    return Templates(interps, sum(map(len, cands.values())), sum(map(len, kept.values())),
                     sum(map(len, states.values())), eqs)


def conjoin(a: dict[str, z3.BoolRef], b: dict[str, z3.BoolRef]) -> dict[str, z3.BoolRef]:
    return {n: z3.And(a[n], b[n]) if n in b else a[n] for n in a}


_NONLINEAR_OPS = (z3.Z3_OP_MUL, z3.Z3_OP_IDIV, z3.Z3_OP_MOD, z3.Z3_OP_POWER)


def nonlinear(enc: Encoding) -> bool:
    """Whether a clause multiplies, divides or takes the remainder of two non-constant terms
    (the programs whose invariants are polynomial: the portfolio runs templates early).
    Recursive functions' summary clauses are left out: templates never sample them
    (`summaries.without_summaries`), so a product there (a factorial) is no reason."""
    enc = without_summaries(enc)
    roots: list[z3.ExprRef] = [c.constraint for c in enc.clauses]
    roots += [a for c in enc.clauses if c.head is not None for a in c.head.children()]
    return not _linear(*roots)


def _linear(*roots: z3.ExprRef) -> bool:
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        e = stack.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if (z3.is_app(e) and e.decl().kind() in _NONLINEAR_OPS
                and sum(not z3.is_int_value(x) for x in e.children()) >= 2):
            return False
        stack.extend(e.children())
    return True


@dataclass
class Proof:
    """Interpretations re-checked on the clauses by `chc.validate`, and how they were found."""

    interps: dict[str, z3.BoolRef]
    how: str  # "templates" | "templates+spacer"
    templates: Templates


def prove(
    enc: Encoding, *, deadline: float, seed: int = 0, recheck_s: float = 2.0,
    on_proof: Callable[[], None] | None = None,
) -> tuple[Proof | None, str]:
    """A re-checked proof from template invariants (alone, or strengthening Spacer's clauses),
    or None and why not.

    Sampling gets at most 40 % of the time.  The sparse equalities (at most MAX_TERMS
    monomials: the invariants of these loops are, the chance equalities of too few samples
    are not, and they cost Houdini non-linear queries) are tried first, then, if time is
    left, all of them, then the sparse ones with bounds on the program's products (`STAGES`).
    The re-check may run `recheck_s` past `deadline`.
    """
    start = time.monotonic()
    # recursive functions' summaries read as true (`summaries.without_summaries`): the
    # guesses follow the loops alone; the proof, summaries true, is checked on `enc`
    relaxed = without_summaries(enc)
    anything = {p.decl.name(): z3.BoolVal(True) for p in enc.preds if p.function is not None}
    states = reachable_states(relaxed, seed=seed, deadline=start + 0.4 * (deadline - start))
    why = "templates: no candidate"
    tried: set[int] = set()
    for max_terms, with_products in STAGES:
        if deadline - time.monotonic() < 0.05:
            break
        found = infer(relaxed, seed=seed, deadline=deadline, max_terms=max_terms,
                      with_products=with_products, states=states)
        if found is None:
            why = "templates: timeout while checking candidates"
            continue
        if found.candidates in tried:  # the filter left out nothing: the same candidates
            continue
        tried.add(found.candidates)
        if found.kept == 0:
            why = f"templates: none of {found.candidates} candidates is inductive"
            continue
        if anything:
            found = replace(found, interps={**found.interps, **anything})
        proof, why = _prove_with(enc, found, deadline=deadline, seed=seed, recheck_s=recheck_s,
                                 on_proof=on_proof)
        if proof is not None:
            return proof, ""
    return None, why


def _prove_with(
    enc: Encoding, found: Templates, *, deadline: float, seed: int, recheck_s: float,
    on_proof: Callable[[], None] | None,
) -> tuple[Proof | None, str]:
    """The inductive `found` alone, else Spacer on the clauses it strengthens."""
    interps = found.interps
    # Safety first (cheap): only an invariant that excludes the errors is worth the whole
    # re-check, which, past `deadline` by `recheck_s`, may then take what a proof's may
    # (training 3624_2: 38 conjuncts, 7 s to re-check at load 4)
    errors = dataclasses.replace(enc, clauses=[c for c in enc.clauses if c.head is None])
    safe, why = chc.validate(errors, interps, timeout_ms=5000, deadline=deadline)
    if safe is True:
        if on_proof is not None:
            on_proof()
        ok, why = chc.validate(enc, interps, timeout_ms=5000,
                               deadline=max(deadline, time.monotonic()) + recheck_s)
        if ok is True:
            return Proof(interps, "templates", found), ""
    if not found.equalities:
        return None, "templates: no equality is inductive (bounds alone: Spacer's own business)"
    strong = strengthen(enc, interps)
    why = "timeout"
    spacer_end = min(deadline, time.monotonic() + STRENGTHENED_SPACER_S)
    for nl in (False, True):
        left = int((spacer_end - time.monotonic()) * 1000)
        if left < 50:
            break
        ans = chc.solve(strong, timeout_ms=left if nl else left // 2, nonlinear=nl, seed=seed)
        if ans.status != "safe":
            why = f"{ans.status} {ans.reason or ''}".strip()
            continue
        assert ans.interps is not None
        if on_proof is not None:
            on_proof()
        both = conjoin({n: _qf(b) for n, b in ans.interps.items()}, interps)
        ok, why2 = chc.validate(enc, both, timeout_ms=10_000,
                                deadline=max(deadline, time.monotonic()) + recheck_s)
        if ok is True:
            return Proof(both, "templates+spacer", found), ""
        return None, f"templates: the proof did not re-check ({why2})"
    return None, f"templates: Spacer on the strengthened clauses: {why}"


def _qf(body: z3.BoolRef) -> z3.BoolRef:
    qf = chc.eliminate_quantifiers(body, timeout_ms=500)
    return qf if qf is not None else body
