"""Counterexamples are confirmed by gcc: the compiled program must reach reach_error, with no UB."""

from __future__ import annotations

from tests.support.z3c_programs import prog
from veribatch.verifiers import cfront
from veribatch.verifiers.result import Status
from veribatch.verifiers.z3c import api, replay

UNSAFE = prog("""int main() { int a = __VERIFIER_nondet_int(); int b = __VERIFIER_nondet_int();
  if (a > 10 && b == a + 3) reach_error(); return 0; }""")

OVERFLOW_ONLY = prog("""int main() { int x = __VERIFIER_nondet_int();
  assume_abort_if_not(x == 2147483647); x = x + 1; if (x < 0) reach_error(); return 0; }""")


def test_replay_confirms_a_real_trace_and_rejects_a_wrong_one():
    ast = cfront.parse(UNSAFE)
    assert replay.replay(ast, [11, 14]).confirmed
    bad = replay.replay(ast, [11, 15])
    assert not bad.confirmed and "without reaching reach_error" in bad.detail
    short = replay.replay(ast, [11])
    assert not short.confirmed and "more inputs" in short.detail


def test_replay_rejects_traces_with_undefined_behaviour():
    r = replay.replay(cfront.parse(OVERFLOW_ONLY), [2147483647])
    assert not r.confirmed and "undefined behaviour" in r.detail and "overflow" in r.detail


def test_error_reachable_only_through_signed_overflow_is_never_false():
    res = api.verify(OVERFLOW_ONLY, 5, in_process=True)
    assert res.status is not Status.FALSE


def test_uninitialised_locals_and_ilp32_long_are_replayed_as_modelled():
    text = prog("""int main() { int u; long w = __VERIFIER_nondet_int();
      if (u == 7 && w == -2) reach_error(); return 0; }""")
    src = replay.program_source(cfront.parse(text), [7, -2])
    assert "int u = __vb_nd();" in src and "int w = __VERIFIER_nondet_int();" in src
    res = api.verify(text, 10, in_process=True)
    assert res.status is Status.FALSE
    assert res.extras["counterexample"]["inputs"] == [7, -2]
