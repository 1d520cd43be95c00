"""Spec stripping on real programs: all 125 DafnyComp programs of ../shared/data/dafnycomp
(stable, bodies byte-identical, no contract clause left before any body), and the trickier
headers of Dafny's own test files in ../shared/data/recorded/dafny.

The checks use a deliberately naive scanner of their own (brace counting outside comments
and strings) rather than the stripper's, so a bug shared by both cannot hide."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest

from veribatch.tasks.dafnycomp.strip import strip, strip_specs
from veribatch.tasks.dafnycomp.syntax import DafnySyntaxError, declarations

CONTRACT = re.compile(r"\b(requires|ensures|reads|modifies|decreases)\b")
FRAME_END = re.compile(r"\b(?:modifies|reads)\s*$")
DECL_LINE = re.compile(r"^\s*(?:ghost\s+)?(method|function|lemma|predicate)\b", re.MULTILINE)


def _code_mask(text: str) -> str:
    """`text` with comments and string contents blanked (same length), naively."""
    out, i = list(text), 0
    while i < len(text):
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = len(text) if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif text.startswith("/*", i):
            j = text.index("*/", i) + 2
            out[i:j] = [c if c == "\n" else " " for c in text[i:j]]
            i = j
        elif text[i] == '"':
            j = text.index('"', i + 1) + 1
            out[i:j] = " " * (j - i)
            i = j
        else:
            i += 1
    return "".join(out)


def _top_level(text: str) -> tuple[list[str], str]:
    """(the top-level {...} blocks, verbatim; the text outside them, comments blanked)."""
    mask = _code_mask(text)
    blocks, outside, depth, start, display = [], [], 0, 0, 0
    for i, c in enumerate(mask):
        if depth == 0 and (display or (c == "{" and FRAME_END.search(mask, 0, i))):
            display += {"{": 1, "}": -1}.get(c, 0)  # `modifies {}`: a set, not a body
            outside.append(c)
            continue
        if c == "{":
            if depth == 0:
                start = i
            depth += 1
        elif c == "}":
            depth -= 1
            assert depth >= 0
            if depth == 0:
                blocks.append(text[start:i + 1])
            continue
        if depth == 0:
            outside.append(c)
    assert depth == 0
    return blocks, "".join(outside)


def _deleted_runs(original: str, stripped: str) -> list[str]:
    """The runs of `original` missing from `stripped`, asserting that `stripped` is `original`
    with characters deleted (nothing inserted or replaced).  Lines first (fast); a changed
    line is compared character by character."""
    a_lines, b_lines = original.splitlines(keepends=True), stripped.splitlines(keepends=True)
    runs = []
    for op, a0, a1, b0, b1 in difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False).get_opcodes():
        if op == "delete":
            runs.append("".join(a_lines[a0:a1]))
        elif op == "replace":
            runs += _char_deletions("".join(a_lines[a0:a1]), "".join(b_lines[b0:b1]))
        else:
            assert op == "equal", (op, a_lines[a0:a1], b_lines[b0:b1])
    return runs


def _char_deletions(original: str, stripped: str) -> list[str]:
    ops = difflib.SequenceMatcher(None, original, stripped, autojunk=False).get_opcodes()
    assert {op for op, *_ in ops} <= {"equal", "delete"}, (original, stripped)
    runs = []
    for op, a, b, _, _ in ops:
        if op == "delete":  # an alignment may rotate a deletion; shift it right as far as it goes
            while b < len(original) and original[a] == original[b]:
                a, b = a + 1, b + 1
            runs.append(original[a:b])
    return runs


def _programs(shared_data: Path) -> list[Path]:
    progs = sorted((shared_data / "dafnycomp").glob("*/dafny_code.dfy"))
    assert len(progs) == 125
    return progs


def test_stripping_all_125_programs(shared_data: Path) -> None:
    total = 0
    for path in _programs(shared_data):
        original = path.read_text()
        result = strip_specs(original)
        stripped = result.text
        name = path.parent.name
        # stable
        assert strip(stripped) == stripped, name
        # every body byte-identical (all DafnyComp declarations are top-level)
        blocks_o, outside_o = _top_level(original)
        blocks_s, outside_s = _top_level(stripped)
        assert blocks_s == blocks_o, name
        # no contract keyword left anywhere before a body; and there were some to remove
        assert not CONTRACT.search(outside_s), (name, CONTRACT.search(outside_s))
        assert len(CONTRACT.findall(outside_o)) == result.clauses_removed > 0, name
        # only deletions, each one a contract clause (with the whitespace before it)
        for run in _deleted_runs(original, stripped):
            assert CONTRACT.match(run.strip()) or run.strip().startswith(("//", "/*")), (name, run)
        # every declaration found (methods, functions, lemmas, predicates)
        assert result.declarations == len(DECL_LINE.findall(original)), name
        total += result.clauses_removed
    assert total > 2000


def test_headers_of_dafnys_own_test_files(shared_data: Path) -> None:
    rec = shared_data / "recorded" / "dafny"
    # one-line bodyless headers, attributes before the name, `ensures` twice on one line
    method = (rec / "bodyless_verify_false" / "method.dfy").read_text()
    s = strip(method)
    assert "method Compiled()\nghost method Ghost()\nmethod {:axiom} Axiom()\n" in s
    assert "method BodylessLoop() {\n  while(true) invariant true || false\n}" in s
    assert "method {:extern} Booo() {\n  assert false;\n}" in s
    bodyless = [d for d in declarations(method) if d.bodyless]
    assert [d.name for d in bodyless][:3] == ["Compiled", "Ghost", "Axiom"]
    assert bodyless[2].attributes == ("{:axiom}",)
    # attributes inside clauses; loop invariants (with attributes) stay
    custom = (rec / "custom_error_attr" / "CustomErrorMesage.dfy").read_text()
    s = strip(custom)
    assert "cannot establish" not in s and "when calling" not in s
    assert s.count('invariant {:error "position variable out of range"}') == 1
    assert "ghost function foo(x:int) : (y:int)\n{\n  x\n}" in s
    # members of a datatype; a comment between a header and its body stays
    assume = (rec / "assume_warning" / "assume.dfy").read_text()
    s = strip(assume)
    assert "function PropagateFailure<U>(): Option<U>\n    {" in s and "requires" not in s
    neg = (rec / "multiple_errors" / "ComputationsNeg.dfy").read_text()
    s = strip(neg)
    assert "ghost method go_bad()\n{  // error: postcondition violation" in s
    assert "ghost function bad(n: nat): nat\n{" in s
    # a parenthesised requires spanning an array quantifier
    summax = (rec / "verified_ok" / "Problem1-SumMax.dfy").read_text()
    assert "returns (sum: int, max: int)\n{\n  sum := 0;" in strip(summax)
    assert "invariant i <= N && sum <= i * max" in strip(summax)


def test_tricky_contracts() -> None:
    src = (
        "method M(a: array<int>) returns (r: int)\n"
        "  modifies {}\n"
        "  ensures r in {1, 2} // a set display, not the body\n"
        "  ensures forall f: int -> int :: f.requires(r) ==> true\n"
        "{ r := 1; }\n"
        "function F(x: int): int requires x > 0 reads {} { x } by method { return x; }\n"
        "twostate lemma L() ensures true\n"
        "function method G(s: string): char requires |s| > 0 { if s[0] == '}' then 'x' else s[0] }\n"
        "predicate P(x': int) decreases x' { x' > 0 }\n"
    )
    s = strip(src)
    assert s == (
        "method M(a: array<int>) returns (r: int)\n"  # the clause's comment went with it
        "{ r := 1; }\n"
        "function F(x: int): int { x } by method { return x; }\n"
        "twostate lemma L()\n"
        "function method G(s: string): char { if s[0] == '}' then 'x' else s[0] }\n"
        "predicate P(x': int) { x' > 0 }\n"
    )
    assert [d.kind for d in declarations(src)] == ["method", "function", "lemma", "function", "predicate"]


def test_unreadable_programs_raise_with_a_position() -> None:
    with pytest.raises(DafnySyntaxError, match="line 2"):
        declarations("method M()\n{ if x { }\n")
    with pytest.raises(DafnySyntaxError, match="unterminated comment"):
        strip("/* no end\nmethod M() {}")


def test_no_hint_survives_from_a_stripped_clause_line(shared_data: Path) -> None:
    """End-of-line comments of removed clauses (`ensures r <= 250000  // Upper bound estimate`)
    go with them instead of moving onto the signature line; comments in bodies stay."""
    leaking = 0
    for path in _programs(shared_data):
        original = path.read_text()
        stripped = strip(original)
        hints = [m.group(1).strip() for m in re.finditer(r"^\s*(?:requires|ensures|reads|modifies|decreases)\b.*?(//.*)$",
                                                        original, re.MULTILINE)]
        leaking += bool(hints)
        for hint in hints:
            assert original.count(hint) > stripped.count(hint), (path.parent.name, hint)
        body_comments = re.findall(r"^\s*(//.*)$", original, re.MULTILINE)
        for c in body_comments:  # own-line comments (all inside bodies in these programs) stay
            assert c in stripped, (path.parent.name, c)
    assert leaking >= 2
