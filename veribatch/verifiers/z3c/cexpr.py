"""C boolean expressions over a loop head's variables ⇄ z3 formulas.

Both directions are needed: a candidate invariant (C text from a model or from
the dataset) becomes a predicate interpretation by evaluating it with the
verifier's own C semantics; an invariant Spacer found becomes C text for
InvBench.  Interpretations are z3 formulas over `Var(i)`, i = position of the
variable in the predicate's signature, like the models Spacer returns.
"""

from __future__ import annotations

from functools import lru_cache

import z3
from pycparser import c_ast

from veribatch.verifiers import cfront
from veribatch.verifiers.z3c.encode import Encoder, Pred, State, Unsupported, _is_simple


class CandidateError(ValueError):
    """A candidate expression that is not a side-effect-free C expression over visible variables."""


def _visible_vars(pred: Pred) -> dict[str, int]:
    """C name → signature index of the variables nameable at the loop head."""
    index = {v.uid: i for i, v in enumerate(pred.sig)}
    return {name: index[uid] for name, uid in pred.visible.items() if uid in index}


def to_formula(
    expr: str, pred: Pred, ast: c_ast.FileAST, *, data_model: str = "ILP32"
) -> z3.BoolRef:
    """The C expression `expr`, evaluated at `pred`'s loop head, as a formula over Var(i)."""
    try:
        node = cfront.parse_expression(expr)
    except cfront.CParseError as exc:
        raise CandidateError(f"candidate does not parse as a C expression: {exc}") from exc
    if not _is_simple(node):
        raise CandidateError(
            f"candidate {expr!r} has side effects (calls, assignments or ++/--)"
        )
    sorts = [pred.decl.domain(i) for i in range(len(pred.sig))]
    enc = _expr_encoder(ast, data_model, any(v.uid == "$size" for v in pred.sig))
    consts = [z3.Const(f"__s{i}", sorts[i]) for i in range(len(pred.sig))]
    visible = _visible_vars(pred)
    enc.frames = [[{name: pred.sig[i] for name, i in visible.items()}]]
    state = State((), (), {v.uid: consts[i] for i, v in enumerate(pred.sig)}, z3.IntVal(0))
    try:
        s, val = enc.eval(state, node)
    except Unsupported as exc:
        raise CandidateError(f"candidate {expr!r}: {exc.construct}") from exc
    if s is None:
        raise CandidateError(f"candidate {expr!r} has no value")
    f = z3.And(*s.cond, val.as_bool()) if s.cond else val.as_bool()
    pairs = [(c, z3.Var(i, sorts[i])) for i, c in enumerate(consts)]
    return z3.substitute(f, *pairs) if pairs else f


@lru_cache(maxsize=64)
def _expr_encoder(ast: c_ast.FileAST, data_model: str, heap: bool = False) -> Encoder:
    """One evaluator per program (building one scans the whole AST); with `heap`, a candidate
    may read memory (`p->f`, `*p`) from the heap in the loop head's signature."""
    enc = Encoder(ast, mode="chc", data_model=data_model, heap=heap)
    enc.fresh_division = False  # an interpretation has no clause to carry q, r's definitions
    enc.fresh_bitwise = False  # nor those of `x & y` (`bitabs.and_facts`)
    enc.abstract_floats = False  # nor any opaque floating-point value
    for ext in ast.ext:  # typedefs used by casts in candidates
        if isinstance(ext, c_ast.Typedef):
            enc.typedefs[ext.name] = ext.type
    return enc


class NotExpressible(ValueError):
    pass


def to_c(body: z3.ExprRef, pred: Pred) -> str:
    """C text of an interpretation over Var(i); raises `NotExpressible`."""
    names: dict[int, str] = {}
    for name, i in _visible_vars(pred).items():
        names[i] = name
    return _print(body, names)


def _num(v: int) -> str:
    lit = f"{abs(v)}" + ("LL" if abs(v) > 2147483647 else "")
    return f"(-{lit})" if v < 0 else lit


def _negated(e: z3.ExprRef, names: dict[int, str]) -> str | None:
    """For ``-k`` or ``(-1) * x`` (how z3 writes subtraction) the text of k or x, else None."""
    if z3.is_int_value(e) and e.as_long() < 0:
        return _num(-e.as_long())
    if z3.is_app(e) and e.decl().kind() == z3.Z3_OP_MUL and len(e.children()) == 2:
        c, x = e.children()
        if z3.is_int_value(c) and c.as_long() == -1:
            return _print(x, names)
        if z3.is_int_value(c) and c.as_long() < 0:
            return f"{_num(-c.as_long())} * {_print(x, names)}"
    return None


def _print(e: z3.ExprRef, names: dict[int, str]) -> str:
    if z3.is_var(e):
        idx = z3.get_var_index(e)
        if idx not in names:
            raise NotExpressible(f"variable {idx} is not visible at the loop head")
        return names[idx]
    if z3.is_true(e):
        return "1"
    if z3.is_false(e):
        return "0"
    if z3.is_int_value(e):
        return _num(e.as_long())
    if z3.is_quantifier(e):
        raise NotExpressible("quantified formula")
    if not z3.is_app(e):
        raise NotExpressible(f"cannot print {e}")
    if e.decl().name() == "ptr" and all(z3.is_int_value(a) and a.as_long() == 0 for a in e.children()):
        return "0"  # the memory model's NULL (`ir.null`)
    k = e.decl().kind()
    args = [_print(a, names) for a in e.children()]

    def join(op: str) -> str:
        return "(" + f" {op} ".join(args) + ")"

    if k == z3.Z3_OP_AND:
        return join("&&") if args else "1"
    if k == z3.Z3_OP_OR:
        return join("||") if args else "0"
    if k == z3.Z3_OP_NOT:
        inner = e.children()[0]
        flipped = {z3.Z3_OP_LE: ">", z3.Z3_OP_LT: ">=", z3.Z3_OP_GE: "<", z3.Z3_OP_GT: "<=",
                   z3.Z3_OP_EQ: "!="}
        ik = inner.decl().kind() if z3.is_app(inner) else None
        if ik in flipped and z3.is_arith(inner.children()[0]):
            a, b = (_print(x, names) for x in inner.children())
            return f"({a} {flipped[ik]} {b})"
        return f"!{args[0]}" if args[0].startswith("(") else f"!({args[0]})"
    if k == z3.Z3_OP_IMPLIES:
        return f"(!{args[0]} || {args[1]})"
    if k == z3.Z3_OP_XOR:
        return f"(!{args[0]} != !{args[1]})"
    binops = {
        z3.Z3_OP_LE: "<=", z3.Z3_OP_LT: "<", z3.Z3_OP_GE: ">=", z3.Z3_OP_GT: ">",
        z3.Z3_OP_EQ: "==",
    }
    if k in binops:
        return f"({args[0]} {binops[k]} {args[1]})"
    if k == z3.Z3_OP_DISTINCT:
        if len(args) != 2:
            raise NotExpressible("distinct with more than two arguments")
        return f"({args[0]} != {args[1]})"
    if k == z3.Z3_OP_ADD:
        out = args[0]
        for child, text in zip(e.children()[1:], args[1:], strict=True):
            neg = _negated(child, names)
            out += f" - {neg}" if neg is not None else f" + {text}"
        return f"({out})"
    if k == z3.Z3_OP_SUB:
        return join("-")
    if k == z3.Z3_OP_MUL:
        return join("*")
    if k == z3.Z3_OP_UMINUS:
        return f"(-{args[0]})"
    if k == z3.Z3_OP_ITE:
        return f"({args[0]} ? {args[1]} : {args[2]})"
    if k in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD):
        d = e.children()[1]
        if not z3.is_int_value(d) or d.as_long() <= 0:
            raise NotExpressible("division by a non-constant")
        m = _num(d.as_long())
        x = args[0]
        euclid_mod = f"((({x} % {m}) + {m}) % {m})"
        if k == z3.Z3_OP_MOD:
            return euclid_mod
        return f"(({x} - {euclid_mod}) / {m})"
    if k == z3.Z3_OP_TO_INT or k == z3.Z3_OP_TO_REAL:
        return args[0]
    raise NotExpressible(f"operator {e.decl().name()}")
