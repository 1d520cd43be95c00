"""The memory model (`verifiers.z3c.memory`): stack arrays, malloc'd buffers, pointers.

Bounded model checking reads and writes a heap of objects; a FALSE is only a trace
that gcc replays, a TRUE a complete unrolling in which every access is defined or a
Spacer proof over the heap (re-checked, naming its memory model: `test_heap_horn`).
Undefined accesses (out of bounds, freed memory) never yield a complete-unrolling
TRUE, and what the model leaves out stays UNKNOWN naming it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.z3c_programs import assert_memory_certificate, prog
from veribatch.verifiers.result import Status
from veribatch.verifiers.z3c import api, portfolio
from veribatch.verifiers.z3c.engines import HEAP_ASSUMPTION

MALLOC = "void *malloc(unsigned int size); void free(void *p); void *calloc(unsigned int n, unsigned int s);\n"

# (name, expected verdict, program): each safe program has an unsafe twin one detail away.
MEMORY_CASES = [
    ("stack-array-loop",
     "TRUE", prog("int main() { int a[4]; int i; for (i = 0; i < 4; i++) a[i] = 2 * i;\n"
                  "  int s = 0; for (i = 0; i < 4; i++) s += a[i]; __VERIFIER_assert(s == 12); return 0; }")),
    ("stack-array-loop-unsafe",
     "FALSE", prog("int main() { int a[4]; int i; for (i = 0; i < 4; i++) a[i] = 2 * i;\n"
                   "  int s = 0; for (i = 0; i < 4; i++) s += a[i]; __VERIFIER_assert(s == 13); return 0; }")),
    ("malloc-nondet-size-unsafe",
     "FALSE", MALLOC + prog("int main() { int n = __VERIFIER_nondet_int(); if (n <= 0 || n > 5) return 0;\n"
                            "  int *a = malloc(sizeof(int) * n); int i;\n"
                            "  for (i = 0; i < n; i++) a[i] = i;\n"
                            "  __VERIFIER_assert(a[n - 1] < 3); free(a); return 0; }")),
    ("pointer-arithmetic-and-deref",
     "TRUE", prog("int main() { long long buf[3]; long long *p = buf;\n"
                  "  long long *q = p + 1; *q = 7; *(p + 2) = *q + 1; q++; (*q)++; --q;\n"
                  "  __VERIFIER_assert(p[1] == 7 && p[2] == 9 && q - p == 1 && &p[1] == q && p); return 0; }")),
    ("pointer-arithmetic-and-deref-unsafe",
     "FALSE", MALLOC + prog("int main() { long long *p = (long long *)malloc(3 * sizeof(long long));\n"
                            "  long long *q = p + 1; *q = 7; *(p + 2) = *q + 1; q++; (*q)++;\n"
                            "  __VERIFIER_assert(p[2] == 8); free(p); return 0; }")),
    ("global-array-zero-and-init-list",
     "TRUE", prog("int g[3]; int main() { int b[3] = {1, 2}; __VERIFIER_assert(g[2] == 0 && b[1] == 2 && b[2] == 0);\n"
                  "  __VERIFIER_assert(sizeof(b) == 3 * sizeof(int)); return 0; }")),
    ("array-parameter-and-calloc-unsafe",
     "FALSE", MALLOC + prog("int sum(int a[], int n) { int s = 0; int i; for (i = 0; i < n; i++) s += a[i]; return s; }\n"
                            "int main() { int k = __VERIFIER_nondet_int(); if (k < 0 || k > 3) return 0;\n"
                            "  int *a = calloc(4, sizeof(int)); a[k] = k; __VERIFIER_assert(sum(a, 4) != 3); return 0; }")),
    ("malloc-null-checked",  # NULL handled, then the object is used: provable
     "TRUE", MALLOC + prog("int main() { int *p = malloc(2 * sizeof(int)); if (!p) return 0;\n"
                           "  p[0] = 1; p[1] = p[0] + 1; __VERIFIER_assert(p[1] == 2); free(p); return 0; }")),
    ("two-dimensional-array",  # `c[i][j]` is element i*4 + j of one object: rows do not overlap
     "TRUE", prog("int main() { int c[4][4]; int i, j;\n"
                  "  for (i = 0; i < 4; i++) { c[i][0] = 1; c[i][i] = 1;\n"
                  "    for (j = 1; j < i; j++) c[i][j] = c[i - 1][j - 1] + c[i - 1][j]; }\n"
                  "  __VERIFIER_assert(c[3][1] == 3 && c[2][1] == 2 && sizeof(c) == 16 * sizeof(int));\n"
                  "  return 0; }")),
    ("two-dimensional-array-unsafe",
     "FALSE", prog("int main() { int c[4][4]; int i, j;\n"
                   "  for (i = 0; i < 4; i++) { c[i][0] = 1; c[i][i] = 1;\n"
                   "    for (j = 1; j < i; j++) c[i][j] = c[i - 1][j - 1] + c[i - 1][j]; }\n"
                   "  __VERIFIER_assert(c[3][2] != 3); return 0; }")),
    ("short-circuit-guards-the-access",  # a[i] is only read while i < 3: no undefined path
     "TRUE", prog("int main() { int a[3] = {0, 0, 0}; int i = 0; while (i < 3 && a[i] == 0) i++;\n"
                  "  __VERIFIER_assert(i == 3); return 0; }")),
]


@pytest.mark.parametrize(("name", "expected", "text"), MEMORY_CASES, ids=[c[0] for c in MEMORY_CASES])
def test_memory_construct_verdict_with_certificate(name, expected, text):
    res = api.verify(text, 20, in_process=True)
    assert_memory_certificate(res, name, expected)


@pytest.mark.parametrize(("name", "body"), [
    ("out-of-bounds-write", "int main() { int a[2]; a[0] = 0; a[2] = 5; __VERIFIER_assert(a[0] == 0); return 0; }"),
    ("use-after-free", MALLOC + "int main() { int *p = malloc(sizeof(int)); *p = 1; free(p);\n"
                                "  __VERIFIER_assert(*p == 1); return 0; }"),
    ("double-free", MALLOC + "int main() { int *p = malloc(sizeof(int)); free(p); free(p); return 0; }"),
    ("column-past-its-row", "int main() { int c[2][2]; c[1][0] = 1; c[0][2] = 5;\n"
                            "  __VERIFIER_assert(c[1][0] == 1); return 0; }"),
    ("malloc-null-unchecked", MALLOC + "int main() { int *p = malloc(sizeof(int)); *p = 1;\n"
                                 "  __VERIFIER_assert(*p == 1); free(p); return 0; }"),
])
def test_undefined_access_is_never_a_proof(name, body):
    """Each program is 'safe' only by ignoring undefined behaviour (a NULL from malloc too):
    never a complete unrolling; a Spacer TRUE holds in the memory model it names."""
    out = portfolio.verify_text(prog(body), 2, members=("bmc",), in_process=True)
    assert out.status in ("UNKNOWN", "TIMEOUT"), (out.status, out.reason)
    res = api.verify(prog(body), 5, in_process=True)
    if res.status is Status.TRUE:
        assert res.extras["proof"] == "spacer" and res.extras["assumes"] == HEAP_ASSUMPTION


def test_unbounded_array_loop_is_proved_over_the_heap():
    text = prog("int main() { int n = __VERIFIER_nondet_int(); if (n <= 0) return 0; int a[n]; int i;\n"
                "  for (i = 0; i < n; i++) a[i] = 1; __VERIFIER_assert(a[0] == 1); return 0; }")
    res = api.verify(text, 20, in_process=True)
    assert res.status is Status.TRUE, (res.status, res.reason)
    assert res.extras["proof"] == "spacer" and res.extras["proof_checked"] is True


@pytest.mark.parametrize(("construct", "body"), [
    ("cast between different pointer types",
     MALLOC + "int main() { int *p = malloc(8); char *c = (char *)p; *c = 1; return 0; }"),
    ("pointers to pointers", "int main() { int **pp = 0; return 0; }"),
    ("a two-dimensional array other than as a[i][j]",
     "int main() { int c[2][2]; int *p = c[1]; return 0; }"),
    ("integer to pointer conversion", "int main() { int *p = (int *)4096; return 0; }"),
    ("unions", MALLOC + "union node { int v; union node *next; };\n"
                         "int main() { union node *n = malloc(sizeof(union node)); return 0; }"),
])
def test_outside_the_memory_model_is_unknown_with_reason(construct, body):
    res = api.verify(prog(body), 5, in_process=True)
    assert res.status is Status.UNKNOWN and construct in res.reason, res.reason


def test_invbench_easy_array_programs_false_as_uautomizer(shared_data: Path, invbench_easy: Path):
    """brs2f, modnf, s42iff (stack and malloc'd arrays), condmf, sqmf (arrays through pointers)."""
    timing = json.loads((shared_data / "invbench" / "Dataset" / "Evaluation" / "timing_easy.json").read_text())
    expected = {r["file"]: r["result"] for r in timing}
    for name in ("brs2f_1.c", "modnf_1.c", "s42iff_1.c", "condmf_1.c", "sqmf_1.c"):
        res = api.verify((invbench_easy / name).read_text(), 20, in_process=True, filename=name)
        assert str(res.status) == expected[name] == "FALSE", (name, res.status, res.reason)
        assert res.extras["counterexample"]["replay"] == "reach_error reached by the compiled program"


def test_heap_sorts_follow_a_fresh_z3_context():
    """The fork server renews z3's context after its warm-up: the Ptr sort must follow."""
    from veribatch.verifiers.z3c import engines

    text = MEMORY_CASES[1][2]
    assert api.verify(text, 20, in_process=True).status is Status.FALSE
    engines.fresh_context()
    assert api.verify(text, 20, in_process=True).status is Status.FALSE
