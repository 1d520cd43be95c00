"""Floating point (`verifiers.z3c.floats`): IEEE binary32/binary64 with C's rounding.

A FALSE is a trace gcc replays, fed the inputs' exact bits (NaN included); a TRUE on
a property of the doubles a complete unrolling (the Horn encoding abstracts them
away: `test_floats_horn`) or, for an input double only converted to an integer, a
Spacer proof.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from veribatch.verifiers import cfront
from veribatch.verifiers.result import Status
from veribatch.verifiers.z3c import api, replay

H = """extern void abort(void); void reach_error(void);
extern double __VERIFIER_nondet_double(void); extern float __VERIFIER_nondet_float(void);
void __VERIFIER_assert(int c) { if (!c) { reach_error(); abort(); } }
void assume_abort_if_not(int c) { if (!c) abort(); }
"""

FP_CASES = [
    # 0.1 + 0.2 rounds to 0.30000000000000004 (binary64, round to nearest-even)
    ("rounding-unsafe", "FALSE", "int main() { double x = 0.1; double y = 0.2; __VERIFIER_assert(x + y == 0.3); return 0; }"),
    ("exact-and-truncation", "TRUE",
     "int main() { double x = 0.5; double y = 0.25; __VERIFIER_assert(x + y == 0.75 && (int)(x * 7) == 3 && (int)(-x * 7) == -3); return 0; }"),
    ("float-is-not-double", "FALSE", "int main() { float f = 0.1f; double g = 0.1; __VERIFIER_assert(f == g); return 0; }"),
    ("nan-input", "FALSE", "int main() { double d = __VERIFIER_nondet_double(); if (d != d) reach_error(); return 0; }"),
    ("double-input-absorbs", "FALSE",
     "int main() { double d = __VERIFIER_nondet_double(); assume_abort_if_not(d > 0.0 && d < 1.0);\n"
     "  __VERIFIER_assert(d + 1.0 - 1.0 == d); return 0; }"),
    ("float-input-absorbs", "FALSE",
     "int main() { float f = __VERIFIER_nondet_float(); assume_abort_if_not(f > 0.0f && f < 1.0f);\n"
     "  __VERIFIER_assert(f + 1.0f - 1.0f == f); return 0; }"),
    ("input-double-as-int", "TRUE",  # only converted to int: an int input in the Horn encoding
     "int main() { int a = __VERIFIER_nondet_double(); int i = 0; int s = a;\n"
     "  while (i < a) { i++; s++; } __VERIFIER_assert(a <= 0 || s == 2 * a); return 0; }"),
]


@pytest.mark.parametrize(("name", "expected", "body"), FP_CASES, ids=[c[0] for c in FP_CASES])
def test_floating_point_verdict_with_certificate(name, expected, body):
    res = api.verify(H + body, 20, in_process=True)
    assert str(res.status) == expected, (name, res.status, res.reason)
    if res.status is Status.FALSE:
        assert res.extras["counterexample"]["replay"] == "reach_error reached by the compiled program"
    else:
        assert res.extras["proof"] in ("complete-unrolling", "spacer")


def test_replay_feeds_a_double_input_its_bits():
    """The harness copies ND's bits into the double: NaN's pattern reaches the error, 1.0's does not."""
    ast = cfront.parse(H + "int main() { double d = __VERIFIER_nondet_double(); if (d != d) reach_error(); return 0; }")
    nan_bits = 0x7FF8000000000000
    one_bits = 0x3FF0000000000000
    assert replay.replay(ast, [nan_bits]).confirmed
    assert not replay.replay(ast, [one_bits]).confirmed


def test_long_double_stays_unknown_with_reason():
    res = api.verify(H + "int main() { long double x = 1.0; __VERIFIER_assert(x > 0); return 0; }", 5, in_process=True)
    assert res.status is Status.UNKNOWN and "long double" in res.reason


def test_fermat1_input_doubles_converted_to_int(shared_data: Path, invbench_easy: Path):
    """InvBench-Easy fermat1_3: `int A = __VERIFIER_nondet_double();`, TRUE as UAutomizer says."""
    timing = json.loads((shared_data / "invbench" / "Dataset" / "Evaluation" / "timing_easy.json").read_text())
    assert {r["file"]: r["result"] for r in timing}["fermat1_3.c"] == "TRUE"
    res = api.verify((invbench_easy / "fermat1_3.c").read_text(), 30, in_process=True, filename="fermat1_3.c")
    assert res.status is Status.TRUE and res.extras["proof_checked"], (res.status, res.reason)


def test_uninitialised_double_local_is_an_input_replayed_from_its_bits():
    text = H + "int main() { double d; if (d > 2.5 && d < 3.0) reach_error(); return 0; }"
    res = api.verify(text, 20, in_process=True)
    assert res.status is Status.FALSE
    [bits] = res.extras["counterexample"]["inputs"]
    assert 2.5 < struct.unpack("<d", struct.pack("<Q", bits))[0] < 3.0
