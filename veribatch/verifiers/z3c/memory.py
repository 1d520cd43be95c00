"""The encoder's memory model: variables, scopes, declarations, types, lvalues, the heap.

Scalar variables live in the symbolic environment (`State.env`: uid → z3 term).
Arrays and `malloc`'d buffers live in a heap of objects, as in UAutomizer's
memory model: a pointer is a pair (base, offset) (the z3 datatype `Ptr`, offset in
elements of the pointee type), and three environment entries hold the heap:

* ``$mem``: base → (offset → value), every object's contents (mathematical
  integers of the pointee type);
* ``$pmem``: base → (offset → Ptr), the pointer members of struct objects;
* ``$size``: base → size in bytes (0: never allocated, or freed, or out of scope);
* ``$next``: the base of the next object (objects are never reused).

Contents start unconstrained (a fresh ``$mem``: stack and heap garbage) except
for globals and `calloc` (zero) and initializer lists.  An access is defined when
``0 <= offset`` and ``(offset + 1) * sizeof(T) <= $size[base]``; a path on which
it is not (out of bounds, NULL, freed or dead object, pointers of two objects
compared) is undefined behaviour.  In bounded model checking (``unroll``) it is
cut like a path longer than the unrolling bound, so a complete unrolling (a
TRUE) also proves every access defined, and a counterexample is still only one
that gcc replays.  `malloc` and `calloc` may return NULL (an arbitrary choice,
not an input): a program must handle it (a dereference of NULL is cut) to be
proved by unrolling.

In the Horn encoding (``chc``) the heap's four entries are arguments of every
predicate (`HEAP_KEYS`, only for programs that use memory: `HeapNeeded`), and the
model is UAutomizer's for unreach-call (`defined`): a dereference of NULL ends
the execution (a segmentation fault), any other undefined access is not checked
and acts on the object's cells.  That agrees with C on every execution without
undefined behaviour, and never hides an error reached after an undefined
access.  Memory safety is not proved (`engines.HEAP_ASSUMPTION`).

Structs (`malloc(sizeof(struct T))`, struct locals, globals and arrays of them):
a struct object is one heap object of ``sizeof(struct T)`` bytes (members
naturally aligned, as gcc lays them out or larger); a pointer to it has its
offset in whole structs, and member ``f`` (slot k of n) of the struct at offset
``o`` is element ``o * n + k`` of ``$mem`` (integer members) or ``$pmem`` (pointer
members).  ``p->f`` is defined when the whole struct is inside a live object, so
a NULL, freed or dangling node is cut like any other undefined access.  A struct
variable names its object (`struct_uids`) and is no value of its own.  Enums are
`unsigned int` (or `int` with a negative constant), their constants `int`.

Pointers to pointers, unions, struct values (copy, pass or return by value),
array or struct members, the address of a member or of a scalar, casts between
different pointee types and pointer/integer conversions stay `Unsupported` in
both modes.  Mixed into `encode.Encoder`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import z3
from pycparser import c_ast

from veribatch.verifiers.z3c import cint
from veribatch.verifiers.z3c.cint import CType
from veribatch.verifiers.z3c.floats import FloatType, float_from_specifiers, is_float
from veribatch.verifiers.z3c.ir import (
    BmcOnly,
    PtrType,
    State,
    Unsupported,
    Val,
    Var,
    base_of,
    heap_sorts,
    mk_ptr,
    null,
    off_of,
    ptr_sort,
)


class HeapNeeded(BmcOnly):
    """A memory construct met by a Horn encoding built without the heap (`encode.encode`
    then encodes again with it: programs without memory keep predicates over integers)."""


HEAP_KEYS = ("$mem", "$pmem", "$size", "$next")


@dataclass(frozen=True)
class StructType(CType):
    """`struct tag`: its layout (`Layout`) lives in the encoder, found by the tag.

    `width` is 0 here (a pointer to a struct may be declared before the struct is
    complete, as in `struct node { struct node *next; }`); sizes come from
    `MemoryMixin.sizeof`.
    """

    tag: str = ""


@dataclass(frozen=True)
class Layout:
    """A struct's fields: name → (slot, type, byte offset), its size and alignment (gcc's)."""

    fields: dict[str, tuple[int, CType, int]]
    size: int
    align: int
    nslots: int = 0  # cells per struct: one per field, n for an array member `T f[n]`
    lengths: dict[str, int] = field(default_factory=dict)  # array members: their n


@dataclass(frozen=True)
class MemLoc:
    """An lvalue in the heap: element `off` of object `base`, of type `ctype`.

    A struct field is the element ``off * nslots + slot`` of its object: integer
    fields in ``$mem``, pointer fields in ``$pmem`` (same indexing).
    """

    base: z3.ArithRef
    off: z3.ArithRef
    ctype: CType
    wild: bool = False  # a pointer member the program never writes (`never_written_pointer_fields`)


def is_ptr(v: Val) -> bool:
    return isinstance(v.ctype, PtrType)


def heap_env() -> dict[str, z3.ExprRef]:
    """The initial heap: no object, unconstrained contents."""
    mem_sort, pmem_sort = heap_sorts()
    return {
        "$mem": z3.Const("$mem!init", mem_sort),
        "$pmem": z3.Const("$pmem!init", pmem_sort),
        "$size": z3.K(z3.IntSort(), z3.IntVal(0)),
        "$next": z3.IntVal(1),
    }


class MemoryMixin:
    """Variables and their storage (part of `encode.Encoder`)."""

    def live_vars(self) -> list[Var]:
        out = list(self.globals.values()) + list(self.statics.values())
        for frame in self.frames:
            for scope in frame:
                out.extend(scope.values())
        return out

    def lookup(self, name: str, node: c_ast.Node) -> Var:
        if self.frames:
            for scope in reversed(self.frames[-1]):
                if name in scope:
                    return scope[name]
        if name in self.globals:
            return self.globals[name]
        raise Unsupported(f"undeclared identifier {name!r}", node)

    def resolve_type(self, tnode: c_ast.Node, where: c_ast.Node) -> CType:
        if isinstance(tnode, c_ast.TypeDecl):
            inner = tnode.type
            if isinstance(inner, c_ast.IdentifierType):
                names = inner.names
                if len(names) == 1 and names[0] in self.typedefs:
                    return self.resolve_type(self.typedefs[names[0]], where)
                t = cint.from_specifiers(names, self.dm)
                if t is None:
                    t = float_from_specifiers(names)
                    if t is not None:
                        self.need_fp(f"type {' '.join(names)!r} unsupported", where)
                        return t
                if t is None:
                    raise Unsupported(f"type {' '.join(names)!r} unsupported", where)
                return t
            if isinstance(inner, c_ast.Struct | c_ast.Union):
                return self.struct_type(inner, where)
            if isinstance(inner, c_ast.Enum):
                return self.enum_type(inner, where)
        if isinstance(tnode, c_ast.Typename):
            return self.resolve_type(tnode.type, where)
        if isinstance(tnode, c_ast.PtrDecl):
            self.need_heap("pointers unsupported", where)
            if self.is_void(tnode.type):
                return self.ptr_type(None)
            if isinstance(tnode.type, c_ast.PtrDecl | c_ast.ArrayDecl):
                raise Unsupported("pointers to pointers/arrays unsupported", where)
            return self.ptr_type(self.resolve_type(tnode.type, where))
        if isinstance(tnode, c_ast.ArrayDecl):
            self.need_heap("arrays unsupported", where)
            raise Unsupported("arrays outside a declaration or parameter unsupported", where)
        raise Unsupported(f"type {type(tnode).__name__} unsupported", where)

    def is_void(self, tnode: c_ast.Node) -> bool:
        return (
            isinstance(tnode, c_ast.TypeDecl)
            and isinstance(tnode.type, c_ast.IdentifierType)
            and tnode.type.names == ["void"]
        )

    # ------------------------------------------------------------------ declarations
    def _declare_global(self, state: State | None, decl: c_ast.Decl, t: CType | None, *, nondet: bool):
        if state is None:
            return None
        if isinstance(decl.type, c_ast.ArrayDecl):
            return self._declare_array(state, decl, is_global=True)
        if isinstance(t, StructType):
            return self._declare_struct(state, decl, t, is_global=True)
        var = Var(self.new_uid(decl.name), decl.name, t, is_global=True)
        self.globals[decl.name] = var
        if decl.init is not None:
            state, v = self.eval(state, decl.init)
            if state is None:
                return None
            value = self.coerce(v, t, decl)
        elif isinstance(t, PtrType):
            if nondet:
                raise Unsupported("extern pointer variables unsupported", decl)
            value = null()
        elif isinstance(t, FloatType):
            if nondet:
                state, fv = self.float_nondet(state, t, decl.name)
                value = fv.expr
            else:
                value = self.float_zero(t)
        elif nondet:
            state, value = self.nondet(state, t, decl.name)
        else:
            value = z3.IntVal(0)
        if self._boxable(decl.name, t):
            del self.globals[decl.name]
            return self._box(state, decl.name, t, value, is_global=True)
        env = dict(state.env)
        env[var.uid] = value
        return state.with_env(env)

    def declare_statics(self, state: State | None) -> State | None:
        """Static locals of every function, initialised once before `main` (C 6.2.4: their
        lifetime is the whole execution) as globals nobody else can name; `exec_decl` binds
        the name where the declaration stands."""
        decls: list[c_ast.Decl] = []

        class Visitor(c_ast.NodeVisitor):
            def visit_Decl(self, node: c_ast.Decl) -> None:  # noqa: N802 - pycparser's visitor API
                if "static" in (node.storage or []) and not isinstance(node.type, c_ast.FuncDecl):
                    decls.append(node)
                self.generic_visit(node)

        for f in self.funcs.values():
            Visitor().visit(f.body)
        for decl in decls:
            if state is None:
                return None
            shadowed = self.globals.pop(decl.name, None)
            if isinstance(decl.type, c_ast.ArrayDecl):
                state = self._declare_global(state, decl, None, nondet=False)
            else:
                t = self.resolve_type(decl.type, decl)
                if isinstance(t, StructType):
                    raise Unsupported("static local structs unsupported", decl)
                if isinstance(decl.init, c_ast.InitList):
                    raise Unsupported("initializer lists unsupported", decl)
                state = self._declare_global(state, decl, t, nondet=False)
            self.statics[id(decl)] = self.globals.pop(decl.name)
            if shadowed is not None:
                self.globals[decl.name] = shadowed
        return state

    def _drop(self, state: State, dead: set[str]) -> State:
        """Leave a scope: its variables go, its arrays' objects die (`$size` 0); static locals
        live on."""
        dead = dead - {v.uid for v in self.statics.values()}
        env = {k: v for k, v in state.env.items() if k not in dead}
        arrays = [k for k in dead if k in self.array_uids and k in state.env]
        if arrays and "$size" in env:
            size = env["$size"]
            for k in arrays:
                size = z3.Store(size, base_of(state.env[k]), 0)
            env["$size"] = size
        return state.with_env(env)

    def exec_decl(self, state: State, decl: c_ast.Decl) -> State | None:
        if isinstance(decl.type, c_ast.FuncDecl):
            return state  # a local prototype
        if decl.name is None:
            raise Unsupported("declaration without a name", decl)
        storage = decl.storage or []
        if "static" in storage:  # initialised at the start (`declare_statics`): only its name here
            self.frames[-1][-1][decl.name] = self.statics[id(decl)]
            return state
        if "typedef" in storage:
            self.typedefs[decl.name] = decl.type
            return state
        if isinstance(decl.type, c_ast.ArrayDecl):
            return self._declare_array(state, decl, is_global=False)
        t = self.resolve_type(decl.type, decl)
        if isinstance(t, StructType):
            return self._declare_struct(state, decl, t, is_global=False)
        s: State | None = state
        if decl.init is not None:
            if isinstance(decl.init, c_ast.InitList):
                raise Unsupported("initializer lists unsupported", decl)
            s, v = self.eval(state, decl.init)
            if s is None:
                return None
            value = self.coerce(v, t, decl)
            if decl.name in self.havoc:
                value = self.fresh_like(decl.name, value)  # outside the cone of influence: any value
        elif isinstance(t, PtrType):
            # indeterminate: NULL or no object (any dereference is undefined)
            value = z3.Const(f"{decl.name}!{next(self.counter)}", ptr_sort())
            s = s.assume(base_of(value) <= 0)
        elif isinstance(t, FloatType):
            s, fv = self.float_nondet(state, t, decl.name)
            value = fv.expr
        else:
            s, value = self.nondet(state, t, decl.name)
        if self._boxable(decl.name, t):
            return self._box(s, decl.name, t, value, is_global=False)
        var = Var(self.new_uid(decl.name), decl.name, t)
        self.frames[-1][-1][decl.name] = var
        env = dict(s.env)
        env[var.uid] = value
        return s.with_env(env)

    def _boxable(self, name: str, t: CType) -> bool:
        return name in self.address_taken and not isinstance(t, PtrType | FloatType | StructType)

    def _box(self, state: State, name: str, t: CType, value: z3.ExprRef, *, is_global: bool) -> State:
        """An integer variable whose address is taken (`&x`): an object of one element holding
        its value; `x` reads and writes that element (`lvalue`), `&x` is its address, and the
        object dies with the scope like an array's."""
        self.need_heap("address of a variable", None)
        s, p = self.allocate(state, z3.IntVal(self.sizeof(t, None)), zero=False)
        s = self.store_mem(s, MemLoc(base_of(p), z3.IntVal(0), t), value)
        var = Var(self.new_uid(name), name, self.ptr_type(t), is_global=is_global)
        self.array_uids.add(var.uid)
        self.boxed.add(var.uid)
        return self._bind_object(s, var, p, is_global=is_global)

    def _declare_array(self, state: State, decl: c_ast.Decl, *, is_global: bool) -> State | None:
        """`T a[n]` (n constant or not) and `T a[] = {...}`: a new object; `a` names its start."""
        self.need_heap("arrays unsupported", decl)
        at = decl.type
        row = None  # `T a[n][k]`: one object of n*k elements, `a[i][j]` its element i*k + j
        if isinstance(at.type, c_ast.ArrayDecl) and isinstance(at.type.type, c_ast.TypeDecl) \
                and decl.init is None and at.dim is not None:
            _, kv = self.eval(state, at.type.dim)
            row = _const(kv.as_int())
            if row is None or row <= 0:
                raise Unsupported("a two-dimensional array with a non-constant row unsupported", decl)
            at = c_ast.ArrayDecl(at.type.type, c_ast.BinaryOp("*", at.dim, at.type.dim), [], at.coord)
        if isinstance(at.type, c_ast.ArrayDecl | c_ast.PtrDecl):
            raise Unsupported("multi-dimensional arrays / arrays of pointers unsupported", decl)
        elem = self.resolve_type(at.type, decl)
        if row is not None and isinstance(elem, StructType | FloatType | PtrType):
            raise Unsupported("two-dimensional arrays of non-integers unsupported", decl)
        if isinstance(elem, PtrType):  # pragma: no cover - resolve_type of a TypeDecl
            raise Unsupported("arrays of pointers unsupported", decl)
        init = decl.init
        if init is not None and not isinstance(init, c_ast.InitList):
            raise Unsupported("array initialised by a string or expression unsupported", decl)
        s: State | None = state
        if at.dim is not None:
            s, n = self.eval(s, at.dim)
            if s is None:
                return None
            count = cint.convert(n.as_int(), n.ctype, cint.type_named("unsigned long", self.dm))
        elif init is not None:
            count = z3.IntVal(len(init.exprs))
        else:
            raise Unsupported("array without a size unsupported", decl)
        width = self.sizeof(elem, decl)
        s, p = self.allocate(s, count * width, zero=is_global or init is not None)
        if init is not None:
            if isinstance(elem, StructType):
                raise Unsupported("initializer list of a struct array unsupported", decl)
            if len(init.exprs) > (_const(count) or 0):
                raise Unsupported("initializer list longer than a constant array", decl)
            mem = s.env["$mem"]
            obj = mem[base_of(p)]
            for i, e in enumerate(init.exprs):
                s, v = self.eval(s, e)
                if s is None:
                    return None
                obj = z3.Store(obj, i, self.coerce(v, elem, decl))
            s = self._set(s, "$mem", z3.Store(mem, base_of(p), obj))
        var = Var(self.new_uid(decl.name), decl.name, self.ptr_type(elem))
        self.array_uids.add(var.uid)
        if row is not None:
            self.rows[var.uid] = row
        return self._bind_object(s, var, p, is_global=is_global)

    def _bind_object(self, state: State, var: Var, start: z3.ExprRef, *, is_global: bool) -> State:
        """The declared name of a new array or struct object, in its scope, naming its start."""
        if is_global:
            self.globals[var.cname] = var
        else:
            self.frames[-1][-1][var.cname] = var
        return self._set(state, var.uid, start)

    def _declare_struct(self, state: State, decl: c_ast.Decl, t: StructType, *, is_global: bool) -> State | None:
        """`struct T s;`: a new object (as an array of one struct); `s` names its start.

        `s` is no value of its own (`struct_uids`): only `s.f` and `&s` read it, and a
        struct copied, passed or returned by value stays `Unsupported`.
        """
        if decl.init is not None:
            raise Unsupported("struct initializers unsupported", decl)
        s, p = self.allocate(state, z3.IntVal(self.sizeof(t, decl)), zero=is_global)
        var = Var(self.new_uid(decl.name), decl.name, self.ptr_type(t), is_global=is_global)
        self.array_uids.add(var.uid)  # dies with its scope, never assigned
        self.struct_uids.add(var.uid)
        return self._bind_object(s, var, p, is_global=is_global)

    # ------------------------------------------------------------------ structs
    def collect_structs(self, ast: c_ast.Node) -> None:
        """Every struct definition of the program, by tag (before any use: a pointer to
        `struct node` may be declared before or apart from the definition)."""

        enums = self.enum_consts

        class _Visitor(c_ast.NodeVisitor):
            def __init__(self, out: dict[str, c_ast.Struct]) -> None:
                self.out = out

            def visit_Enum(self, node: c_ast.Enum) -> None:  # noqa: N802 - pycparser's visitor API
                if node.values is not None:
                    v: int | None = -1
                    for e in node.values.enumerators:
                        v = _literal(e.value) if e.value is not None else (None if v is None else v + 1)
                        enums[e.name] = v

            def visit_Struct(self, node: c_ast.Struct) -> None:  # noqa: N802 - pycparser's visitor API
                if node.decls is not None and node.name is not None:
                    self.out.setdefault(node.name, node)
                self.generic_visit(node)

        _Visitor(self.struct_defs).visit(ast)

    def enum_type(self, node: c_ast.Enum, where: c_ast.Node) -> CType:
        """An enum is gcc's `unsigned int` when no constant is negative, else `int`."""
        values = node.values.enumerators if node.values is not None else []
        vals = [self.enum_consts.get(e.name) for e in values]
        if not vals or any(v is None for v in vals):
            raise Unsupported("enum with a non-literal or unknown constant unsupported", where)
        return cint.type_named("unsigned int" if min(vals) >= 0 else "int", self.dm)

    def enum_constant(self, name: str, node: c_ast.Node) -> Val | None:
        """An enumeration constant (type `int`, C 6.4.4.3) unless a variable shadows it."""
        if name not in self.enum_consts:
            return None
        try:
            self.lookup(name, node)
            return None
        except Unsupported:
            pass
        v = self.enum_consts[name]
        if v is None:
            raise Unsupported(f"enumeration constant {name} with a non-literal value unsupported", node)
        return Val(z3.IntVal(v), self.int_t)

    def struct_type(self, node: c_ast.Struct | c_ast.Union, where: c_ast.Node) -> StructType:
        if isinstance(node, c_ast.Union):
            raise Unsupported("unions unsupported", where)
        self.need_heap("structs unsupported", where)
        tag = node.name
        if tag is None:  # an anonymous struct (in a typedef): named by its node
            tag = f"<anonymous {id(node)}>"
            self.struct_defs.setdefault(tag, node)
        return StructType(f"struct {tag}", 0, False, 99, tag)

    def layout(self, t: StructType, where: c_ast.Node) -> Layout:
        """Fields in declaration order, each aligned to its size (natural alignment: never
        smaller than gcc's on i386 or x86-64, so a bound check never lets an access pass
        that gcc's layout puts outside the object)."""
        if t.tag in self.layouts:
            return self.layouts[t.tag]
        node = self.struct_defs.get(t.tag)
        if node is None:
            raise Unsupported(f"incomplete type struct {t.tag}", where)
        fields: dict[str, tuple[int, CType, int]] = {}
        lengths: dict[str, int] = {}
        off, align, slot = 0, 1, 0
        for d in node.decls:
            if d.bitsize is not None:
                raise Unsupported("bit-fields unsupported", d)
            if d.name is None:
                raise Unsupported("anonymous struct members unsupported", d)
            n = 1
            ftype = d.type
            if isinstance(ftype, c_ast.ArrayDecl):  # `T f[n]`: n cells, only `s.f[i]` reads them
                n = _literal(ftype.dim) if ftype.dim is not None else None
                if n is None or n <= 0 or not isinstance(ftype.type, c_ast.TypeDecl):
                    raise Unsupported("array members of structs unsupported", d)
                ftype = ftype.type
            ft = self.resolve_type(ftype, d)
            if isinstance(ft, StructType | FloatType):
                raise Unsupported(f"struct member of type {ft.name} unsupported", d)
            size = self.sizeof(ft, d)
            off = -(-off // size) * size
            fields[d.name] = (slot, ft, off)
            if isinstance(d.type, c_ast.ArrayDecl):
                lengths[d.name] = n
            off += size * n
            slot += n
            align = max(align, size)
        lay = Layout(fields, max(1, -(-off // align) * align), align, slot, lengths)
        self.layouts[t.tag] = lay
        return lay

    def sizeof(self, t: CType, where: c_ast.Node) -> int:
        if isinstance(t, StructType):
            return self.layout(t, where).size
        return max(1, t.width // 8)

    def struct_addr(self, state: State, node: c_ast.Node) -> tuple[State | None, Val]:
        """The address of the struct that `node` (the left of `.`) designates."""
        s: State | None = state
        if isinstance(node, c_ast.ID) and self.lookup(node.name, node).uid in self.struct_uids:
            var = self.lookup(node.name, node)
            return state, Val(state.env[var.uid], var.ctype)
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            s, p = self.eval(state, node.expr)
        elif isinstance(node, c_ast.ArrayRef):
            s, p = self.eval(state, node.name)
            s, i = self.eval(s, node.subscript)
            if s is None:
                return None, p
            if not is_ptr(p):
                raise Unsupported("subscript of a non-pointer unsupported", node)
            s, p = self.ptr_arith(s, "+", p, i, node)
        else:
            raise Unsupported(f"struct designated by {type(node).__name__} unsupported", node)
        return s, p

    def field_loc(
        self, state: State, node: c_ast.StructRef, index: Val | None = None
    ) -> tuple[State | None, MemLoc]:
        """`p->f` / `s.f`: element ``off * nslots + slot`` of p's object, after the bound check
        of the whole struct (NULL, freed, dead or out-of-bounds: undefined, cut); with
        `index`, `p->f[i]` of an array member: element ``off * nslots + slot + i`` after
        i's bound 0..n-1 (BMC; the Horn encoding acts on the cell)."""
        self.need_heap("structs unsupported", node)
        dummy = MemLoc(z3.IntVal(0), z3.IntVal(0), self.int_t)
        if node.type == "->":
            s, p = self.eval(state, node.name)
        else:
            s, p = self.struct_addr(state, node.name)
        if s is None:
            return None, dummy
        if not is_ptr(p) or not isinstance(p.ctype.target, StructType):
            raise Unsupported(f"member access {node.type} on a {p.ctype.name}", node)
        t = p.ctype.target
        lay = self.layout(t, node)
        name = node.field.name
        if name not in lay.fields:
            raise Unsupported(f"struct {t.tag} has no member {name}", node)
        slot, ft, _ = lay.fields[name]
        if name in lay.lengths and index is None:
            raise Unsupported("an array member of a struct other than as s.f[i] unsupported", node)
        s = self.defined(s, self.in_bounds(s, p.expr, t), crash=base_of(p.expr) == 0)
        if s is None:
            return None, dummy
        cell = off_of(p.expr) * lay.nslots + slot
        wild = isinstance(ft, PtrType) and name in self.wild_fields
        if index is not None and name not in lay.lengths:  # `p->q[i]` of a pointer member q
            s, q = self.read(s, MemLoc(z3.simplify(base_of(p.expr)), z3.simplify(cell), ft, wild))
            if s is None:
                return None, dummy
            if not is_ptr(q):
                raise Unsupported("subscript of a non-pointer unsupported", node)
            s, q = self.ptr_arith(s, "+", q, index, node)
            if s is None:
                return None, dummy
            return self.deref(s, q, node)
        if index is not None:
            i = index.as_int()
            s = self.defined(s, z3.And(i >= 0, i < lay.lengths[name]))
            if s is None:
                return None, dummy
            cell = cell + i
        return s, MemLoc(z3.simplify(base_of(p.expr)), z3.simplify(cell), ft, wild)

    # ------------------------------------------------------------------ the heap
    def need_heap(self, construct: str, node: c_ast.Node | None) -> None:
        """A memory construct: the Horn encoding must carry the heap (`HeapNeeded`)."""
        if self.mode != "unroll" and not self.heap:
            raise HeapNeeded(construct, node)

    def heap_vars(self, env: dict[str, z3.ExprRef]) -> list[Var]:
        """The heap's entries of `env` as predicate arguments (after the C variables)."""
        return [Var(k, k, self.int_t) for k in HEAP_KEYS if k in env]

    def ptr_type(self, target: CType | None) -> PtrType:
        w = 64 if self.dm == "LP64" else 32
        return PtrType(f"{target.name if target else 'void'} *", w, False, 99, target)

    def allocate(self, state: State, size_bytes: z3.ArithRef, *, zero: bool) -> tuple[State, z3.ExprRef]:
        base = state.env["$next"]
        if not z3.is_int_value(base):
            base = z3.simplify(base)
        env = dict(state.env)
        env["$next"] = z3.simplify(base + 1)
        env["$size"] = z3.Store(env["$size"], base, size_bytes)
        if zero:
            env["$mem"] = z3.Store(env["$mem"], base, z3.K(z3.IntSort(), z3.IntVal(0)))
            env["$pmem"] = z3.Store(env["$pmem"], base, z3.K(z3.IntSort(), null()))
        return state.with_env(env), mk_ptr(base, z3.IntVal(0))

    def defined(self, state: State, ok: z3.BoolRef, crash: z3.BoolRef | None = None) -> State | None:
        """BMC: continue where `ok` holds; the rest of the paths is undefined behaviour: cut
        (and a complete unrolling must show it infeasible).

        Horn encoding: an access through NULL (`crash`) ends the execution (a segmentation
        fault: `reach_error` is not reached after it); any other undefined access is not
        checked and acts on the model's arrays, as in UAutomizer's memory model for
        unreach-call, so every execution still counts and a proof covers them all.
        """
        if self.mode == "chc":
            return state if crash is None else state.assume(z3.simplify(z3.Not(crash)))
        ok = z3.simplify(ok)
        if not z3.is_true(ok):
            self.cut = True
            self.cut_guards.append(z3.And(*state.cond, z3.Not(ok)))
        return state.assume(ok)

    def in_bounds(self, state: State, p: z3.ExprRef, t: CType) -> z3.BoolRef:
        w = self.sizeof(t, None)
        off = off_of(p)
        return z3.And(off >= 0, (off + 1) * w <= state.env["$size"][base_of(p)])

    def deref(self, state: State, p: Val, node: c_ast.Node) -> tuple[State | None, MemLoc]:
        t = p.ctype
        assert isinstance(t, PtrType)
        if t.target is None:
            raise Unsupported("dereference of a void pointer unsupported", node)
        s = self.defined(state, self.in_bounds(state, p.expr, t.target), crash=base_of(p.expr) == 0)
        return s, MemLoc(z3.simplify(base_of(p.expr)), z3.simplify(off_of(p.expr)), t.target)

    def load(self, state: State, loc: MemLoc) -> tuple[State | None, Val]:
        if isinstance(loc.ctype, StructType):
            raise Unsupported("struct values unsupported", None)
        if loc.wild:  # never written: NULL or (0, k), a pointer to no object (`wild_pointer`)
            return state, Val(mk_ptr(z3.IntVal(0), z3.Int(f"$wild!{next(self.counter)}")), loc.ctype)
        if isinstance(loc.ctype, PtrType):  # a pointer member: any garbage is some Ptr
            return state, Val(state.env["$pmem"][loc.base][loc.off], loc.ctype)
        v = state.env["$mem"][loc.base][loc.off]
        return state.assume(cint.in_range(v, loc.ctype)), Val(v, loc.ctype)

    def store_mem(self, state: State, loc: MemLoc, value: z3.ArithRef) -> State:
        assert not loc.wild, "a member never written is written"  # never_written_pointer_fields
        key = "$pmem" if isinstance(loc.ctype, PtrType) else "$mem"
        mem = state.env[key]
        return self._set(state, key, z3.Store(mem, loc.base, z3.Store(mem[loc.base], loc.off, value)))

    def free(self, state: State, p: Val, node: c_ast.Node) -> State | None:
        if not is_ptr(p):
            raise Unsupported("free of a non-pointer unsupported", node)
        b, o = base_of(p.expr), off_of(p.expr)
        is_null = z3.And(b == 0, o == 0)
        s = self.defined(state, z3.Or(is_null, z3.And(o == 0, b > 0, state.env["$size"][b] > 0)))
        if s is None:
            return None
        size = s.env["$size"]
        return self._set(s, "$size", z3.If(is_null, size, z3.Store(size, b, 0)))

    def coerce(self, v: Val, t: CType, node: c_ast.Node) -> z3.ExprRef:
        """`v` converted to `t` as by assignment; pointers only to compatible pointers."""
        if isinstance(t, StructType) or isinstance(v.ctype, StructType):
            raise Unsupported("struct values (copy, pass or return by value) unsupported", node)
        if isinstance(t, FloatType):
            return self.to_float(v, t, node)
        if is_float(v):
            if isinstance(t, PtrType):
                raise Unsupported("floating point to pointer conversion unsupported", node)
            return self.float_to_int(v, t)
        if isinstance(t, PtrType):
            if is_ptr(v):
                src = v.ctype.target
                if src is None or t.target is None or src == t.target:
                    return v.expr
                raise Unsupported("cast between different pointer types unsupported", node)
            if _const(v.as_int()) == 0:
                return null()
            raise Unsupported("integer to pointer conversion unsupported", node)
        if is_ptr(v):
            if t.is_bool:
                return z3.If(v.expr != null(), z3.IntVal(1), z3.IntVal(0))
            raise Unsupported("pointer to integer conversion unsupported", node)
        return cint.convert(v.as_int(), v.ctype, t)

    def ptr_arith(self, state: State, op: str, a: Val, b: Val, node: c_ast.Node) -> tuple[State | None, Val]:
        """`p + i`, `i + p`, `p - i`, `p - q`, comparisons of pointers (C 6.5.6, 6.5.8, 6.5.9)."""
        if op in ("==", "!="):
            pa = self.coerce(a, b.ctype if is_ptr(b) else a.ctype, node)
            pb = self.coerce(b, a.ctype if is_ptr(a) else b.ctype, node)
            if self.wild_fields:  # an indeterminate pointer's bits may equal an object's address
                eq = z3.If(z3.Or(z3.And(wild_pointer(pa), base_of(pb) != 0),
                                 z3.And(wild_pointer(pb), base_of(pa) != 0)),
                           z3.Bool(f"$wild_eq!{next(self.counter)}"), pa == pb)
                return state, Val(eq if op == "==" else z3.Not(eq), self.int_t)
            return state, Val(pa == pb if op == "==" else pa != pb, self.int_t)
        if op in ("<", "<=", ">", ">=", "-") and is_ptr(a) and is_ptr(b):
            s = self.defined(state, base_of(a.expr) == base_of(b.expr))
            x, y = off_of(a.expr), off_of(b.expr)
            if op == "-":
                return s, Val(x - y, cint.type_named("long" if self.dm == "LP64" else "int", self.dm))
            r = {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
            return s, Val(r, self.int_t)
        if op in ("+", "-"):
            p, i = (a, b) if is_ptr(a) else (b, a)
            if is_ptr(i) or (op == "-" and not is_ptr(a)) or p.ctype.target is None:
                raise Unsupported(f"pointer arithmetic {op!r} on these operands unsupported", node)
            k = i.as_int() if op == "+" else -i.as_int()
            return state, Val(mk_ptr(base_of(p.expr), off_of(p.expr) + k), p.ctype)
        raise Unsupported(f"operator {op!r} on pointers unsupported", node)

    # ------------------------------------------------------------------ lvalues
    def _lvalue(self, node: c_ast.Node) -> Var:
        if isinstance(node, c_ast.ID):
            var = self.lookup(node.name, node)
            if var.uid in self.struct_uids:
                raise Unsupported("struct values (copy, pass or return by value) unsupported", node)
            if var.uid in self.array_uids:
                raise Unsupported("assignment to an array unsupported", node)
            return var
        if isinstance(node, c_ast.ArrayRef):
            self.need_heap("arrays unsupported", node)
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            self.need_heap("pointers unsupported", node)
        raise Unsupported(f"assignment to {type(node).__name__} unsupported", node)

    def lvalue(self, state: State, node: c_ast.Node) -> tuple[State | None, Var | MemLoc]:
        """Where an assignment or increment writes: a variable or a heap element."""
        if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.ArrayRef) \
                and isinstance(node.name.name, c_ast.ID) \
                and self.lookup(node.name.name.name, node).uid in self.rows:
            return self._element_2d(state, node)
        if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.StructRef):
            s, i = self.eval(state, node.subscript)
            if s is None:
                return None, MemLoc(z3.IntVal(0), z3.IntVal(0), self.int_t)
            if is_ptr(i) or is_float(i):
                raise Unsupported("subscript of an array member by a non-integer", node)
            return self.field_loc(s, node.name, i)
        if isinstance(node, c_ast.ArrayRef):
            self.need_heap("arrays unsupported", node)
            s, p = self.eval(state, node.name)
            if s is None:
                return None, MemLoc(z3.IntVal(0), z3.IntVal(0), self.int_t)
            s, i = self.eval(s, node.subscript)
            if not is_ptr(p):
                if s is not None and is_ptr(i):
                    p, i = i, p
                else:
                    raise Unsupported("subscript of a non-pointer unsupported", node)
            if s is None:
                return None, MemLoc(z3.IntVal(0), z3.IntVal(0), self.int_t)
            s, q = self.ptr_arith(s, "+", p, i, node)
            return self.deref(s, q, node)
        if isinstance(node, c_ast.StructRef):
            return self.field_loc(state, node)
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            self.need_heap("pointers unsupported", node)
            s, p = self.eval(state, node.expr)
            if s is None:
                return None, MemLoc(z3.IntVal(0), z3.IntVal(0), self.int_t)
            if not is_ptr(p):
                raise Unsupported("dereference of a non-pointer unsupported", node)
            return self.deref(s, p, node)
        if isinstance(node, c_ast.ID):
            var = self.lookup(node.name, node)
            if var.uid in self.boxed:
                return state, MemLoc(base_of(state.env[var.uid]), z3.IntVal(0), var.ctype.target)
        return state, self._lvalue(node)

    def _element_2d(self, state: State, node: c_ast.ArrayRef) -> tuple[State | None, MemLoc]:
        """`a[i][j]` of `T a[n][k]`: element i*k + j of a's object, after j's row bound (BMC:
        a column outside 0..k-1 is undefined even inside the object, cut like any other)."""
        var = self.lookup(node.name.name.name, node)
        k = self.rows[var.uid]
        dummy = MemLoc(z3.IntVal(0), z3.IntVal(0), self.int_t)
        s, i = self.eval(state, node.name.subscript)
        s, j = self.eval(s, node.subscript)
        if s is None:
            return None, dummy
        if is_ptr(i) or is_ptr(j) or is_float(i) or is_float(j):
            raise Unsupported("subscript of a two-dimensional array by a non-integer", node)
        je = j.as_int()
        s = self.defined(s, z3.And(je >= 0, je < k))
        if s is None:
            return None, dummy
        flat = Val(i.as_int() * k + je, cint.type_named("long long", self.dm))
        s, q = self.ptr_arith(s, "+", Val(s.env[var.uid], var.ctype), flat, node)
        if s is None:
            return None, dummy
        return self.deref(s, q, node)

    def read(self, state: State, loc: Var | MemLoc) -> tuple[State | None, Val]:
        if isinstance(loc, MemLoc):
            return self.load(state, loc)
        return state, Val(state.env[loc.uid], loc.ctype)

    def write(self, state: State, loc: Var | MemLoc, value: z3.ExprRef) -> State:
        if isinstance(loc, MemLoc):
            return self.store_mem(state, loc, value)
        return self._store(state, loc, value)

    def _store(self, state: State, var: Var, value: z3.ExprRef) -> State:
        return self._set(state, var.uid, value)

    @staticmethod
    def _set(state: State, key: str, value: z3.ExprRef) -> State:
        env = dict(state.env)
        env[key] = value
        return state.with_env(env)


def never_written_pointer_fields(ast: c_ast.FileAST) -> frozenset[str]:
    """Pointer members the program reads (`p->f`, `s.f`) and never writes, by name.

    Such a member holds what its object started with: NULL (`calloc`, a global or static
    struct) or an indeterminate value (`malloc`, a struct local), which no pointer the
    program made was ever stored into, so it points to no object (C 7.22.3.4; using it as
    an address is undefined behaviour).  `MemoryMixin.field_loc` reads it as such a value.
    A member counts as written if any member of that name (of any struct) is assigned,
    incremented or has its address taken.  Empty (the ordinary model everywhere) when
    something could write the member's cells under another name: a `void *` declared or
    cast to anywhere but in a body-less prototype or `(void *) 0` (`malloc`'s result converted to a struct
    pointer is fine; another object reached through `void *` may be punned), or an array
    member of a struct (an index out of its bounds is a cell of the next member in the
    Horn encoding)."""
    pointer_fields: set[str] = set()
    read: set[str] = set()
    written: set[str] = set()
    punned = False

    def is_void_ptr(t: c_ast.Node) -> bool:
        while isinstance(t, c_ast.PtrDecl | c_ast.ArrayDecl | c_ast.Typename):
            if isinstance(t, c_ast.PtrDecl) and isinstance(t.type, c_ast.TypeDecl) \
                    and isinstance(t.type.type, c_ast.IdentifierType) and t.type.type.names == ["void"]:
                return True
            t = t.type
        return False

    class Visitor(c_ast.NodeVisitor):
        def visit_Struct(self, node: c_ast.Struct) -> None:  # noqa: N802 - pycparser's visitor API
            nonlocal punned
            for d in node.decls or []:
                if isinstance(d.type, c_ast.ArrayDecl):
                    punned = True
                if isinstance(d.type, c_ast.PtrDecl) and d.name is not None:
                    pointer_fields.add(d.name)
            self.generic_visit(node)

        def visit_Decl(self, node: c_ast.Decl) -> None:  # noqa: N802 - pycparser's visitor API
            nonlocal punned
            if isinstance(node.type, c_ast.FuncDecl):
                return  # a prototype (`void *malloc(size_t)`); a definition's body is visited below
            if is_void_ptr(node.type):
                punned = True
            self.generic_visit(node)

        def visit_FuncDef(self, node: c_ast.FuncDef) -> None:  # noqa: N802 - pycparser's visitor API
            nonlocal punned
            fd = node.decl.type
            if is_void_ptr(fd.type) or any(is_void_ptr(getattr(p, "type", None))
                                           for p in (fd.args.params if fd.args else [])):
                punned = True
            self.visit(node.body)

        def visit_Typename(self, node: c_ast.Typename) -> None:  # noqa: N802 - pycparser's visitor API
            nonlocal punned
            if is_void_ptr(node.type):
                punned = True

        def visit_Cast(self, node: c_ast.Cast) -> None:  # noqa: N802 - pycparser's visitor API
            if _literal(node.expr) == 0:  # `(void *) 0`: NULL
                return
            self.generic_visit(node)

        def visit_Assignment(self, node: c_ast.Assignment) -> None:  # noqa: N802 - pycparser's visitor API
            if isinstance(node.lvalue, c_ast.StructRef):
                written.add(node.lvalue.field.name)
            self.generic_visit(node)

        def visit_UnaryOp(self, node: c_ast.UnaryOp) -> None:  # noqa: N802 - pycparser's visitor API
            if node.op in ("&", "++", "--", "p++", "p--") and isinstance(node.expr, c_ast.StructRef):
                written.add(node.expr.field.name)
            self.generic_visit(node)

        def visit_StructRef(self, node: c_ast.StructRef) -> None:  # noqa: N802 - pycparser's visitor API
            read.add(node.field.name)
            self.generic_visit(node)

    Visitor().visit(ast)
    if punned:
        return frozenset()
    return frozenset((pointer_fields & read) - written)


def wild_pointer(p: z3.ExprRef) -> z3.BoolRef:
    """`p` is (0, k), k != 0: how the Horn encoding reads a pointer member never written
    (`MemoryMixin.load`).  No pointer a defined execution makes has base 0 and is not NULL,
    so such a value came from that member: it is non-NULL and a dereference of it ends the
    execution, like NULL's (base 0, `MemoryMixin.defined`'s `crash`).  Its comparisons with
    NULL and with other such values follow its k (fresh at each read: NULL or not, as any
    garbage, stable as the rest of the model's uninitialised memory); compared with `==` to
    a pointer into an object it may be equal (its bits are anything): any truth value."""
    return z3.And(base_of(p) == 0, off_of(p) != 0)


def address_taken_names(ast: c_ast.Node) -> frozenset[str]:
    """Names `x` of every `&x` in the program (any scope: boxing a namesake costs only speed)."""
    out: set[str] = set()

    class Visitor(c_ast.NodeVisitor):
        def visit_UnaryOp(self, node: c_ast.UnaryOp) -> None:  # noqa: N802 - pycparser's visitor API
            if node.op == "&" and isinstance(node.expr, c_ast.ID):
                out.add(node.expr.name)
            self.generic_visit(node)

    Visitor().visit(ast)
    return frozenset(out)


def _literal(node: c_ast.Node) -> int | None:
    """An integer literal, possibly negated (enumerator values); None for anything else."""
    neg = isinstance(node, c_ast.UnaryOp) and node.op == "-"
    if neg:
        node = node.expr
    if not (isinstance(node, c_ast.Constant) and node.type == "int"):
        return None
    try:
        v = int(node.value.rstrip("uUlL"), 0)
    except ValueError:
        return None
    return -v if neg else v


def _const(e: z3.ExprRef) -> int | None:
    e = z3.simplify(e)
    return e.as_long() if z3.is_int_value(e) else None
