"""Run identity and shard assignment: same inputs ⇒ same id; anything result-relevant ⇒ new id."""

from __future__ import annotations

import pytest

from veribatch.launch.manifest import build_manifest
from veribatch.launch.plan import PlanError, make_config, make_plan, run_id_for, shard_bounds
from veribatch.tasks.base import UnknownNameError, get_task


def cfg(**kw):
    return make_config(get_task("selftest"), **kw)


def test_same_inputs_same_run_id():
    assert run_id_for(cfg(shards=3, options=["sleep_s=0.5"])) == \
        run_id_for(cfg(shards=3, options=["sleep_s=0.5"]))
    assert run_id_for(cfg()).startswith("selftest-")


@pytest.mark.parametrize("change", [
    {"options": ["iterations=7"]},
    {"shards": 2},
    {"dataset": "small"},
    {"model": "hf:org/model"},
    {"sampling": {"temperature": 0.7}},
    {"limit": 5},
    {"verifier": "alternate"},
    {"strategy": "alternate"},
])
def test_result_relevant_change_gives_new_run_id(change):
    assert run_id_for(cfg(**change)) != run_id_for(cfg())


def test_unknown_strategy_is_refused_before_it_reaches_a_run_id():
    with pytest.raises(PlanError, match="unknown strategy 'best-of-n'.*default, alternate"):
        cfg(strategy="best-of-n")
    assert cfg().strategy == "default"
    with pytest.raises(PlanError, match="unknown verifier 'dafny'.*none, alternate"):
        cfg(verifier="dafny")
    assert cfg().verifier == "none"


def test_model_paths_and_replay_sources_are_checked_at_plan_time(tmp_path):
    with pytest.raises(PlanError, match="no model at /nonexistent"):
        cfg(model="hf:/nonexistent")
    with pytest.raises(PlanError, match="replay needs a run directory; /nonexistent does not"):
        cfg(model="replay:/nonexistent")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")  # a model folder: config and weights
    (tmp_path / "m" / "model.safetensors").write_text("")
    assert cfg(model=f"hf:{tmp_path / 'm'}").model == f"hf:{tmp_path / 'm'}"
    assert cfg(model="vllm:Qwen/Qwen2.5-72B-Instruct").model  # a hub name: not a path


def test_option_default_given_explicitly_is_the_same_run():
    assert run_id_for(cfg(options=["iterations=1000"])) == run_id_for(cfg())


def test_code_version_recorded_but_not_in_identity(monkeypatch):
    task = get_task("selftest")
    plan = make_plan(task, cfg())
    m1 = build_manifest(plan)
    monkeypatch.setattr("veribatch.launch.manifest.code_version", lambda: "git:something-else")
    m2 = build_manifest(plan)
    assert m1["code_version"] != m2["code_version"]
    assert m1["identity"] == m2["identity"] and m1["run_id"] == m2["run_id"]


def test_shard_bounds_cover_everything_once_and_are_balanced():
    for n, s in [(12, 1), (12, 5), (13, 4), (10000, 7)]:
        b = shard_bounds(n, s)
        assert b[0][0] == 0 and b[-1][1] == n
        assert all(b[i][1] == b[i + 1][0] for i in range(s - 1))
        sizes = [hi - lo for lo, hi in b]
        assert max(sizes) - min(sizes) <= 1


def test_plan_sorts_instances_by_id_and_validates_stages():
    plan = make_plan(get_task("selftest"), cfg(shards=5))
    ids = [i.id for i in plan.instances]
    assert ids == sorted(ids) and len(ids) == 12
    assert [s.name for s in plan.stages] == ["work", "check"]


def test_option_errors_name_the_option():
    with pytest.raises(PlanError, match="unknown option 'sleepy'.*known options: .*sleep_s"):
        cfg(options=["sleepy=1"])
    with pytest.raises(PlanError, match="iterations='many'"):
        cfg(options=["iterations=many"])
    with pytest.raises(PlanError, match="expected key=value"):
        cfg(options=["iterations"])


def test_unknown_names_and_impossible_shard_counts():
    with pytest.raises(UnknownNameError, match="unknown task 'nope'.*selftest"):
        get_task("nope")
    with pytest.raises(UnknownNameError, match="unknown dataset 'tiny'.*smoke"):
        cfg(dataset="tiny")
    with pytest.raises(PlanError, match="--shards 13 exceeds the 12 instances"):
        make_plan(get_task("selftest"), cfg(shards=13))
    with pytest.raises(PlanError, match="at least 1"):
        cfg(shards=0)
