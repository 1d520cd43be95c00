"""The encoding's data: symbolic state, values and their types, Horn clauses, error paths.

The base of the encoder: every construct module (`control`, `expressions`, `memory`,
`floats`, `calls`) and every consumer of an `Encoding` (`chc`, `engines`, `candidate`)
builds on it, and it imports none of them.  So the names several construct modules share
live here — the `Unsupported`/`BmcOnly` outcomes, the pointer type and the `Ptr` datatype
with its NULL — rather than in the module that uses them most.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import z3
from pycparser import c_ast

from veribatch.verifiers import cfront
from veribatch.verifiers.z3c.cint import CType

Mode = Literal["chc", "unroll"]


class Unsupported(Exception):
    """A construct outside the verifier's C subset."""

    def __init__(self, construct: str, node: c_ast.Node | None = None, line: int | None = None):
        if line is None and node is not None and node.coord is not None:
            line = node.coord.line
        self.construct = construct
        self.line = line
        super().__init__(f"{construct} (line {line})" if line else construct)


class BmcOnly(Unsupported):
    """A construct outside the Horn encoding, inside bounded model checking (floats, bit-wise
    operators, recursion): the portfolio then runs BMC alone."""


@dataclass(frozen=True)
class PtrType(CType):
    """A pointer to an integer type (`target` None: `void *`, only as `malloc`'s result)."""

    target: CType | None = None


@dataclass(frozen=True)
class Var:
    uid: str
    cname: str
    ctype: CType
    is_global: bool = False


@dataclass
class Pred:
    """A predicate of the Horn system: a loop head (`label` set), a join point, or a
    recursive function's summary (`function` set: `summaries`)."""

    decl: z3.FuncDeclRef
    sig: list[Var]
    label: int | None
    line: int
    visible: dict[str, str] = field(default_factory=dict)  # C name → uid visible at the head
    function: str | None = None  # a summary: the function whose calls it relates to results


@dataclass
class Clause:
    body: tuple[z3.BoolRef, ...]  # predicate applications
    constraint: z3.BoolRef
    head: z3.BoolRef | None  # None: the clause leads to reach_error
    line: int
    kind: str  # "init" | "step" | "error" | "join" | "summary"


@dataclass
class State:
    preds: tuple[z3.BoolRef, ...]
    cond: tuple[z3.BoolRef, ...]
    env: dict[str, z3.ArithRef]
    nd: z3.ArithRef  # unroll mode: index of the next nondet value

    def assume(self, c: z3.BoolRef) -> State | None:
        if z3.is_false(c):
            return None
        if z3.is_true(c):
            return self
        return State(self.preds, (*self.cond, c), self.env, self.nd)

    def with_env(self, env: dict[str, z3.ArithRef]) -> State:
        return State(self.preds, self.cond, env, self.nd)


# (context, Ptr sort, heap sort, pointer-heap sort): the context itself is kept, so that
# a new context (`engines.fresh_context`) is never mistaken for the old one by a reused id.
_SORTS: list[tuple[z3.Context, z3.DatatypeSortRef, z3.ArraySortRef, z3.ArraySortRef]] = []


def _sorts() -> tuple[z3.Context, z3.DatatypeSortRef, z3.ArraySortRef, z3.ArraySortRef]:
    """`Ptr(base, off)` and the heap's array sorts over it, made once per z3 context."""
    ctx = z3.main_ctx()
    if not _SORTS or _SORTS[0][0] is not ctx:
        dt = z3.Datatype("Ptr")
        dt.declare("ptr", ("base", z3.IntSort()), ("off", z3.IntSort()))
        sort = dt.create()
        _SORTS[:] = [(
            ctx, sort,
            z3.ArraySort(z3.IntSort(), z3.ArraySort(z3.IntSort(), z3.IntSort())),
            z3.ArraySort(z3.IntSort(), z3.ArraySort(z3.IntSort(), sort)),
        )]
    return _SORTS[0]


def ptr_sort() -> z3.DatatypeSortRef:
    """`Ptr(base, off)`: a pointer value (base 0 is NULL)."""
    return _sorts()[1]


def heap_sorts() -> tuple[z3.ArraySortRef, z3.ArraySortRef]:
    """The sorts of ``$mem`` (base → offset → integer) and ``$pmem`` (base → offset → Ptr)."""
    _, _, mem, pmem = _sorts()
    return mem, pmem


def mk_ptr(base: z3.ArithRef, off: z3.ArithRef) -> z3.DatatypeRef:
    return ptr_sort().ptr(base, off)


def base_of(p: z3.ExprRef) -> z3.ArithRef:
    return ptr_sort().base(p)


def off_of(p: z3.ExprRef) -> z3.ArithRef:
    return ptr_sort().off(p)


def null() -> z3.DatatypeRef:
    return mk_ptr(z3.IntVal(0), z3.IntVal(0))


@dataclass
class Val:
    expr: z3.ExprRef  # ArithRef, or BoolRef for 0/1 results of comparisons
    ctype: CType

    def as_int(self) -> z3.ArithRef:
        if z3.is_bool(self.expr):
            return z3.If(self.expr, z3.IntVal(1), z3.IntVal(0))
        return self.expr  # type: ignore[return-value]

    def as_bool(self) -> z3.BoolRef:
        if z3.is_bool(self.expr):
            return self.expr  # type: ignore[return-value]
        if z3.is_fp(self.expr):  # NaN is true, +0 and -0 false
            return z3.Not(z3.fpIsZero(self.expr))
        if not z3.is_arith(self.expr):  # a pointer (`Ptr`): true unless NULL
            return self.expr != null()
        return self.expr != 0

    @property
    def is_01(self) -> bool:
        return z3.is_bool(self.expr) or self.ctype.is_bool


@dataclass
class Outcomes:
    normal: list[State] = field(default_factory=list)
    brk: list[State] = field(default_factory=list)
    cont: list[State] = field(default_factory=list)
    ret: list[tuple[State, Val | None]] = field(default_factory=list)

    def absorb(self, other: Outcomes, *, normal: bool = True) -> None:
        if normal:
            self.normal += other.normal
        self.brk += other.brk
        self.cont += other.cont
        self.ret += other.ret


@dataclass
class ErrorPath:
    """Unroll mode: the guard of one path to reach_error and its nondet count."""

    guard: z3.BoolRef
    nd: z3.ArithRef
    line: int


@dataclass
class Encoding:
    mode: Mode
    preds: list[Pred]
    clauses: list[Clause]
    errors: list[ErrorPath]
    nd_func: z3.FuncDeclRef
    loop_sites: list[cfront.LoopSite]
    cut: bool  # unroll mode: some path was cut at the unrolling depth
    cut_guards: list[z3.BoolRef]  # unroll mode: path constraints of the cut paths
    definitions: list[z3.BoolRef] = field(default_factory=list)  # unroll mode: x = bv2int(b) links
    nd_kind: z3.FuncDeclRef | None = None  # unroll mode with floats: which sequence slot i reads
    nd_bits: dict[int, z3.FuncDeclRef] = field(default_factory=dict)  # width → bits sequence
    heap: bool = False  # the memory model's state ($mem, $pmem, $size, $next) is in the encoding
    bit_level: bool = False  # unroll mode: some `&`/`|`/`^` is encoded bit by bit
    no_ub: list[z3.BoolRef] = field(default_factory=list)  # unroll mode: no undefined behaviour
    fresh_divisions: bool = False  # chc mode: some `/`/`%` by a variable is a fresh q, r
    # chc mode: the clauses admit more executions than the program (`bitabs`: `x & y` of two
    # variables), so an error Spacer finds reachable may be spurious
    over_approximate: bool = False
    # unroll mode: each join's integer constant (by name) -> the term it stands for (`bvcheck`)
    joins: dict[str, z3.ArithRef] = field(default_factory=dict)
    # unroll mode: input index -> the range of the types read there (-1: some index not constant)
    nd_ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
