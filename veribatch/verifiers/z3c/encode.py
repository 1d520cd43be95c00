"""C AST → constrained Horn clauses (or a bounded unrolling) by symbolic execution.

One pass over the structured AST of `main`, calls inlined.  The symbolic state is
(conjunction of predicate applications, path constraint, variable → z3 term).
Loop-free code is executed symbolically, branches are merged at join points with
fresh variables (large-block encoding, linear in the program size).  Two modes:

* ``chc``: every loop head is a cut point with its own predicate ``inv<k>`` over the
  variables live there (k = the loop label of `verifiers.cfront.loop_sites`).  The
  entry path, each back edge and each path to ``reach_error`` become clauses.
  Where states with different predicates meet (a loop inside one branch of an
  `if`), a join predicate is introduced.
* ``unroll``: loops are unrolled `depth` times (paths staying longer are cut):
  bounded model checking for counterexamples.  Nondet values are read from one
  uninterpreted sequence ``ND(0), ND(1), ...`` in call order, so a model of the
  error path is a concrete input sequence for `replay`.

Anything outside the supported subset raises `Unsupported` naming the construct
and line; the verifier answers UNKNOWN with that reason, never a guess.

The encoder is one class assembled from a module per C construct family:
`control` (statements, loops, joins), `expressions` (operators, constants),
`memory` (variables, declarations, types, lvalues) and `calls` (builtins,
inlining); `ir` holds the data they share.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace

import z3
from pycparser import c_ast

from veribatch.verifiers import cfront
from veribatch.verifiers.z3c import cint
from veribatch.verifiers.z3c.calls import CallsMixin, nondet_type_name
from veribatch.verifiers.z3c.control import ControlFlowMixin
from veribatch.verifiers.z3c.expressions import ExpressionsMixin, _is_simple, uses_bitwise
from veribatch.verifiers.z3c.floats import FloatsMixin, reads_floating_point
from veribatch.verifiers.z3c.ir import (
    BmcOnly,
    Clause,
    Encoding,
    ErrorPath,
    Mode,
    Outcomes,
    Pred,
    State,
    Unsupported,
    Val,
    Var,
)
from veribatch.verifiers.z3c.memory import (
    HeapNeeded,
    Layout,
    MemoryMixin,
    address_taken_names,
    heap_env,
    never_written_pointer_fields,
)
from veribatch.verifiers.z3c.summaries import SummariesMixin

__all__ = [
    "BmcOnly", "Clause", "Encoder", "Encoding", "ErrorPath", "Mode", "Outcomes", "Pred", "State",
    "Unsupported", "Val", "Var", "_is_simple", "encode", "nondet_type_name",
]


class Encoder(ControlFlowMixin, ExpressionsMixin, MemoryMixin, FloatsMixin, CallsMixin, SummariesMixin):
    """Symbolic executor; build with `encode(ast, mode=...)`."""

    def __init__(
        self,
        ast: c_ast.FileAST,
        *,
        mode: Mode = "chc",
        depth: int = 0,
        data_model: str = "ILP32",
        should_stop: Callable[[], bool] | None = None,
        havoc: frozenset[str] = frozenset(),
        heap: bool = False,
    ):
        self.ast = ast
        # chc mode: the heap ($mem, $pmem, $size, $next) is carried through the predicates
        self.heap = heap or mode == "unroll"
        # chc mode: names outside the cone of influence (`slicing`), assigned arbitrary values
        self.havoc = havoc if mode == "chc" else frozenset()
        self.mode = mode
        self.depth = depth
        self.dm = data_model
        self.should_stop = should_stop or (lambda: False)
        self.funcs = cfront.function_defs(ast)
        self.sites = cfront.loop_sites(ast)
        self.site_of = {id(s.node): s for s in self.sites}
        self.typedefs: dict[str, c_ast.Node] = {}
        self.preds: list[Pred] = []
        self.clauses: list[Clause] = []
        self.errors: list[ErrorPath] = []
        self.globals: dict[str, Var] = {}
        self.frames: list[list[dict[str, Var]]] = []
        self.call_stack: list[str] = []
        self.counter = itertools.count()
        self.uids: set[str] = set()
        self.nd_func = z3.Function("ND", z3.IntSort(), z3.IntSort())
        self.nd_kind: z3.FuncDeclRef | None = None  # input slot i: 0 integer, 32/64 float bits
        self.nd_bits: dict[int, z3.FuncDeclRef] = {}
        if mode == "unroll" and reads_floating_point(ast):
            self.nd_kind = z3.Function("ND_kind", z3.IntSort(), z3.IntSort())
            self.nd_bits = {w: z3.Function(f"ND_bits{w}", z3.IntSort(), z3.BitVecSort(w))
                            for w in (32, 64)}
        self.cut = False
        self.cut_guards: list[z3.BoolRef] = []
        self.instances: dict[int, int] = {}
        self.int_t = cint.type_named("int", data_model)
        self.definitions: list[z3.BoolRef] = []  # global definitions of fresh terms (floats)
        # chc mode: `/` and `%` by a variable as fresh quotient/remainder (`quotient`), their
        # definitions by the constants' names; candidates (`cexpr`) keep `div`/`mod`
        self.fresh_division = mode == "chc"
        self.division_facts: dict[str, z3.BoolRef] = {}
        # chc mode: `x & y` of two variables as a fresh value, its facts beside the
        # quotients' (`ExpressionsMixin.bitwise_horn`); off where no clause carries them
        self.fresh_bitwise = mode == "chc"
        self.over_approximate = False  # some `x & y` is such a fresh value, or a float (`floats`)
        self.abstract_floats = mode == "chc"  # floating point as opaque values (`floats`)
        self.bit_level = False  # a bitwise operator was encoded bit by bit (expressions.bitwise)
        self.no_ub: list[z3.BoolRef] = []  # no undefined behaviour (note_defined), search only
        self.joins: dict[str, z3.ArithRef] = {}  # unroll mode: a join's integer constant -> its term
        self.nd_ranges: dict[int, tuple[int, int]] = {}  # unroll mode: input index -> its types' range
        # only encodings with bitwise operators collect `no_ub` for the bit-blasted search
        # (engines.run_bmc): quadratic in the unrolling, it made floating-point programs'
        # deep unrollings 4-6x slower to encode, and their traces rarely need it
        self.track_ub = mode == "unroll" and uses_bitwise(ast)
        self.array_uids: set[str] = set()
        self.address_taken = address_taken_names(ast)  # `&x` somewhere: x lives in memory
        # pointer members never written: read as NULL or a pointer to no object (memory)
        self.wild_fields = never_written_pointer_fields(ast) if mode == "chc" else frozenset()
        self.boxed: set[str] = set()  # such scalars' variables: they hold the object's address
        self.statics: dict[int, Var] = {}  # static locals by their declaration's node (memory)
        self.rows: dict[str, int] = {}  # two-dimensional arrays: row length (memory)
        self.struct_uids: set[str] = set()  # variables naming a struct object (memory)
        self.struct_defs: dict[str, c_ast.Struct] = {}
        self.layouts: dict[str, Layout] = {}
        self.enum_consts: dict[str, int | None] = {}  # enumeration constants (None: not a literal)
        self.collect_structs(ast)
        self._summary_setup()  # chc mode: recursive functions as summary predicates
        # per function being executed: its labels' positions, states of pending gotos
        self.goto_frames: list[tuple[dict[str, tuple[int, int]], dict[str, list[State]]]] = []  # variables naming an array object (memory)

    # ------------------------------------------------------------------ helpers
    def fresh(self, base: str) -> z3.ArithRef:
        return z3.Int(f"{base}!{next(self.counter)}")

    def fresh_like(self, base: str, like: z3.ExprRef) -> z3.ExprRef:
        """A fresh term of `like`'s sort (an integer, a pointer, an array)."""
        return self.fresh(base) if z3.is_int(like) else z3.FreshConst(like.sort(), base)

    def new_uid(self, cname: str) -> str:
        uid = cname
        while uid in self.uids:
            uid = f"{cname}#{next(self.counter)}"
        self.uids.add(uid)
        return uid

    # ------------------------------------------------------------------ program
    def encode(self) -> Encoding:
        init = State((), (), heap_env() if self.heap else {}, z3.IntVal(0))
        state: State | None = init
        for ext in self.ast.ext:
            if isinstance(ext, c_ast.Typedef):
                self.typedefs[ext.name] = ext.type
            elif isinstance(ext, c_ast.Decl) and not isinstance(ext.type, c_ast.FuncDecl):
                if ext.name is None:
                    if isinstance(ext.type, c_ast.Struct | c_ast.Union | c_ast.Enum):
                        continue
                    raise Unsupported("declaration without a name", ext)
                if isinstance(ext.type, c_ast.ArrayDecl):
                    state = self._declare_global(state, ext, None, nondet=False)
                elif "extern" in (ext.storage or []) and ext.init is None:
                    t = self.resolve_type(ext.type, ext)
                    state = self._declare_global(state, ext, t, nondet=True)
                else:
                    t = self.resolve_type(ext.type, ext)
                    state = self._declare_global(state, ext, t, nondet=False)
        main = self.funcs.get("main")
        if main is None:
            raise Unsupported("no main function")
        state = self.declare_statics(state)
        if state is None:
            return self._result()
        self.frames.append([{}])
        self.call_stack.append("main")
        self.enter_function(main.body)
        out = self.exec_stmt(state, main.body)
        self.leave_function()
        self.call_stack.pop()
        self.frames.pop()
        del out  # leaving main (fall-through or return) ends the program: safe
        self.encode_summaries()
        return self._result()

    def _result(self) -> Encoding:
        if self.division_facts:
            self.clauses = [self._with_division_facts(c) for c in self.clauses]
        return Encoding(
            self.mode, self.preds, self.clauses, self.errors, self.nd_func, self.sites,
            self.cut, self.cut_guards, self.definitions, self.nd_kind, self.nd_bits, self.heap,
            self.bit_level, self.no_ub, bool(self.division_facts),
            over_approximate=self.over_approximate, joins=self.joins,
            nd_ranges=self.nd_ranges,
        )

    def _with_division_facts(self, clause: Clause) -> Clause:
        """`clause` with the definitions of the quotients/remainders it mentions (transitively)."""
        facts: list[z3.BoolRef] = []
        seen: set[int] = set()
        todo = [clause.constraint] + ([clause.head] if clause.head is not None else [])
        while todo:
            e = todo.pop()
            if e.get_id() in seen:
                continue
            seen.add(e.get_id())
            if z3.is_const(e):
                fact = self.division_facts.get(e.decl().name())
                if fact is not None and fact.get_id() not in seen:
                    seen.add(fact.get_id())
                    facts.append(fact)
                    todo.append(fact)
                continue
            todo.extend(e.children())
        if not facts:
            return clause
        return replace(clause, constraint=z3.And(clause.constraint, *facts))


def encode(
    ast: c_ast.FileAST,
    *,
    mode: Mode = "chc",
    depth: int = 0,
    data_model: str = "ILP32",
    should_stop: Callable[[], bool] | None = None,
    havoc: frozenset[str] = frozenset(),
    fresh_division: bool = True,
) -> Encoding:
    """Encode `main` of `ast`; raises `Unsupported`.

    `fresh_division=False` keeps `/` and `%` by a variable as `div`/`mod` in the Horn
    encoding (what the templates member's concrete runs handle best) instead of fresh
    quotients and remainders (what Spacer needs: `ExpressionsMixin.quotient`).

    A Horn encoding is first built without the heap; a program that uses memory
    (`memory.HeapNeeded`) is encoded again with the heap as predicate arguments, so
    programs without memory keep predicates over integers only.
    """
    def build(heap: bool) -> Encoding:
        enc = Encoder(ast, mode=mode, depth=depth, data_model=data_model, should_stop=should_stop,
                      havoc=havoc, heap=heap)
        enc.fresh_division = enc.fresh_division and fresh_division
        return enc.encode()

    if mode != "chc":
        return build(False)
    try:
        return build(False)
    except HeapNeeded:
        return build(True)
