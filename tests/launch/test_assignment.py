"""The tail of slow instances spread by measured cost (`launch.assignment`): with per-instance
costs in the measured-costs file a few 20x slower instances land on different shards and
the largest shard's cost drops below both round-robin's and the contiguous cut's (both
computed here from the cost file); the assignment is frozen in the run directory, so a
resume under a changed costs file finds the same shards."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import launch, only_run_dir, stage_records, status_json
from veribatch.launch import measured
from veribatch.launch.assignment import CONTIGUOUS, LPT, lpt
from veribatch.launch.run_control import plan_run
from veribatch.rundir.shards import file_sha256

SHARDS = 4
IDS = [f"selftest/smoke/{k:05d}" for k in range(12)]


def _costs_file(path: Path, slow: list[int], factor: float = 20.0) -> dict[str, float]:
    """A costs file whose `work` stage measured 1 s per instance, `factor` s for `slow`."""
    cost = {i: (factor if k in slow else 1.0) for k, i in enumerate(IDS)}
    plan = plan_run("selftest", shards=SHARDS)
    key = measured.key_name(measured.key_of(plan.config.to_json(), "work"))
    measured.record(path, [], {key: cost})
    return cost


def _shard_ids(plan) -> list[list[str]]:
    return [[i.id for i in plan.instances[a:b]] for a, b in plan.shard_bounds()]


def test_slow_instances_go_to_different_shards_and_the_largest_shard_shrinks(
        tmp_path: Path, monkeypatch) -> None:
    slow = [0, 1, 4, 8]  # neighbours (one contiguous slice) and congruent mod 4 (round-robin)
    cost = _costs_file(tmp_path / "costs.json", slow)
    monkeypatch.delenv(measured.COSTS_ENV, raising=False)
    before = plan_run("selftest", shards=SHARDS)
    assert before.assignment.method == CONTIGUOUS
    monkeypatch.setenv(measured.COSTS_ENV, str(tmp_path / "costs.json"))
    plan = plan_run("selftest", shards=SHARDS)
    assert plan.assignment.method == LPT and plan.run_id == before.run_id
    shards = _shard_ids(plan)
    assert sorted(i for s in shards for i in s) == IDS            # each instance once
    assert all(s == sorted(s) and s for s in shards)
    holders = {k for k, s in enumerate(shards) for i in s if IDS.index(i) in slow}
    assert len(holders) == len(slow), shards                      # one slow one per shard

    # the alternatives, from the cost file alone (not from the code under test)
    round_robin = [sum(cost[i] for i in IDS[k::SHARDS]) for k in range(SHARDS)]
    n = len(IDS)
    contiguous = [sum(cost[i] for i in IDS[k * n // SHARDS:(k + 1) * n // SHARDS])
                  for k in range(SHARDS)]
    spread = [sum(cost[i] for i in s) for s in shards]
    assert max(spread) < max(round_robin) and max(spread) < max(contiguous), (
        spread, round_robin, contiguous)
    assert max(spread) == 22.0 and max(round_robin) == 60.0 and max(contiguous) == 41.0
    assert plan.assignment.source["expected_max_shard_s"] == {"contiguous": 41.0, "lpt": 22.0}

    # deterministic: the same inputs give the same shards, whatever order they come in
    assert lpt(list(reversed(IDS)), cost, SHARDS) == shards
    assert _shard_ids(plan_run("selftest", shards=SHARDS)) == shards


def test_without_per_instance_costs_or_a_real_tail_the_contiguous_cut_stays(
        tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "costs.json"
    measured.record(path, [])
    monkeypatch.setenv(measured.COSTS_ENV, str(path))
    plan = plan_run("selftest", shards=SHARDS)
    assert plan.assignment.method == CONTIGUOUS and plan.assignment.source is None
    assert _shard_ids(plan) == [IDS[k * 3:(k + 1) * 3] for k in range(SHARDS)]
    # costs within a few per cent of each other (one night's jitter): no reshuffle
    _costs_file(path, [5], factor=1.05)
    plan = plan_run("selftest", shards=SHARDS)
    assert plan.assignment.method == CONTIGUOUS
    assert _shard_ids(plan) == [IDS[k * 3:(k + 1) * 3] for k in range(SHARDS)]
    assert plan.assignment.source["expected_max_shard_s"]["contiguous"] == 3.05


def test_the_assignment_is_frozen_so_resume_under_changed_costs_finds_the_same_shards(
        tmp_path: Path, monkeypatch) -> None:
    costs, runs = tmp_path / "costs.json", tmp_path / "runs"
    _costs_file(costs, [0, 1, 2, 3])
    env = {measured.COSTS_ENV: str(costs)}
    r = launch("selftest", "--shards", str(SHARDS), "--runs-dir", str(runs), "-q", env=env)
    assert r.returncode == 0, r.stderr
    rd = only_run_dir(runs)
    index = json.loads((rd / "shards.json").read_text())
    assert index["sharding"] == LPT
    assert index["costs"]["sha256"] == file_sha256(costs)
    assert index["costs"]["measured"] == 12
    frozen = (rd / "shards.json").read_bytes(), (rd / "instances.jsonl").read_bytes()
    work = stage_records(rd, "work")
    owner = dict(zip(work["instance_id"], work["shard"], strict=True))
    assert len({owner[IDS[k]] for k in range(4)}) == 4             # spread, not shard 0

    # the costs change (other instances are slow now): a new plan would cut differently...
    _costs_file(costs, [2, 5, 6, 9])
    monkeypatch.setenv(measured.COSTS_ENV, str(costs))
    fresh = {i: k for k, s in enumerate(_shard_ids(plan_run("selftest", shards=SHARDS)))
             for i in s}
    assert fresh != owner
    # ...but a shard redone by resume reads the frozen assignment
    for stage in ("work", "check"):
        (rd / "shards" / stage / "1" / "DONE").unlink()
    r = launch("resume", str(rd), "-q", env=env)
    assert r.returncode == 0, r.stderr
    assert ((rd / "shards.json").read_bytes(), (rd / "instances.jsonl").read_bytes()) == frozen
    again = stage_records(rd, "work")
    assert dict(zip(again["instance_id"], again["shard"], strict=True)) == owner
    assert len(again) == 12 and again["instance_id"].is_unique
    # and so does launching the same plan into the same directory again
    r = launch("selftest", "--shards", str(SHARDS), "--runs-dir", str(runs), "-q", env=env)
    assert r.returncode == 0, r.stderr
    assert (rd / "shards.json").read_bytes() == frozen[0]
    code, st = status_json(rd)
    assert code == 0 and st["complete"]

    # what the run measured per instance is what the next plan spreads by
    per = measured.measure_instances(rd)
    key = measured.key_name(measured.key_of(json.loads((rd / "manifest.json").read_text())
                                            ["config"], "work"))
    assert set(per) == {key} and set(per[key]) == set(IDS)   # `check` records no time
    assert measured.main([str(tmp_path / "next.json"), str(rd)]) == 0
    assert measured.read_instance_costs(tmp_path / "next.json") == per


def test_an_unreadable_costs_file_keeps_the_contiguous_cut_and_says_why(
        tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "costs.json"
    path.write_text("{not json")
    monkeypatch.setenv(measured.COSTS_ENV, str(path))
    plan = plan_run("selftest", shards=SHARDS)
    assert plan.assignment.method == CONTIGUOUS
    assert "unreadable measured-costs file" in plan.assignment.source["error"]
    r = launch("selftest", "--shards", str(SHARDS), "--runs-dir", str(tmp_path / "runs"),
               "--dry-run", env={measured.COSTS_ENV: str(path)})
    assert r.returncode == 0, r.stderr
    assert "the costs file was not used" in r.stdout and "costs.json" in r.stdout, r.stdout
