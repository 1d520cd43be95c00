"""Recursive functions in the Horn encoding: summary predicates, non-linear clauses.

Each program below is unbounded (the recursion depth is an input), so a TRUE can only
come from Spacer's summaries re-checked by `chc.validate`, never from a complete
unrolling; each unsafe twin must be FALSE by a gcc-replayed trace, never TRUE.
"""

from __future__ import annotations

import pytest
import z3

from tests.support.z3c_programs import prog
from veribatch.verifiers.result import Status
from veribatch.verifiers.z3c import api, chc, engines
from veribatch.verifiers.z3c.encode import encode
from veribatch.verifiers.z3c.engines import parsed

FIB = "int fib(int n) { if (n <= 1) return n; return fib(n - 1) + fib(n - 2); }\n"
EVEN_ODD = ("int odd(int n);\nint even(int n) { if (n == 0) return 1; return odd(n - 1); }\n"
            "int odd(int n) { if (n == 0) return 0; return even(n - 1); }\n")
DOWN = "int down(int n) { __VERIFIER_assert(N_OK); if (n <= 0) return 0; return down(n - 1); }\n"
FACT = "int fact(int n) { if (n <= 1) return 1; return n * fact(n - 1); }\n"
_INPUT = "int n = __VERIFIER_nondet_int(); assume_abort_if_not(BOUND);\n"


def _main(check: str, bound: str = "n >= 0") -> str:
    return "int main() { " + _INPUT.replace("BOUND", bound) + f"  {check} return 0; }}\n"


CASES = [
    # two recursive calls in one body: a non-linear Horn clause
    ("fib", "TRUE", FIB + _main("__VERIFIER_assert(fib(n) >= 0);"), {"fib"}),
    ("fib", "FALSE", FIB + _main("__VERIFIER_assert(fib(n) != 5);", "n >= 0 && n < 20"), None),
    # mutual recursion: two summaries, each used in the other's clauses
    ("even-odd", "TRUE", EVEN_ODD + _main("__VERIFIER_assert(even(n) + odd(n) == 1);"),
     {"even", "odd"}),
    ("even-odd", "FALSE", EVEN_ODD + _main("__VERIFIER_assert(even(n) == 1 || n != 3);"), None),
    # an assertion inside the recursive function: checked for the calls that happen
    ("assert-inside", "TRUE", DOWN.replace("N_OK", "n >= 0") + _main("down(n);"), {"down"}),
    ("assert-inside", "FALSE", DOWN.replace("N_OK", "n != 3") + _main("down(n);", "n >= 0 && n < 10"),
     None),
    # calls from a loop of main: the loop's step clause has the summary in its body
    ("loop-calls", "TRUE", FACT + "int main() { int i, s = 0; " + _INPUT.replace("BOUND", "n >= 0")
     + "  for (i = 0; i < n; i++) { s += fact(i); } __VERIFIER_assert(s >= i); return 0; }\n", {"fact"}),
    ("loop-calls", "FALSE", FACT + "int main() { int i, s = 0; " + _INPUT.replace("BOUND", "n >= 0 && n < 9")
     + "  for (i = 0; i < n; i++) { s += fact(i); } __VERIFIER_assert(s != 10); return 0; }\n", None),
]


@pytest.mark.parametrize(("name", "expected", "body", "functions"), CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_recursive_program_verdict(name, expected, body, functions):
    res = api.verify(prog(body), 30, in_process=True)
    assert str(res.status) == expected, (name, res.status, res.reason)
    if res.status is Status.FALSE:
        assert res.extras["counterexample"]["replay"] == "reach_error reached by the compiled program"
        return
    assert res.extras["proof"] == "spacer" and res.extras["proof_checked"] is True
    # the summaries are reported apart, as SMT terms, never among the loop invariants
    summaries = res.extras["summaries"]
    assert {s["function"] for s in summaries} == functions
    assert all(s["kind"] in ("returns", "calls") and s["smt"] for s in summaries)
    assert all("\\result" not in i["invariant"] for i in res.extras["invariants"])


def test_a_non_linear_clause_proof_is_rechecked_clause_by_clause():
    """fib's body gives a clause with two summary applications; `chc.validate` checks
    Spacer's interpretation on it and rejects one that is not a summary of fib."""
    enc = encode(parsed(prog(FIB + _main("__VERIFIER_assert(fib(n) >= 0);"))), mode="chc")
    assert [p.decl.name() for p in enc.preds] == ["sum_fib"]
    assert any(len(c.body) == 2 and c.kind == "summary" for c in enc.clauses)
    ans = chc.solve(enc, timeout_ms=20_000)
    assert ans.status == "safe", ans.reason
    assert chc.validate(enc, ans.interps, timeout_ms=10_000) == (True, None)
    # "fib returns at least 1" is false for fib(0): the base case's clause is violated
    wrong = {"sum_fib": z3.Var(1, z3.IntSort()) >= 1}
    ok, why = chc.validate(enc, wrong, timeout_ms=10_000)
    assert ok is False and "summary" in why


def test_templates_member_proves_a_loop_after_a_recursive_call():
    """The templates' guesses follow the loop with the call's result any value; the proof
    (summaries read as true) is re-checked on the clauses with the summaries."""
    gcd = "int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }\n"
    text = prog(gcd + "int main() { int x = __VERIFIER_nondet_int(), y = __VERIFIER_nondet_int(), i, s = 0;\n"
                "  assume_abort_if_not(x > 0 && y > 0); int g = gcd(x, y);\n"
                "  for (i = 1; i <= 10; i++) { s += i * g; }\n"
                "  __VERIFIER_assert(s == g * 55); return 0; }\n")
    got = engines.run_templates(text, 20)
    assert got["answer"] == "safe", got
    assert got["proof"].startswith("templates") and got["proof_checked"] is True
    assert [s["function"] for s in got["summaries"]] == ["gcd"]


def test_recursion_a_summary_cannot_hold_stays_bounded_and_is_never_proved():
    """A recursive function writing a global: its effect is no summary argument, so the
    recursion stays BMC only (inlined to the unrolling depth, never TRUE), with the reason."""
    text = prog("int calls = 0;\n"
                "int sum(int n) { calls++; if (n <= 0) return 0; return n + sum(n - 1); }\n"
                "int main() { int n = __VERIFIER_nondet_int(); assume_abort_if_not(n >= 0);\n"
                "  __VERIFIER_assert(sum(n) != 7); return 0; }")  # true, but only by induction
    res = api.verify(text, 3, in_process=True)
    assert res.status in (Status.UNKNOWN, Status.TIMEOUT), (res.status, res.reason)
    assert "recursion (sum) outside the Horn encoding: sum names the global calls" in res.reason


def test_a_product_inside_a_summary_does_not_schedule_templates_early():
    """`n * fact(n - 1)` is in fact's summary clauses, which templates never sample: the
    loop of main is linear, so the portfolio keeps templates for a later round."""
    from veribatch.verifiers.z3c import templates

    enc = encode(parsed(prog(CASES[6][2])), mode="chc")
    assert any(c.kind == "summary" and not templates._linear(c.constraint, *c.head.children())
               for c in enc.clauses)
    assert templates.nonlinear(enc) is False


_HEAP_MAIN = ("int main() { int n = __VERIFIER_nondet_int(); assume_abort_if_not(n > 0 && n < 4);\n"
              "  int *a = malloc(n * sizeof(int)); if (!a) return 0;\n"
              "  for (int i = 0; i < n; i++) a[i] = fib(i);\n"
              "  __VERIFIER_assert(CHECK); free(a); return 0; }\n")


@pytest.mark.parametrize(("check", "expected"), [("a[n - 1] >= 0", "TRUE"), ("a[n - 1] != 1", "FALSE")])
def test_a_recursive_function_touching_no_memory_is_summarised_in_a_heap_program(check, expected):
    """The heap is no summary argument, but a call of a function that touches no memory
    leaves it as it was: the program's other memory is in the clauses, fib is a summary."""
    text = prog("extern void *malloc(unsigned long); extern void free(void *);\n" + FIB
                + _HEAP_MAIN.replace("CHECK", check))
    res = api.verify(text, 30, in_process=True)
    assert str(res.status) == expected, res.reason
    if res.status is Status.FALSE:
        assert res.extras["counterexample"]["replay"] == "reach_error reached by the compiled program"
    else:
        assert res.extras["proof"] == "spacer" and [s["function"] for s in res.extras["summaries"]] == ["fib"]


def test_a_recursive_function_touching_memory_stays_bounded():
    text = prog("extern void *malloc(unsigned long);\n"
                "int sum(int *a, int n) { if (n <= 0) return 0; return a[n - 1] + sum(a, n - 1); }\n"
                "int main() { int n = __VERIFIER_nondet_int(); assume_abort_if_not(n > 0 && n < 100000);\n"
                "  int *a = malloc(n * sizeof(int)); if (!a) return 0;\n"
                "  for (int i = 0; i < n; i++) a[i] = 1;\n"
                "  __VERIFIER_assert(sum(a, n) == n); return 0; }\n")
    res = api.verify(text, 3, in_process=True)
    assert res.status in (Status.UNKNOWN, Status.TIMEOUT), (res.status, res.reason)
    assert "recursion (sum) outside the Horn encoding: the program uses memory and sum may touch it" in res.reason
