"""DafnyComp end to end through `launch` (local executor) on the shipped sample.

Without Dafny (this machine): the Dafny-free stages run, the verify stage is left out and
`launch dafnycomp` exits 2 with the install hint; `-o verify=on` refuses before anything
runs; `-o verify=off` is a clean run.  With Dafny's output replayed from the recorded real
cases (`dafny_replay.py`; Dafny itself cannot run here): the verify stage's command lines,
its records, the result cache and Tables 1-2."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.support import DIR as SUPPORT
from tests.support.cli import launch
from veribatch.aggregate.records import load_run
from veribatch.launch.run_control import ExecChoice, launch_run, plan_run
from veribatch.tasks.dafnycomp.strength import strength_file
from veribatch.tasks.dafnycomp.strip import strip

SAMPLE = Path(__file__).resolve().parents[3] / "veribatch" / "tasks" / "dafnycomp" / "sample"


@pytest.fixture
def no_dafny(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VERIBATCH_DAFNY", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no dafny on it (checked below)
    import shutil

    assert shutil.which("dafny") is None


def _frames(run_dir: Path) -> dict[str, pd.DataFrame]:
    _, stages = load_run(run_dir)
    return {k: v.frame for k, v in stages.items()}




def test_without_dafny_the_default_runs_what_it_can_and_exits_2(no_dafny: None, tmp_path: Path) -> None:
    res = launch("dafnycomp", "--runs-dir", str(tmp_path / "runs"), "--workers", "1", "-q")
    assert res.returncode == 2, res.stdout + res.stderr
    for needle in ("dafny not found", "dafny-4.10.0-x64-ubuntu-20.04.zip", "launch images build dafny",
                   "-o runtime=apptainer", "-o verify=off"):
        assert needle in res.stderr, needle
    (rd,) = [p for p in (tmp_path / "runs").iterdir()]
    manifest = json.loads((rd / "manifest.json").read_text())
    assert [s["name"] for s in manifest["stages"]] == ["strip", "check", "aggregate"]
    assert manifest["config"]["options"]["verify"] == "unavailable"
    assert manifest["config"]["versions"]["strip"] == "dafnycomp-strip-v2"
    frames = _frames(rd)
    strip_recs, check = frames["strip"], frames["check"]
    assert len(strip_recs) == 6 and set(strip_recs["status"]) == {"ok"}
    assert strip_recs["bodies_preserved"].all() and strip_recs["stable"].all()
    assert set(check["arm"]) == {"original", "stripped"} and len(check) == 12
    by_arm = check.groupby("arm")["integrity"].agg(set)
    assert by_arm["original"] == {"ok"} and by_arm["stripped"] == {"cheat"}
    assert set(check[check["arm"] == "stripped"]["integrity_kinds"]) == {'["trivial_spec"]'}
    answers = pd.read_csv(rd / "tables" / "dafnycomp_answers.csv").set_index("arm")
    assert answers.loc["original", "integrity=ok"] == 6 and answers.loc["stripped", "cheat:trivial_spec"] == 6
    st = pd.read_csv(rd / "tables" / "dafnycomp_strip.csv")
    assert st.loc[0, "covered"] == 6 and st.loc[0, "clauses_removed"] == strip_recs["clauses_removed"].sum() > 20
    assert not (rd / "tables" / "table1_dafnycomp.csv").exists()  # no verdicts without Dafny

    on = launch("dafnycomp", "-o", "verify=on", "--runs-dir", str(tmp_path / "on"), "-q")
    assert on.returncode == 2 and "launch images build dafny" in on.stderr
    assert not (tmp_path / "on").exists()  # refused before any shard (or directory)
    off = plan_run("dafnycomp", options=["verify=off"])
    assert [s.name for s in off.stages] == ["strip", "check"]
    assert launch_run(off, tmp_path / "off", ExecChoice("local", workers=1), progress=False).ok


# stripped program → the recorded real Dafny output it gets; every original → verified_ok
STRIPPED_CASES = {
    "main_2node_inc_twice": "verified_ok",  # nothing to prove without specs: it does verify
    "main_2node_count_clamp": "invariant_entry",
    "main_2node_fill_sum": "precondition_call",
    "main_3node_abs_triple_cap": "termination",  # a missing measure: instability (§1(iii))
    "main_3node_halve_steps": "parse_error_verify",
    "main_4node_gcd_chain": "timeout",
}


@pytest.fixture
def replayed_dafny(shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    mapping = {}
    for f in sorted(SAMPLE.glob("*.dfy")):
        original = f.read_text()
        mapping[hashlib.sha256(original.encode()).hexdigest()] = "verified_ok"
        # the strength lemmas of the original against itself: Dafny proves them
        lemmas = strength_file(original, original).text
        mapping[hashlib.sha256(lemmas.encode()).hexdigest()] = "verified_ok"
        mapping[hashlib.sha256(strip(original).encode()).hexdigest()] = STRIPPED_CASES[f.stem]
    (tmp_path / "map.json").write_text(json.dumps(mapping))
    exe = tmp_path / "bin" / "dafny"
    exe.parent.mkdir()
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{SUPPORT / "dafny_replay.py"}" "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "dafny-calls.jsonl"
    monkeypatch.setenv("VERIBATCH_DAFNY", str(exe))
    monkeypatch.setenv("DAFNY_REPLAY_MAP", str(tmp_path / "map.json"))
    monkeypatch.setenv("DAFNY_REPLAY_LOG", str(log))
    monkeypatch.setenv("DAFNY_REPLAY_RECORDED", str(shared_data / "recorded" / "dafny"))
    return log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.slow
def test_reference_arms_with_replayed_dafny_output(replayed_dafny: Path, tmp_path: Path) -> None:
    options = ["obligation_time_limit_s=20", "cores=2", f"cache_dir={tmp_path / 'cache'}"]
    plan = plan_run("dafnycomp", options=options)
    assert plan.config.verifier == "dafny" and plan.config.verifier_version == "4.10.0"
    assert [s.name for s in plan.stages] == ["strip", "check", "verify"]
    verify_stage = plan.stages[-1]
    assert (verify_stage.verdict_column, verify_stage.record_key) == ("outcome", ("arm", "sample_index"))
    out = launch_run(plan, tmp_path / "run", ExecChoice("local", workers=1), progress=False)
    assert out.ok, out
    v = _frames(out.rd.root)["verify"].set_index(["program", "arm"])
    # command lines: resolve, then verify with the task's options, on program.dfy; then, for
    # a strictly verified candidate, the strength lemmas (strength.dfy, including program.dfy)
    calls = [c for c in _calls(replayed_dafny) if c != ["--version"]]
    resolves = [c for c in calls if c[0] == "resolve"]
    programs = [c for c in calls if c[0] == "verify" and Path(c[-1]).name == "program.dfy"]
    verifies = [c for c in programs if "--warn-contradictory-assumptions" not in c]
    flagged = [c for c in programs if "--warn-contradictory-assumptions" in c]
    strengths = [c for c in calls if c[0] == "verify" and Path(c[-1]).name == "strength.dfy"]
    assert len(resolves) == 12 and len(verifies) == 11  # the parse error stops at resolve
    assert len(strengths) == 6  # the six originals
    assert resolves[0][:-1] == ["resolve", "--use-basename-for-filename", "--show-snippets:false"]
    # the paper protocol runs plain `dafny verify`, as the paper did; the strict protocol's
    # contradictory-assumption run only for what the paper protocol verified (the originals)
    assert verifies[0][:-1] == ["verify", "--use-basename-for-filename", "--show-snippets:false",
                                "--verification-time-limit:20", "--cores:2"]
    assert len(flagged) == 6 and all(c[:-1] == [*verifies[0][:-1], "--warn-contradictory-assumptions"]
                                     for c in flagged)
    assert {Path(c[-1]).parent.name for c in flagged} == {"original-0"}
    assert strengths[0][:-1] == verifies[0][:-1]
    assert all(Path(c[-1]).name in ("program.dfy", "strength.dfy") for c in calls)
    # originals: all verified, honestly
    orig = v.xs("original", level="arm")
    assert orig["verified"].all() and orig["syntax_correct"].all() and set(orig["outcome"]) == {"verified"}
    assert orig["spec_as_strong"].all() and set(orig["strength_status"]) == {"as_strong"}
    # stripped: Dafny's own verdicts and failure modes, never counted (trivial_spec)
    s = v.xs("stripped", level="arm")
    assert not s["verified"].any() and not s["syntax_correct"].any() and set(s["outcome"]) == {"cheat"}
    assert s.loc["main_3node_halve_steps", "syntax_ok"] == False  # noqa: E712
    assert s.loc["main_4node_gcd_chain", "verify_status"] == "UNKNOWN"  # a time-out: undecided
    assert s["dafny_failure_mode"].fillna("verified").to_dict() == {
        "main_2node_inc_twice": "verified",
        "main_2node_count_clamp": "implementation_proof_misalignment",
        "main_2node_fill_sum": "specification_fragility",
        "main_3node_abs_triple_cap": "reasoning_instability",
        "main_3node_halve_steps": "other",
        "main_4node_gcd_chain": "other"}
    t1 = pd.read_csv(out.rd.root / "tables" / "table1_dafnycomp.csv").set_index("arm")
    assert t1.loc["original", "verified_at_1"] == 100 and t1.loc["original", "syntax_at_1"] == 100
    assert t1.loc["original", "strict_verified_at_1"] == 100 and t1.loc["original", "strong_at_1"] == 100
    # what verifies without specs (1 of 6): the paper's protocol counts it, the strict one never
    assert t1.loc["stripped", "verified_at_1"] == 16.67 and t1.loc["stripped", "strict_verified_at_1"] == 0
    # syntax (paper: parses) 5 of 6; the resolve-based extra is 0 (integrity: trivial_spec)
    assert t1.loc["stripped", "syntax_at_1"] == 83.33 and t1.loc["stripped", "strict_syntax_at_1"] == 0
    assert t1["paper_comparable_dafny"].all()
    assert (t1["covered"] == 6).all() and (t1["missing"] == 0).all()
    t2 = pd.read_csv(out.rd.root / "tables" / "table2_failure_modes.csv")
    paper = t2[(t2["arm"] == "stripped") & (t2["protocol"] == "paper")].set_index("failure_mode")
    assert paper["candidates"].to_dict() == {"specification_fragility": 1, "implementation_proof_misalignment": 1,
                                             "reasoning_instability": 1, "other": 2}
    assert paper["pct_of_failed"].sum() == 100.0
    t2 = t2[t2["protocol"] == "strict"]
    stripped = t2[t2["arm"] == "stripped"].set_index("failure_mode")["candidates"]
    assert stripped.to_dict() == {"specification_fragility": 1, "implementation_proof_misalignment": 1,
                                  "reasoning_instability": 1, "other": 2, "cheat": 0, "unchecked": 0,
                                  "no_program": 0}
    by = pd.read_csv(out.rd.root / "tables" / "table1_by_functions.csv")
    assert sorted(set(by["chain_length"])) == [2, 3, 4]

    # the same candidates again (another run directory, same cache): Dafny is not called
    before = len(_calls(replayed_dafny))
    again = launch_run(plan, tmp_path / "run2", ExecChoice("local", workers=1), progress=False)
    assert again.ok
    assert [c for c in _calls(replayed_dafny)[before:] if c != ["--version"]] == []
    assert _frames(again.rd.root)["verify"]["outcome"].tolist() == _frames(out.rd.root)["verify"]["outcome"].tolist()


def test_version_and_runtime_in_the_run_id(replayed_dafny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_dafny = plan_run("dafnycomp")
    monkeypatch.setenv("VERIBATCH_DAFNY", "/nonexistent/dafny")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    without = plan_run("dafnycomp")
    assert with_dafny.run_id != without.run_id
    assert without.config.options["verify"] == "unavailable"
    assert os.environ["VERIBATCH_DAFNY"] == "/nonexistent/dafny"


def test_other_dafny_is_refused_unless_allowed(replayed_dafny: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from veribatch.tasks.dafnycomp.checker import DafnyUnavailableError

    monkeypatch.setenv("DAFNY_REPLAY_VERSION", "4.11.0")
    with pytest.raises(DafnyUnavailableError, match="paper used Dafny 4.10"):
        plan_run("dafnycomp")
    plan = plan_run("dafnycomp", options=["allow_other_dafny=true"])
    assert plan.config.verifier_version == "4.11.0" and "NOT comparable" in capsys.readouterr().err
