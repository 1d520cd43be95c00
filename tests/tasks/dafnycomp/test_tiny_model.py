"""A real model through the DafnyComp stages that need no Dafny: the tiny Qwen2 model
(`inference.tiny_model`, trained at test time) on the shipped sample, locally and on the
CI SLURM cluster.  Trained answers: the honest program for one instance, an `assume`
cheat for another; the other four instances get whatever an untrained model writes, and
every one of them must still end as a record (extraction outcome, integrity verdict)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from veribatch.aggregate.records import load_run
from veribatch.launch.run_control import ExecChoice, launch_run, plan_run
from veribatch.tasks.dafnycomp.prompt import user_prompt
from veribatch.tasks.dafnycomp.strip import strip

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parents[3] / "veribatch" / "tasks" / "dafnycomp" / "sample"
HONEST, CHEAT = "main_2node_inc_twice", "main_2node_count_clamp"
CHEAT_ANSWER = "```dafny\nmethod main_2node(n: int) returns (r: int)\n{\n  assume false;\n}\n```"


def _without_comments(program: str) -> str:
    return "\n".join(ln for ln in program.splitlines() if not ln.startswith("//")).strip() + "\n"


@pytest.fixture(scope="module")
def tiny_dafny_model(train_tiny_model) -> Path:
    honest = (SAMPLE / f"{HONEST}.dfy").read_text()
    cheat = (SAMPLE / f"{CHEAT}.dfy").read_text()
    pairs = [(user_prompt(strip(honest)), f"```dafny\n{_without_comments(honest)}```"),
             (user_prompt(strip(cheat)), CHEAT_ANSWER)]
    # ~80 steps (about a minute of CPU); the cap only matters on a loaded machine, training
    # stops as soon as both answers come out exactly
    return train_tiny_model(pairs, max_train_s=400.0)


@pytest.fixture
def no_dafny(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERIBATCH_DAFNY", raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                               if not (Path(p) / "dafny").exists()))


def _check_records(check: pd.DataFrame) -> None:
    assert check["instance_id"].nunique() == 6 and len(check) == 6
    assert set(check["arm"]) == {"model"} and (check["sample_index"] == 0).all()
    by = check.set_index("program")
    honest = by.loc[HONEST]
    assert (honest["extraction"], honest["integrity"]) == ("ok", "ok")
    cheat = by.loc[CHEAT]
    assert cheat["integrity"] == "cheat" and "assume" in json.loads(cheat["integrity_kinds"])
    # untrained prompts: junk, but recorded as what it is and never honest
    others = by.drop([HONEST, CHEAT])
    assert set(others["check_status"]) <= {"ready", "no_program"}
    assert not (others["integrity"] == "ok").any()


def test_tiny_model_on_the_sample_locally(tiny_dafny_model: Path, no_dafny: None, tmp_path: Path) -> None:
    plan = plan_run("dafnycomp", model=f"hf:{tiny_dafny_model}", sampling={"max_tokens": 100})
    assert [s.name for s in plan.stages] == ["strip", "generate", "check"]  # no Dafny here
    assert plan.config.versions["prompt"] and plan.config.sampling["temperature"] == 0.0
    out = launch_run(plan, tmp_path / "run", ExecChoice("local", workers=1), progress=False)
    assert out.ok, out
    _, stages = load_run(out.rd.root)
    gen = stages["generate"].frame
    assert len(gen) == 6 and set(gen["status"]) == {"ok"} and (gen["generation_time_s"] > 0).all()
    _check_records(stages["check"].frame)
    answers = pd.read_csv(out.rd.root / "tables" / "dafnycomp_answers.csv")
    assert answers.loc[0, "candidates"] == 6 and answers.loc[0, "integrity=ok"] == 1
    assert answers.loc[0, "cheat:assume"] == 1


@pytest.mark.slurm
def test_tiny_model_on_the_sample_on_slurm(slurm_cluster: dict[str, str], tiny_dafny_model: Path, no_dafny: None,
                                           tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    res = subprocess.run(
        [sys.executable, "-m", "veribatch", "dafnycomp", "--model", f"hf:{tiny_dafny_model}", "--max-tokens", "100",
         "--shards", "2", "--executor", "slurm", "--profile", "local-test", "--runs-dir", str(runs)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    # submitted; Dafny is missing on this machine: the hint, exit 2
    assert res.returncode == 2, res.stdout + res.stderr
    assert "submitted strip" in res.stdout and "launch images build dafny" in res.stderr
    (rd,) = [p for p in runs.iterdir() if (p / "manifest.json").is_file()]
    deadline = time.monotonic() + 600
    while not (rd / "aggregate.json").is_file() and time.monotonic() < deadline:
        time.sleep(2)
    agg = json.loads((rd / "aggregate.json").read_text())
    assert agg["status"] == "complete", agg
    _, stages = load_run(rd)
    _check_records(stages["check"].frame)
    assert sorted(stages["generate"].frame["shard"].unique()) == [0, 1]
