"""Floating point in the Horn encoding: opaque values (`floats`), so a property that holds
whatever the doubles are is proved by Spacer with a re-checked proof, and one that
depends on them is never TRUE from the abstraction (BMC's replayed trace decides)."""

from __future__ import annotations

import pytest

from tests.support.z3c_programs import assert_never_true
from veribatch.verifiers.z3c import api, chc
from veribatch.verifiers.z3c.encode import encode
from veribatch.verifiers.z3c.engines import parsed

# a loop over doubles beside the asserted integers; a static double, a conversion, `!`
PROGRAM = """extern void reach_error(void);
extern int __VERIFIER_nondet_int(void);
extern double __VERIFIER_nondet_double(void);
void __VERIFIER_assert(int c) { if (!c) reach_error(); }
double g;
int main() {
  int n = __VERIFIER_nondet_int(), k = 0;
  double t = __VERIFIER_nondet_double(), s = 0.0;
  if (n < 0 || n > 1000) return 0;
  while (t > 0) { t -= 1.0; s = s + t * 0.5; if (s > 3.0 && !(t == 2.5f)) k++; if (k > n) break; }
  int m = (int) s;
  __VERIFIER_assert(ASSERTION);
  for (int i = 0; i < n; i++) { g = g + 1.5; k++; }
  __VERIFIER_assert(k >= 0 || -g < 0.0);
  return 0;
}
"""


def test_spacer_proves_an_integer_property_beside_doubles_and_the_proof_rechecks():
    text = PROGRAM.replace("ASSERTION", "k <= n + 1 && (m >= -2147483647 - 1)")
    enc = encode(parsed(text), mode="chc")
    assert enc.over_approximate
    ans = chc.solve(enc, timeout_ms=60_000)
    assert ans.status == "safe", ans.reason
    ok, why = chc.validate(enc, ans.interps, timeout_ms=20_000)
    assert ok is True, why
    res = api.verify(text, 30, in_process=True)
    assert res.status.value == "TRUE" and res.extras["proof"] == "spacer", res.reason


@pytest.mark.parametrize("assertion", [
    "k <= n",      # k reaches n + 1 when the loop breaks
    "m != 0",      # (int) s is 0 when the loop never runs
    "s == 0.0",    # depends on the doubles: spurious or not, never TRUE from the abstraction
])
def test_unsafe_programs_over_doubles_are_never_true(assertion):
    assert_never_true(PROGRAM.replace("ASSERTION", assertion), assertion)


def test_a_property_of_the_doubles_is_not_proved_in_the_horn_encoding():
    """`x * x >= 0` holds for every double but depends on its value: the abstraction cannot
    prove it (its error is reachable there) and says the clauses over-approximate."""
    text = PROGRAM.replace("ASSERTION", "1").replace(
        "int m = (int) s;", "int m = (int) s; __VERIFIER_assert(!(t * t < 0.0));")
    enc = encode(parsed(text), mode="chc")
    assert enc.over_approximate
    assert chc.solve(enc, timeout_ms=30_000).status == "unsafe"


@pytest.mark.parametrize(("guard", "expected"), [
    ("d && k == 0", "unsafe"),   # d == 0.5: true, and (int) d == 0
    ("d && !d", "safe"),         # one value's truth, however often it is read
])
def test_a_double_s_truth_is_not_tied_to_its_conversion(guard, expected):
    """The opaque term's truth (`if (d)`) and `(int) d` must not constrain each other: a
    double 0.5 is true and converts to 0."""
    text = ("extern void reach_error(void);\nextern double __VERIFIER_nondet_double(void);\n"
            "int main() { double d = __VERIFIER_nondet_double(); int k = d;\n"
            f"  if ({guard}) reach_error();\n  return 0; }}\n")
    assert chc.solve(encode(parsed(text), mode="chc"), timeout_ms=30_000).status == expected
