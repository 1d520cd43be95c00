"""LaM4Inv's real logs and programs (../shared/data/lam4inv), and what the loader does with
input it cannot read: a named, counted skip naming file and line, never a crash."""

from __future__ import annotations

import json
from pathlib import Path

from veribatch.tasks.cebench import data, lam4inv


def test_every_real_log_parses(lam4inv_root: Path) -> None:
    logs = sorted((lam4inv_root / lam4inv.LOGS_DIR).glob("*.txt"))
    assert len(logs) == 316
    parsed = [lam4inv.parse_log(p.read_text(), p.name) for p in logs]
    assert all(not log.skips for log in parsed), [s for log in parsed for s in log.skips][:3]
    # LaM4Inv verified 309 of the 316 programs (CE-Bench §3.1.1): the others have no answer
    assert sum(1 for log in parsed if log.final_invariant) == 309
    assert sum(len(log.candidates) for log in parsed) == 3063  # distinct raw candidates
    assert all(log.program and log.program.endswith(log.file.replace(".txt", ".c")) for log in parsed)


def test_candidates_in_log_order_deduplicated_with_their_first_line(lam4inv_root: Path) -> None:
    log = lam4inv.parse_log((lam4inv_root / lam4inv.LOGS_DIR / "1.txt").read_text(), "1.txt")
    exprs = [c.expr for c in log.candidates]
    assert exprs[:3] == ["(y >= 0) && (x >= y)", "x >= y && y >= 0", "(x >= 1) && (y >= 0) && (x >= y)"]
    assert len(exprs) == len(set(exprs)) == 9
    assert [c.line for c in log.candidates][:7] == [2] * 7 and log.candidates[7].line == 9
    assert log.final_invariant is not None and log.final_invariant.startswith("((y >= 0)) && ((x >= y))")
    assert log.final_line == 19 and log.proposals == 2 and abs((log.time_s or 0) - 19.77) < 0.01


def test_unreadable_log_lines_are_named_skips(tmp_path: Path) -> None:
    text = "\n".join([
        "Begin_process:   Benchmarks/Linear/c/9.c",
        "GPT Answer: ['assert(x >= 0);', 'assert(y",          # cut off: not a list literal
        "GPT Answer: ['assert(x >= 0);', 'x <= 3', 'assert(y >= 0);']",  # one item is no assert
        "Candidate: assert(x >= 0);",
        "The answer is :  x >= 0",                            # no assert(...)
    ])
    log = lam4inv.parse_log(text, "9.txt")
    assert [c.expr for c in log.candidates] == ["x >= 0", "y >= 0"]
    assert [(s.line, s.kind) for s in log.skips] == [(2, "log_unparsable"), (3, "candidate_not_assert"),
                                                       (5, "log_unparsable")]
    assert all(s.file == "9.txt" for s in log.skips) and log.final_invariant is None
    empty = lam4inv.parse_log("garbage\n", "x.txt")
    assert [s.reason for s in empty.skips] == ["no Begin_process line: not a LaM4Inv log"]


def test_source_instances_of_the_real_folder(lam4inv_root: Path) -> None:
    src = data.Source("lam4inv", lam4inv_root)
    insts = data.load_source(src)
    assert len(insts) == 317 and insts[0].id == "cebench/lam4inv/1.c" and insts[1].id == "cebench/lam4inv/2.c"
    test_c = next(i for i in insts if i.payload["file"] == "test.c")
    assert test_c.payload["log"] is None
    assert [s["kind"] for s in test_c.payload["skips"]] == ["no_log"]
    json.dumps([i.payload for i in insts])  # instances.jsonl must hold them
    assert len(data.load_source(src, limit=3)) == 3
