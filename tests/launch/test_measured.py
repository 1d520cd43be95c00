"""Sizing from measurements (`launch.measured`): the `--dry-run` plan uses what an earlier
run of the same task × stage × verifier × model took when `$VERIBATCH_COSTS` has it and the
profile's assumed figures otherwise, and says which; a second run's wall and CPU-hours are
compared with the estimate made from the first."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.cli import launch
from veribatch.launch import measured
from veribatch.launch.manifest import build_manifest
from veribatch.launch.profiles import load_profile
from veribatch.launch.run_control import plan_run

SELFTEST = ("selftest", "--shards", "2", "-o", "sleep_s=0.5")
DRY = ("--executor", "slurm", "--profile", "local-test", "--dry-run")


def _stage_line(out: str, stage: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.startswith(f"  {stage}: ") and "requested" in ln]
    assert len(lines) == 1, out
    return lines[0]


def _wall_and_cpu_h(line: str) -> tuple[float, float]:
    """The expected element wall (s) and CPU-hours of one stage's cost line."""
    cpu_h = float(re.search(r"expected ([0-9.e-]+) CPU-h", line).group(1))
    m = re.search(r"wave\(s\) of <= ([0-9.]+) (s|min|h)\)", line)
    wall = float(m.group(1)) * {"s": 1, "min": 60, "h": 3600}[m.group(2)]
    return wall, cpu_h


@pytest.mark.slow  # two local runs of 12 instances at 0.5 s and four `launch` processes
def test_dry_run_uses_measured_costs_when_recorded_and_a_second_run_meets_the_estimate(
        tmp_path: Path) -> None:
    runs, costs = tmp_path / "runs", tmp_path / "hist" / "costs.json"
    env = {"VERIBATCH_COSTS": str(costs), "SLURM_CONF": "/nonexistent"}
    # no measurements yet: the stage's declared seconds per instance (1.5 s), said so
    r = launch(*SELFTEST, "--runs-dir", str(runs), *DRY, env=env)
    assert r.returncode == 0, r.stderr
    assumed = _stage_line(r.stdout, "work")
    assert "1.5 s per instance (assumed: the stage's declared seconds_per_instance)" in assumed
    assert "(measured:" not in r.stdout

    # the first run, measured into the costs file
    r = launch(*SELFTEST, "--runs-dir", str(runs), "--run-name", "first", "-q")
    assert r.returncode == 0, r.stderr
    ms = measured.measure_run(runs / "first")
    assert {m.stage for m in ms} == {"work", "check"}
    work = next(m for m in ms if m.stage == "work")
    assert work.instances == 12 and 0.5 <= work.wall_s < 1.2, work
    measured.record(costs, ms)
    assert json.loads(costs.read_text())["schema"] == 1

    # the second plan, sized from the first run: the plan says so, and its figures are the
    # measured ones (not the declared 1.5 s), in the cost and in the time limit's detail
    r = launch(*SELFTEST, "--runs-dir", str(runs), *DRY, env=env)
    assert r.returncode == 0, r.stderr
    line = _stage_line(r.stdout, "work")
    assert "measured: " in line and "over 12 instance(s) of 1 run(s)" in line, line
    est_wall, est_cpu_h = _wall_and_cpu_h(line)
    assert est_wall == pytest.approx(6 * work.wall_s, abs=1.0)

    # the second run, and its measured wall and CPU-hours against that estimate
    r = launch(*SELFTEST, "--runs-dir", str(runs), "--run-name", "second", "-q")
    assert r.returncode == 0, r.stderr
    stats = [json.loads(p.read_text())
             for p in sorted((runs / "second" / "shards" / "work").glob("*/stats.json"))]
    wall = max(s["wall_s"] for s in stats)           # the longest element
    cpu_h = sum(s["wall_s"] for s in stats) * 1 / 3600  # 1 core per element (cpus_per_task)
    print(f"work stage: estimate {est_wall:.1f} s wall, {est_cpu_h:.3g} CPU-h; "
          f"second run measured {wall:.1f} s wall, {cpu_h:.3g} CPU-h "
          f"(assumed figures would have said {_wall_and_cpu_h(assumed)})")
    assert 0.5 * est_wall <= wall <= 2.0 * est_wall
    assert 0.5 * est_cpu_h <= cpu_h <= 2.0 * est_cpu_h


def test_a_sized_generate_stage_takes_its_grouping_and_time_limit_from_measured_tokens_per_s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Element grouping: slower measured generation (tokens/s) justifies more model loads;
    the time limit grows with it.  Without a measurement: the built-in figures, said so."""
    from veribatch.launch.executors.cost import describe, estimate

    plan = plan_run("invbench", dataset="sample", model="vllm:Qwen2.5-7B-Instruct", shards=8)
    manifest = dict(build_manifest(plan))
    profile = load_profile("example-cluster")
    profile = replace(profile, partitions={k: replace(v, time_min=None)
                                           for k, v in profile.partitions.items()})
    sizes = [b - a for a, b in plan.shard_bounds()]
    costs = tmp_path / "costs.json"
    monkeypatch.setenv(measured.COSTS_ENV, str(costs))

    def generate() -> tuple[int, str]:
        costs_ = estimate(manifest, profile, sizes)
        c = next(c for c in costs_ if c.stage == "generate")
        return c.elements, _stage_line("\n".join(describe(costs_, manifest, profile)), "generate")

    g0, line0 = generate()
    assert "measured" not in line0 and "tokens/s (" in line0
    task, _, verifier, model = measured.key_of(manifest["config"], "generate")
    measured.record(costs, [measured.Measurement(
        task=task, stage="generate", verifier=verifier, model=model, run_id="earlier",
        run_dir=str(tmp_path / "earlier"), dataset="sample", recorded="2026-01-01T00:00:00Z", instances=12, shards=1, wall_s=90.0,
        cpu_s=None, tokens_per_s=5.0, cpus_per_task=1)])
    g1, line1 = generate()
    assert "at 5 tokens/s (measured:" in line1, line1
    assert g1 > g0, (g0, g1)
