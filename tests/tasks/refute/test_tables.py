"""REFUTE tables from judge records: success and pass@1, reasons, buckets, overlap, RandSearch
failure modes, the filter — on records built here, so every number can be checked by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from veribatch.rundir.manifest import Manifest
from veribatch.tasks.refute.tables import build_tables, compare_runs

IDS = [f"refute/sample/P{k}" for k in range(10)]


def _rec(iid: str, arm: str, outcome: str, reason: str, k: int = 0, **extra: object) -> dict:
    n = int(iid[-1])
    return {"instance_id": iid, "kind": "attempt", "model": "m", "arm": arm, "sample_index": k,
            "outcome": outcome, "reason": reason, "problem_rating": 1200 + 100 * n,
            "author_rating": 3000 - 100 * n, "fail_tc": n + 1, "generation_time_s": 0.5,
            "sandbox": "bwrap", "sandbox_unsafe": False, "search_limit_s": None,
            "randsearch_failure": None, **extra}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    (tmp_path / "instances.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in IDS))
    return tmp_path


def _tables(run_dir: Path, records: list[dict], **config: object) -> dict:
    manifest = Manifest.from_json({"instances_file": "instances.jsonl",
                                   "config": {"model": "m", **config}})
    return {t.key: t for t in build_tables(run_dir, manifest, {"judge": pd.DataFrame(records)})}


def test_success_counts_problems_and_pass_at_1_counts_attempts(run_dir: Path) -> None:
    recs = []
    for k, iid in enumerate(IDS[:8]):  # 8 covered, 2 missing
        # two attempts each; P0-P3 solved by one of two attempts, P4 by both
        first = "success" if k < 5 else "failure"
        second = "success" if k == 4 else "failure"
        recs += [_rec(iid, "zero-shot", first, "differs" if first == "success" else "same_output"),
                 _rec(iid, "zero-shot", second, "differs" if second == "success" else "invalid_input", 1)]
    recs.append(_rec(IDS[8], "zero-shot", "error", "correct_failed"))
    t = _tables(run_dir, recs)["refute_success"]
    row = t.frame.iloc[0]
    assert (row["covered"], row["missing"], row["solved"]) == (9, 1, 5)
    assert row["success_rate"] == round(100 * 5 / 9, 1)
    # pass@1: P0-P3 1/2, P4 1, P5-P7 0, P8 0 → (4*0.5 + 1) / 9
    assert row["pass_at_1"] == round(100 * 3 / 9, 1)
    assert row["errors"] == 1 and row["validation_failures"] == 7  # second attempts but P4
    assert t.index == ("model", "arm") and t.metrics["success_rate"].kind == "rate"
    assert t.samples is not None and len(t.samples) == 9


def test_reason_tables_and_buckets(run_dir: Path) -> None:
    recs = [_rec(iid, "few-shot", "success" if k % 2 == 0 else "failure",
                 "differs" if k % 2 == 0 else ("invalid_input" if k % 4 == 1 else "generator_crash"))
            for k, iid in enumerate(IDS)]
    t = _tables(run_dir, recs)
    v = t["refute_validation"].frame.iloc[0]
    assert (v["invalid_input"], v["generator_crash"], v["total"]) == (3, 2, 5)
    assert t["refute_outcomes"].frame.iloc[0]["differs"] == 5
    b = t["refute_buckets"].frame
    rating = b[b["attribute"] == "problem_rating"]
    assert list(rating["bucket"]) == [1, 2, 3, 4, 5] and (rating["covered"] == 2).all()
    # ratings 1200..2100 in pairs; even k solved → exactly one of each pair
    assert (rating["success_rate"] == 50).all()
    assert set(b["attribute"]) == {"problem_rating", "author_rating", "fail_tc"}
    # the report's bar chart: one bar per bucket of each attribute, labelled with its range
    plot = t["refute_buckets"].plots[0]
    assert (plot.kind, plot.x, plot.y) == ("bar", "bucket_label", ("success_rate",))
    assert b["bucket_label"].nunique() == len(b.drop_duplicates(["attribute", "bucket"]))


def test_overlap_and_compare_across_runs(run_dir: Path) -> None:
    a = [_rec(i, "zero-shot", "success" if k < 4 else "failure", "differs") for k, i in enumerate(IDS)]
    b = [_rec(i, "randsearch", "success" if 2 <= k < 7 else "failure", "differs") for k, i in enumerate(IDS)]
    t = _tables(run_dir, a + b)["refute_overlap"].frame
    pair = t[(t["arm"] == "randsearch") & (t["other_arm"] == "zero-shot")].iloc[0]
    assert (pair["both"], pair["only_this"], pair["only_other"], pair["covered"]) == (2, 3, 2, 7)
    alone = t[(t["arm"] == "randsearch") & (t["other_model"] == "(all others)")].iloc[0]
    assert alone["only_this"] == 3
    tables = compare_runs([("r1", {}, {"judge": pd.DataFrame(a)}), ("r2", {}, {"judge": pd.DataFrame(b)})])
    succ = tables[0].frame.set_index("arm")
    assert succ.loc["zero-shot", "solved"] == 4 and succ.loc["randsearch", "solved"] == 5


def test_randsearch_failure_modes(run_dir: Path) -> None:
    modes = (["success"] * 3 + ["wrong_brute_force"] * 3 + ["invalid_input"] + ["nothing_found"]
             + ["brute_error"] + ["no_program"])
    recs = [_rec(i, "randsearch", "success" if m == "success" else "failure", "x",
                 search_limit_s=None if m == "no_program" else 120.0, search_iterations=10,
                 randsearch_failure=None if m == "success" else m) for i, m in zip(IDS, modes, strict=True)]
    recs.append(_rec(IDS[0], "zero-shot", "success", "differs"))  # not a search arm
    t = _tables(run_dir, recs)["refute_randsearch"].frame
    assert list(t["arm"]) == ["randsearch"]
    row = t.iloc[0]
    assert (row["covered"], row["attempts"], row["pct_no_program"]) == (10, 10, 10)
    assert (row["pct_success"], row["pct_wrong_brute_force"], row["pct_invalid_input"]) == (30, 30, 10)
    assert row["pct_incorrect_counterexample"] == 40
    assert (row["of_which_invalid_pct"], row["of_which_brute_pct"]) == (25, 75)


def test_filter_table_keeps_what_the_blind_generator_could_not_break(run_dir: Path) -> None:
    recs = [_rec(i, "blind-random", "success" if k < 3 else "failure",
                 "differs" if k < 3 else "nothing_found") for k, i in enumerate(IDS[:9])]
    t = _tables(run_dir, recs, options={"filter": True})["refute_filter"].frame.set_index("instance_id")
    assert list(t["decision"]).count("dropped") == 3 and list(t["decision"]).count("kept") == 6
    assert t.loc[IDS[9], "decision"] == "missing"


def test_distinct_invalidated_counts_against_prompting_and_agentic_arms_only(run_dir: Path) -> None:
    """§4.3: new problems a search arm solves that the non-oracle prompting and agentic arms did
    not, as % of its covered problems; the oracle arm never counts as 'previous'."""
    solved = {"zero-shot": {0, 1}, "agentic": {2}, "oracle": {3, 4, 5},
              "randsearch": {0, 3, 4, 6}, "randsearch-oracle": {1, 3, 7}}
    recs = [_rec(i, arm, "success" if k in won else "failure", "differs" if k in won else "same_output")
            for arm, won in solved.items() for k, i in enumerate(IDS)]
    t = _tables(run_dir, recs)["refute_distinct"].frame.set_index("arm")
    rs = t.loc["randsearch"]
    assert rs["against"] == "agentic, zero-shot"
    # randsearch solved {0, 3, 4, 6}; {0} was solved before; 3, 4 only by the oracle arm
    assert (rs["distinct_invalidated"], rs["covered"], rs["pct_of_covered"]) == (3, 10, 30.0)
    assert t.loc["randsearch-oracle", "distinct_invalidated"] == 2  # {3, 7}
    assert t.loc["zero-shot", "against"] == "agentic"  # never against itself
    # across runs (one run per strategy) the same figures
    runs = [(arm, {}, {"judge": pd.DataFrame([r for r in recs if r["arm"] == arm])}) for arm in solved]
    cmp = {t.key: t for t in compare_runs(runs)}
    assert cmp["refute_compare_distinct"].frame.set_index("arm").loc["randsearch", "pct_of_covered"] == 30.0


def test_compare_pools_rating_buckets_across_runs(run_dir: Path) -> None:
    """§5 Fig. 4 averages success over strategies: buckets cut on the problems of all runs,
    one pooled row per bucket over every (model, arm, problem)."""
    a = [_rec(i, "zero-shot", "success" if k < 2 else "failure", "differs") for k, i in enumerate(IDS)]
    b = [_rec(i, "randsearch", "success" if k in (0, 9) else "failure", "differs") for k, i in enumerate(IDS)]
    t = {x.key: x for x in compare_runs([("r1", {}, {"judge": pd.DataFrame(a)}),
                                         ("r2", {}, {"judge": pd.DataFrame(b)})])}["refute_compare_buckets"].frame
    pooled = t[(t["arm"] == "(pooled §5)") & (t["attribute"] == "problem_rating")].set_index("bucket")
    assert list(pooled.index) == [1, 2, 3, 4, 5] and set(pooled["covered"]) == {4}  # 2 problems x 2 arms
    assert set(pooled["model"]) == {"(pooled §5): m"}  # no R1 or o3-mini run: the models given
    # bucket 1 = P0, P1: zero-shot solved both, randsearch P0 → 3 of 4
    assert pooled.loc[1, "success_rate"] == 75.0 and pooled.loc[5, "success_rate"] == 25.0
    per_arm = t[(t["arm"] == "zero-shot") & (t["attribute"] == "problem_rating")]
    assert per_arm.set_index("bucket").loc[1, "success_rate"] == 100.0


def test_the_pooled_rows_pool_what_section_5_pooled(run_dir: Path) -> None:
    """§5 Fig. 4 pools R1 and o3-mini on prompting, agentic and search strategies only; every
    arm of every run (oracle, reference rows, other models) is a second row of its own."""
    r1 = [_rec(i, "zero-shot", "failure", "same_output", model="openai:deepseek/deepseek-r1") for i in IDS]
    o3 = [_rec(i, "randsearch", "success" if k < 5 else "failure", "differs", model="openai:o3-mini")
          for k, i in enumerate(IDS)]
    oracle = [_rec(i, "oracle", "success", "differs", model="openai:o3-mini") for i in IDS]
    other = [_rec(i, "few-shot", "success", "differs", model="openai:deepseek-v3") for i in IDS]
    blind = [{**_rec(i, "blind-random", "success", "differs"), "model": "reference (no model)"} for i in IDS]
    runs = [(str(k), {}, {"judge": pd.DataFrame(r)}) for k, r in enumerate((r1, o3, oracle, other, blind))]
    t = {x.key: x for x in compare_runs(runs)}["refute_compare_buckets"].frame
    t = t[t["attribute"] == "problem_rating"]
    paper = t[t["arm"] == "(pooled §5)"].set_index("bucket")
    assert set(paper["model"]) == {"(pooled §5): openai:deepseek/deepseek-r1, openai:o3-mini"}
    assert set(paper["covered"]) == {4}  # 2 problems x (R1 zero-shot, o3-mini randsearch)
    assert paper["solved"].sum() == 5  # o3-mini's randsearch on P0-P4; R1 none
    wide = t[t["arm"] == "(pooled, every arm)"].set_index("bucket")
    assert set(wide["covered"]) == {10} and wide["solved"].sum() == 5 + 3 * len(IDS)


def test_truncations_are_counted_apart(run_dir: Path) -> None:
    recs = [_rec(IDS[0], "zero-shot", "failure", "no_program", truncated=True, answer_outcome="truncated"),
            _rec(IDS[1], "zero-shot", "failure", "no_program", truncated=False, answer_outcome="no_block"),
            _rec(IDS[2], "zero-shot", "success", "differs", truncated=True)]
    t = _tables(run_dir, recs)
    s = t["refute_success"].frame.iloc[0]
    assert (s["truncated"], s["no_program_truncated"]) == (2, 1)
    v = t["refute_validation"].frame.iloc[0]
    assert (v["no_program"], v["no_program_truncated"]) == (2, 1)
