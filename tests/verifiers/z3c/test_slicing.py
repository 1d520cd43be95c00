"""Cone of influence (`verifiers.z3c.slicing`): what Spacer may treat as arbitrary."""

from __future__ import annotations

from veribatch.verifiers import cfront
from veribatch.verifiers.result import Status
from veribatch.verifiers.z3c import api, engines
from veribatch.verifiers.z3c.slicing import irrelevant_names

H = """extern void abort(void); void reach_error(void); extern int __VERIFIER_nondet_int(void);
void __VERIFIER_assert(int c) { if (!c) { reach_error(); abort(); } }
"""


def _irrelevant(body: str) -> set[str]:
    return set(irrelevant_names(cfront.parse(H + body)))


def test_only_names_that_never_reach_a_branch_call_or_return_are_sliced():
    # x only feeds itself and w; w feeds nothing: both irrelevant; y reaches the assert via z
    assert _irrelevant("""int main() { int n = __VERIFIER_nondet_int(); int x = 0, y = 0, z, w, i;
        for (i = 0; i < n; i++) { x = x * x + i; w = x; y = y + 2; }
        z = y; __VERIFIER_assert(z % 2 == 0); return 0; }""") == {"x", "w"}
    # a value used as a condition, passed to a function or returned is relevant
    assert _irrelevant("int main() { int a, b, c, d; a = 1; b = 2; c = 3; d = 4;\n"
                       "  if (a = b) { c = 0; } __VERIFIER_assert(c >= 0); return d; }") == set()
    # a right-hand side with a call or an assignment in it makes all its names relevant
    assert _irrelevant("int f(int v) { return v; } int main() { int p = 1, q = 2, r;\n"
                       "  r = f(p) + q; r = (q = 3); return 0; }") == {"r"}


def test_spacer_proves_on_the_slice_and_candidates_still_see_the_whole_program():
    text = H + """int main() { int n = __VERIFIER_nondet_int(); long long x = 0; int c = 0, y = 0;
        while (c < n) { c = c + 1; y = y + 1; x = x + (long long)y * y * y; }
        __VERIFIER_assert(y == c); return 0; }"""
    ast, sliced = engines.spacer_program(text)
    _, whole = engines.program(text)
    assert "x" in irrelevant_names(ast)
    assert sliced is not whole
    res = api.verify(text, 20, in_process=True)
    assert res.status is Status.TRUE and res.extras["proof_checked"]
    # x's update is gone from Spacer's clauses but not from the candidate checks' ones
    def step(enc) -> str:
        [clause] = [c for c in enc.clauses if c.kind == "step"]
        return f"{clause.constraint} {clause.head}"

    assert "*" not in step(sliced) and "*" in step(whole)
    # a candidate about x is judged on the real updates: x >= 0 is inductive there
    assert api.check_candidate(text, 1, "x >= 0 && y == c && c >= 0", 5000).ok
