"""bench/faults.py: a fixed-seed slice of the fault-injection suite, and its counters.

The slice runs real local runs with real faults (kill -9, torn ledger, a changed upstream,
damaged outputs, two resumes at once, a hung verifier) and asserts the suite's invariants:
nothing lost, duplicated or stale, one `launch resume`, no process left behind.  The SLURM
slice does the same on the CI cluster with scancel, requeue and kill -9.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "faults.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_faults", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_faults"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


faults = load_bench()


def assert_invariants(figs) -> None:
    for f in figs:
        line = faults.line(f)
        assert f.complete, line
        assert (f.lost, f.duplicated, f.stale) == (0, 0, 0), line
        assert f.resumes == 1, line
        assert f.processes_left == 0, line


def test_compare_counts_lost_duplicated_and_stale():
    want = pd.DataFrame({"instance_id": ["a", "b", "c"], "verdict": ["agree"] * 3})
    got = pd.DataFrame({"instance_id": ["a", "a", "c"], "verdict": ["agree", "agree",
                                                                    "disagree"]})
    assert faults.compare(got, want) == (1, 1, 1)
    assert faults.compare(want, want) == (0, 0, 0)
    changed = faults.expect({"work": pd.DataFrame({"instance_id": ["a"], "value": [1]}),
                             "check": want}, {"b": 7})
    assert changed["check"].set_index("instance_id").loc["b", "verdict"] == "disagree"


def test_process_counter_counts_what_outlives_the_run(tmp_path):
    """The "processes left behind" figure is real: a marked process, and an unmarked
    grandchild (environment wiped) of a marked one, are both counted until they die."""
    run = tmp_path / "run"
    run.mkdir()
    env = {**os.environ, "VERIBATCH_RUN_DIR": str(run)}
    marked = subprocess.Popen(["sh", "-c", "env -i sleep 30 & wait"], env=env,
                              start_new_session=True)
    watch = faults.ProcessWatch(run)
    try:
        for _ in range(50):
            watch.scan(force=True)
            if len(watch.seen) >= 2:
                break
            subprocess.run(["sleep", "0.1"])
        assert len(watch.left()) == 2  # sh (marked) and sleep (its child, no marker)
        marked.kill()
        marked.wait()
        left = watch.left()
        assert [p.cmdline() for p in left] == [["sleep", "30"]]  # reparented, still counted
    finally:
        for p in watch.left():
            p.kill()
    assert watch.left() == []


LOCAL_SLICE = ["kill9", "torn_ledger", "changed_upstream", "concurrent_resumes",
               "corrupt_parquet", "delete_done", "hung_verifier"]


@pytest.mark.slow
def test_fixed_seed_local_slice(tmp_path):
    figs = faults.run_suite("local", runs=2, seed=20261130, kinds=LOCAL_SLICE, per_run=3,
                            sleep_s=0.1, work=tmp_path, tag="ci", echo=False)
    assert_invariants(figs)
    injected = {x.kind for f in figs for x in f.faults if x.injected}
    assert len(injected) >= 5, [faults.line(f) for f in figs]
    assert all(f.incomplete_before for f in figs if any(
        x.injected and x.kind in faults.POST_RUN for x in f.faults))  # the faults did damage


@pytest.mark.slurm
@pytest.mark.slow
def test_fixed_seed_slurm_slice(slurm_cluster, tmp_path):
    figs = faults.run_suite("slurm", runs=1, seed=7, kinds=["scancel_element", "kill9",
                                                            "requeue"], per_run=3,
                            profile="local-test", sleep_s=0.5, work=tmp_path, tag="ci",
                            echo=False)
    assert_invariants(figs)
    assert {x.kind for f in figs for x in f.faults if x.injected} >= {"scancel_element"}
