"""Table 1 (pass@k) and Table 2 (failure modes) against hand computations."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from veribatch.tasks.dafnycomp.tables import table1, table2


def _cand(iid: str, k: int, *, syntax: bool, verified: bool, chain: int = 2, mode: str | None = None,
          outcome: str | None = None, integrity: str = "ok", modes: list[str] | None = None) -> dict:
    return {"instance_id": iid, "model": "m", "arm": "model", "sample_index": k, "chain_length": chain,
            "syntax_correct": syntax, "verified": verified, "dafny_verified": verified, "parse_ok": syntax,
            "spec_as_strong": verified, "dafny_version": "4.10.0",
            "integrity": integrity, "outcome": outcome or ("verified" if verified else "failed"),
            "dafny_failure_mode": mode, "dafny_failure_modes": json.dumps(modes or ([mode] if mode else []))}


def test_pass_at_k_table_by_hand() -> None:
    # 3 instances x n=4 samples: verified c = 0, 1, 4; syntax-correct c = 2, 4, 4
    rows = []
    for k in range(4):
        rows.append(_cand("a", k, syntax=k < 2, verified=False, mode="other"))
        rows.append(_cand("b", k, syntax=True, verified=k == 3, chain=3, mode=None if k == 3 else "other"))
        rows.append(_cand("c", k, syntax=True, verified=True, chain=3))
    t1, by, curve = table1(pd.DataFrame(rows), {2: 1, 3: 2})
    r = t1.frame.iloc[0]
    assert (r["covered"], r["n"], r["missing"]) == (3, 4, 0)
    # pass@k = 1 - C(n-c, k) / C(n, k), averaged over instances (in %)
    assert r["verified_at_1"] == pytest.approx(100 * (0 + 1 / 4 + 1) / 3, abs=0.01)           # 41.67
    assert r["verified_at_2"] == pytest.approx(100 * (0 + (1 - 3 / 6) + 1) / 3, abs=0.01)     # 50.00
    assert r["verified_at_4"] == pytest.approx(100 * (0 + 1 + 1) / 3, abs=0.01)               # 66.67
    assert r["syntax_at_1"] == pytest.approx(100 * (2 / 4 + 1 + 1) / 3, abs=0.01)             # 83.33
    assert r["syntax_at_2"] == pytest.approx(100 * ((1 - 1 / 6) + 1 + 1) / 3, abs=0.01)       # 94.44
    assert "verified_at_8" not in t1.frame  # k > n: not estimable
    assert t1.index == ("model", "arm") and t1.metrics["verified_at_2"].kind == "mean"
    assert t1.metrics["verified_at_2"].sampled
    # the per-instance values behind the means
    s = t1.samples.set_index("instance_id")
    assert s.loc["b", "verified_at_2"] == pytest.approx(50.0)
    # breakdown by number of chained functions
    f = by.frame.set_index("chain_length")
    assert f.loc[2, "verified_at_1"] == 0 and f.loc[3, "verified_at_1"] == pytest.approx(62.5)
    assert list(by.index) == ["model", "arm", "chain_length"]
    # no paper table has this breakdown: its title claims none; Table 1's names its ours beside
    assert not by.title.startswith("Table") and "not a paper table" in by.title
    assert "strict_* (ours)" in t1.title
    # the pass@k curve the report draws holds Table 1's numbers, one row per estimable k
    c = curve.frame.set_index("k")
    assert list(c.index) == [1, 2, 4]
    assert c.loc[2, "verified"] == r["verified_at_2"] and c.loc[4, "syntax"] == r["syntax_at_4"]
    assert curve.plots[0].kind == "line" and curve.plots[0].x == "k"


def test_paper_protocol_is_dafnys_verdict_and_strict_refuses_cheats() -> None:
    rows = [_cand("a", 0, syntax=False, verified=False, integrity="cheat", outcome="cheat")]
    rows[0].update(dafny_verified=True, parse_ok=True)  # Dafny says verified, but the answer cheated
    t1, *_ = table1(pd.DataFrame(rows), {2: 1})
    r = t1.frame.iloc[0]
    # paper protocol: Dafny's verdict on the output as is; strict: refused
    assert (r["verified_at_1"], r["syntax_at_1"]) == (100, 100)
    assert (r["strict_verified_at_1"], r["strict_syntax_at_1"], r["strong_at_1"], r["cheats"]) == (0, 0, 0, 1)
    assert bool(r["paper_comparable_dafny"])


def test_syntax_correct_means_parses_and_resolve_is_the_extra_column() -> None:
    row = _cand("a", 0, syntax=False, verified=False, mode="other")
    row.update(parse_ok=True, syntax_ok=False)  # parses, but a type error: not resolve-correct
    t1, *_ = table1(pd.DataFrame([row]), {2: 1})
    r = t1.frame.iloc[0]
    assert (r["syntax_at_1"], r["strict_syntax_at_1"]) == (100, 0)


def test_programs_without_candidates_count_as_zero_not_missing() -> None:
    # 4 programs; "d" failed to strip: its only record has no candidate (sample_index -1)
    rows = [_cand(i, 0, syntax=True, verified=True) for i in ("a", "b", "c")]
    rows.append({"instance_id": "d", "model": "m", "arm": "model", "sample_index": -1,
                 "chain_length": 2, "outcome": "no_program"})
    t1, by, _ = table1(pd.DataFrame(rows), {2: 4})
    r = t1.frame.iloc[0]
    assert (r["verified_at_1"], r["syntax_at_1"], r["programs"], r["covered"]) == (75, 75, 4, 3)
    assert by.frame.iloc[0]["verified_at_1"] == 75


def test_other_dafny_versions_are_named_in_table1() -> None:
    row = _cand("a", 0, syntax=True, verified=True)
    row["dafny_version"] = "4.11.0"
    t1, *_ = table1(pd.DataFrame([row]), {2: 1})
    assert not bool(t1.frame.iloc[0]["paper_comparable_dafny"]) and t1.frame.iloc[0]["dafny_version"] == "4.11.0"


def test_failure_modes_by_hand() -> None:
    rows = [
        _cand("a", 0, syntax=True, verified=False, mode="specification_fragility",
              modes=["specification_fragility", "reasoning_instability"]),
        _cand("a", 1, syntax=True, verified=False, mode="specification_fragility"),
        _cand("b", 0, syntax=True, verified=False, mode="implementation_proof_misalignment"),
        _cand("b", 1, syntax=False, verified=False, integrity="cheat", outcome="cheat"),
        _cand("c", 0, syntax=False, verified=False, outcome="no_program"),
        _cand("c", 1, syntax=True, verified=True),
    ]
    (t2,) = table2(pd.DataFrame(rows), 3)
    paper = t2.frame[t2.frame["protocol"] == "paper"].set_index("failure_mode")
    # the paper's four modes only, summing to 100 %; no program folds into Other
    assert list(paper.index) == ["specification_fragility", "implementation_proof_misalignment",
                                 "reasoning_instability", "other"]
    assert paper["pct_of_failed"].sum() == 100.0 and set(paper["failed"]) == {5}
    assert paper.loc["other", "candidates"] == 2  # the cheat (Dafny: other) and the no-program answer
    # the paper's Table 2 beside ours (its 353, 195, 127, 225 of 900)
    assert paper["paper_pct_of_failed"].tolist() == [39.2, 21.7, 14.1, 25.0]
    f = t2.frame[t2.frame["protocol"] == "strict"].set_index("failure_mode")
    assert set(f["failed"]) == {5}
    assert f.loc["specification_fragility", "candidates"] == 2
    assert f.loc["specification_fragility", "pct_of_failed"] == 40.0
    assert f.loc["implementation_proof_misalignment", "candidates"] == 1
    assert f.loc["cheat", "candidates"] == 1 and f.loc["no_program", "candidates"] == 1
    assert f.loc["reasoning_instability", "candidates"] == 0
    assert f.loc["reasoning_instability", "errors"] == 1  # a secondary error of that mode
    assert f["candidates"].sum() == 5
    assert t2.metrics["pct_of_failed"].n_column == "failed"
