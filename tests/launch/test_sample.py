"""`--sample K --sample-seed S`: a seeded random sample of K instances for every task (InvBench
§5.4's "random sample of 100 problems"), where `--limit K` takes the first K sorted."""

from __future__ import annotations

import pytest

from tests.support.cli import launch
from veribatch.launch.plan import PlanError, run_id_for
from veribatch.launch.run_control import plan_run


def _ids(task: str, **kw) -> list[str]:
    return [i.id for i in plan_run(task, **kw).instances]


@pytest.mark.parametrize("task", ["selftest", "invbench"])
def test_sample_is_seeded_random_and_in_the_run_id(task: str) -> None:
    every = _ids(task)
    a = _ids(task, sample=5, sample_seed=1)
    assert len(a) == 5 and set(a) <= set(every) and a == sorted(a)
    assert a == _ids(task, sample=5, sample_seed=1)          # same seed, same sample
    assert _ids(task, sample=5, sample_seed=2) != a           # another seed, another sample
    assert {tuple(_ids(task, sample=5, sample_seed=s)) for s in range(4)} != {tuple(every[:5])}
    runs = {run_id_for(plan_run(task, sample=5, sample_seed=s).config) for s in (1, 2)}
    runs.add(run_id_for(plan_run(task, limit=5).config))
    assert len(runs) == 3


def test_no_sample_keeps_the_run_id_of_before() -> None:
    assert "sample" not in plan_run("selftest").config.to_json()


def test_bad_sample_is_refused_at_plan_time() -> None:
    n = len(_ids("invbench"))
    with pytest.raises(PlanError, match=f"--sample {n + 1}: the dataset has {n} instances"):
        plan_run("invbench", sample=n + 1)
    with pytest.raises(PlanError, match="not with --limit"):
        plan_run("invbench", sample=3, limit=3)


def test_cli_sample_dry_run(tmp_path) -> None:
    r = launch("invbench", "--sample", "4", "--sample-seed", "7", "--dry-run", "--runs-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "4 instances (a random sample, --sample 4 --sample-seed 7)" in " ".join(r.stdout.split())
