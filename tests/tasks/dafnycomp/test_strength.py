"""What Dafny decides about contracts: the generated strength lemmas (text and the verdict
read from Dafny's real output), vacuity from `--warn-contradictory-assumptions` (recorded real
output, the original judged against its own warnings), and the paper's Dafny version."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from veribatch.tasks.dafnycomp.checker import DafnyUnavailableError, check_paper_version
from veribatch.tasks.dafnycomp.integrity import _vacuous
from veribatch.tasks.dafnycomp.strength import (
    PREFIX,
    StrengthFile,
    declarations_hit,
    failed_lemmas,
    newly_vacuous,
    strength_file,
    strength_verdict,
)
from veribatch.tasks.dafnycomp.strip import strip
from veribatch.tasks.dafnycomp.syntax import declarations
from veribatch.verifiers.dafny import interpret

PROGRAM = "main_2node_1-1925-279"


def _recorded(shared_data: Path, case: str) -> tuple[str, str, str]:
    d = shared_data / "recorded" / "dafny" / case
    (expect,) = d.glob("*.dfy.v4.10.0.expect")
    dfy = d / expect.name.replace(".v4.10.0.expect", "")
    return dfy.name, dfy.read_text(), expect.read_text()


def test_generated_lemmas_compare_candidate_with_original(shared_data: Path) -> None:
    original = (shared_data / "dafnycomp" / PROGRAM / "dafny_code.dfy").read_text()
    weaker = original.replace("    ensures result >= 1\n    ensures result <= n\n", "    ensures result >= 0\n", 1)
    assert weaker != original
    sf = strength_file(original, weaker)
    lines = sf.text.splitlines()
    assert lines[0].startswith("// candidate sha256 ") and lines[1] == 'include "program.dfy"'
    # the generated text is a program our scanner reads: one lemma per name, nothing else
    decls = declarations(sf.text)
    assert [d.name for d in decls] == list(sf.lemmas) and {d.kind for d in decls} == {"lemma"}
    assert f"{PREFIX}requires_isqrt" in sf.lemmas and f"{PREFIX}ensures_main_2node_1" in sf.lemmas
    # numSquares: original requires, the candidate's (weaker) ensures assumed, the original's proved
    assert ("lemma __strength_ensures_numSquares_279(n: int, result: int)\n"
            "  requires (1 <= n <= 10000)\n  requires (result >= 0)\n"
            "  ensures (result >= 1) && (result <= n)\n{\n}\n") in sf.text
    assert "lemma __strength_requires_numSquares_279(n: int)\n  requires (1 <= n <= 10000)\n" \
           "  ensures (1 <= n <= 10000)\n" in sf.text
    # a candidate without specs: no requires lemma, ensures lemmas assume nothing of it
    bare = strength_file(original, strip(original))
    assert not any(n.startswith(f"{PREFIX}requires_") for n in bare.lemmas)
    assert "  requires (x >= 0)\n  ensures (result >= 0) && (result * result <= x)" in bare.text


def test_lemmas_for_the_shipped_programs(shared_data: Path) -> None:
    paths = sorted((shared_data / "dafnycomp").glob("*/dafny_code.dfy"))[:30]
    for path in paths:
        o = path.read_text()
        sf = strength_file(o, o)
        names = [d.name for d in declarations(sf.text)]
        assert names == list(sf.lemmas) and len(names) >= 2, path
        # clause comments and attributes never reach a lemma (grammar, not text)
        assert "//" not in sf.text.split("\n", 1)[1], path


def test_strength_verdict_from_real_dafny_output(shared_data: Path) -> None:
    name, program, out = _recorded(shared_data, "postcondition")
    verdict = interpret(out, 4)
    assert failed_lemmas(program, name, verdict.extras["errors"]) == {"Foo"}
    sf = StrengthFile(program, ("Foo", "CallFoo"), ())
    got = strength_verdict(sf, verdict, name)
    assert got["spec_as_strong"] is False and got["strength_failed"] == '["Foo"]'
    name, program, out = _recorded(shared_data, "verified_ok")
    ok = strength_verdict(StrengthFile(program, ("M",), ()), interpret(out, 0), name)
    assert ok == {"spec_as_strong": True, "strength_status": "as_strong", "strength_failed": "[]"}
    name, program, out = _recorded(shared_data, "timeout")
    undecided = strength_verdict(StrengthFile(program, ("Foo",), ()), interpret(out, 4), name)
    assert undecided["spec_as_strong"] is False
    name, program, out = _recorded(shared_data, "parse_error_verify")
    parse = strength_verdict(StrengthFile(program, ("X",), ()), interpret(out, 2), name)
    assert parse["spec_as_strong"] is None and parse["strength_status"].startswith("not_checked")
    # errors of other declarations (multiple_errors: several fail) are attributed by line
    name, program, out = _recorded(shared_data, "multiple_errors")
    failed = failed_lemmas(program, name, interpret(out, 4).extras["errors"])
    assert len(failed) >= 2 and failed <= {d.name for d in declarations(program)}


def test_contradictory_assumptions_from_real_dafny_output(shared_data: Path) -> None:
    d = shared_data / "recorded" / "dafny" / "contradictory_assumptions"
    program = (d / "ProofDependencies.dfy").read_text()
    verdict = interpret((d / "ProofDependencyWarnings.dfy.v4.10.0.expect").read_text(), 0)
    contradictory = [w for w in verdict.extras["warnings"] if w["kind"] == "contradictory"]
    assert len(contradictory) == 8  # the others are redundancy warnings
    hits = declarations_hit(program, "ProofDependencies.dfy", contradictory)
    assert hits == Counter({"ObviouslyContradictoryRequiresMethod": 3, "ObviouslyContradictoryRequiresFunc": 2,
                            "ContradictoryAssumeMethod": 1, "AssumeFalseMethod": 1,
                            "CallContradictoryMethodMethod": 1})
    # the original judged against its own warnings (its `assume false` is not the answer's)
    assert newly_vacuous(hits, hits) == []
    assert newly_vacuous(hits + Counter({"AssumeFalseMethod": 1, "Other": 1}), hits) == ["AssumeFalseMethod", "Other"]
    # z3 alone agrees with Dafny on the contradictory requires (x: nat, x > 10, x < 10)
    by_name = {dd.name: dd for dd in declarations(program)}
    assert _vacuous(by_name["ObviouslyContradictoryRequiresFunc"])
    assert _vacuous(by_name["ObviouslyContradictoryRequiresMethod"])
    assert not _vacuous(by_name["CallContradictoryMethodMethod"])  # only Dafny sees that one


def test_only_dafny_4_10_is_paper_comparable() -> None:
    assert check_paper_version("4.10.0", False) is None
    with pytest.raises(DafnyUnavailableError, match="allow_other_dafny"):
        check_paper_version("4.11.0", False)
    assert "NOT comparable" in (check_paper_version("4.11.0", True) or "")
