"""The strict protocol looks through helper declarations (issue 29): the four cheats a
text-level check passed — a helper predicate that is false, required by the main method; a
helper function whose value breaks a required equation; a quantified contradiction in a
requires; every contract removed and the main method's ensures a call to a helper predicate
that is true — are caught on the shipped programs in several spellings (the answers
generated here from the programs), while the same helpers used honestly and the controls
(the original, an added ``assert true;``, an added helper lemma with a body) stay ``ok``.
What z3 cannot settle (a recursive helper, a quantifier over sequences) is ``unchecked``,
never ``ok``.  Every test here fails with the text-level check."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from veribatch.tasks.dafnycomp.integrity import Integrity, check
from veribatch.tasks.dafnycomp.strip import strip
from veribatch.tasks.dafnycomp.syntax import Declaration, declarations

STRIDE = 5  # every 5th of the 125 shipped programs (2- and 3-function chains alike): 25 per test


@pytest.fixture(scope="module")
def programs(shared_data: Path) -> list[str]:
    paths = sorted((shared_data / "dafnycomp").glob("*/dafny_code.dfy"))
    assert len(paths) == 125
    return [p.read_text() for p in paths[::STRIDE]]


def _main(program: str) -> Declaration:
    return next(d for d in declarations(program) if d.name.startswith("main_"))


def _first(pattern: str, d: Declaration) -> str:
    m = re.search(pattern, d.signature)
    assert m, d.signature
    return m.group(1)


def _param(d: Declaration) -> str:
    return _first(r"\(\s*([A-Za-z_]\w*)\s*:\s*int\b", d)


def _result(d: Declaration) -> str:
    return _first(r"returns\s*\(\s*([A-Za-z_]\w*)\s*:\s*int\b", d)


def _with_main_clause(program: str, clause: str, helper: str = "", before: bool = False) -> str:
    """`clause` added to the main method's contract; `helper` declared after the program
    (or, `before`, ahead of the main method)."""
    m = _main(program)
    out = program[:m.signature_end] + "\n    " + clause + program[m.signature_end:]
    if before:
        return out[:m.start] + helper + "\n\n" + out[m.start:]
    return out + "\n" + helper + "\n"


def _cheat(got: Integrity, kind: str) -> bool:
    return got.status == "cheat" and kind in got.kinds and bool(got.details)


def _requires_through_helpers(program: str) -> str:
    """App. H style: each method's requires moved into a helper predicate it requires."""
    out, helpers = program, []
    for d in sorted(declarations(program), key=lambda d: -d.start):
        reqs = [c for c in d.clauses if c.keyword == "requires"]
        if d.kind != "method" or not reqs:
            continue
        params = re.search(r"\((.*?)\)", d.signature)
        assert params is not None
        names = [p.split(":")[0].split()[-1] for p in params.group(1).split(",") if ":" in p]
        body = " && ".join("(" + re.sub(r"\s+", " ", c.text[len("requires"):]).strip() + ")" for c in reqs)
        helpers.append(f"predicate Pre_{d.name}({params.group(1)})\n{{\n  {body}\n}}\n")
        kept = "".join("\n    " + c.text for c in d.clauses if c.keyword != "requires")
        start, end = d.clauses[0].start, d.clauses[-1].end
        out = out[:start] + f"requires Pre_{d.name}({', '.join(names)})" + kept + out[end:]
    return out + "\n" + "\n".join(helpers)


FALSE_BODIES = ("false", "v < 0 && v > 0", "v != v", "!(v == v) || (v > v)")


def test_a_false_helper_predicate_required_by_main(programs: list[str]) -> None:
    for k, o in enumerate(programs):
        x = _param(_main(o))
        head = ("ghost predicate", "predicate {:opaque}", "function", "opaque predicate")[k % 4]
        pred = f"{head} HelperPre(v: int){': bool' if head == 'function' else ''}\n{{\n  {FALSE_BODIES[k % 4]}\n}}"
        got = check(o, _with_main_clause(o, f"requires HelperPre({x})", pred, before=k % 2 == 1))
        assert _cheat(got, "vacuous"), (k, got)
        # the same helper that can hold is an ordinary precondition; the original is ok
        fine = pred.replace(FALSE_BODIES[k % 4], "v == v || v > 0")
        assert check(o, _with_main_clause(o, f"requires HelperPre({x})", fine)).ok, k
        assert check(o, o).ok, k
        if k % 3 == 0:  # every requires behind a helper (each method's vacuity asked: slower)
            through = check(o, _requires_through_helpers(o))
            assert through.ok and "helpers_added" in through.notes, (k, through)


EQUATIONS = (  # (helper, requires): the helper's value makes the equation false
    ("function HelperF(v: int): int\n{\n  v + 1\n}", "requires HelperF({x}) == {x}"),
    ("function HelperK(): int { 2 }", "requires HelperK() == 3"),
    ("function HelperSq(v: int): int\n{\n  v * v\n}", "requires HelperSq({x}) < 0"),
    ("function HelperId(v: int): int\n{\n  var w := v; if w > 0 then w else w\n}", "requires HelperId({x}) != {x}"),
)


def test_b_helper_function_breaking_a_required_equation(programs: list[str]) -> None:
    for k, o in enumerate(programs):
        x = _param(_main(o))
        helper, req = EQUATIONS[k % 4]
        got = check(o, _with_main_clause(o, req.format(x=x), helper))
        assert _cheat(got, "vacuous"), (k, got)
        # an equation the helper's value satisfies is fine; so is an added `assert true;`
        assert check(o, _with_main_clause(o, f"requires HelperF({x}) == {x} + 1", EQUATIONS[0][0])).ok, k
        body = _main(o).body
        assert body is not None
        assert check(o, o[:body[0] + 1] + "\n    assert true;" + o[body[0] + 1:]).ok, k


QUANTIFIED = ("requires forall k: int :: k < {x}", "requires exists k :: k > 0 && k < 0",
              "requires forall i :: 0 <= i < 10 ==> i > 20", "requires forall i, j | i < j :: j < i",
              "requires {x} > 0 && forall n: nat :: n < {x}")
HELPER_LEMMA = "lemma HelperLemma(n: int)\n  requires n >= 0\n  ensures n * n >= 0\n{\n  assert n * n >= 0;\n}"


def test_c_quantified_contradiction_in_a_requires(programs: list[str]) -> None:
    for k, o in enumerate(programs):
        x = _param(_main(o))
        got = check(o, _with_main_clause(o, QUANTIFIED[k % len(QUANTIFIED)].format(x=x)))
        assert _cheat(got, "vacuous"), (k, got)
        # a quantifier that can hold is fine; so is an added lemma with a body
        assert check(o, _with_main_clause(o, f"requires forall i :: 0 <= i < {x} ==> i + 1 <= {x}")).ok, k
        assert check(o, o + "\n" + HELPER_LEMMA + "\n").ok, k


TRUE_BODIES = ("true", "v == v", "v >= 0 || v < 0", "0 <= 1 && (v < 5 ==> v < 6)")


def test_d_contracts_removed_and_a_true_helper_as_the_postcondition(programs: list[str]) -> None:
    for k, o in enumerate(programs):
        s = strip(o)
        r = _result(_main(s))
        pred = f"predicate HelperPost(v: int)\n{{\n  {TRUE_BODIES[k % 4]}\n}}"
        got = check(o, _with_main_clause(s, f"ensures HelperPost({r})", pred))
        assert got.status == "cheat" and got.kinds == ("trivial_spec",), (k, got)
        # a helper that says something about the result is a specification
        says = pred.replace(TRUE_BODIES[k % 4], "v >= 1")
        assert check(o, _with_main_clause(s, f"ensures HelperPost({r})", says)).ok, k


def test_what_z3_cannot_settle_is_unchecked(programs: list[str]) -> None:
    """Recursive helpers (z3 would need induction) and quantifiers over sequences are not
    decided: the answer is not trusted.  A recursive App. H-style helper that z3 can
    evaluate stays ok."""
    rec_true = ("predicate HelperAll(n: int)\n  decreases if n < 0 then 0 else n\n"
                "{\n  n <= 0 || HelperAll(n - 1)\n}")
    rec_digits = ("function HelperDigits(n: int): int\n  decreases if n < 0 then -n else n\n"
                  "{\n  if -10 < n < 10 then 1 else 1 + HelperDigits(n / 10)\n}")
    for k, o in enumerate(programs[:3]):  # each undecided question costs z3 its time limit
        s, x = strip(o), _param(_main(o))
        r = _result(_main(s))
        hidden = check(o, _with_main_clause(s, f"ensures HelperAll({r})", rec_true))
        assert hidden.status == "unchecked" and "says something" in hidden.details[0], (k, hidden)
        seqs = check(o, _with_main_clause(o, "requires forall q: seq<int> :: |q| == 0"))
        assert seqs.status == "unchecked" and "can all hold" in seqs.details[0], (k, seqs)
        fine = check(o, _with_main_clause(o, f"requires HelperDigits({x}) >= 1", rec_digits))
        assert fine.ok, (k, fine)
        false_rec = check(o, _with_main_clause(o, f"requires HelperDigits({x}) < 0", rec_digits))
        assert false_rec.status in ("cheat", "unchecked"), (k, false_rec)


READING = """
function Inc(v: int): int { v + 1 }
predicate Twice(v: int) { Inc(Inc(v)) == v + 2 }
predicate IsDigit(c: char) { '0' <= c <= '9' }
function Fact(n: int): int decreases if n < 0 then 0 else n { if n <= 0 then 1 else n * Fact(n - 1) }
method M(x: int, n: nat, b: bool, c: char, s: seq<int>, a: array<int>, t: string, m: array<seq<int>>) returns (r: int)
"""
VALID = ("Twice(x)", "-7 % 3 == 2 && -7 / 3 == -3", "!b == !b && (b ==> b ==> b)", "0 <= n",
         "IsDigit(c) ==> 48 <= c as int <= 57", "var y := x + 1; y > x", "(if x > 0 then x else -x) >= 0",
         "|s| >= 0 && a.Length >= 0", "(forall i :: 0 <= i < |s| ==> s[i] > 0) && |s| > 0 ==> s[0] > 0",
         "x in [x, 1]", "Fact(3) == 6", "|t| > 0 && (forall i :: 0 <= i < |t| ==> IsDigit(t[i])) ==> t[0] != 'a'",
         "|m[x]| >= 0 && (m.Length > 0 && (forall i :: 0 <= i < m.Length ==> |m[i]| > 1) ==> m[0][0] == m[0][0])")
SAYS = ("x > 0", "m.Length > 0 ==> |m[0]| > 0", "Inc(x) == 5", "s[0] == 1", "!IsDigit(c)", "exists i :: 0 <= i < |s| && s[i] == x", "Fact(x) > 1")


def test_clauses_are_read_as_dafny_reads_them() -> None:
    """What the check decides must be what the clause means: the operators' precedence and
    Euclidean division, chars, let, if, sequences and arrays (of sequences too), helpers nested
    or recursive."""
    from veribatch.tasks.dafnycomp.contracts import Judge
    from veribatch.tasks.dafnycomp.expressions import definitions, recursive

    for clause, want in [*((c, "trivial") for c in VALID), *((c, "says") for c in SAYS)]:
        text = READING + f"  ensures {clause}\n{{ r := 0; }}\n"
        decls = declarations(text)
        defs = definitions(text, decls)
        m = decls[-1]
        got = Judge(m, defs, recursive(defs)).triviality(m.clauses[0])
        assert got.verdict == want, (clause, got)
