"""The integrity check on real DafnyComp programs: honest answers pass (also reformatted or
with other specs), every cheat kind the issue names is caught, and the reference arms come
out as they must (the original: ok; the stripped program: trivial_spec)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from veribatch.tasks.dafnycomp.integrity import CHEAT_KINDS, check
from veribatch.tasks.dafnycomp.strip import strip

PROGRAM = "main_2node_1-1925-279"  # countTriples_1925, isqrt, numSquares_279, main_2node_1


@pytest.fixture(scope="module")
def original(shared_data: Path) -> str:
    return (shared_data / "dafnycomp" / PROGRAM / "dafny_code.dfy").read_text()


def _reformat(program: str) -> str:
    """Comments dropped, indentation and blank lines changed: nothing a check should see."""
    lines = [re.sub(r"\s*//.*$", "", ln) for ln in program.splitlines()]
    return "\n\n".join("\t" + ln.strip() + "   // reformatted" for ln in lines if ln.strip())


def test_reference_arms_on_all_125_programs(shared_data: Path) -> None:
    progs = sorted((shared_data / "dafnycomp").glob("*/dafny_code.dfy"))
    assert len(progs) == 125
    with_assume = 0
    for path in progs:
        o = path.read_text()
        assert check(o, o).status == "ok", path
        assert check(o, _reformat(o)).status == "ok", path
        stripped = check(o, strip(o))
        assert (stripped.status, stripped.kinds) == ("cheat", ("trivial_spec",)), (path, stripped)
        with_assume += "assume" in o
    assert with_assume >= 10  # originals that assume things themselves still pass


def test_other_specs_are_fine(original: str) -> None:
    other = original.replace("    ensures result >= 0\n{\n    result := 0;",
                             "    ensures 0 <= result\n    ensures result < 1000000\n{\n    result := 0;", 1)
    assert other != original
    assert check(original, other).ok


def _replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) >= 1, old
    return text.replace(old, new, 1)


CHEATS: dict[str, tuple[str, str, set[str]]] = {
    # name: (old, new, expected kinds) applied once to the original
    "assume": ("    result := 0;\n    var a := 1;", "    assume false;\n    result := 0;\n    var a := 1;",
               {"assume"}),
    "expect": ("    var m := isqrt(n);", "    expect n > 0;\n    var m := isqrt(n);", {"expect"}),
    "verify_false": ("method isqrt(", "method {:verify false} isqrt(", {"verify_false"}),
    "axiom_bodyless": ("method isqrt(x: int) returns (result: int)\n",
                       "lemma {:axiom} isqrt_facts(x: int) ensures x >= 0\nmethod isqrt(x: int) returns (result: int)\n",
                       {"axiom", "bodyless"}),
    "extern": ("method numSquares_279(", "method {:extern} numSquares_279(", {"extern"}),
    "only": ("method main_2node_1(", "method {:only} main_2node_1(", {"only"}),
    "options": ("\nmethod countTriples_1925", '\nmodule {:options "--allow-axioms"} Escape {}\nmethod countTriples_1925',
                {"options"}),  # an empty module is harmless in itself: the attribute is the cheat
    "decreases_star": ("method isqrt(x: int) returns (result: int)\n", "method isqrt(x: int) returns (result: int)\n    decreases *\n",
                       {"decreases_star"}),
    "signature": ("method isqrt(x: int) returns (result: int)", "method isqrt(x: nat) returns (result: int)",
                  {"signature_changed"}),
    "body": ("result := result + 1;\n    }\n}", "result := result + 2;\n    }\n}", {"body_changed"}),
    "ghost": ("method isqrt(", "ghost method isqrt(", {"signature_changed"}),
}


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_each_cheat_is_caught(original: str, name: str) -> None:
    old, new, kinds = CHEATS[name]
    got = check(original, _replace_once(original, old, new))
    assert got.status == "cheat" and set(got.kinds) == kinds, got
    assert set(got.kinds) <= set(CHEAT_KINDS) and got.details


def _without_method(program: str, name: str) -> str:
    start = program.index(f"method {name}(")
    end = program.index("\nmethod ", start + 1)
    return program[:start] + program[end + 1:]


def test_structural_cheats(original: str) -> None:
    removed = check(original, _without_method(original, "isqrt"))
    assert set(removed.kinds) == {"removed"}
    renamed = check(original, _replace_once(original, "method isqrt(", "method isqrt2("))
    assert set(renamed.kinds) == {"renamed"} and "isqrt → isqrt2" in renamed.details[0]
    # a bodyless method: the verifier would take its contract on faith
    start = original.index("method isqrt(")
    body_start = original.index("{", start)
    body_end = original.index("\nmethod ", start)
    bodyless = original[:body_start] + "    ensures result * result <= x\n" + original[body_end:]
    assert set(check(original, bodyless).kinds) == {"bodyless"}
    added = check(original, original + "\nlemma Helper(n: int) ensures n * n >= 0\n")
    assert set(added.kinds) == {"bodyless"}  # an added lemma without a body is an axiom
    helper = check(original, original + "\nlemma Helper(n: int) ensures n * n >= 0 {}\n")
    assert helper.ok and helper.notes == ("helpers_added",)  # proved by Dafny: allowed


def test_ensures_true_everywhere_is_a_cheat(original: str) -> None:
    s = strip(original)
    trivial = s.replace(") returns (result: int)\n{", ") returns (result: int)\n    ensures true\n    requires result == result\n{")
    assert trivial.count("ensures true") == 4
    got = check(original, trivial)
    assert got.kinds == ("trivial_spec",)


def test_unreadable_programs_are_unchecked(original: str) -> None:
    truncated = original[: len(original) // 2]  # what a model that ran out of tokens returns
    got = check(original, truncated)
    assert got.status == "unchecked" and "could not be read" in got.details[0]
