"""Every construct of the C subset, safe and unsafe twins, decided correctly.

FALSE verdicts only come from a counterexample confirmed by running the program
compiled with gcc, so each unsafe twin also exercises the replay; outside the
subset the verdict is UNKNOWN naming the construct.
"""

from __future__ import annotations

import itertools
import time

import pytest

from tests.support.z3c_programs import CASES, UNSUPPORTED, prog
from veribatch.verifiers.result import Status
from veribatch.verifiers.z3c import api, engines


@pytest.mark.parametrize(("name", "expected", "text"), CASES, ids=[c[0] for c in CASES])
def test_construct_verdict(name, expected, text):
    res = api.verify(text, 20, in_process=True)
    assert str(res.status) == expected, (name, res.status, res.reason)
    if res.status is Status.FALSE:
        cex = res.extras["counterexample"]
        assert cex["replay"] == "reach_error reached by the compiled program"
        assert isinstance(cex["inputs"], list)
    else:
        assert res.extras["proof"] in ("spacer", "complete-unrolling")


@pytest.mark.parametrize(("name", "construct", "text"), UNSUPPORTED, ids=[c[0] for c in UNSUPPORTED])
def test_unsupported_construct_is_unknown_with_reason(name, construct, text):
    res = api.verify(text, 10, in_process=True)
    assert res.status is Status.UNKNOWN
    assert construct in res.reason and "line 12" in res.reason


def test_true_carries_rechecked_invariant_in_c():
    # An unbounded loop (n is an input): only an invariant proves it, so the verdict cannot
    # come from a complete unrolling that happened to finish first.
    text = (
        "extern int __VERIFIER_nondet_int(void); void reach_error(void);\n"
        "int main() { int i = 0; int k = __VERIFIER_nondet_int(); int n = __VERIFIER_nondet_int();\n"
        "  if (!(k >= 0 && k < 100 && n < 1000000)) return 0;\n"
        "  int j = k;\n"
        "  while (i < n) { i++; j++; }\n"
        "  if (j != k + i) reach_error();\n"
        "  return 0; }\n"
    )
    res = api.verify(text, 20, in_process=True)
    assert res.status is Status.TRUE
    [inv] = res.extras["invariants"]
    assert inv["loop"] == 1 and inv["line"] == 5
    # The invariant is returned only after it re-checked as C; check it independently too.
    check = api.check_candidate(text, 1, inv["invariant"], 2000)
    assert check.ok, check


def test_no_error_call_is_safe_without_solving():
    res = api.verify("int main() { int x = 0; while (x < 3) x++; return x; }", 5, in_process=True)
    assert res.status is Status.TRUE


def test_parse_error_is_error_naming_the_line():
    """Text the tool cannot read is ERROR, as for every verifier (verifiers/result.py)."""
    res = api.verify("int main() {\n  int x = ;\n}\n", 5, in_process=True, filename="p.c")
    assert res.status is Status.ERROR and "p.c" in res.reason and "line 2" in res.reason


def test_undecidable_within_budget_is_timeout_or_unknown_never_a_verdict():
    # Fermat for cubes: no solutions exist, but neither Spacer nor BMC can show it.
    text = (
        "extern int __VERIFIER_nondet_int(void); void reach_error(void);\n"
        "int main() { long long a = __VERIFIER_nondet_int(), b = __VERIFIER_nondet_int(),"
        " c = __VERIFIER_nondet_int();\n"
        "  if (a < 1 || b < 1 || c < 1 || a > 100000 || b > 100000 || c > 100000) return 0;\n"
        "  if (a * a * a + b * b * b == c * c * c) reach_error(); return 0; }\n"
    )
    res = api.verify(text, 2, in_process=True)
    assert res.status in (Status.TIMEOUT, Status.UNKNOWN), res
    assert res.wall_s < 8


def test_a_crashing_member_is_an_error_status_never_a_verdict(monkeypatch):
    from veribatch.verifiers.z3c import engines

    def boom(*args, **kwargs):
        raise KeyError("encoder bug")

    monkeypatch.setattr(engines, "run_member", boom)
    res = api.verify(CASES[0][2], 5, in_process=True)
    assert res.status is Status.ERROR and "crashed" in res.reason and "encoder bug" in res.reason


def test_a_slice_that_overruns_is_killed_with_its_process_group(tmp_path, monkeypatch):
    import psutil

    from veribatch.verifiers.z3c import portfolio

    f = tmp_path / "p.c"
    f.write_text(CASES[0][2])
    monkeypatch.setattr(portfolio, "GRACE_S", 0.0)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    got = portfolio._run_subprocess("spacer", str(f), 0.05, "ILP32", 0)  # cannot even start Python
    assert got == {"answer": "timeout"}
    after = {p.pid for p in psutil.Process().children(recursive=True)}
    assert after <= before


def test_data_model_decides_the_width_of_long():
    text = (
        "void reach_error(void);\n"
        "int main() { unsigned long u = 4294967295UL; u = u + 1;\n"
        "  if (u == 0) reach_error(); return 0; }\n"
    )
    assert api.verify(text, 10, in_process=True).status is Status.FALSE  # ILP32: 32-bit wrap
    assert api.verify(text, 10, in_process=True, data_model="LP64").status is Status.TRUE


def test_extract_invariants_per_loop_label():
    text = (
        "extern int __VERIFIER_nondet_int(void); void reach_error(void);\n"
        "int main() { int n = __VERIFIER_nondet_int(); if (n < 0 || n > 50) return 0;\n"
        "  int a = 0; while (a < n) { a++; }\n"
        "  int b = 0; while (b < a) { b += 1; }\n"
        "  if (b != n) reach_error(); return 0; }\n"
    )
    invs = api.extract_invariants(text, 20, in_process=True)
    assert [i["loop"] for i in invs] == [1, 2] and [i["line"] for i in invs] == [3, 4]
    first = api.check_candidate(text, 1, invs[0]["invariant"], 2000)
    assert first.ok and first.exact
    # loop 2's invariant is inductive relative to loop 1's: alone, its entry is over-approximated
    second = api.check_candidate(text, 2, invs[1]["invariant"], 2000)
    assert second.consecution is True and second.safety is True and not second.exact


def test_a_trace_through_an_undefined_shift_is_no_counterexample():
    """1 << 40 is undefined: the model lets it be anything, gcc's UBSan stops the replay."""
    text = prog("int main() { int s = __VERIFIER_nondet_int(); int x = 1 << s;\n"
                "  if (s == 40) reach_error(); return x; }")
    res = api.verify(text, 3, in_process=True)
    assert res.status in (Status.UNKNOWN, Status.TIMEOUT), (res.status, res.reason)
    assert "unconfirmed counterexample" in res.reason



def test_the_counterexample_search_avoids_traces_the_replay_would_reject():
    """A signed `<<` out of range is undefined: both searches assume it away.

    Most inputs reaching the error overflow `(e + 64) << 24`; the searches must hand
    out only inputs for which the sanitised gcc replay reaches `reach_error`: the
    bit-vector search (rule 23) first, which BMC now runs first, and the bit-blasted
    one (rule 16) on its own.
    """
    text = prog("int main() { unsigned int m = __VERIFIER_nondet_uint(); int e = __VERIFIER_nondet_int();\n"
                "  assume_abort_if_not(e >= -64 && e < 192);\n"
                "  unsigned int r = (m & 0xff00ffu) | (unsigned int)((e + 64) << 24);\n"
                "  if ((r ^ m) == 0x01000000u) reach_error(); return 0; }")
    res = api.verify(text, 20, in_process=True)
    assert res.status is Status.FALSE, (res.status, res.reason)
    cex = res.extras["counterexample"]
    assert cex["replay"] == "reach_error reached by the compiled program"
    assert cex["search"] == "bit-vectors"
    m, e = cex["inputs"]
    assert (e + 64) << 24 < 2**31
    enc = engines.encode(engines.parsed(text), mode="unroll", depth=0)
    for values, _ in itertools.islice(engines._bit_blasted_traces(enc, time.monotonic() + 20), 3):
        assert (values[1] + 64) << 24 < 2**31, values


_STATICS = (
    "extern int __VERIFIER_nondet_int(void); void reach_error(void);\n"
    "void __VERIFIER_assert(int c) { if (!c) reach_error(); }\n"
    "int counter = 100;\n"
    "int next(void) { static int counter = 10; counter++; return counter; }\n"
    "int main() { int n = __VERIFIER_nondet_int(), i, last = 10;\n"
    "  if (n < 0 || n > 1000) return 0;\n"
    "  for (i = 0; i < n; i++) { static int seen[4]; seen[i % 4] += 1; last = next(); }\n"
    "  __VERIFIER_assert(CHECK);\n"
    "  return 0; }\n"
)


@pytest.mark.parametrize(("check", "expected"), [
    ("last == n + 10 && counter == 100", "TRUE"),  # initialised once, apart from the global
    ("last != 13", "FALSE"),  # three calls: the count survives between them
])
def test_static_locals_live_across_calls(check, expected):
    res = api.verify(_STATICS.replace("CHECK", check), 30, in_process=True)
    assert str(res.status) == expected, res.reason
    if res.status is Status.FALSE:
        assert res.extras["counterexample"]["replay"] == "reach_error reached by the compiled program"
    else:
        assert res.extras["proof_checked"] is True
