"""The encoder's memory model: variables, scopes, declarations, types, lvalues.

Every C object the encoder supports is a scalar variable of the symbolic
environment (`State.env`: uid → z3 term); this module decides which declarations
and types map onto it and raises `Unsupported` (UNKNOWN with the reason) for the
rest.  Mixed into `encode.Encoder`.
"""

from __future__ import annotations

import z3
from pycparser import c_ast

from veribatch.verifiers.z3c import cint
from veribatch.verifiers.z3c.cint import CType
from veribatch.verifiers.z3c.ir import State, Unsupported, Var


class MemoryMixin:
    """Variables and their storage (part of `encode.Encoder`)."""

    def live_vars(self) -> list[Var]:
        out = list(self.globals.values())
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
                    raise Unsupported(f"type {' '.join(names)!r} unsupported", where)
                return t
            if isinstance(inner, c_ast.Struct | c_ast.Union):
                raise Unsupported("structs/unions unsupported", where)
            if isinstance(inner, c_ast.Enum):
                raise Unsupported("enums unsupported", where)
        if isinstance(tnode, c_ast.Typename):
            return self.resolve_type(tnode.type, where)
        if isinstance(tnode, c_ast.PtrDecl):
            raise Unsupported("pointers unsupported", where)
        if isinstance(tnode, c_ast.ArrayDecl):
            raise Unsupported("arrays unsupported", where)
        raise Unsupported(f"type {type(tnode).__name__} unsupported", where)

    def is_void(self, tnode: c_ast.Node) -> bool:
        return (
            isinstance(tnode, c_ast.TypeDecl)
            and isinstance(tnode.type, c_ast.IdentifierType)
            and tnode.type.names == ["void"]
        )


    def _declare_global(self, state: State | None, decl: c_ast.Decl, t: CType, *, nondet: bool):
        if state is None:
            return None
        var = Var(self.new_uid(decl.name), decl.name, t, is_global=True)
        self.globals[decl.name] = var
        if decl.init is not None:
            state, v = self.eval(state, decl.init)
            if state is None:
                return None
            value = cint.convert(v.as_int(), v.ctype, t)
        elif nondet:
            state, value = self.nondet(state, t, decl.name)
        else:
            value = z3.IntVal(0)
        env = dict(state.env)
        env[var.uid] = value
        return state.with_env(env)


    @staticmethod
    def _drop(state: State, dead: set[str]) -> State:
        return state.with_env({k: v for k, v in state.env.items() if k not in dead})

    def exec_decl(self, state: State, decl: c_ast.Decl) -> State | None:
        if isinstance(decl.type, c_ast.FuncDecl):
            return state  # a local prototype
        if decl.name is None:
            raise Unsupported("declaration without a name", decl)
        storage = decl.storage or []
        if "static" in storage:
            raise Unsupported("static local variables unsupported", decl)
        if "typedef" in storage:
            self.typedefs[decl.name] = decl.type
            return state
        t = self.resolve_type(decl.type, decl)
        s: State | None = state
        if decl.init is not None:
            if isinstance(decl.init, c_ast.InitList):
                raise Unsupported("initializer lists unsupported", decl)
            s, v = self.eval(state, decl.init)
            if s is None:
                return None
            value = cint.convert(v.as_int(), v.ctype, t)
        else:
            s, value = self.nondet(state, t, decl.name)
        var = Var(self.new_uid(decl.name), decl.name, t)
        self.frames[-1][-1][decl.name] = var
        env = dict(s.env)
        env[var.uid] = value
        return s.with_env(env)


    def _lvalue(self, node: c_ast.Node) -> Var:
        if isinstance(node, c_ast.ID):
            return self.lookup(node.name, node)
        if isinstance(node, c_ast.ArrayRef):
            raise Unsupported("arrays unsupported", node)
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            raise Unsupported("pointers unsupported", node)
        raise Unsupported(f"assignment to {type(node).__name__} unsupported", node)

    def _store(self, state: State, var: Var, value: z3.ArithRef) -> State:
        env = dict(state.env)
        env[var.uid] = value
        return state.with_env(env)
