"""The strict protocol on the shipped programs: every cheat that makes Dafny accept a wrong
program is caught in each of its spellings (≥ 20 real programs per kind, the mutated answers
generated here from the programs), and App. H-style answers — added loop invariants,
asserts, helper lemmas with bodies and calls to them, {:axiom} on a declaration that keeps
its body, a module wrapper — are not (the paper scores them as ordinary Dafny results)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from veribatch.tasks.dafnycomp.integrity import check
from veribatch.tasks.dafnycomp.strip import strip
from veribatch.tasks.dafnycomp.syntax import Declaration, declarations

N = 24  # programs per kind (of the 125 shipped)


@pytest.fixture(scope="module")
def programs(shared_data: Path) -> list[str]:
    paths = sorted((shared_data / "dafnycomp").glob("*/dafny_code.dfy"))
    assert len(paths) == 125
    return [p.read_text() for p in paths]


def _insert_clause(program: str, d: Declaration, clause: str) -> str:
    """`clause` on its own line right after `d`'s signature."""
    return program[:d.signature_end] + "\n    " + clause + program[d.signature_end:]


def _at_each(program: str, pick, clause_for) -> str:  # type: ignore[no-untyped-def]
    """Insert a clause after the signature of every declaration `pick` accepts (from the end,
    so offsets stay valid)."""
    for d in sorted(declarations(program), key=lambda d: -d.signature_end):
        if pick(d):
            program = _insert_clause(program, d, clause_for(d))
    return program


def _main(program: str) -> Declaration:
    return next(d for d in declarations(program) if d.name.startswith("main_"))


def _int_param(d: Declaration) -> str | None:
    m = re.search(r"\(\s*([A-Za-z_]\w*)\s*:\s*int\b", d.signature)
    return m.group(1) if m else None


def _kinds(original: str, answer: str) -> set[str]:
    got = check(original, answer)
    return set(got.kinds) if got.status == "cheat" else set()


SPELLINGS_FALSE = ("requires false", "requires 0 > 1", "requires {:x} (1 == 2) // why not",
                   "requires /* c */ !true")


def test_requires_false_on_main_only(programs: list[str]) -> None:
    for k, o in enumerate(programs[:N]):
        spelling = SPELLINGS_FALSE[k % len(SPELLINGS_FALSE)]
        answer = _at_each(o, lambda d: d.name.startswith("main_"), lambda d, s=spelling: s)
        assert "vacuous" in _kinds(o, answer), (k, spelling)


def test_requires_false_and_ensures_false_everywhere(programs: list[str]) -> None:
    for k, o in enumerate(programs[N:2 * N]):
        spelling = SPELLINGS_FALSE[k % len(SPELLINGS_FALSE)]
        answer = _at_each(o, lambda d: True, lambda d, s=spelling: s)
        assert "vacuous" in _kinds(o, answer), (k, spelling)
        both = _at_each(answer, lambda d: True, lambda d: "ensures false")
        assert "vacuous" in _kinds(o, both), k


def test_contradictory_requires_on_main(programs: list[str]) -> None:
    caught = 0
    for o in programs:
        x = _int_param(_main(o))
        if x is None:
            continue
        answer = _at_each(o, lambda d: d.name.startswith("main_"),
                          lambda d, x=x: f"requires {x} > 10\n    requires {x} < 5")
        assert "vacuous" in _kinds(o, answer)
        caught += 1
        if caught == N:
            break
    assert caught == N


DECREASES_STAR = ("decreases *", "decreases*", "decreases /* c */ *", "decreases {:x} *")


def test_decreases_star_in_every_spelling(programs: list[str]) -> None:
    for k, o in enumerate(programs[2 * N:3 * N]):
        spelling = DECREASES_STAR[k % len(DECREASES_STAR)]
        answer = _at_each(o, lambda d: d.kind == "method", lambda d, s=spelling: s)
        assert "decreases_star" in _kinds(o, answer), (k, spelling)


TRIVIAL = ("ensures 1 > 0", "ensures true && true", "ensures (2 + 2 == 4) || false",
           "requires 0 <= 1\n    ensures !false")


def test_trivially_true_specs_everywhere(programs: list[str]) -> None:
    for k, o in enumerate(programs[3 * N:4 * N]):
        spelling = TRIVIAL[k % len(TRIVIAL)]
        answer = _at_each(strip(o), lambda d: True, lambda d, s=spelling: s)
        assert _kinds(o, answer) == {"trivial_spec"}, (k, spelling)
        # one real clause is enough to not be "nothing said"
        honest = _at_each(answer, lambda d: d.name.startswith("main_"), lambda d: "ensures 1 > 0 && true")
        assert _kinds(o, honest) == {"trivial_spec"}


def test_trivial_result_bound_is_not_trivial(programs: list[str]) -> None:
    o = programs[0]
    answer = _at_each(strip(o), lambda d: d.name.startswith("main_"), lambda d: "ensures result >= 1")
    assert check(o, answer).ok


# ---------------------------------------------------------------- App. H-style answers


def _add_invariants(program: str) -> str:
    """Duplicate every loop invariant line (an added invariant, as App. H's answers add)."""
    return re.sub(r"^(\s*)(invariant .*)$", r"\1\2\n\1invariant true", program, flags=re.MULTILINE)


def _add_assert_and_helper(program: str) -> str:
    main = _main(program)
    assert main.body is not None
    brace = main.body[0] + 1
    program = program[:brace] + "\n    assert 0 <= 1;\n    HelperH(0);" + program[brace:]
    return program + "\nlemma HelperH(n: int)\n  requires n >= 0\n  ensures n * n >= 0\n{\n  assert n * n >= 0;\n}\n"


def test_app_h_style_answers_are_not_flagged(programs: list[str]) -> None:
    with_loops = [o for o in programs if re.search(r"^\s*invariant ", o, re.MULTILINE)]
    assert len(with_loops) >= N
    for o in with_loops[:N]:
        inv = check(o, _add_invariants(o))
        assert inv.ok and "proof_annotations" in inv.notes, inv
        helper = check(o, _add_assert_and_helper(o))
        assert helper.ok and {"proof_annotations", "helpers_added"} <= set(helper.notes), helper
        wrapped = check(o, "module M {\n" + o + "\n}\n")
        assert wrapped.ok and wrapped.notes == ("module_wrapped",), wrapped
        # an implementation edit is still refused
        changed = _add_invariants(o).replace(":= 0;", ":= 1;", 1)
        if changed != _add_invariants(o):
            assert "body_changed" in _kinds(o, changed)


def test_axiom_on_a_function_that_keeps_its_body_is_not_a_cheat(programs: list[str]) -> None:
    seen = 0
    for o in programs:
        fn = next((d for d in declarations(o) if d.kind in ("function", "predicate") and d.body), None)
        if fn is None:
            continue
        kw = o.index(fn.kind, fn.start) + len(fn.kind)
        answer = o[:kw] + " {:axiom}" + o[kw:]
        got = check(o, answer)
        assert got.ok and "axiom_on_body" in got.notes, got
        # the same attribute on a bodyless copy is an axiom: refused
        assert fn.body is not None
        bodyless = answer[:fn.body[0] + len(" {:axiom}")] + answer[fn.body[1] + len(" {:axiom}"):]
        assert {"bodyless"} <= _kinds(o, bodyless)
        seen += 1
        if seen == 8:
            break
    assert seen == 8


def test_vacuity_reads_every_parameter_of_a_signature() -> None:
    src = ("method M(a: array<int>, n: int, m: map<int, int>) returns (r: int, b: bool)\n"
           "  requires n > 0\n{ r := 0; b := true; }\n")
    bad = src.replace("requires n > 0", "requires n > 10\n  requires n < 5")
    assert check(src, bad).kinds == ("vacuous",)
    nat = src.replace("requires n > 0", "requires n > 0\n  requires m == m")
    assert check(src, nat).ok
    assert check(src.replace("n: int", "n: nat"), src.replace("n: int", "n: nat").replace("n > 0", "n < 0")).kinds \
        == ("vacuous",)  # a nat below zero


def test_ghost_state_and_forall_proofs_are_proof_not_code(programs: list[str]) -> None:
    o = programs[0]
    main = _main(o)
    assert main.body is not None
    brace = main.body[0] + 1
    proof = ("\n    ghost var steps := 0;\n    steps := steps + 1;"
             "\n    forall k | 0 <= k < 3\n      ensures k * k >= 0\n    {\n      HelperH(k);\n    }")
    answer = _add_assert_and_helper(o[:brace] + proof + o[brace:])
    got = check(o, answer)
    assert got.ok and "proof_annotations" in got.notes, got
    # an aggregate forall (no ensures) over an array is code: refused when added
    agg = o[:brace] + "\n    var arr := new int[3];\n    forall k | 0 <= k < 3 { arr[k] := 0; }" + o[brace:]
    assert "body_changed" in _kinds(o, agg)
