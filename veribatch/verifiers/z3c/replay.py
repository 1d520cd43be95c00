"""Confirm a counterexample by running the program with gcc on its input sequence.

A FALSE verdict is reported only when the real program, compiled by gcc with the
UB sanitizer (signed overflow, division by zero, bad shifts abort the run), fed
the nondet values of the BMC model in call order, actually calls `reach_error`.
That is an independent check of the encoder's C semantics: a trace that only
exists in the model (or needs undefined behaviour) is not confirmed.

The program is dataset code (a downloaded split, a user's ``easy:/path``), so it is
compiled and run in the judge's sandbox (`veribatch.verifiers.judge.run_sandboxed`, the box
the judge runs model programs in): namespaces, seccomp, no network, a scrubbed environment,
an unprivileged user, no view of other processes or of files outside its box, under CPU,
memory and wall limits.  Which box is chosen by $VERIBATCH_REPLAY_SANDBOX (`auto`, the
default; `bwrap`; `apptainer`; `unsafe`, only when asked for) and named on every replay
(`Replay.sandbox`, the counterexample's ``replay_sandbox``); without one the trace is not
replayed and the FALSE is not confirmed (UNKNOWN, with the sandbox's refusal as reason).

The replay runs what the encoder verified: a program's own definition of a
``__VERIFIER_nondet_*`` function is replaced by the input reader, since the encoder reads
every such call as one input whatever its body says.
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pycparser import c_ast

from veribatch.verifiers import cfront
from veribatch.verifiers.judge import SandboxUnavailable, detect_sandbox, run_sandboxed
from veribatch.verifiers.result import Limits
from veribatch.verifiers.z3c import encode

SANDBOX_ENV = "VERIBATCH_REPLAY_SANDBOX"
COMPILE_LIMITS = Limits(wall_s=60.0, cpu_s=60.0, memory_mb=2048)
RUN_CPU_S = 10.0
RUN_MEMORY_MB = 1024
OUTPUT_CAP = 1 << 20

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
    sandbox: str = ""  # the box it ran in (`Sandbox.label`), "" when it did not run


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

    ours = {"reach_error", "__assert_fail", "__VERIFIER_error"}
    # the program's own input functions go too: the encoder reads each call as one input
    inputs = {e.decl.name for e in tree.ext if isinstance(e, c_ast.FuncDef) and _is_input(e.decl.name)}
    tree.ext = [
        e for e in tree.ext
        if not (isinstance(e, c_ast.FuncDef) and e.decl.name in ours | inputs)
        and not (isinstance(e, c_ast.Decl) and e.name in ours | {"rand"})
    ]
    Calls().visit(tree)
    defined = {e.decl.name for e in tree.ext if isinstance(e, c_ast.FuncDef)}
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
    for name in sorted(called - defined):
        nd = encode.nondet_type_name(name)
        if name == "scanf":
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


def _is_input(name: str) -> bool:
    """A function the encoder reads as an input, whatever its definition."""
    return encode.nondet_type_name(name) is not None or name in _FLOAT_INPUTS


_FLAGS = ("-std=gnu11", "-O0", "-w", "-fno-builtin",
          "-fsanitize=signed-integer-overflow,integer-divide-by-zero,shift", "-fno-sanitize-recover=all")


def replay(
    ast: c_ast.FileAST, values: list[int], *, data_model: str = "ILP32", timeout_s: float = 10.0
) -> Replay:
    """Compile and run the program on `values` in the judge's sandbox; confirmed iff it
    reaches `reach_error`."""
    if shutil.which("gcc") is None:
        return Replay(False, "gcc not found: the counterexample cannot be confirmed")
    try:
        box = detect_sandbox(os.environ.get(SANDBOX_ENV) or "auto")
    except (SandboxUnavailable, ValueError) as e:
        return Replay(False, f"not replayed (no sandbox for dataset code): {e}")
    src = program_source(ast, values, data_model=data_model)
    # the compiler's output dir: the box's user must reach it, so not inside a private dir
    with tempfile.TemporaryDirectory(prefix="vb-replay-") as tmp, \
            tempfile.TemporaryDirectory(prefix="vb-replay-out-") as out_dir:
        work, out = Path(tmp), Path(out_dir)
        if box.uid is not None:
            os.chown(out, box.uid, box.uid)  # the compiler writes here as the box's user
        log = work / "compile.log"
        comp = run_sandboxed(["gcc", *_FLAGS, "cex.c", "-o", "out/cex"], {"cex.c": src.encode()},
                             COMPILE_LIMITS, stdin_path=None, stdout_path=log, stderr_path=log,
                             output_cap=OUTPUT_CAP, sandbox=box, writable={"out": out})
        exe = out / "cex"
        if comp.termination_reason != "exit" or comp.returncode != 0 or not exe.is_file():
            text = comp.error or comp.read_output()
            first = (text.strip().splitlines() or [comp.termination_reason])[0]
            return Replay(False, f"replay program did not compile: {first}", box.label)
        stdout, stderr = work / "stdout", work / "stderr"
        limits = Limits(wall_s=timeout_s, cpu_s=RUN_CPU_S, memory_mb=RUN_MEMORY_MB)
        run = run_sandboxed(["./cex"], {"cex": exe}, limits, stdin_path=None, stdin_data=b"",
                            stdout_path=stdout, stderr_path=stderr, output_cap=OUTPUT_CAP, sandbox=box,
                            syscalls="cpp")  # the judged programs' allow-list: no fork, no writes
        text = stdout.read_text(errors="replace") if stdout.is_file() else ""
        etext = stderr.read_text(errors="replace") if stderr.is_file() else ""
        if run.termination_reason not in ("exit", "signal"):
            why = run.error or run.termination_reason
            return Replay(False, f"replay stopped ({why})", box.label)
        if run.returncode == 99 and _MARK in text:
            return Replay(True, "reach_error reached by the compiled program", box.label)
        if "runtime error" in etext:
            line = next(x for x in etext.splitlines() if "runtime error" in x)
            return Replay(False, f"undefined behaviour on the trace: {line.strip()}", box.label)
        if run.returncode == 97:
            return Replay(False, "the program asked for more inputs than the trace has", box.label)
        return Replay(False, f"program ended without reaching reach_error (exit {run.returncode})", box.label)
