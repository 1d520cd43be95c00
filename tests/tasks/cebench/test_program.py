"""LaM4Inv programs → SV-COMP programs, P and B, and the §3.2.1 instrumentation (real data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cebench_gcc import c_holds, gcc_run
from veribatch.tasks.cebench.instrument import instrument, prompt_program
from veribatch.tasks.cebench.program import ProgramError, c_literal, normalise
from veribatch.verifiers import cfront


def _prog(root: Path, name: str):
    return normalise((root / "Benchmarks/Linear/c" / name).read_text(), name)


def test_every_real_program_normalises(lam4inv_root: Path) -> None:
    files = sorted((lam4inv_root / "Benchmarks/Linear/c").glob("*.c"))
    assert len(files) == 317
    progs = [normalise(p.read_text(), p.name) for p in files]
    assert sum(1 for p in progs if p.precondition is not None) == 317
    for p in progs:
        text = p.text()
        assert "unknown()" not in text and "unkown()" not in text and "assume(" not in text
        assert "void reach_error(void)" in text
    for p in progs[::16]:  # the normal form is C the front end reads (a sample: cpp is slow)
        assert cfront.parse(p.text(), filename=p.file)


@pytest.mark.parametrize(("name", "pre", "guard"), [
    ("1.c", "x == 1 && y == 0", "y < 100000"),
    ("77.c", "i == 0 && (x >= 0) && (y >= 0) && (x >= y)", "1"),  # while (unknown())
    ("test.c", "x == n && y == 0 && (n >= 0)", "x > 0"),                     # int x = n, after assume
    ("300.c", "i == 0 && k == 0 && j == 0 && (n <= 20000001)", "i < n"),
    ("212.c", "unowned == 0 && nonexclusive == 0 && exclusive == 0 && (invalid >= 1)",
     "!(((nonexclusive + unowned) >= 1) && (invalid >= 1))"),
])
def test_precondition_and_guard(lam4inv_root: Path, name: str, pre: str, guard: str) -> None:
    p = _prog(lam4inv_root, name)
    assert (p.precondition, p.guard) == (pre, guard)


def test_a_value_read_then_overwritten_leaves_p_undefined() -> None:
    p = normalise("int main() { int x; int y; y = x; x = 0; while (x < y) { x = x + 1; } assert(x == y); }", "t.c")
    assert p.precondition is None and "input value of x" in (p.precondition_note or "")
    with pytest.raises(ProgramError, match="2 loops"):
        normalise("int main() { int i = 0; while (i < 3) i++; while (i > 0) i--; }", "two.c")


def test_literals_keep_their_value_in_c() -> None:
    assert c_literal(-2**31, "int") == "(-2147483647 - 1)" and c_literal(2**32 - 1, "unsigned int") == "4294967295U"
    p = normalise("int main() { int x; unsigned int u; while (x < 3) { x = x + 1; } }", "t.c")
    state = {"x": -2**31, "u": 2**32 - 1}
    assert c_holds(p, f"x < -2147483647 && u == {c_literal(2**32 - 1, 'unsigned int')} && u > 0", state)
    assert c_holds(p, p.state_expr(state), state)


def test_instrumentation_sites_and_the_prompt_program(lam4inv_root: Path) -> None:
    p = _prog(lam4inv_root, "1.c")
    state = {"x": 1, "y": 0}
    start = instrument(p, state, "Inductive").program
    end = instrument(p, state, "UNSAT_Pre").program
    assert "__VERIFIER_assert(!((x == 1) && (y == 0)));" in start
    body_start = start[start.index("while"):]
    assert body_start.index("__VERIFIER_assert") < body_start.index("x = x + y")
    body_end = end[end.index("while"):]
    assert body_end.index("y = y + 1") < body_end.index("__VERIFIER_assert")
    # the original post-condition is gone from the instrumented program, kept in p.text()
    assert "x >= y" not in start and "__VERIFIER_assert(x >= y)" in p.text()
    shown = prompt_program(p, "UNSAT_Pre")
    assert "CHECK POINT" in shown and "__VERIFIER_assert" not in shown and "reach_error" not in shown
    # the instrumented program is real C: with nondet stubs gcc builds and runs it
    stubs = ("#include <stdlib.h>\nint __VERIFIER_nondet_int(void) { return 0; }\n"
             "void __assert_fail(const char *a, const char *b, unsigned int c, const char *d) { exit(3); }\n")
    program = start.replace("extern int __VERIFIER_nondet_int(void);", "").replace(
        "extern void abort(void);", "").replace(
        "extern void __assert_fail(const char *, const char *, unsigned int, const char *);", "")
    main_body = program[program.index("int main()") + len("int main()"):].strip()[1:-1]
    helpers = program[:program.index("int main()")]
    # x = 1, y = 0 is the first loop-head state: the assertion fails at once (exit 3)
    assert gcc_run(main_body, stubs + helpers) == 3
