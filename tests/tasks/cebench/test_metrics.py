"""The metric functions against the paper's own counts (Tables 2, 4 and 5), and answer parsing."""

from __future__ import annotations

import pandas as pd
import pytest

from veribatch.tasks.cebench.answer import parse_answer
from veribatch.tasks.cebench.tables import _judge_tables, bias_metrics, confusion

# Table 5 (DeepSeek-V3.2, zero-shot): per category genuine total and G→S errors, spurious
# total and S→G errors.  Table 4 gives the correct counts these must add up to.
TABLE5 = {
    "SAT_Pre": {"genuine": 848, "g2s": 439, "spurious": 0, "s2g": 0},
    "UNSAT_Pre": {"genuine": 74, "g2s": 35, "spurious": 516, "s2g": 113},
    "Inductive": {"genuine": 103, "g2s": 61, "spurious": 395, "s2g": 96},
}
TABLE4_CORRECT = {"SAT_Pre": (409, 848, 48.23), "UNSAT_Pre": (442, 590, 74.92), "Inductive": (341, 498, 68.47)}


def _predictions(counts: dict[str, int]) -> tuple[list[str], list[str]]:
    labels = ["GENUINE"] * counts["genuine"] + ["SPURIOUS"] * counts["spurious"]
    predicted = (["SPURIOUS"] * counts["g2s"] + ["GENUINE"] * (counts["genuine"] - counts["g2s"])
                 + ["GENUINE"] * counts["s2g"] + ["SPURIOUS"] * (counts["spurious"] - counts["s2g"]))
    return labels, predicted


def _frame() -> pd.DataFrame:
    rows = []
    for cat, counts in TABLE5.items():
        labels, predicted = _predictions(counts)
        for i, (t, p) in enumerate(zip(labels, predicted, strict=True)):
            rows.append({"instance_id": f"{cat}/{i}", "model": "deepseek", "arm": "model", "strategy": "zero-shot",
                         "category": cat, "label": t, "predicted": p, "correct": t == p, "time_s": 5.0})
    return pd.DataFrame(rows)


def test_table5_overall_from_the_papers_counts() -> None:
    labels, predicted = [], []
    for counts in TABLE5.values():
        a, b = _predictions(counts)
        labels += a
        predicted += b
    c = confusion(labels, predicted)
    assert (c["genuine"], c["g2s"], c["spurious"], c["s2g"]) == (1025, 535, 911, 209)
    m = bias_metrics(c)
    assert round(100 * m["g2s_rate"], 1) == 52.2 and round(100 * m["s2g_rate"], 1) == 22.9
    assert round(100 * m["genuine_recall"], 1) == 47.8          # paper: 47.8 %
    assert round(100 * m["precision"], 1) == 70.1               # paper: 70.1 %
    assert round(100 * m["accuracy"], 2) == 61.57               # Table 2/4: 1192/1936
    # Balanced accuracy: the paper's 62.5 % is the mean of its *rounded* recalls
    # (47.8 + 77.1) / 2 = 62.45; from the counts it is 62.43 %.
    assert round(100 * m["spurious_recall"], 1) == 77.1
    assert round(100 * m["balanced_accuracy"], 2) == 62.43
    assert round((47.8 + 77.1) / 2, 2) == 62.45
    # F1: the harmonic mean of the paper's own precision and recall is 56.8 %, not the 60.6 %
    # it prints; no standard F1 of these counts gives 60.6 (macro 61.1, weighted 60.9), so
    # the metric keeps the standard definition and this test pins the discrepancy.
    assert round(100 * m["f1"], 1) == 56.8
    assert round(2 * 70.1 * 47.8 / (70.1 + 47.8), 1) == 56.8


def test_table4_and_table5_rows_through_the_tables() -> None:
    tables = {t.key: t for t in _judge_tables(_frame(), 1936, "paper counts")}
    rq3 = tables["cebench_rq3_categories"].frame.set_index("category")
    for cat, (correct, total, acc) in TABLE4_CORRECT.items():
        assert (rq3.loc[cat, "correct"], rq3.loc[cat, "covered"], rq3.loc[cat, "accuracy"]) == (correct, total, acc)
    assert (rq3.loc["Overall", "correct"], rq3.loc["Overall", "accuracy"]) == (1192, 61.57)
    rq4 = tables["cebench_rq4_bias"].frame.set_index("category")
    assert rq4.loc["SAT_Pre", "g2s_pct"] == 51.77 and rq4.loc["UNSAT_Pre", "g2s_pct"] == 47.3
    assert rq4.loc["UNSAT_Pre", "s2g_pct"] == 21.9 and rq4.loc["Inductive", "g2s_pct"] == 59.22
    assert rq4.loc["Inductive", "s2g_pct"] == 24.3 and rq4.loc["Overall", "genuine_recall"] == 47.8
    rq1 = tables["cebench_rq1_models"]
    assert rq1.frame.loc[0, "correct"] == 1192 and rq1.frame.loc[0, "missing"] == 0
    assert set(rq1.metrics) >= {"accuracy", "avg_time_s"} and rq1.index == ("model", "arm", "strategy")
    assert rq1.samples is not None and len(rq1.samples) == 1936


def test_an_unparsable_answer_is_wrong_and_counted_never_guessed() -> None:
    c = confusion(["GENUINE", "GENUINE", "SPURIOUS"], ["GENUINE", None, None])
    assert c["g_unparsable"] == 1 and c["s_unparsable"] == 1 and c["g2s"] == 0 and c["s2g"] == 0
    m = bias_metrics(c)
    assert m["genuine_recall"] == 0.5 and m["spurious_recall"] == 0.0 and m["accuracy"] == pytest.approx(1 / 3)


@pytest.mark.parametrize(("text", "outcome", "label"), [
    ("GENUINE", "ok", "GENUINE"),
    ("The state is reachable.\nAnswer: SPURIOUS", "ok", "SPURIOUS"),
    ("**genuine**", "ok", "GENUINE"),
    ("It could be GENUINE or SPURIOUS", "conflict", None),
    ("The loop never reaches it.", "none", None),
    ("", "empty", None),
])
def test_answer_outcomes(text: str, outcome: str, label: str | None) -> None:
    got = parse_answer(text)
    assert (got.outcome, got.label) == (outcome, label)
    assert parse_answer("GENUINE", engine_error="timeout").outcome == "engine_error"


def test_balanced_accuracy_is_undefined_when_a_class_is_absent() -> None:
    """SAT_Pre has no SPURIOUS state: a 'balanced' accuracy of one recall is that recall
    alone (always-GENUINE would score 100 there), which balances nothing."""
    sat = confusion(["GENUINE"] * 5, ["GENUINE"] * 5)
    assert bias_metrics(sat)["genuine_recall"] == 1.0 and bias_metrics(sat)["balanced_accuracy"] is None
    only_spurious = confusion(["SPURIOUS"] * 4, ["SPURIOUS"] * 4)
    assert bias_metrics(only_spurious)["balanced_accuracy"] is None
    tables = {t.key: t for t in _judge_tables(_frame(), 1936, "paper counts")}
    rq4 = tables["cebench_rq4_bias"].frame.set_index("category")
    assert pd.isna(rq4.loc["SAT_Pre", "balanced_accuracy"])
    assert rq4.loc["Overall", "balanced_accuracy"] == pytest.approx(62.43, abs=0.01)


def test_rq1_counts_truncated_answers_apart() -> None:
    frame = _frame().head(6).assign(finish_reason=["length", "stop", "length", "stop", "stop", "stop"])
    frame.loc[0, "predicted"] = None  # cut before the label: unparsable *and* truncated
    rq1 = {t.key: t for t in _judge_tables(frame, 6, "v")}["cebench_rq1_models"]
    row = rq1.frame.iloc[0]
    assert (row["truncated"], row["unparsable"]) == (2, 1)
    assert "truncated" in rq1.metrics and "max_tokens" in rq1.caption


def test_default_budgets_leave_room_for_reasoning_models() -> None:
    from veribatch.tasks.cebench.prompt import MAX_TOKENS

    assert min(MAX_TOKENS.values()) >= 4096 and MAX_TOKENS["cot"] >= MAX_TOKENS["zero-shot"]
