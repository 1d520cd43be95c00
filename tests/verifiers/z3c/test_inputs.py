"""Input functions beyond the SV-COMP nondet calls: `scanf` reads inputs.

`scanf(fmt, &x, ...)` returns a count r in -1..k and stores only into its first
r targets; a FALSE must replay with the same reading of the trace's inputs
(`replay`'s own scanf), a TRUE must hold for every r.
"""

from __future__ import annotations

from veribatch.verifiers.result import Status
from veribatch.verifiers.z3c import api

_HEAD = "extern void reach_error(void);\nvoid __VERIFIER_assert(int c) { if (!c) reach_error(); }\n"


def test_scanf_input_bounds_a_loop_proved_for_every_input():
    text = _HEAD + (
        "int main() { int n, i, s = 0;\n"
        "  if (scanf(\"%d\", &n) != 1 || n < 0 || n > 1000000) return 0;\n"
        "  for (i = 0; i < n; i++) s += 2;\n"
        "  __VERIFIER_assert(s == 2 * n);\n"
        "  return 0; }\n"
    )
    res = api.verify(text, 30, in_process=True)
    assert res.status is Status.TRUE, res.reason
    assert res.extras["proof_checked"] is True


def test_scanf_counterexample_replays_with_its_count_and_values():
    text = _HEAD + (
        "int main() { int n = 7; unsigned char c; long m = 3;\n"
        "  int k = scanf(\"%d %hhu%ld\", &n, &c, &m);\n"
        "  if (k == 2 && n == 5 && c == 200 && m == 3) reach_error();\n"
        "  return 0; }\n"
    )
    res = api.verify(text, 30, in_process=True)
    assert res.status is Status.FALSE, res.reason
    cex = res.extras["counterexample"]
    assert cex["replay"] == "reach_error reached by the compiled program"
    assert 5 in cex["inputs"] and 200 in cex["inputs"]


def test_scanf_leaves_targets_past_its_count_unchanged():
    # Were every target overwritten whatever the count, `k <= 1 && m != 3` would be reachable.
    text = _HEAD + (
        "int main() { int n = 7; long m = 3;\n"
        "  int k = scanf(\"%d%ld\", &n, &m);\n"
        "  if (k <= 1 && m != 3) reach_error();\n"
        "  if (k > 2 || k < -1) reach_error();\n"
        "  return 0; }\n"
    )
    res = api.verify(text, 30, in_process=True)
    assert res.status is Status.TRUE, res.reason


def test_scanf_of_a_string_is_outside_the_subset():
    text = _HEAD + (
        "int main() { char b[8]; int n = 0;\n"
        "  scanf(\"%s\", b);\n"
        "  if (n) reach_error();\n"
        "  return 0; }\n"
    )
    res = api.verify(text, 10, in_process=True)
    assert res.status is Status.UNKNOWN
    assert "scanf format" in res.reason
