"""`launch regress`: the classification rules, table cells with significance tests, and the
command end to end on real selftest runs (local executor, real parquet) with a regression
injected through a task option."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.support.cli import launch
from veribatch.aggregate.regress import (
    RecordChange,
    RegressReport,
    StageSummary,
    Thresholds,
    _classify,
    apply_retimes,
    compare_table,
    retime_candidates,
    verdict_class,
)
from veribatch.aggregate.render import read_sidecar, write_table
from veribatch.aggregate.table import Metric, Plot, Table

DECL = {"verdict_column": "v", "time_column": "t", "time_limit_column": "lim"}




def test_verdict_classes() -> None:
    assert {verdict_class(v) for v in ("TRUE", "FALSE", "ok", "agree", "GENUINE", True)} == {"decided"}
    assert {verdict_class(v) for v in ("UNKNOWN", "TIMEOUT", "OOM", None, float("nan"), "no-value",
                                       "CANCELLED", "")} == {"undecided"}
    assert {verdict_class(v) for v in ("ERROR", "ERROR (exit 3)", "engine_error", "crash")} == {"error"}


@pytest.mark.parametrize(("base", "cur", "kind"), [
    ({"v": "TRUE", "t": 1.0, "lim": 60}, {"v": "FALSE", "t": 1.0, "lim": 60}, "flip"),
    ({"v": "TRUE", "t": 1.0, "lim": 60}, {"v": "TIMEOUT", "t": 60.0, "lim": 60}, "lost"),
    # decided at 55 of 60 s, timed out tonight: a flapping timeout, not a regression
    ({"v": "TRUE", "t": 55.0, "lim": 60}, {"v": "TIMEOUT", "t": 60.0, "lim": 60}, "flapping"),
    ({"v": "UNKNOWN", "t": 3.0, "lim": 60}, {"v": "TRUE", "t": 2.0, "lim": 60}, "gained"),
    ({"v": "TRUE", "t": 1.0, "lim": 60}, {"v": "ERROR", "t": 0.1, "lim": 60}, "new_error"),
    ({"v": "ERROR", "t": 1.0, "lim": 60}, {"v": "TRUE", "t": 0.1, "lim": 60}, "fixed_error"),
    ({"v": "UNKNOWN", "t": 1.0, "lim": 60}, {"v": "TIMEOUT", "t": 60, "lim": 60}, "changed"),
    ({"v": "TRUE", "t": 2.0, "lim": 60}, {"v": "TRUE", "t": 5.0, "lim": 60}, "slower"),
    ({"v": "TRUE", "t": 0.2, "lim": 60}, {"v": "TRUE", "t": 0.9, "lim": 60}, "same"),  # < min_time_s
    ({"v": "TRUE", "t": 1.8, "lim": 2}, {"v": "TRUE", "t": 4.0, "lim": 4}, "flapping"),  # both near limit
    ({"v": "TRUE", "t": 6.0, "lim": 60}, {"v": "TRUE", "t": 2.0, "lim": 60}, "faster"),
    ({"v": "TRUE", "t": 2.0, "lim": 60}, {"v": "TRUE", "t": 3.0, "lim": 60}, "same"),
])
def test_record_rules(base: dict, cur: dict, kind: str) -> None:
    assert _classify(base, cur, DECL, Thresholds())[0] == kind


def test_thresholds_are_validated() -> None:
    with pytest.raises(ValueError, match="time_factor"):
        Thresholds(time_factor=1.0)
    with pytest.raises(ValueError, match="near_limit"):
        Thresholds(near_limit=1.5)


def _rate_table(pct: float, n: int, *, sampled: bool = True, samples: pd.DataFrame | None = None) -> Table:
    return Table(key="t", title="t", frame=pd.DataFrame([{"arm": "model", "acc": pct, "covered": n,
                                                          "missing": 0}]),
                 index=("arm",), metrics={"acc": Metric("rate", sampled=sampled, unit="%")}, samples=samples)


def test_sampled_rate_one_instance_wobble_is_noise_a_real_drop_a_regression() -> None:
    th = Thresholds()
    wobble, _ = compare_table(_rate_table(50.0, 20), _rate_table(45.0, 20), th)
    assert [(c.kind, c.test) for c in wobble] == [("noise", "fisher")] and wobble[0].p_value > 0.5
    drop, _ = compare_table(_rate_table(90.0, 40), _rate_table(40.0, 40), th)
    assert drop[0].kind == "regression" and drop[0].p_value < 0.001 and drop[0].note == "36/40 vs 16/40"
    up, _ = compare_table(_rate_table(40.0, 40), _rate_table(90.0, 40), th)
    assert up[0].kind == "improvement"


def test_non_sampled_metric_changes_are_shown_not_counted_unless_tolerance() -> None:
    cells, _ = compare_table(_rate_table(90.0, 40, sampled=False), _rate_table(40.0, 40, sampled=False),
                             Thresholds())
    assert cells[0].kind == "changed" and cells[0].delta == -50.0
    cells, _ = compare_table(_rate_table(90.0, 40, sampled=False), _rate_table(40.0, 40, sampled=False),
                             Thresholds(metric_tolerance=0.1))
    assert cells[0].kind == "regression"


def test_paired_tests_from_samples() -> None:
    ids = [f"i{k}" for k in range(30)]
    # rate: 12 instances lose their success, none gain → McNemar p = 2 / 2^12
    before = pd.DataFrame({"arm": "model", "instance_id": ids, "acc": [1] * 20 + [0] * 10})
    after = pd.DataFrame({"arm": "model", "instance_id": ids, "acc": [1] * 8 + [0] * 22})
    cells, _ = compare_table(_rate_table(66.7, 30, samples=before), _rate_table(26.7, 30, samples=after),
                             Thresholds())
    assert cells[0].test == "mcnemar" and cells[0].kind == "regression"
    assert cells[0].p_value == pytest.approx(2 / 2 ** 12)
    # mean: every instance's speedup halves → the bootstrap interval excludes 0
    mean_metric = {"speedup": Metric("mean", sampled=True, unit="×")}
    sb = pd.DataFrame({"arm": "model", "instance_id": ids, "speedup": [2.0 + k / 10 for k in range(30)]})
    sc = sb.assign(speedup=sb["speedup"] / 2)
    tb = Table("m", "m", pd.DataFrame([{"arm": "model", "speedup": sb["speedup"].mean()}]), index=("arm",),
               metrics=mean_metric, samples=sb)
    tc = Table("m", "m", pd.DataFrame([{"arm": "model", "speedup": sc["speedup"].mean()}]), index=("arm",),
               metrics=mean_metric, samples=sc)
    cells, _ = compare_table(tb, tc, Thresholds(resamples=500))
    assert cells[0].test == "bootstrap" and cells[0].kind == "regression" and "30 paired" in cells[0].note


def test_sidecar_round_trip(tmp_path: Path) -> None:
    frame = pd.DataFrame({"split": ["easy", "easy"], "lo": [0.0, 5.0], "hi": [5.0, float("inf")],
                          "n": [3, None]})
    samples = pd.DataFrame({"split": ["easy"], "instance_id": ["a"], "n": [1.0]})
    t = Table("dist", "Distribution", frame, caption="c", index=("split", "lo"),
              metrics={"n": Metric("count", unit="instances")}, samples=samples,
              plots=(Plot("bar", x="lo", x_to="hi", y=("n",), y_label="instances"),))
    paths = write_table(t, tmp_path, ("md",))
    assert {p.name for p in paths} == {"dist.md", "dist.csv", "dist.table.json", "dist.samples.parquet"}
    back = read_sidecar(tmp_path / "dist.table.json")
    assert back.index == t.index and back.metrics == t.metrics and back.plots == t.plots
    assert back.frame["hi"].tolist() == [5.0, float("inf")] and pd.isna(back.frame["n"][1])
    assert back.samples is not None and back.samples.equals(samples)


@pytest.mark.slow  # three runs + five `launch` processes: ~15 s idle, more on a busy node
def test_regress_command_on_real_runs(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for name, extra in (("base", []), ("errs", ["-o", "fail=3,5"]), ("other", ["--dataset", "small"])):
        r = launch("selftest", "--runs-dir", str(runs), "--run-name", name, "--shards", "2", "-q", *extra)
        assert r.returncode == 0, r.stderr
    same = launch("regress", "base", "base", "--runs-dir", str(runs))
    assert same.returncode == 0 and "no regressions" in same.stdout

    r = launch("regress", "base", "errs", "--runs-dir", str(runs), "--format", "json", "--out",
               str(tmp_path / "out"))
    assert r.returncode == 1, r.stderr
    data = json.loads(r.stdout)
    assert {"field": "options.fail", "base": "", "current": "3,5"} in data["config_diff"]
    found = {(c["stage"], c["instance_id"], c["kind"]) for c in data["records"]}
    assert found == {("work", "selftest/smoke/00003", "new_error"), ("work", "selftest/smoke/00005", "new_error"),
                     ("check", "selftest/smoke/00003", "lost"), ("check", "selftest/smoke/00005", "lost")}
    md = (tmp_path / "out" / "regress.md").read_text()
    assert md.index("## New errors") > md.index("## Configuration differences")

    # a shard of CURRENT lost its output: its instances' records are missing (a regression)
    (runs / "errs" / "shards" / "check" / "1" / "DONE").unlink()
    r = launch("regress", "base", "errs", "--runs-dir", str(runs), "--format", "json")
    missing = [c for c in json.loads(r.stdout)["records"] if c["kind"] == "missing"]
    assert len(missing) == 6 and all(c["note"] == "shard 1 of CURRENT is incomplete" for c in missing)

    refused = launch("regress", "base", "other", "--runs-dir", str(runs))
    assert refused.returncode == 2 and "different dataset content" in refused.stderr
    bad = launch("regress", "base", "nowhere", "--runs-dir", str(runs))
    assert bad.returncode == 2 and "no run 'nowhere'" in bad.stderr


def test_time_rule_a_retried_shard_or_a_time_within_spread_is_noise() -> None:
    """The 4-node cluster's false alarm: 0.14 s -> 1.45 s for an instance whose element was
    requeued.  Marked as retried it is noise; the same change on a clean shard still alarms."""
    b, c = {"v": "TRUE", "t": 0.14, "lim": 60}, {"v": "TRUE", "t": 1.45, "lim": 60}
    assert _classify(b, c, DECL, Thresholds())[0] == "slower"
    kind, info = _classify(b, c, DECL, Thresholds(), retried="CURRENT")
    assert kind == "noisy" and info["retried"] == "CURRENT" and "more than once" in info["note"]
    # with a spread: an instance that took 2.0-3.1 s on unchanged nights is noise
    # (the fixed rule: slower) at 4 s, beyond it at 7 s; 2x its median is caught below min_time_s too
    b = {"v": "TRUE", "t": 2.0, "lim": 60}
    assert _classify(b, {**b, "t": 4.0}, DECL, Thresholds())[0] == "slower"
    assert _classify(b, {**b, "t": 4.0}, DECL, Thresholds(), spread=[2.0, 3.1, 2.2])[0] == "noisy"
    assert _classify(b, {**b, "t": 7.0}, DECL, Thresholds(), spread=[2.0, 3.1, 2.2])[0] == "slower"
    small = {"v": "TRUE", "t": 0.6, "lim": 60}
    assert _classify(small, {**small, "t": 1.2}, DECL, Thresholds())[0] == "same"
    assert _classify(small, {**small, "t": 1.2}, DECL, Thresholds(),
                     spread=[0.6, 0.61, 0.59])[0] == "slower"
    # sub-second jitter (0.15 s -> 0.31 s) stays under min_spread_s however tight the spread
    tiny = {"v": "TRUE", "t": 0.15, "lim": 60}
    assert _classify(tiny, {**tiny, "t": 0.31}, DECL, Thresholds(),
                     spread=[0.15, 0.15, 0.16])[0] == "same"
    # too few clean timings for a spread: the fixed rule
    assert _classify(small, {**small, "t": 1.2}, DECL, Thresholds(), spread=[0.6, 0.61])[0] == "same"


def _flagged(base_t: float, cur_t: float, spread: list[float] | None = None) -> RegressReport:
    """A comparison that flagged one record `slower` on the night's single timing."""
    b, c = {"v": "TRUE", "t": base_t, "lim": 60}, {"v": "TRUE", "t": cur_t, "lim": 60}
    kind, info = _classify(b, c, DECL, Thresholds(), spread=spread)
    assert kind == "slower", info
    report = RegressReport(base={}, current={}, thresholds={})
    report.stages = [StageSummary("verify", dict(DECL), compared=1, counts={"slower": 1})]
    report.records = [RecordChange("verify", "p1", {}, kind, **info)]
    return report


def test_retiming_clears_a_one_off_and_keeps_a_real_slowdown() -> None:
    """The false alarm of one timing (0.14 s -> 1.45 s): re-timed twice at 0.15 s it is a
    one-off (noisy, exit 0); a real 2x slowdown re-times as slow and stays a regression."""
    th = Thresholds()
    noisy = _flagged(0.14, 1.45)
    key = noisy.records[0].record_key
    apply_retimes(noisy, {key: [0.15, 0.16]}, th)
    (c,) = noisy.records
    assert c.kind == "noisy" and c.retimed == [0.15, 0.16] and "within the rule" in c.note
    assert noisy.exit_code == 0 and noisy.stages[0].counts == {"noisy": 1}
    assert any("re-timing: 1 slower record(s)" in n for n in noisy.notes)

    real = _flagged(1.0, 2.5)
    apply_retimes(real, {real.records[0].record_key: [2.4, 2.6]}, th)
    (c,) = real.records
    assert c.kind == "slower" and c.retimed == [2.4, 2.6] and "still beyond" in c.note
    assert real.exit_code == 1 and real.stages[0].counts == {"slower": 1}

    # the median decides, not the best run: one fast re-run of two slow ones is not enough
    mixed = _flagged(1.0, 2.5)
    apply_retimes(mixed, {mixed.records[0].record_key: [0.9, 2.6, 2.7]}, th)
    assert mixed.records[0].kind == "slower"

    # judged by the spread rule where the record was: 2.0-3.1 s on earlier nights
    spread = _flagged(2.0, 7.0, spread=[2.0, 3.1, 2.2])
    apply_retimes(spread, {spread.records[0].record_key: [3.0, 3.2]}, th)
    assert spread.records[0].kind == "noisy"
    spread = _flagged(2.0, 7.0, spread=[2.0, 3.1, 2.2])
    apply_retimes(spread, {spread.records[0].record_key: [6.5, 7.2]}, th)
    assert spread.records[0].kind == "slower"

    # not re-timed (no timings, or the re-run failed): the flag stands, saying why
    left = _flagged(0.14, 1.45)
    apply_retimes(left, {}, th, failed={("verify", "p1"): "a gpu stage is not re-run"})
    assert left.records[0].kind == "slower" and left.records[0].retimed is None
    assert "re-timing failed: a gpu stage" in left.records[0].note


def test_retime_candidates_are_bounded() -> None:
    report = RegressReport(base={}, current={}, thresholds={})
    report.records = [RecordChange("verify", f"p{i:02d}", {}, "slower") for i in range(30)]
    report.records.append(RecordChange("verify", "q", {}, "lost"))
    assert len(retime_candidates(report, Thresholds())) == 20
    assert [c.instance_id for c in retime_candidates(report, Thresholds(retime_max=3))] == \
        ["p00", "p01", "p02"]
    assert retime_candidates(report, Thresholds(retime_k=0)) == []
    with pytest.raises(ValueError, match="retime_k"):
        Thresholds(retime_k=-1)
