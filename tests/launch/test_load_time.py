"""Model load time measured, with the tiny real model (`hf:`): the generate stage notes what
opening its engine took in the shard's stats.json, `launch.measured` carries it into the
costs file, and sizing uses it in place of the profile's read rate and start-up — and says
so — while an engine a `shared_engines` scope hands out again costs no second load."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.cli import launch, only_run_dir
from veribatch.launch import measured

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from veribatch.inference.tiny_model import build_tiny_qwen2

    # what it answers is not tested: only that it loads
    return build_tiny_qwen2(tmp_path_factory.mktemp("tiny") / "model", max_train_s=3.0)


def test_a_shared_engine_is_charged_one_load(tiny_model: Path) -> None:
    from veribatch.inference import open_engine, shared_engines

    with open_engine(f"hf:{tiny_model}") as alone:
        assert alone.load_s is not None and alone.load_s > 0
    with shared_engines():
        first = open_engine(f"hf:{tiny_model}")
        again = open_engine(f"hf:{tiny_model}")
        assert first.load_s and first.load_s > 0 and again.load_s == 0.0


def _generate_line(out: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.startswith("  generate: ") and "requested" in ln]
    assert len(lines) == 1, out
    return lines[0]


def test_the_generate_stage_records_its_load_and_sizing_uses_it(tiny_model: Path,
                                                                 tmp_path: Path) -> None:
    runs, costs = tmp_path / "runs", tmp_path / "costs.json"
    run = ("invbench", "--model", f"hf:{tiny_model}", "--max-tokens", "8", "-o", "budget_s=5",
           "--limit", "2", "--runs-dir", str(runs))
    dry = ("--executor", "slurm", "--profile", "local-test", "--dry-run")
    env = {measured.COSTS_ENV: str(costs), "SLURM_CONF": "/nonexistent"}

    # before any measurement: the profile's (built-in) read rate and start-up, said so
    r = launch(*run, *dry, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assumed = _generate_line(r.stdout)
    assert "GB/s" in assumed and "engine start-up" in assumed and "measured" not in assumed

    r = launch(*run, "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    rd = only_run_dir(runs)
    stats = json.loads((rd / "shards" / "generate" / "0" / "stats.json").read_text())
    load = stats["notes"]["engine_load_s"]
    assert 0 < load < stats["wall_s"], stats
    for stage in ("baseline", "verify"):  # stages that open no engine note nothing
        assert "notes" not in json.loads((rd / "shards" / stage / "0" / "stats.json").read_text())

    ms = {m.stage: m for m in measured.measure_run(rd)}
    assert ms["generate"].load_s == pytest.approx(load, abs=1e-3)
    assert ms["baseline"].load_s is None
    measured.record(costs, list(ms.values()))
    assert json.loads(costs.read_text())["measurements"][0]["load_s"] is None  # baseline's
    assert measured.lookup(costs, ms["generate"].key).load_s == pytest.approx(load, abs=1e-3)

    # the next plan's load figure is the measured one, and the line says so
    r = launch(*run, *dry, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    line = _generate_line(r.stdout)
    m = re.search(r"load ([0-9.]+) min \(measured: ([0-9.e+-]+) s per engine load, median of "
                  r"1 run\(s\)", line)
    assert m, line
    assert float(m.group(2)) == pytest.approx(load, rel=0.01)
    assert "GB/s" not in line and "engine loads excluded" in line, line
