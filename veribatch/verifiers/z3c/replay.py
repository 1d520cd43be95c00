"""Confirm a counterexample by running the program with gcc on its input sequence.

A FALSE verdict is reported only when the real program, compiled by gcc with the
UB sanitizer (signed overflow, division by zero, bad shifts abort the run), fed
the nondet values of the BMC model in call order, actually calls `reach_error`.
That is an independent check of the encoder's C semantics: a trace that only
exists in the model (or needs undefined behaviour) is not confirmed.

The program runs in its own temporary directory and process group, under CPU,
memory and wall limits, and is killed with its whole group on timeout.
"""

from __future__ import annotations

import copy
import os
import resource
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass

from pycparser import c_ast

from veribatch.verifiers import cfront
from veribatch.verifiers.z3c import encode

_MARK = "VERIBATCH_REACH_ERROR"
_ALLOC_PROTOTYPES = {
    "malloc": "extern void *malloc(unsigned long);",
    "calloc": "extern void *calloc(unsigned long, unsigned long);",
    "free": "extern void free(void *);",
}
_FLOAT_INPUTS = {"__VERIFIER_nondet_double": ("double", "long long"),
                 "__VERIFIER_nondet_float": ("float", "int")}


# `scanf` as `calls.eval_scanf` reads it: the count r (-1..k) first, then one input per
# conversion, stored only into the first r targets ([width] [hh|h|l|ll] d i u x X o c).
_SCANF_C = """int scanf(const char *f, ...) {
  __builtin_va_list ap; __builtin_va_start(ap, f);
  long long r = __vb_nd(); int i = 0;
  for (; *f; f++) {
    if (*f != '%') continue;
    f++;
    if (*f == '%') continue;
    while (*f >= '0' && *f <= '9') f++;
    int h = 0, l = 0;
    while (*f == 'h') { h++; f++; }
    while (*f == 'l') { l++; f++; }
    long long v = __vb_nd();
    void *p = __builtin_va_arg(ap, void *);
    if (i++ >= r) continue;
    int s = *f == 'd' || *f == 'i';
    if (*f == 'c') *(char *)p = (char)v;
    else if (h == 2) { if (s) *(signed char *)p = v; else *(unsigned char *)p = v; }
    else if (h == 1) { if (s) *(short *)p = v; else *(unsigned short *)p = v; }
    else if (l == 2) { if (s) *(long long *)p = v; else *(unsigned long long *)p = v; }
    else if (l == 1) { if (s) *(LONG *)p = v; else *(unsigned LONG *)p = v; }
    else { if (s) *(int *)p = v; else *(unsigned int *)p = v; }
  }
  __builtin_va_end(ap);
  return (int)r;
}"""


@dataclass
class Replay:
    confirmed: bool
    detail: str


class _Rewrite(c_ast.NodeVisitor):
    """Uninitialised scalar locals read the next input; ILP32 `long` becomes `int`.

    Struct and union locals (also through a typedef) keep their garbage: the encoder
    reads no input for them either (`memory._declare_struct`).
    """

    def __init__(self, ilp32: bool, aggregates: set[str]):
        self.ilp32 = ilp32
        self.aggregates = aggregates  # typedef names of struct/union types

    def visit_FuncDef(self, node: c_ast.FuncDef) -> None:
        if node.body is not None:
            self._locals(node.body)
        self.generic_visit(node)

    def _locals(self, node: c_ast.Node) -> None:
        for _, child in node.children():
            if (
                isinstance(child, c_ast.Decl)
                and child.init is None
                and isinstance(child.type, c_ast.TypeDecl)
                and not (child.storage or [])
                and not isinstance(child.type.type, c_ast.Struct | c_ast.Union)
                and not set(getattr(child.type.type, "names", [])) & self.aggregates
            ):
                names = getattr(child.type.type, "names", [])
                # floating point inputs are bit patterns (see `floats`)
                reader = "__VERIFIER_nondet_double" if names == ["double"] else \
                    "__VERIFIER_nondet_float" if names == ["float"] else "__vb_nd"
                child.init = c_ast.FuncCall(c_ast.ID(reader), None)
            if not isinstance(child, c_ast.FuncDef):
                self._locals(child)

    def visit_IdentifierType(self, node: c_ast.IdentifierType) -> None:
        if self.ilp32 and node.names.count("long") == 1:
            names = ["int" if n == "long" else n for n in node.names]
            while names.count("int") > 1:
                names.remove("int")
            node.names = names


def _aggregate_typedefs(tree: c_ast.FileAST) -> set[str]:
    """Typedef names that stand for a struct or union (`typedef struct T {...} S;`)."""
    out: set[str] = set()
    for e in tree.ext:
        if isinstance(e, c_ast.Typedef) and isinstance(e.type, c_ast.TypeDecl):
            inner = e.type.type
            if isinstance(inner, c_ast.Struct | c_ast.Union) or \
                    set(getattr(inner, "names", [])) & out:
                out.add(e.name)
    return out


def program_source(ast: c_ast.FileAST, values: list[int], *, data_model: str = "ILP32") -> str:
    """The instrumented C program fed with `values` (exposed for tests)."""
    tree = copy.deepcopy(ast)
    called: set[str] = set()

    class Calls(c_ast.NodeVisitor):
        def visit_FuncCall(self, node: c_ast.FuncCall) -> None:
            if isinstance(node.name, c_ast.ID):
                called.add(node.name.name)
            self.generic_visit(node)

    Calls().visit(tree)
    defined = {e.decl.name for e in tree.ext if isinstance(e, c_ast.FuncDef)}
    ours = {"reach_error", "__assert_fail", "__VERIFIER_error"}
    tree.ext = [
        e for e in tree.ext
        if not (isinstance(e, c_ast.FuncDef) and e.decl.name in ours)
        and not (isinstance(e, c_ast.Decl) and e.name in ours | {"rand"})
    ]
    _Rewrite(data_model == "ILP32", _aggregate_typedefs(tree)).visit(tree)
    Calls().visit(tree)  # the rewrite may call the float input readers
    long_as = "int" if data_model == "ILP32" else "long"
    vals = ", ".join(f"{v % (1 << 64)}ULL" for v in values) or "0ULL"
    lines = [
        "extern void _exit(int);",
        "extern long write(int, const void *, unsigned long);",
        f"static const unsigned long long __vb_vals[] = {{{vals}}};",
        "static unsigned long __vb_pos = 0;",
        f"static long long __vb_nd(void) {{ if (__vb_pos >= {len(values)}UL) _exit(97);"
        " return (long long)__vb_vals[__vb_pos++]; }",
        f'static void __vb_err(void) {{ write(1, "{_MARK}\\n", {len(_MARK) + 1}); _exit(99); }}',
        "void reach_error() { __vb_err(); }",
        "void __VERIFIER_error() { __vb_err(); }",
        "void __assert_fail(const char *a, const char *b, unsigned int c, const char *d)"
        " { __vb_err(); }",
    ]
    declared = {e.name for e in tree.ext if isinstance(e, c_ast.Decl)}
    for name, proto in _ALLOC_PROTOTYPES.items():
        # without a prototype gcc takes an `int` result and truncates the pointer
        if name in called and name not in defined | declared:
            lines.append(proto)
    for name, (ctype, ints) in _FLOAT_INPUTS.items():
        if name in called and name not in defined:  # its bits, as `floats.float_nondet` reads ND(i)
            lines.append(f"{ctype} {name}(void) {{ unsigned {ints} b = (unsigned {ints})__vb_nd();"
                         f" {ctype} d; __builtin_memcpy(&d, &b, sizeof d); return d; }}")
    # a program's own `__VERIFIER_nondet_int` that calls scanf is a builtin to the
    # encoder (one input): there scanf stays libc's (stdin is empty)
    wrapped = any(encode.nondet_type_name(e.decl.name) and "scanf" in cfront.to_source(e)
                  for e in tree.ext if isinstance(e, c_ast.FuncDef))
    for name in sorted(called - defined):
        nd = encode.nondet_type_name(name)
        if name == "scanf" and not wrapped:
            lines.append(_SCANF_C.replace("LONG", long_as))
        if nd is not None:
            ctype = nd.replace("long long", "LL").replace("long", long_as).replace("LL", "long long")
            lines.append(f"{ctype} {name}(void) {{ return ({ctype})__vb_nd(); }}")
        elif name == "rand":
            lines.append("int rand(void) { return (int)__vb_nd(); }")
        elif name in ("assert", "__VERIFIER_assert"):
            lines.append(f"void {name}(int c) {{ if (!c) __vb_err(); }}")
        elif name in ("assume", "__VERIFIER_assume", "assume_abort_if_not"):
            lines.append(f"void {name}(int c) {{ if (!c) _exit(0); }}")
        elif name.startswith("INVARIANT_MARKER") or name == "__VERIFIER_marker":
            lines.append(f"void {name}(void) {{}}")
    return "\n".join(lines) + "\n" + cfront.to_source(tree)


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (10, 10))
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 24, 1 << 24))


def replay(
    ast: c_ast.FileAST, values: list[int], *, data_model: str = "ILP32", timeout_s: float = 10.0
) -> Replay:
    """Compile and run the program on `values`; confirmed iff it reaches `reach_error`."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return Replay(False, "gcc not found: the counterexample cannot be confirmed")
    src = program_source(ast, values, data_model=data_model)
    with tempfile.TemporaryDirectory(prefix="vb-replay-") as tmp:
        cfile = os.path.join(tmp, "cex.c")
        exe = os.path.join(tmp, "cex")
        with open(cfile, "w") as fh:
            fh.write(src)
        flags = [
            "-std=gnu11", "-O0", "-w", "-fno-builtin",
            "-fsanitize=signed-integer-overflow,integer-divide-by-zero,shift",
            "-fno-sanitize-recover=all",
        ]
        comp = subprocess.run(
            [gcc, *flags, cfile, "-o", exe], capture_output=True, text=True, timeout=60, cwd=tmp
        )
        if comp.returncode != 0:
            first = (comp.stderr.strip().splitlines() or ["?"])[0]
            return Replay(False, f"replay program did not compile: {first}")
        proc = subprocess.Popen(
            [exe], cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_limits,
            env={"PATH": "/usr/bin:/bin", "UBSAN_OPTIONS": "halt_on_error=1"},
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Replay(False, "replay timed out")
        text = out.decode(errors="replace")
        etext = err.decode(errors="replace")
        if proc.returncode == 99 and _MARK in text:
            return Replay(True, "reach_error reached by the compiled program")
        if "runtime error" in etext:
            line = next(x for x in etext.splitlines() if "runtime error" in x)
            return Replay(False, f"undefined behaviour on the trace: {line.strip()}")
        if proc.returncode == 97:
            return Replay(False, "the program asked for more inputs than the trace has")
        return Replay(False, f"program ended without reaching reach_error (exit {proc.returncode})")
