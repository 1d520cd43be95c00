"""`-o strip=reform`: stripping as DafnyComp's authors' ReForm scripts strip (every line starting
with requires/ensures/invariant/assert/modifies/assume/reads/decreases, with its continuation,
and all comments), beside §3.3's contract-only default; its own prompt; default run ids kept."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from veribatch.launch.plan import make_config, run_id_for
from veribatch.tasks.base import get_task
from veribatch.tasks.dafnycomp.prompt import template_hash, user_prompt
from veribatch.tasks.dafnycomp.stages import strip_record
from veribatch.tasks.dafnycomp.strip import strip_specs
from veribatch.tasks.dafnycomp.strip_reform import REFORM_KEYWORDS, _without_comments, strip_reform

PROGRAM = """\
include "lib.dfy"
// Sum of 0..n-1
method Sum(n: int) returns (s: int)
  requires n >= 0
  ensures s == n * (n - 1) / 2 // closed form
{
  s := 0;
  var i := 0;
  while i < n
    invariant 0 <= i <= n
    invariant s == i * (i - 1) / 2
    decreases n - i
  {
    s := s + i; /* step */
    i := i + 1;
  }
  assert s >= 0 by {
    assert n >= 0;
  }
  var t := "// not a comment";
}
function F(x: int): int
  requires (x >= 0 &&
     x < 10)
{ x + 1 }
"""


def test_reform_strip_drops_every_annotation_line_and_comment() -> None:
    r = strip_reform(PROGRAM)
    assert r.text == (
        "method Sum(n: int) returns (s: int)\n"
        "{\n"
        "  s := 0;\n"
        "  var i := 0;\n"
        "  while i < n\n"
        "  {\n"
        "    s := s + i; \n"
        "    i := i + 1;\n"
        "  }\n"
        '  var t := "// not a comment";\n'
        "}\n"
        "function F(x: int): int\n"
        "{ x + 1 }")
    # the `assert ... by { ... }` block goes whole; the two-line requires by its parentheses
    assert r.removed == Counter({"requires": 2, "ensures": 1, "invariant": 2, "decreases": 1, "assert": 1,
                                 "comment": 3})
    # §3.3's default keeps what is inside bodies
    kept = strip_specs(PROGRAM).text
    assert "invariant 0 <= i <= n" in kept and "assert s >= 0 by" in kept and "requires" not in kept


def test_reform_strip_on_the_125_shared_programs(shared_data: Path) -> None:
    """Stable, no annotation line or comment left, the rest kept in order; the totals beside
    the default's (printed with -s)."""
    reform: Counter[str] = Counter()
    contracts: Counter[str] = Counter()
    programs = sorted((shared_data / "dafnycomp").glob("main_*/dafny_code.dfy"))
    assert len(programs) == 125
    spec_line = re.compile(r"^\s*(" + "|".join(REFORM_KEYWORDS) + r")\b")
    for path in programs:
        text = path.read_text()
        r = strip_reform(text)
        assert strip_reform(r.text).text == r.text, path
        lines = r.text.split("\n")
        assert not any(spec_line.match(ln) for ln in lines), path
        assert _without_comments(r.text)[1] == 0, path
        source = iter(ln for ln in _without_comments(text)[0].split("\n"))
        assert all(any(ln == src for src in source) for ln in lines), f"{path}: not a subsequence"
        reform += r.removed
        contracts += strip_specs(text).removed
    lines_removed = sum(v for k, v in reform.items() if k != "comment")
    print(f"\ncontracts (default): {sum(contracts.values())} clauses {dict(sorted(contracts.items()))}"
          f"\nreform: {lines_removed} lines {dict(sorted((k, v) for k, v in reform.items() if k != 'comment'))}"
          f", {reform['comment']} comments")
    assert sum(contracts.values()) == 2220
    assert (lines_removed, reform["invariant"], reform["assert"], reform["comment"]) == (5251, 2579, 85, 748)


def test_reform_strip_record_and_prompt(shared_data: Path) -> None:
    inst = get_task("dafnycomp").load(str(shared_data / "dafnycomp"), limit=1)[0]
    rec = strip_record(inst, "reform")
    assert rec["status"] == "ok" and rec["strip"] == "reform" and rec["stable"]
    assert rec["removed_invariant"] > 0 and "invariant" not in rec["stripped"]
    assert rec["clauses_removed"] == sum(rec[f"removed_{k}"] for k in REFORM_KEYWORDS)
    default = strip_record(inst)
    assert default["status"] == "ok" and "strip" not in default and "invariant" in default["stripped"]
    assert "Loop invariants, assertions and all code are still there" in user_prompt("x")
    assert "every requires, ensures, invariant, assert" in user_prompt("x", "reform")
    assert template_hash("reform") != template_hash()


def test_strip_option_changes_the_run_id_only_when_set() -> None:
    task = get_task("dafnycomp")
    default = make_config(task)
    assert "strip" not in default.options  # not recorded: runs without it keep their ids
    assert run_id_for(make_config(task, options=["strip=contracts"])) == run_id_for(default)
    reform = make_config(task, options=["strip=reform"])
    assert reform.options["strip"] == "reform" and run_id_for(reform) != run_id_for(default)
    assert task.versions(reform)["strip"] != task.versions(default)["strip"]
    with pytest.raises(ValueError, match="strip='all': expected one of contracts, reform"):
        make_config(task, options=["strip=all"])


def test_strip_table_names_the_reform_strip(shared_data: Path) -> None:
    import pandas as pd

    from veribatch.tasks.dafnycomp.tables import strip_table

    insts = get_task("dafnycomp").load(str(shared_data / "dafnycomp"), limit=3)
    reform = strip_table(pd.DataFrame([{**strip_record(i, "reform"), "instance_id": i.id} for i in insts]), 3)
    row = reform.frame.iloc[0]
    assert "ReForm" in reform.title and row["invariant"] > 0 and row["comment"] >= 0
    assert row["clauses_removed"] == sum(int(row[k]) for k in REFORM_KEYWORDS if k in row)
    default = strip_table(pd.DataFrame([{**strip_record(i), "instance_id": i.id} for i in insts]), 3)
    assert "§3.3" in default.title and "invariant" not in default.frame
