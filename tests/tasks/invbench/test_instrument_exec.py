"""The instrumented programs, compiled with gcc and executed: ψ sits at the loop head.

Independent of any verifier: a concrete run of d_a's program reaches reach_error()
exactly when ψ fails at some loop head of that run, and the original target no longer
counts; d_b's program stops (abort) where ψ fails and still reports the target.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from veribatch.tasks.invbench.instrument import instrument

SAMPLE = Path(__file__).resolve().parents[3] / "veribatch" / "tasks" / "invbench" / "sample"
HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
static int vals[64], nvals, pos;
__attribute__((constructor)) static void load(void) {
    char *s = getenv("VB_NONDET");
    while (s && *s && nvals < 64) { vals[nvals++] = (int) strtol(s, &s, 10); if (*s == ',') s++; }
}
int __VERIFIER_nondet_int(void) { return pos < nvals ? vals[pos++] : 0; }
void __assert_fail(const char *a, const char *f, unsigned int l, const char *fn) {
    puts("REACHED_ERROR"); fflush(stdout); exit(3);
}
"""

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


def _run(tmp_path: Path, program: str, nondet: list[int], tag: str) -> str:
    """'error' (reach_error called), 'abort' (an assume/abort stopped it) or 'ok'."""
    src, harness, exe = tmp_path / f"{tag}.c", tmp_path / "harness.c", tmp_path / tag
    src.write_text(program)
    harness.write_text(HARNESS)
    subprocess.run(["gcc", "-w", "-o", str(exe), str(src), str(harness)], check=True)
    proc = subprocess.run([str(exe)], env={**os.environ, "VB_NONDET": ",".join(map(str, nondet))},
                          capture_output=True, text=True, timeout=10)
    if "REACHED_ERROR" in proc.stdout:
        return "error"
    return "abort" if proc.returncode < 0 else "ok"


def _both(tmp_path: Path, name: str, psi: str, nondet: list[int], label: int = 1) -> tuple[str, str]:
    progs = instrument((SAMPLE / name).read_text(), label, psi, filename=name)
    return _run(tmp_path, progs.check_invariant, nondet, "a"), _run(tmp_path, progs.use_invariant, nondet, "b")


def test_while_head_true_and_false_invariant(tmp_path: Path) -> None:
    assert _both(tmp_path, "count_up.c", "x <= n", [3]) == ("ok", "ok")
    # x < n fails at the last head (x == n): d_a reports it, d_b's assume stops the run.
    assert _both(tmp_path, "count_up.c", "x < n", [3]) == ("error", "abort")


def test_original_target_is_dropped_in_d_a_only(tmp_path: Path) -> None:
    # off_by_one violates its target for every n; with a trivial ψ only d_b reports it.
    assert _both(tmp_path, "off_by_one.c", "1", [4]) == ("abort", "error")


def test_head_is_before_a_side_effecting_condition(tmp_path: Path) -> None:
    # counter is 0 at the first head (before counter++ runs): "counter >= 1" fails there,
    # although it holds everywhere inside the body.
    assert _both(tmp_path, "counter_cond.c", "counter >= 1", [])[0] == "error"
    assert _both(tmp_path, "counter_cond.c", "counter <= 20 && x == 2 * (counter / 2)", [])[0] == "ok"
    assert _both(tmp_path, "counter_cond.c", "counter <= 19", [])[0] == "error"


def test_for_head_sees_the_step_and_the_exit(tmp_path: Path) -> None:
    assert _both(tmp_path, "parity_split.c", "e + o == i", [])[0] == "ok"
    assert _both(tmp_path, "parity_split.c", "e + o == i && i < 100", [])[0] == "error"


def test_do_while_head_is_the_body_start(tmp_path: Path) -> None:
    assert _both(tmp_path, "do_while_even.c", "x % 2 == 0 && x < n", [5]) == ("ok", "ok")
    assert _both(tmp_path, "do_while_even.c", "x < 4", [5])[0] == "error"


def test_inner_loop_label(tmp_path: Path) -> None:
    # loop 2 is the inner for: j <= m holds at its head, j < m does not.
    assert _both(tmp_path, "nested.c", "j <= m && c >= 0", [2, 3], label=2)[0] == "ok"
    assert _both(tmp_path, "nested.c", "j < m", [2, 3], label=2)[0] == "error"


def test_a_set_of_invariants_is_asserted_and_assumed_together(tmp_path: Path) -> None:
    """§5.4 supplies all of a program's invariants at once: d_a fails if any one fails."""
    from veribatch.tasks.invbench.instrument import InstrumentationError, instrument_all

    program = (SAMPLE / "nested.c").read_text()

    def both(invs: list[tuple[int, str]]) -> tuple[str, str]:
        progs = instrument_all(program, invs, filename="nested.c")
        return _run(tmp_path, progs.check_invariant, [2, 3], "a"), _run(tmp_path, progs.use_invariant, [2, 3], "b")

    assert both([(1, "i <= n && c == i * m"), (2, "j <= m && c >= 0")]) == ("ok", "ok")
    assert both([(1, "i <= n && c == i * m"), (2, "j < m")]) == ("error", "abort")  # the inner one fails
    assert both([(1, "i < n"), (2, "j <= m")]) == ("error", "abort")  # the outer one fails at its exit
    # two ψ for one loop are conjoined
    assert both([(2, "j <= m"), (2, "j < m")])[0] == "error"
    with pytest.raises(InstrumentationError, match="no loop 7"):
        instrument_all(program, [(1, "1"), (7, "1")], filename="nested.c")
