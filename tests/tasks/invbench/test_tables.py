"""Table 2-7 arithmetic on hand-built records (the formulas of InvBench §4)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from veribatch.rundir.manifest import Manifest
from veribatch.tasks.invbench.tables import build_tables, compare_runs, compare_verifiers


def _inst(iid: str, *, decision: str | None, speedup: float | None, correct: bool, total: float | None,
          n: int = 1, model: str = "hf:/m", arm: str = "model", solved: bool = True) -> dict:
    return {"instance_id": iid, "stage": "verify", "shard": 0, "kind": "instance", "arm": arm, "model": model,
            "n_samples": n, "decision": decision, "speedup": speedup, "correct_invariant": correct,
            "total_time_s": total, "baseline_solved": solved,
            "status": "decided" if decision in ("TRUE", "FALSE") else "undecided"}


def _run(tmp_path: Path, ids: list[str], verify: list[dict], baseline: list[dict], budget: float = 600.0,
         timeout_source: str = "baseline", verifier: str = "z3", run_id: str = "invbench-x"):
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    (run_dir / "instances.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    manifest = Manifest.from_json({
        "run_id": run_id, "instance_count": len(ids), "instances_file": "instances.jsonl",
        "config": {"verifier": verifier, "verifier_version": "1.0", "model": "hf:/m",
                   "options": {"budget_s": budget, "timeout_source": timeout_source}}})
    return run_dir, manifest, {"verify": pd.DataFrame(verify), "baseline": pd.DataFrame(baseline)}


def test_table2_columns(tmp_path: Path) -> None:
    ids = [f"invbench/easy/p{i}.c" for i in range(5)]
    verify = [
        _inst(ids[0], decision="TRUE", speedup=2.0, correct=True, total=1.0),
        _inst(ids[1], decision="TRUE", speedup=4.0, correct=True, total=0.5),
        _inst(ids[2], decision="FALSE", speedup=0.5, correct=False, total=8.0),
        _inst(ids[3], decision="UNKNOWN", speedup=None, correct=True, total=3.0),
        # ids[4] has no record: a lost shard → missing
        {"instance_id": ids[0], "kind": "candidate", "arm": "model", "model": "hf:/m", "status": "decided"},
    ]
    base = [{"instance_id": i, "solved": True, "baseline_time_s": t} for i, t in zip(ids, [2, 2, 4, 50, 700], strict=True)]
    tables = {t.key: t for t in build_tables(*_run(tmp_path, ids, verify, base))}
    row = tables["table2_invbench_easy"].frame.iloc[0]
    assert row["covered"] == 4 and row["missing"] == 1
    assert row["pct_correct_invariant"] == 75.0
    assert row["pct_speedup"] == 50.0
    assert row["speedup_gt1"] == 3.0  # mean of 2 and 4
    assert row["speedup_all_arith"] == pytest.approx((2 + 4 + 1 + 1) / 4, abs=0.01)
    assert row["speedup_all_geo"] == pytest.approx((2 * 4 * 1 * 1) ** (1 / 4), abs=0.01)
    assert row["decided"] == 3
    assert row["timeout_source"] == "baseline: this run's z3 solve time"
    # the per-instance values behind the means, for `launch regress`'s bootstrap
    samples = tables["table2_invbench_easy"].samples.set_index("instance_id")
    assert sorted(samples.index) == ids[:4]
    assert samples["speedup_all_arith"].mean() == pytest.approx(row["speedup_all_arith"], abs=0.01)
    assert samples["speedup_gt1"].mean() == row["speedup_gt1"]  # NaN outside the speedup cases
    assert samples["pct_correct_invariant"].mean() == row["pct_correct_invariant"]
    assert set(samples["arm"]) == {"model"} and set(samples["split"]) == {"easy"}
    solved = tables["solved_baseline_vs_arm_easy"].frame.set_index("solver")
    assert solved.loc["z3 (baseline)", "solved_10s"] == 3
    assert solved.loc["z3 (baseline)", "solved_100s"] == 4
    assert solved.loc["z3 (baseline)", "solved_600s"] == 4  # 700 s is over every budget
    assert solved.loc["hf:/m (model)", "solved_10s"] == 3
    assert solved.loc["hf:/m (model)", "covered"] == 4
    assert solved.loc["hf:/m (model)", "missing"] == 1


def test_budgets_above_the_run_budget_are_not_claimed(tmp_path: Path) -> None:
    ids = ["invbench/sample/a.c"]
    tables = {t.key: t for t in build_tables(*_run(
        tmp_path, ids, [_inst(ids[0], decision="TRUE", speedup=1.5, correct=True, total=1.0)],
        [{"instance_id": ids[0], "solved": True, "baseline_time_s": 1.5}], budget=60.0))}
    cols = set(tables["solved_baseline_vs_arm_sample"].frame.columns)
    assert {"solved_10s", "solved_60s"} <= cols and "solved_100s" not in cols


def test_compare_detects_best_of_n(tmp_path: Path) -> None:
    ids = ["invbench/easy/a.c", "invbench/easy/b.c"]
    runs = []
    for n, sp in ((1, None), (16, 3.0)):
        d = tmp_path / f"n{n}"
        d.mkdir()
        run_dir, manifest, frames = _run(d, ids, [
            _inst(ids[0], decision="TRUE" if sp else "UNKNOWN", speedup=sp, correct=bool(sp), total=1.0, n=n),
            _inst(ids[1], decision="UNKNOWN", speedup=None, correct=False, total=1.0, n=n)], [])
        runs.append((f"N={n}", run_dir, manifest, frames))
    table = compare_runs(runs)
    assert table.key == "table7_best_of_n"
    by_n = table.frame.set_index("N")
    assert by_n.loc[1, "pct_speedup"] == 0.0 and by_n.loc[16, "pct_speedup"] == 50.0
    assert (table.frame["missing"] == 0).all()


def test_distribution_tables_and_plot_page(tmp_path: Path) -> None:
    ids = [f"invbench/easy/p{i}.c" for i in range(3)]
    verify = [
        _inst(ids[0], decision="TRUE", speedup=3.0, correct=True, total=0.5),
        _inst(ids[1], decision="FALSE", speedup=0.7, correct=False, total=4.0),
        _inst(ids[2], decision="UNKNOWN", speedup=None, correct=False, total=9.0),
    ]
    base = [{"instance_id": i, "solved": True, "baseline_time_s": t} for i, t in zip(ids, [1.5, 2.8, 20.0], strict=True)]
    run_dir, manifest, frames = _run(tmp_path, ids, verify, base, budget=30.0)
    tables = {t.key: t for t in build_tables(run_dir, manifest, frames)}
    dist = tables["speedup_distribution_easy"].frame
    assert dist["instances"].tolist() == [0, 1, 0, 0, 1, 0, 1]
    curve = tables["solved_vs_budget_easy"].frame.set_index("budget_s")
    assert curve.loc[1.0, "baseline_solved"] == 0 and curve.loc[3.0, "baseline_solved"] == 2
    assert curve.loc[1.0, "arm_solved"] == 1 and curve.loc[30.0, "arm_solved"] == 2
    assert 100.0 not in curve.index  # beyond the run's budget
    # the two plots are declarations `launch report` draws (tests/aggregate/test_report.py)
    bar = tables["speedup_distribution_easy"].plots[0]
    assert (bar.kind, bar.x, bar.x_to, bar.y) == ("bar", "speedup_from", "speedup_to", ("instances",))
    line = tables["solved_vs_budget_easy"].plots[0]
    assert line.kind == "line" and line.y == ("baseline_solved", "arm_solved") and line.log_x


def test_every_row_names_its_timeout_source(tmp_path: Path) -> None:
    ids = ["invbench/easy/a.c", "invbench/easy/b.c"]
    verify = [{**_inst(ids[0], decision="TRUE", speedup=2.0, correct=True, total=1.0), "timeout_source": "reference"},
              {**_inst(ids[1], decision="UNKNOWN", speedup=None, correct=False, total=5.0),
               "timeout_source": "budget-fallback"}]
    tables = {t.key: t for t in build_tables(*_run(tmp_path, ids, verify, [], timeout_source="reference"))}
    row = tables["table2_invbench_easy"].frame.iloc[0]
    assert row["timeout_source"] == "reference: InvBench timing.json (UAutomizer), the paper's"
    assert row["timeout_fallback"] == 1
    assert "InvBench timing.json" in tables["table2_invbench_easy"].caption


def test_correct_invariant_is_over_every_covered_instance_as_the_paper(tmp_path: Path) -> None:
    """The paper divides % correct invariant by all 113 instances of a split (every Table 2/3
    value is a multiple of 1/113), as it does % speedup.  Ours beside it (`_timed`) counts only
    the instances timed at a solve time: not one whose unsolved baseline fell back to the budget,
    not `timeout_source=budget`, not a program the front end rejected (no decision timeout at
    all).  No speedup: 1.00× as printed."""
    ids = [f"invbench/easy/p{i}.c" for i in range(6)]
    verify = [{**_inst(ids[0], decision="UNKNOWN", speedup=None, correct=True, total=1.0), "timeout_source": "baseline"},
              {**_inst(ids[1], decision="UNKNOWN", speedup=None, correct=False, total=1.0), "timeout_source": "reference"},
              {**_inst(ids[2], decision="UNKNOWN", speedup=None, correct=True, total=600.0, solved=False),
               "timeout_source": "budget-fallback"},
              {**_inst(ids[3], decision="UNKNOWN", speedup=None, correct=True, total=600.0, solved=False),
               "timeout_source": "budget-fallback"},
              {**_inst(ids[4], decision="UNKNOWN", speedup=None, correct=False, total=600.0), "timeout_source": "budget"},
              {**_inst(ids[5], decision=None, speedup=None, correct=False, total=None), "status": "program_parse_error"}]
    t = {t.key: t for t in build_tables(*_run(tmp_path, ids, verify, []))}["table2_invbench_easy"]
    row = t.frame.iloc[0]
    assert (row["covered"], row["pct_correct_invariant"]) == (6, 50.0)  # 3 / 6, the paper's denominator
    assert (row["pct_correct_invariant_timed"], row["timed_at_solve"]) == (50.0, 2)  # 1 / 2
    assert row["timeout_fallback"] == 2
    assert row["speedup_gt1"] == 1.0 and row["pct_speedup"] == 0.0
    assert t.samples["pct_correct_invariant"].mean() == 50.0
    assert t.samples["pct_correct_invariant_timed"].count() == 2  # the others are NaN there
    assert "multiples of 1/113" in t.caption and "pct_correct_invariant_timed (ours)" in t.caption
    assert t.title.startswith("Table 2:") and "pct_correct_invariant_timed and the verifier-invariant arm are ours" in t.title


def test_table4_is_per_verifier_as_in_the_paper(tmp_path: Path) -> None:
    """Rows: the dataset's recorded (UAutomizer) times, the run's baseline verifier, its arm."""
    ids = [f"invbench/hard/p{i}.c" for i in range(4)]
    base = [{"instance_id": i, "solved": s, "baseline_time_s": bt, "reference_time_s": rt,
             "expected_verdict": "TRUE", "reference_tool": "UAutomizer (InvBench timing.json)"}
            for i, s, bt, rt in zip(ids, [True, True, True, False], [5.0, 50.0, 250.0, 300.0],
                                    [40.0, 90.0, 200.0, 590.0], strict=True)]
    verify = [_inst(ids[0], decision="TRUE", speedup=1.0, correct=True, total=5.0),
              _inst(ids[1], decision="FALSE", speedup=2.0, correct=False, total=150.0)]
    run_dir, manifest, frames = _run(tmp_path, ids, verify, base, budget=300.0)
    tables = {t.key: t for t in build_tables(run_dir, manifest, frames)}
    t4 = tables["table4_verifiers_hard"].frame.set_index("kind")
    # two sources in one "Table 4": the title says which rows are the paper's kind of figure
    assert "recorded times (kind=reference) beside this run's" in tables["table4_verifiers_hard"].title
    cols = ["solved_10s", "solved_100s", "solved_300s", "solved_600s"]
    assert t4.loc["reference", cols].tolist() == [0, 2, 3, 4]
    assert t4.loc["reference", "solver"].startswith("UAutomizer (InvBench timing.json)")
    # the baseline ran with budget_s=300: its 600 s column is not measured, not claimed
    assert t4.loc["baseline", cols[:3]].tolist() == [1, 2, 3] and pd.isna(t4.loc["baseline", "solved_600s"])
    assert t4.loc["baseline", "solver"] == "z3 1.0"
    assert t4.loc["model", cols].tolist() == [1, 1, 2, 2] and t4.loc["model", "missing"] == 2
    # any number of runs: a second verifier's run adds its rows, the reference appears once
    other = tmp_path / "other"
    other.mkdir()
    run2 = _run(other, ids, [], [{**b, "baseline_time_s": b["baseline_time_s"] / 10} for b in base],
                budget=600.0, verifier="uautomizer", run_id="invbench-y")
    both = compare_verifiers([("z3-run", run_dir, manifest, frames), ("ua-run", *run2)]).frame
    assert both["kind"].tolist() == ["reference", "baseline", "model", "baseline"]
    assert both.iloc[3][["run", "solver"]].tolist() == ["ua-run", "uautomizer 1.0"]
    assert both.iloc[3][cols].tolist() == [2, 3, 3, 3]


@pytest.mark.parametrize("model, speedup, paper, mean", [
    ("gpt-oss-120b", 29.57, 1.03, "speedup_all_geo"),      # arithmetic would print 1.25
    ("claude-sonnet-4", 3.35, 1.01, "speedup_all_geo"),    # arithmetic: 1.02
    ("claude-opus-4.1", 2.96, 1.02, "speedup_all_arith"),  # geometric: 1.01
])
def test_speedup_all_both_means_against_the_papers_table3(tmp_path: Path, model: str, speedup: float,
                                                          paper: float, mean: str) -> None:
    """Table 3 (hard, 113 instances): one speedup case each; the paper's Speedup_all is one of
    the two means, printed side by side and named."""
    ids = [f"invbench/hard/p{i:03}.c" for i in range(113)]
    verify = [_inst(i, decision="TRUE" if k == 0 else "UNKNOWN", speedup=speedup if k == 0 else None,
                    correct=k == 0, total=1.0) for k, i in enumerate(ids)]
    base = [{"instance_id": i, "solved": True, "baseline_time_s": 10.0} for i in ids]
    table = {t.key: t for t in build_tables(*_run(tmp_path, ids, verify, base))}["table2_invbench_hard"]
    row = table.frame.iloc[0]
    assert row["speedup_gt1"] == speedup and row["pct_speedup"] == 0.9
    assert row[mean] == paper
    other = "speedup_all_arith" if mean == "speedup_all_geo" else "speedup_all_geo"
    assert row[other] != paper
    assert "geometric mean" in table.caption and "arithmetic mean" in table.caption
