"""Pointer members a program reads and never writes (`memory.never_written_pointer_fields`).

Such a member holds NULL or an indeterminate value no pointer of the program was stored
into; the Horn encoding reads it as NULL or (0, k), whose dereference ends the execution
and whose `==` with a pointer into an object is any truth value.  InvBench-Easy's
`sll-01-1_8` (its `CREATE_INNER` emptied: `inner` never written) is proved that way; the
unsafe programs below must never become TRUE: a comparison with NULL or with a live
node's address is as open as the garbage it reads.
"""

from __future__ import annotations

import pytest

from tests.support.z3c_programs import prog
from veribatch.verifiers.result import Status
from veribatch.verifiers.z3c import api
from veribatch.verifiers.z3c.engines import HEAP_ASSUMPTION, WILD_ASSUMPTION, parsed
from veribatch.verifiers.z3c.memory import never_written_pointer_fields

NODE = "typedef struct TSLL { struct TSLL *next; struct TSLL *inner; } SLL;\n"

# sll-01-1_8's shape: a list of nodes whose `inner` is never written, each inner chain
# checked to be at most one long (it can only be NULL or a pointer to no object).
INNER_CHAINS = NODE + """
int main() {
  SLL *list = malloc(sizeof(SLL));
  list->next = 0;
  SLL *end = list;
  while (__VERIFIER_nondet_int()) {
    end->next = malloc(sizeof(SLL));
    end = end->next;
    end->next = 0;
  }
  end = 0;
  end = list;
  while (0 != end) {
    int len = 0;
    SLL *inner = end->inner;
    while (0 != inner) {
      if (len == 0) { len = 1; } else { len = 2; }
      inner = inner->inner;
    }
    __VERIFIER_assert(len <= 1);
    end = end->next;
  }
  while (0 != list) {
    end = list->inner;
    if (0 != end) { free(end); end = 0; }
    end = list->next;
    free(list);
    list = end;
  }
  return 0;
}
"""


def test_a_list_whose_inner_pointers_are_never_written_is_proved():
    res = api.verify(prog(INNER_CHAINS), 20, in_process=True)
    assert res.status is Status.TRUE, res.reason
    assert res.extras["proof"] == "spacer" and res.extras["proof_checked"] is True
    assert res.extras["assumes"] == HEAP_ASSUMPTION + WILD_ASSUMPTION.format("inner")


@pytest.mark.parametrize(("name", "test"), [
    ("garbage-not-null", "p->inner != 0"),
    ("garbage-is-a-live-node", "p->inner == q"),  # its bits may be q's address
    ("garbage-is-not-a-live-node", "p->inner != q && p->inner != 0"),
])
def test_reading_garbage_is_never_a_proof(name, test):
    """The error is reached by some garbage without undefined behaviour: never TRUE (and
    gcc's replay, whose fresh heap reads zeros, confirms no trace of these)."""
    body = NODE + ("int main() { SLL *q = malloc(sizeof(SLL)); SLL *p = malloc(sizeof(SLL));\n"
                   "  if (!p || !q) return 0; p->next = q; q->next = 0;\n"
                   f"  if ({test}) reach_error();\n  return 0; }}")
    res = api.verify(prog(body), 4, in_process=True)
    assert res.status is not Status.TRUE, (name, res.extras.get("proof"))


def test_garbage_read_as_null_is_replayed():
    """Glibc's fresh heap is zero: the NULL garbage reaches the error under gcc."""
    body = NODE + ("int main() { SLL *p = malloc(sizeof(SLL)); if (!p) return 0; p->next = 0;\n"
                   "  if (p->inner == 0) reach_error();\n  return 0; }")
    res = api.verify(prog(body), 10, in_process=True)
    assert res.status is Status.FALSE, res.reason
    assert res.extras["counterexample"]["replay"] == "reach_error reached by the compiled program"


@pytest.mark.parametrize(("src", "expected"), [
    (INNER_CHAINS, {"inner"}),
    # written on one path only: the ordinary model (any garbage, a node's address included)
    (NODE + "int main() { SLL *p = malloc(sizeof(SLL)); if (__VERIFIER_nondet_int()) p->inner = p;\n"
            "  p->next = p->inner; return 0; }", set()),
    (NODE + "int main() { SLL *p = malloc(sizeof(SLL)); p->next = p->inner; p->inner++; return 0; }", set()),
    # another object reached through `void *` may write the member under another name
    (NODE + "int main() { SLL *p = malloc(sizeof(SLL)); void *v = p; p->next = p->inner; return 0; }", set()),
    # an array member indexed past its end is a cell of the next member in the Horn encoding
    ("struct t { int a[1]; struct t *n; };\n"
     "int main() { struct t *p = malloc(sizeof(struct t)); p->a[1] = 5; return p->n == 0; }", set()),
])
def test_which_members_count_as_never_written(src, expected):
    assert set(never_written_pointer_fields(parsed(prog(src)))) == expected
