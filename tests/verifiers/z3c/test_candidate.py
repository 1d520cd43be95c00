"""Candidate invariants ⟨ψ, loop⟩: initiation, consecution, safety with ICE examples; OMT bounds."""

from __future__ import annotations

import pytest

from veribatch.verifiers.z3c import api

LOOP = """
extern int __VERIFIER_nondet_int(void);
void reach_error(void);
int main() {
  int n = __VERIFIER_nondet_int();
  if (!(n >= 0 && n <= 1000)) return 0;
  int i = 0; int s = 0;
  while (i < n) {
    i = i + 1;
    s = s + 2;
  }
  if (s != 2 * n) reach_error();
  return 0;
}
"""


def test_valid_inductive_invariant_passes_all_three():
    res = api.check_candidate(LOOP, 1, "s == 2 * i && i <= n", 1000)
    assert (res.initiation, res.consecution, res.safety) == (True, True, True)
    assert res.ok and res.failed is None and res.exact


def test_initiation_failure_gives_a_reachable_entry_state():
    res = api.check_candidate(LOOP, 1, "s == 2 * i && i >= 1", 1000)
    assert res.initiation is False and res.failed == "initiation"
    assert res.state["i"] == 0 and res.state["s"] == 0 and 0 <= res.state["n"] <= 1000


def test_consecution_failure_gives_pre_and_post_state():
    res = api.check_candidate(LOOP, 1, "s == 2 * i && i <= n && s <= 10", 1000)
    assert res.initiation is True and res.consecution is False and res.failed == "consecution"
    pre, post = res.pre, res.post
    # pre satisfies ψ and the loop condition; post is one iteration later and violates ψ
    assert pre["s"] == 2 * pre["i"] and pre["i"] < pre["n"] and pre["s"] <= 10
    assert post["i"] == pre["i"] + 1 and post["s"] == pre["s"] + 2 and post["s"] > 10


def test_safety_failure_gives_a_head_state_that_reaches_the_error():
    res = api.check_candidate(LOOP, 1, "i <= n", 1000)
    assert res.inductive and res.safety is False and res.failed == "safety"
    st = res.state
    assert st["i"] >= st["n"] and st["s"] != 2 * st["n"]


def test_candidates_must_be_side_effect_free_expressions_over_visible_variables():
    with pytest.raises(api.CandidateError, match="side effects"):
        api.check_candidate(LOOP, 1, "i++ > 0", 1000)
    with pytest.raises(api.CandidateError, match="undeclared identifier 'zz'"):
        api.check_candidate(LOOP, 1, "zz > 0", 1000)
    with pytest.raises(api.CandidateError, match="does not parse"):
        api.check_candidate(LOOP, 1, "i >", 1000)
    with pytest.raises(api.CandidateError, match="no loop 2"):
        api.check_candidate(LOOP, 2, "1", 1000)


def test_other_loops_are_over_approximated_and_flagged_inexact():
    two = LOOP.replace("  if (s != 2 * n) reach_error();",
                       "  int j = 0; while (j < 3) { j++; }\n  if (s != 2 * n) reach_error();")
    res = api.check_candidate(two, 2, "j <= 3", 1000)
    assert res.initiation is True and res.consecution is True
    assert res.exact is False  # the error path crosses loop 1's states


def test_omt_bounds_of_each_variable():
    bounds = api.omt_bounds(LOOP, 1, "s == 2 * i && i <= n && n <= 1000 && i >= 0 && !(s == 2 * n) && !(i < n)")
    # i >= n and i <= n force i == n, then s == 2n: the formula is unsatisfiable
    assert bounds == {"n": (None, None), "i": (None, None), "s": (None, None)}
    b = api.omt_boundaries(LOOP, 1, "s == 2 * i && i <= n && n <= 1000 && i >= 0")
    assert (b.low["i"], b.high["i"]) == (0, 1000)
    assert (b.low["s"], b.high["s"]) == (0, 2000)
    assert b.argmax["s"]["i"] == 1000 and b.argmax["s"]["n"] == 1000


def test_omt_unbounded_direction_is_none_without_type_ranges():
    b = api.omt_boundaries(LOOP, 1, "i >= 0 && s == 2 * i", type_ranges=False)
    assert b.low["i"] == 0 and b.high["i"] is None
    with_ranges = api.omt_boundaries(LOOP, 1, "i >= 0 && s == 2 * i")
    assert with_ranges.high["i"] == 1073741823  # s = 2i must fit an int
