"""The heap in the Horn encoding: Spacer proves programs that build lists of any length.

The memory model's arrays (``$mem``, ``$pmem``, ``$size``, ``$next``) are arguments of
every loop predicate, so an invariant may speak of the heap; a TRUE from Spacer is a
proof re-checked clause by clause over heap states (``proof_checked``), names the
memory model it assumes (``assumes``: a NULL dereference ends the execution, other
undefined accesses act on the model's cells, as in UAutomizer's model for
unreach-call) and carries the invariants C cannot state as SMT-LIB terms.  A program
whose error is reachable, through aliasing or after an undefined access, is never
proved: BMC finds it FALSE (replayed by gcc) or it stays UNKNOWN.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import z3

from tests.support.z3c_programs import prog
from veribatch.verifiers.result import Status
from veribatch.verifiers.z3c import api, cexpr, chc, engines, memory
from veribatch.verifiers.z3c.encode import encode
from veribatch.verifiers.z3c.engines import parsed

MALLOC = "void *malloc(unsigned int size); void free(void *p);\n"

# A list of any length (no complete unrolling); the head's value survives only because
# every new node is a fresh object: the invariant needs `$mem` and `$next`.
UNBOUNDED = MALLOC + prog("""
struct s { struct s *n; int v; };
int main() {
  struct s *h = malloc(sizeof(struct s));
  if (!h) return 0;
  h->v = 7; h->n = 0;
  struct s *t = h;
  while (__VERIFIER_nondet_int()) {
    struct s *p = malloc(sizeof(struct s));
    if (!p) return 0;
    p->v = 1; p->n = 0; %s
    t->n = p; t = p;
  }
  __VERIFIER_assert(%s);
  return 0;
}
""")


def test_unbounded_list_is_proved_by_spacer_with_a_rechecked_heap_invariant():
    text = UNBOUNDED % ("", "h->v == 7")
    res = api.verify(text, 30, in_process=True)
    assert res.status is Status.TRUE, (res.status, res.reason)
    assert res.extras["proof"] == "spacer" and res.extras["proof_checked"] is True
    assert res.extras["assumes"] == engines.HEAP_ASSUMPTION
    smt = res.extras["invariants_smt"]  # the loop's invariant reads the heap's arrays
    assert [i["loop"] for i in smt] == [1] and "$mem" in smt[0]["smt"], smt


@pytest.mark.parametrize(("name", "text"), [
    ("head-value-wrong", UNBOUNDED % ("", "h->v == 1")),
    # t starts as h: the first iteration overwrites h's value through the alias
    ("write-through-alias", UNBOUNDED % ("t->v = 1;", "h->v == 7")),
])
def test_buggy_list_is_never_proved(name, text):
    res = api.verify(text, 20, in_process=True)
    assert res.status is Status.FALSE, (name, res.status, res.reason)
    assert res.extras["counterexample"]["replay"] == "reach_error reached by the compiled program"


@pytest.mark.parametrize(("name", "body"), [
    ("read-after-free", MALLOC + "int main() { int *p = malloc(sizeof(int)); if (!p) return 0;\n"
                                 "  *p = 1; free(p); if (*p == 1) reach_error(); return 0; }"),
    ("write-out-of-bounds", "int main() { int a[2]; a[0] = 0; a[2] = 5;\n"
                            "  if (a[2] == 5) reach_error(); return 0; }"),
])
def test_error_after_an_undefined_access_is_not_proved(name, body):
    """Undefined accesses are not cut in the Horn encoding: the executions continue on the
    model's cells and reach the error, so Spacer has no proof (cutting them would give one)."""
    text = prog(body)
    enc = encode(parsed(text), mode="chc")
    assert enc.heap
    assert chc.solve(enc, timeout_ms=10_000).status == "unsafe"
    res = api.verify(text, 3, in_process=True)
    assert res.status is not Status.TRUE, (name, res.status, res.reason)


def test_null_dereference_ends_the_execution():
    """`p->v` with p NULL is a segmentation fault: the assertion after it is never reached."""
    text = MALLOC + prog("struct s { int v; };\n"
                         "int main() { struct s *p = malloc(sizeof(struct s)); p->v = 1;\n"
                         "  __VERIFIER_assert(p != 0 && p->v == 1); free(p); return 0; }")
    res = api.verify(text, 20, in_process=True)
    assert res.status is Status.TRUE and res.extras["proof"] == "spacer", (res.status, res.reason)


def test_programs_without_memory_keep_integer_predicates():
    text = prog("int main() { int i = 0; while (i < 10) i++; __VERIFIER_assert(i == 10); return 0; }")
    enc = encode(parsed(text), mode="chc")
    assert not enc.heap
    assert all(p.decl.domain(k) == z3.IntSort() for p in enc.preds for k in range(p.decl.arity()))


def test_candidate_over_a_heap_program_reads_memory():
    text = UNBOUNDED % ("", "h->v == 7")
    ok = api.check_candidate(text, 1, "h != 0 && h->v == 7 && t != 0", 2000)
    assert ok.initiation is True and ok.safety is True
    bad = api.check_candidate(text, 1, "h->v == 1", 2000)
    assert bad.initiation is False


def test_invbench_easy_list_programs(shared_data: Path, invbench_easy: Path):
    """Unbounded lists, TRUE upstream: sll-queue needs the nodes after the head to be
    distinct fresh objects (proved); sll-01-1_8 reads `inner` fields it never writes:
    NULL or a pointer to no object, whose dereference is undefined (`test_wild_fields`),
    so each inner chain is at most one long (proved, naming that assumption)."""
    timing = json.loads((shared_data / "invbench" / "Dataset" / "Evaluation" / "timing_easy.json").read_text())
    expected = {r["file"]: r["result"] for r in timing}
    for name, want in (("sll-queue-1_19.c", {Status.TRUE}), ("dll-rb-cnstr_1-2_3.c", {Status.TRUE}),
                       ("sll-01-1_8.c", {Status.TRUE})):
        assert expected[name] == "TRUE"
        res = api.verify((invbench_easy / name).read_text(), 20, in_process=True, filename=name)
        assert res.status in want, (name, res.status, res.reason)
        if res.status is Status.TRUE:
            assert res.extras["proof"] == "spacer" and res.extras["proof_checked"] is True


def test_pointer_invariant_round_trips_through_c():
    """`t != NULL` at a heap loop head prints as C (`memory.null` as 0) and reads back equal."""
    text = UNBOUNDED % ("", "h->v == 7")
    ast = parsed(text)
    enc = encode(ast, mode="chc")
    p = next(p for p in enc.preds if p.label == 1)
    i = next(k for k, v in enumerate(p.sig) if v.cname == "t")
    body = z3.Var(i, p.decl.domain(i)) != memory.null()
    c_text = cexpr.to_c(body, p)
    assert "0" in c_text and "ptr" not in c_text, c_text
    back = cexpr.to_formula(c_text, p, ast)
    args = [z3.Const(f"a{k}", p.decl.domain(k)) for k in range(p.decl.arity())]
    s = z3.Solver()
    s.add(z3.substitute_vars(back, *args) != z3.substitute_vars(body, *args))
    assert s.check() == z3.unsat, (c_text, back)
