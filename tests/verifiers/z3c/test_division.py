"""`/` and `%` by a variable in the Horn encoding: fresh quotient and remainder.

Spacer rejects `div`/`mod` by a non-literal ("Uninterpreted 'div'"); the encoding
gives it q, r with C's truncating definition instead, conjoined to every clause
that mentions them, and Spacer's proofs still pass `chc.validate`.
"""

from __future__ import annotations

import pytest

from veribatch.verifiers.z3c import chc
from veribatch.verifiers.z3c.encode import encode
from veribatch.verifiers.z3c.engines import parsed

_HEAD = ("extern void reach_error(void);\nextern int __VERIFIER_nondet_int(void);\n"
         "void __VERIFIER_assert(int c) { if (!c) reach_error(); }\n")

DIGITS = _HEAD + """int main() {
  int n = __VERIFIER_nondet_int(), b = __VERIFIER_nondet_int();
  if (n < 0 || b < 2) return 0;
  int s = 0;
  while (n > 0) { int d = n % b; __VERIFIER_assert(d >= 0 && d < b); s += d; n = n / b; }
  __VERIFIER_assert(s >= 0 && n == 0);
  return 0;
}
"""


def _spacer(text: str) -> tuple[str, object]:
    enc = encode(parsed(text), mode="chc")
    return chc.solve(enc, timeout_ms=60_000), enc


# Z3 resource units per Spacer run: DIGITS needs about 9,000 in a fresh process; the budget
# is counted in steps, not seconds, so the machine's load does not change the outcome.
SPACER_RLIMIT = 5_000_000


def test_spacer_proves_a_loop_dividing_by_a_variable_and_the_proof_rechecks():
    """Spacer's path depends on the history of the Z3 context (the terms earlier tests left
    in it, `engines.fresh_context`): one seed may wander where another proves it at once.
    Restarts with other seeds, as the portfolio's rounds do, each bounded by resource units
    (the wall-clock limit is only a backstop); the proof found must re-check all the same."""
    enc = encode(parsed(DIGITS), mode="chc")
    tried = []
    for seed in range(4):
        ans = chc.solve(enc, timeout_ms=300_000, rlimit=SPACER_RLIMIT, seed=seed)
        tried.append(ans.reason)
        if ans.status != "unknown":
            break
    assert ans.status == "safe", tried
    ok, why = chc.validate(enc, ans.interps, timeout_ms=20_000)
    assert ok is True, why


@pytest.mark.parametrize(("cond", "expected"), [
    ("a < 0 && r > 0", "safe"),          # the remainder takes the dividend's sign
    ("a < 0 && r < 0", "unsafe"),        # -7 % 2 == -1
    ("a == -7 && b == 2 && q != -3", "safe"),  # truncation toward zero, not floor
    ("a == -7 && b == 2 && q == -3", "unsafe"),
    ("b > 0 && a % b >= b", "safe"),     # `&&`'s right operand: its definition still holds
])
def test_quotient_and_remainder_are_c_s(cond, expected):
    text = _HEAD + ("int main() { int a = __VERIFIER_nondet_int(), b = __VERIFIER_nondet_int();\n"
                    "  if (b == 0 || a == -2147483648) return 0;\n"
                    "  int q = a / b, r = a % b;\n"
                    f"  if ({cond}) reach_error();\n"
                    "  return 0; }\n")
    ans, _ = _spacer(text)
    assert ans.status == expected, (cond, ans.status, ans.reason)


def test_templates_member_keeps_div_spacer_gets_fresh_quotients():
    """The templates member's concrete runs and Houdini checks handle `mod` well and the fresh
    quotient's non-linear definition badly: it solves the clauses with `div`/`mod` kept."""
    from veribatch.verifiers.z3c import engines

    text = DIGITS.replace("int s = 0;", "int s = 0; int u = 0;")  # a fresh text: no cache shared
    _, spacer_enc = engines.spacer_program(text)
    _, templates_enc = engines.templates_program(text)
    assert spacer_enc.fresh_divisions and not templates_enc.fresh_divisions
    names = {str(c.constraint) for c in templates_enc.clauses}
    assert not any("quot!" in n or "rem!" in n for n in names)
    assert any("quot!" in str(c.constraint) for c in spacer_enc.clauses)
