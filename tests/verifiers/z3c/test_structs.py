"""Structs in the memory model (`verifiers.z3c.memory`): malloc'd nodes, fields, linked lists.

A struct object is one heap object; its integer members live in ``$mem`` and its
pointer members in ``$pmem``, element ``off * nfields + slot``.  As for arrays, a
TRUE is a complete unrolling in which every member access is defined (no NULL,
freed or out-of-bounds node) or a re-checked Spacer proof over the heap naming its
memory model (`test_heap_horn`), a FALSE only a trace gcc replays, and what the
model leaves out (unions, struct values, array or struct members) stays UNKNOWN
naming the construct.  The programs call `malloc`/`free` without a prototype, as
SV-COMP files do once `<stdlib.h>` is gone: the replay must declare them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.z3c_programs import assert_memory_certificate, prog
from veribatch.verifiers.result import Status
from veribatch.verifiers.z3c import api, portfolio, replay
from veribatch.verifiers.z3c.engines import HEAP_ASSUMPTION, parsed

LIST = """
typedef struct node { int data; struct node *next; } Node;
int main() {
  int n = __VERIFIER_nondet_int();
  if (n < 0 || n > 4) return 0;
  Node *head = 0;
  for (int i = 0; i < n; i++) {
    Node *p = malloc(sizeof(Node));
    if (!p) return 0;
    p->data = i; p->next = head; head = p;
  }
  int len = 0, sum = 0;
  for (Node *q = head; q != 0; q = q->next) { len++; sum += q->data; }
  __VERIFIER_assert(len == n);
  __VERIFIER_assert(%s);
  while (head) { Node *t = head->next; free(head); head = t; }
  return 0;
}
"""

DLL = """
struct dnode { struct dnode *next, *prev; enum { RED, BLACK } colour; };
int main() {
  struct dnode *a = calloc(1, sizeof(struct dnode));
  if (!a) return 0;
  struct dnode *b = malloc(sizeof(struct dnode));
  if (!b) { free(a); return 0; }
  a->next = b; b->prev = a; b->next = 0; a->colour = BLACK;
  b->colour = __VERIFIER_nondet_int() ? RED : BLACK;
  __VERIFIER_assert(a->prev == 0 && a->next->prev == a && b->prev->next == b);
  __VERIFIER_assert(%s);
  free(b); free(a);
  return 0;
}
"""

LOCALS = """
struct pt { int x; unsigned char y; long long z; };
struct pt g;
int main() {
  struct pt a; struct pt arr[3];
  struct pt *p = &a;
  a.x = __VERIFIER_nondet_int();
  p->y = 300;
  arr[2].z = a.x; (&arr[1])->x = 1;
  __VERIFIER_assert(g.x == 0 && g.z == 0 && a.y == 44 && arr[1].x == 1);
  __VERIFIER_assert(sizeof(struct pt) == 16 && sizeof(arr) == 48);
  __VERIFIER_assert(%s);
  return 0;
}
"""

_STACK = ("typedef struct { int data[8]; int size; } Stack;\n"
          "int push(Stack *s, int v) { if (s->size >= 8) return -1; s->data[s->size++] = v; return 0; }\n"
          "int pop(Stack *s, int *v) { if (s->size <= 0) return -1; *v = s->data[--s->size]; return 0; }\n"
          "int main() { Stack st; st.size = 0; int v, w;\n"
          "  push(&st, __VERIFIER_nondet_int()); push(&st, 4); pop(&st, &v); pop(&st, &w);\n"
          "  __VERIFIER_assert(v == 4 && st.size == 0 && sizeof(Stack) == 9 * sizeof(int));\n")

STRUCT_CASES = [
    # an array member: `s->data[i]` is cell slot + i of the struct, beside `size`
    ("array-member-stack", "TRUE", prog(_STACK + "  return 0; }")),
    ("array-member-stack-unsafe", "FALSE", prog(_STACK + "  __VERIFIER_assert(w != 5); return 0; }")),
    ("list-build-sum-free", "TRUE", prog(LIST % "2 * sum == n * (n - 1)")),
    ("list-build-sum-free-unsafe", "FALSE", prog(LIST % "sum != 3")),
    ("dll-links-and-enum", "TRUE", prog(DLL % "a->colour == BLACK && (b->colour == RED || b->colour == BLACK)")),
    ("dll-links-and-enum-unsafe", "FALSE", prog(DLL % "b->colour == BLACK")),
    ("struct-locals-globals-arrays", "TRUE", prog(LOCALS % "arr[2].z == a.x")),
    ("struct-locals-globals-arrays-unsafe", "FALSE", prog(LOCALS % "a.x != 7")),
]


@pytest.mark.parametrize(("name", "expected", "text"), STRUCT_CASES, ids=[c[0] for c in STRUCT_CASES])
def test_struct_program_verdict_with_certificate(name, expected, text):
    res = api.verify(text, 30, in_process=True)
    assert_memory_certificate(res, name, expected)  # structs are in the Horn encoding too


@pytest.mark.parametrize(("name", "body"), [
    ("use-after-free", "struct s { int v; };\n"
                       "int main() { struct s *p = malloc(sizeof(struct s)); if (!p) return 0;\n"
                       "  p->v = 1; free(p); __VERIFIER_assert(p->v == 1); return 0; }"),
    ("malloc-null-unchecked", "struct s { int v; struct s *n; };\n"
                              "int main() { struct s *p = malloc(sizeof(struct s)); p->v = 1; p->n = 0;\n"
                              "  __VERIFIER_assert(p->v == 1); return 0; }"),
    ("field-beyond-a-short-object", "struct s { int v; int w; };\n"
                                    "int main() { struct s *p = malloc(4); if (!p) return 0;\n"
                                    "  p->w = 1; __VERIFIER_assert(p->w == 1); return 0; }"),
    ("array-member-index-past-its-end", "struct s { int a[2]; int b; };\n"
                                        "int main() { struct s x; x.b = 1; x.a[2] = 5;\n"
                                        "  __VERIFIER_assert(x.b == 1); return 0; }"),
    ("next-of-null", "struct s { int v; struct s *n; };\n"
                     "int main() { struct s *p = calloc(1, sizeof(struct s)); if (!p) return 0;\n"
                     "  __VERIFIER_assert(p->n->v == p->n->v); return 0; }"),
])
def test_undefined_member_access_is_never_a_proof(name, body):
    """'Safe' only by ignoring undefined behaviour: never a complete unrolling; a Spacer
    TRUE holds in the memory model it names (a NULL dereference ends the execution)."""
    out = portfolio.verify_text(prog(body), 3, members=("bmc",), in_process=True)
    assert out.status in ("UNKNOWN", "TIMEOUT"), (name, out.status, out.reason)
    res = api.verify(prog(body), 5, in_process=True)
    if res.status is Status.TRUE:
        # (next-of-null never writes `n`: the assumption names it, `test_wild_fields`)
        assert res.extras["proof"] == "spacer" and res.extras["assumes"].startswith(HEAP_ASSUMPTION)


@pytest.mark.parametrize(("construct", "body"), [
    ("unions", "union u { int a; unsigned b; };\n"
               "int main() { union u x; x.a = 1; __VERIFIER_assert(x.b == 1); return 0; }"),
    ("struct values", "struct pt { int x; };\n"
                      "int main() { struct pt a, b; a.x = 1; b = a; __VERIFIER_assert(b.x == 1); return 0; }"),
    ("an array member of a struct other than as s.f[i]",
     "struct s { int a[2]; };\n"
     "int main() { struct s *p = malloc(sizeof(struct s)); if (!p) return 0; int *q = p->a; return 0; }"),
    ("struct member of type struct", "struct in { int v; }; struct out { struct in i; };\n"
                                     "int main() { struct out *p = malloc(sizeof(struct out)); return 0; }"),
    ("address of a variable or struct member", "struct s { int v; };\n"
                                               "int main() { struct s a; int *q = &a.v; *q = 1; return 0; }"),
])
def test_outside_the_struct_model_is_unknown_with_reason(construct, body):
    res = api.verify(prog(body), 5, in_process=True)
    assert res.status is Status.UNKNOWN and construct in res.reason, res.reason


def test_unbounded_list_is_never_a_complete_unrolling():
    """A list of any length: BMC alone cannot prove it (Spacer can: `test_heap_horn`)."""
    text = prog("struct s { struct s *n; };\n"
                "int main() { struct s *h = 0; while (__VERIFIER_nondet_int()) {\n"
                "  struct s *p = malloc(sizeof(struct s)); if (!p) return 0; p->n = h; h = p; }\n"
                "  while (h) { struct s *t = h->n; free(h); h = t; } return 0; }")
    out = portfolio.verify_text(text, 3, members=("bmc",), in_process=True)
    assert out.status in ("UNKNOWN", "TIMEOUT"), out.status


def test_replay_declares_malloc_and_leaves_struct_locals_alone():
    """Without a prototype gcc truncates malloc's pointer to int; a struct local is no input."""
    text = prog("typedef struct { int v; } S;\n"
                "int main() { S s; struct { int w; } t; int k; int *p = malloc(sizeof(int));\n"
                "  s.v = k; t.w = k; return 0; }")
    src = replay.program_source(parsed(text), [5])
    assert "extern void *malloc(unsigned long);" in src
    assert "S s;" in src and "k = __vb_nd()" in src
    assert "s = __vb_nd" not in src and "t = __vb_nd" not in src


def test_invbench_easy_list_programs_never_wrong(shared_data: Path, invbench_easy: Path):
    """sll/dll (TRUE upstream): their lists are unbounded, so BMC alone cannot prove them:
    UNKNOWN, never FALSE (Spacer over the heap proves some: `test_heap_horn`)."""
    timing = json.loads((shared_data / "invbench" / "Dataset" / "Evaluation" / "timing_easy.json").read_text())
    expected = {r["file"]: r["result"] for r in timing}
    for name in ("sll-01-1_8.c", "dll-rb-cnstr_1-2_3.c"):
        assert expected[name] == "TRUE"
        out = portfolio.verify_text((invbench_easy / name).read_text(), 4, members=("bmc",),
                                    in_process=True, filename=name)
        assert out.status in ("UNKNOWN", "TIMEOUT"), (name, out.status)
        assert "unsupported" not in (out.reason or ""), out.reason


def test_invbench_easy_dll_false_is_replayed_and_matches_uautomizers_rerun(shared_data: Path, invbench_easy: Path):
    """dll-rb-cnstr_1-2_4: `__VERIFIER_assert(end->next)` fails at the list's last node.

    InvBench labels it TRUE; Wonda's recorded re-run of UAutomizer answers FALSE (the
    disputed label `bench/verifier.py` lists apart), and gcc reaches reach_error on the trace.
    """
    name = "dll-rb-cnstr_1-2_4.c"
    wonda = json.loads((shared_data / "wonda" / "wonda-eval-invbench-easy.json").read_text())
    rows = wonda if isinstance(wonda, list) else list(wonda.values())
    assert next(r for r in rows if r["file"] == name)["baseline_decision"] == "FALSE"
    res = api.verify((invbench_easy / name).read_text(), 20, in_process=True, filename=name)
    assert res.status is Status.FALSE, (res.status, res.reason)
    assert res.extras["counterexample"]["replay"] == "reach_error reached by the compiled program"
