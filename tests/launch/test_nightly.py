"""`launch nightly`: idempotent nights, a failed night resumed and never a reference, history
appended once per night — with the local executor and the selftest task (seconds); and the
shipped suite's real two-night sequences on the SLURM cluster (no change → exit 0; a verifier
budget that makes instances time out → exit 1 with the instance list)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.support.cli import launch

REPO = Path(__file__).resolve().parents[2]


def _suite(path: Path, history: Path, runs: list[dict], executor: str = "local") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"executor": executor, "history": str(history), "runs": runs}))
    return path


def _night(history: Path, night: str) -> dict:
    return json.loads((history / "nights" / night / "night.json").read_text())


def test_suite_files_are_checked(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("runs: [{name: a, task: selftest, optoins: {}}]\n")
    r = launch("nightly", str(bad), "--history", str(tmp_path / "h"))
    assert r.returncode == 2 and "unknown key(s) 'optoins'" in r.stderr
    r = launch("nightly", "no-such-suite", "--history", str(tmp_path / "h"))
    assert r.returncode == 2 and "unknown suite 'no-such-suite'" in r.stderr and "nightly/" in r.stderr
    # the shipped suite: embedded defaults only (reference arms, no model), CI's SLURM profile
    shipped = yaml.safe_load((REPO / "veribatch" / "nightly" / "embedded.yaml").read_text())
    assert [(r["task"], r.get("model")) for r in shipped["runs"]] == [("invbench", None)]
    assert (shipped["executor"], shipped["profile"]) == ("slurm", "local-test")


@pytest.mark.slow  # seven `launch nightly` processes
def test_nights_idempotent_failed_night_resumed_never_a_reference(tmp_path: Path) -> None:
    hist = tmp_path / "hist"
    suite = _suite(tmp_path / "s" / "smoke.yaml", hist,
                   [{"name": "self", "task": "selftest", "shards": 2, "options": {"iterations": 50}}])
    r = launch("nightly", str(suite), "--night", "2026-01-01")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no earlier good night" in r.stdout
    first = _night(hist, "2026-01-01")["entries"]["self"]
    assert first["status"] == "complete" and first["submitted"] == 4
    rows = pd.read_parquet(hist / "history.parquet")
    # again the same night: nothing is run, the history keeps one copy of the night
    r = launch("nightly", str(suite), "--night", "2026-01-01")
    assert r.returncode == 0 and _night(hist, "2026-01-01")["entries"]["self"]["submitted"] == 0
    again = pd.read_parquet(hist / "history.parquet")
    assert len(again) == len(rows) and set(again["night"]) == {"2026-01-01"}
    assert {"agree", "regressions"} <= set(again["metric"])

    # night 2 completes, then loses a shard (error.json, no DONE): a failed night
    assert launch("nightly", str(suite), "--night", "2026-01-02").returncode == 0
    shard = hist / "nights" / "2026-01-02" / "self" / "shards" / "work" / "1"
    (shard / "DONE").unlink()
    (shard / "error.json").write_text(json.dumps({"type": "RuntimeError", "message": "node lost"}))
    # night 3 compares with night 1, not with the incomplete night 2
    r = launch("nightly", str(suite), "--night", "2026-01-03")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _night(hist, "2026-01-03")["entries"]["self"]["reference_night"] == "2026-01-01"
    # night 2 again: resumed (only the lost shard and the shard built on it), not re-run
    r = launch("nightly", str(suite), "--night", "2026-01-02")
    assert r.returncode == 0, r.stdout + r.stderr
    n2 = _night(hist, "2026-01-02")["entries"]["self"]
    assert n2["status"] == "complete" and n2["submitted"] == 2
    stats = json.loads((shard / "stats.json").read_text())
    assert stats["resumed_from_ledger"] == 6  # its ledger survived; no instance redone
    assert (hist / "nights" / "2026-01-02" / "report.html").is_file()
    hist_rows = pd.read_parquet(hist / "history.parquet")
    assert sorted(set(hist_rows["night"])) == ["2026-01-01", "2026-01-02", "2026-01-03"]


@pytest.mark.slow
def test_a_night_with_failing_shards_exits_5_and_is_never_a_reference(tmp_path: Path) -> None:
    hist = tmp_path / "hist"
    good = _suite(tmp_path / "a" / "crashy.yaml", hist, [{"name": "self", "task": "selftest"}])
    bad = _suite(tmp_path / "b" / "crashy.yaml", hist,
                 [{"name": "self", "task": "selftest", "options": {"crash": "3"}}])
    assert launch("nightly", str(good), "--night", "2026-02-01").returncode == 0
    r = launch("nightly", str(bad), "--night", "2026-02-02")
    assert r.returncode == 5 and "self: failed" in r.stdout, r.stdout + r.stderr
    r = launch("nightly", str(good), "--night", "2026-02-03")
    assert r.returncode == 0 and _night(hist, "2026-02-03")["entries"]["self"]["reference_night"] == "2026-02-01"


def _shipped_with(tmp_path: Path, budget_s: float) -> Path:
    """The shipped suite, unchanged except the InvBench budget (the file keeps its name, so the
    history's suite and entry names stay the same)."""
    data = yaml.safe_load((REPO / "veribatch" / "nightly" / "embedded.yaml").read_text())
    data["runs"][0]["options"]["budget_s"] = budget_s
    path = tmp_path / f"budget{budget_s:g}" / "embedded.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(data))
    return path


def _submissions(hist: Path, night: str) -> int:
    jobs = hist / "nights" / night / "invbench-reference" / "jobs.json"
    return len(json.loads(jobs.read_text())["submissions"])


@pytest.mark.slurm
@pytest.mark.slow
def test_shipped_suite_two_night_sequences_on_slurm(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    hist = tmp_path / "hist"
    args = ["--history", str(hist), "--wait", "--poll", "2", "--wait-timeout", "900"]
    # night A: the shipped suite as is, on the cluster (profile local-test from the suite)
    r = launch("nightly", "embedded", "--night", "2026-03-01", *args, timeout=1200)
    assert r.returncode == 0, r.stdout + r.stderr
    subs = _submissions(hist, "2026-03-01")
    # cron fires again the same night: nothing new is submitted
    r = launch("nightly", "embedded", "--night", "2026-03-01", "--history", str(hist), timeout=600)
    assert r.returncode == 0 and _submissions(hist, "2026-03-01") == subs, r.stdout + r.stderr
    # night B, nothing changed: no regression
    r = launch("nightly", "embedded", "--night", "2026-03-02", *args, timeout=1200)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "against night 2026-03-01: no regression" in r.stdout
    # night C: a verifier budget of 1 s (injected on purpose) makes the slower programs time out
    r = launch("nightly", str(_shipped_with(tmp_path, 1.0)), "--night", "2026-03-03", *args, timeout=1200)
    print(r.stdout)
    assert r.returncode == 1, r.stdout + r.stderr
    report = json.loads((hist / "nights" / "2026-03-03" / "regress" / "invbench-reference.json").read_text())
    lost = {c["instance_id"] for c in report["records"] if c["stage"] == "baseline" and c["kind"] == "lost"}
    # counter_cond (≈2.4 s with the warm verifier) cannot finish in 1 s; the quicker programs
    # (bounded_wrong ≈1 s) may or may not, depending on the machine's load
    assert "invbench/sample/counter_cond.c" in lost
    assert {"field": "options.budget_s", "base": "600.0", "current": "1.0"} in report["config_diff"]
    assert "invbench/sample/counter_cond.c" in r.stdout
    night = _night(hist, "2026-03-03")
    assert night["exit_code"] == 1 and night["entries"]["invbench-reference"]["reference_night"] == "2026-03-02"
    assert json.loads((hist / "nights" / "2026-03-03" / "invbench-reference" / "jobs.json").read_text())[
        "last_launch"]["profile"] == "local-test"
    h = pd.read_parquet(hist / "history.parquet")
    assert sorted(set(h["night"])) == ["2026-03-01", "2026-03-02", "2026-03-03"]
    assert (hist / "nights" / "2026-03-03" / "report.html").is_file()


def _night_with_a_node_kill(suite: Path, night: str, shard: int = 1) -> None:
    """A night whose `work` shard loses its process mid-shard (SIGKILL, as a lost node does)
    and is resumed by the next call that night: the shard's records come from two attempts."""
    import os
    import signal
    import subprocess
    import sys
    import time

    hist = Path(yaml.safe_load(suite.read_text())["history"])
    sdir = hist / "nights" / night / "self" / "shards" / "work" / str(shard)
    p = subprocess.Popen([sys.executable, "-m", "veribatch", "nightly", str(suite), "--night", night],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    end = time.monotonic() + 120
    while time.monotonic() < end:
        ledger, attempt = sdir / "ledger.jsonl", sdir / "attempt.json"
        if ledger.exists() and len(ledger.read_text().splitlines()) >= 3 and attempt.exists():
            os.kill(json.loads(attempt.read_text())["pid"], signal.SIGKILL)  # our own worker
            break
        time.sleep(0.05)
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 5 and "stopped without finishing" in out, out
    r = launch("nightly", str(suite), "--night", night)  # the morning call resumes it
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads((sdir / "stats.json").read_text())["attempt"] == 2


@pytest.mark.slow  # nine `launch nightly` processes, ~2 min
def test_time_rule_nights_with_node_kills_no_alarm_a_2x_slower_verifier_caught_first_night(
        tmp_path: Path) -> None:
    """The noise-aware time rule on real records: three nights that each lose a shard's
    process mid-shard (resumed from the ledger, no code change) raise no time alarm, the
    retried shard is marked in every comparison; then the work made 2x slower on purpose
    (0.6 s -> 1.2 s per instance, under the fixed rule's 1 s minimum: `launch regress` with
    one reference misses it) is caught the first night, on the instances whose spread over
    the nights is known."""
    hist = tmp_path / "hist"
    run = {"name": "self", "task": "selftest", "shards": 2, "options": {"sleep_s": 0.6}}
    suite = _suite(tmp_path / "s" / "timing.yaml", hist, [run])
    r = launch("nightly", str(suite), "--night", "2026-04-01")
    assert r.returncode == 0, r.stdout + r.stderr
    for night in ("2026-04-02", "2026-04-03", "2026-04-04"):
        _night_with_a_node_kill(suite, night)
        report = json.loads((hist / "nights" / night / "regress" / "self.json").read_text())
        assert report["exit_code"] == 0, [c for c in report["records"] if c["kind"] == "slower"]
        assert any("CURRENT work: shard(s) [1] ran more than once" in n for n in report["notes"])
        kinds = {c["kind"] for c in report["records"]}
        assert "slower" not in kinds
    # the same work made 2x slower on purpose: the first night with it raises the alarm
    slow = _suite(tmp_path / "slow" / "timing.yaml", hist,
                  [{**run, "options": {"sleep_s": 1.2}}])
    r = launch("nightly", str(slow), "--night", "2026-04-05")
    assert r.returncode == 1, r.stdout + r.stderr
    report = json.loads((hist / "nights" / "2026-04-05" / "regress" / "self.json").read_text())
    slower = {c["instance_id"] for c in report["records"] if c["kind"] == "slower"}
    # shard 0 ran clean on all four earlier nights: its six instances have a spread.  Of
    # shard 1 (killed on nights 2-4), an instance counts as clean on a night when the
    # first attempt recorded it (the ledger's first `resumed_from_ledger`); it is judged
    # when clean on night 4 (BASE) and on 3+ nights in all, else the fixed rule misses it
    clean = {"2026-04-01": {f"selftest/smoke/{i:05d}" for i in range(6, 12)}}
    for night in ("2026-04-02", "2026-04-03", "2026-04-04"):
        sdir = hist / "nights" / night / "self" / "shards" / "work" / "1"
        resumed = json.loads((sdir / "stats.json").read_text())["resumed_from_ledger"]
        lines = [json.loads(x) for x in (sdir / "ledger.jsonl").read_text().splitlines()[1:]]
        clean[night] = {x["instance_id"] for x in lines[:resumed]}
    judged = {i for i in clean["2026-04-01"] if i in clean["2026-04-04"]
              and sum(i in c for c in clean.values()) >= 3}
    assert slower == {f"selftest/smoke/{i:05d}" for i in range(6)} | judged, report["records"]
    assert judged, clean  # the first attempt's instances of a killed shard keep their spread
    assert all(len(c["spread_s"]) >= 3 for c in report["records"] if c["kind"] == "slower")
    # every complete night's measured costs are kept for sizing the next (launch.measured)
    costs = json.loads((hist / "costs.json").read_text())["measurements"]
    assert len([m for m in costs if m["stage"] == "work"]) == 5
    # the fixed rule alone (one reference night, no spread) does not see it: 0.6 s < min_time_s
    r = launch("regress", str(hist / "nights" / "2026-04-04" / "self"),
               str(hist / "nights" / "2026-04-05" / "self"), "--format", "json")
    assert r.returncode == 0 and not json.loads(r.stdout)["records"], r.stdout + r.stderr
    # ... and `launch regress` with the earlier nights as --history judges as the nightly did
    nights = [str(hist / "nights" / n / "self") for n in ("2026-04-01", "2026-04-02", "2026-04-03")]
    r = launch("regress", str(hist / "nights" / "2026-04-04" / "self"),
               str(hist / "nights" / "2026-04-05" / "self"), "--format", "json",
               *[a for n in nights for a in ("--history", n)])
    assert r.returncode == 1 and {c["instance_id"] for c in json.loads(r.stdout)["records"]
                                  if c["kind"] == "slower"} == slower, r.stdout + r.stderr


def test_an_unreadable_costs_file_costs_the_measurement_not_the_night(tmp_path: Path) -> None:
    hist = tmp_path / "hist"
    suite = _suite(tmp_path / "s" / "costs.yaml", hist,
                   [{"name": "self", "task": "selftest", "options": {"iterations": 50}}])
    hist.mkdir(parents=True)
    (hist / "costs.json").write_text("{not json")
    r = launch("nightly", str(suite), "--night", "2026-05-01")
    assert r.returncode == 0, r.stdout + r.stderr
    entry = _night(hist, "2026-05-01")["entries"]["self"]
    assert entry["status"] == "complete" and "costs not recorded" in entry["message"]
    assert "unreadable measured-costs file" in entry["message"] and "costs.json" in entry["message"]


@pytest.mark.slow  # three `launch nightly` processes with re-timings, ~1 min
def test_flagged_instances_are_retimed_a_one_off_is_cleared_a_real_slowdown_stays(
        tmp_path: Path) -> None:
    """Re-timing within the night, on real runs.  Night 2 has no change, but one `work`
    process is stopped for 2.5 s mid-instance (SIGSTOP, as a descheduled or swapped-out
    process is): that instance's single timing is 3x+ its reference, flagged `slower`,
    re-timed twice by `launch nightly` at its usual time and cleared (noisy, exit 0).
    Night 3 makes the work 2x slower on purpose: re-timed, it stays slower (exit 1), and
    only `retime_max` instances are re-timed."""
    import os
    import signal
    import subprocess
    import sys
    import time

    hist = tmp_path / "hist"
    th = {"time_factor": 1.5, "min_time_s": 0.3, "retime_max": 2}
    run = {"name": "self", "task": "selftest", "shards": 2, "limit": 6,
           "options": {"sleep_s": 1.0}}
    suite = tmp_path / "s" / "retime.yaml"
    suite.parent.mkdir(parents=True)
    suite.write_text(yaml.safe_dump({"executor": "local", "history": str(hist),
                                     "thresholds": th, "runs": [run]}))
    r = launch("nightly", str(suite), "--night", "2026-06-01")
    assert r.returncode == 0, r.stdout + r.stderr

    night = "2026-06-02"
    sdir = hist / "nights" / night / "self" / "shards" / "work" / "0"
    p = subprocess.Popen([sys.executable, "-m", "veribatch", "nightly", str(suite), "--night", night],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    end = time.monotonic() + 120
    while time.monotonic() < end:
        ledger, attempt = sdir / "ledger.jsonl", sdir / "attempt.json"
        if ledger.exists() and len(ledger.read_text().splitlines()) >= 2 and attempt.exists():
            time.sleep(0.3)  # inside the next instance's 1 s of work
            pid = json.loads(attempt.read_text())["pid"]  # our own worker
            os.kill(pid, signal.SIGSTOP)
            time.sleep(2.5)
            os.kill(pid, signal.SIGCONT)
            break
        time.sleep(0.05)
    out, _ = p.communicate(timeout=300)
    report = json.loads((hist / "nights" / night / "regress" / "self.json").read_text())
    retimed = [c for c in report["records"] if c["retimed"]]
    assert len(retimed) == 1 and retimed[0]["kind"] == "noisy", report["records"]
    (c,) = retimed
    assert c["current_time_s"] >= 2.5 and len(c["retimed"]) == 2  # stopped 2.5 s in its sleep
    assert all(0.9 <= t < 1.5 for t in c["retimed"]), c   # its usual 1 s
    assert "within the rule" in c["note"] and "slower" not in {x["kind"] for x in report["records"]}
    assert p.returncode == 0 and report["exit_code"] == 0, out
    assert (hist / "nights" / night / "retime" / "self" / "result.json").is_file()

    # the work made 2x slower on purpose: flagged, re-timed (at most retime_max), kept
    slow = tmp_path / "slow" / "retime.yaml"
    slow.parent.mkdir(parents=True)
    slow.write_text(yaml.safe_dump({"executor": "local", "history": str(hist), "thresholds": th,
                                    "runs": [{**run, "options": {"sleep_s": 2.0}}]}))
    r = launch("nightly", str(slow), "--night", "2026-06-03")
    assert r.returncode == 1, r.stdout + r.stderr
    report = json.loads((hist / "nights" / "2026-06-03" / "regress" / "self.json").read_text())
    slower = [c for c in report["records"] if c["kind"] == "slower"]
    assert len(slower) >= 5, report["records"]  # all six but night 2's stopped one (~3 s there)
    retimed = [c for c in slower if c["retimed"]]
    assert len(retimed) == 2 and all(t >= 1.9 for c in retimed for t in c["retimed"]), retimed
    assert all("still beyond the rule" in c["note"] for c in retimed)
