"""REFUTE end to end through `launch`: the reference rows without a model (locally and on the
real SLURM cluster), the §4.1 filter command, an explicitly unsafe run, and the tiny real
Qwen2 model driving every model strategy — the agentic one also through an OpenAI-compatible
HTTP endpoint (`inference.serve_http`), as `launch serve` would provide."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.support import refute_tiny as tiny
from veribatch.aggregate.records import load_run
from veribatch.launch.cli import app
from veribatch.launch.run_control import ExecChoice, launch_run, plan_run
from veribatch.tasks.refute import data
from veribatch.tasks.refute.counterexample import REASONS

pytestmark = pytest.mark.slow
FAST = ["search_s=3", "filter_s=2", "run_s=3", "generator_s=5"]


def _judge(run_dir: Path) -> pd.DataFrame:
    _, stages = load_run(run_dir)
    return stages["judge"].frame


def _export(tmp_path: Path, ids: tuple[str, ...]) -> str:
    """A local export (the hub's schema) holding only the sample problems `ids`."""
    rows = [json.loads(line) for line in data.SAMPLE_FILE.read_text().splitlines()]
    path = tmp_path / "export" / "train.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r["problem_id"] in ids))
    return str(path.parent)


def test_reference_rows_without_a_model(tmp_path: Path) -> None:
    plan = plan_run("refute", limit=4, options=FAST)
    assert [s.name for s in plan.stages] == ["judge"]
    assert plan.config.verifier == "judge" and "g++" in plan.config.verifier_version
    out = launch_run(plan, tmp_path / "run", ExecChoice("local", workers=1), progress=False)
    assert out.ok, out
    j = _judge(out.rd.root)
    assert len(j) == 8 and set(j["arm"]) == {"blind-random", "trivial-randsearch-oracle"}
    assert set(j["model"]) == {"reference (no model)"} and (j["generation_time_s"] == 0).all()
    assert set(j["reason"]) <= set(REASONS) and set(j["sandbox"]) == {"bwrap"}
    assert not j["sandbox_unsafe"].any()
    blind = j[j["arm"] == "blind-random"].set_index("instance_id")
    # S01's blind generator draws values up to 1e9: the int product overflows at once
    assert blind.loc["refute/sample/S01", "outcome"] == "success"
    assert blind.loc["refute/sample/S01", "generator_source"] == "dataset blind generator"
    # S04's random trees are shallow: the recursion-limit crash is out of blind reach
    assert blind.loc["refute/sample/S04", "reason"] in ("nothing_found", "no_new_inputs")
    trivial = j[j["arm"] == "trivial-randsearch-oracle"]
    assert (trivial["search_invalid_skipped"] >= 0).all() and (trivial["search_limit_s"] == 3).all()
    tables = {p.name for p in out.aggregate.paths}
    for key in ("refute_success", "refute_validation", "refute_outcomes", "refute_buckets",
                "refute_overlap", "refute_randsearch"):
        assert f"{key}.md" in tables
    success = pd.read_csv(out.rd.root / "tables" / "refute_success.csv")
    assert set(success["covered"]) == {4} and set(success["missing"]) == {0}


def test_filter_command_and_an_explicitly_unsafe_run(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["refute", "filter", "--limit", "2", "--runs-dir", str(tmp_path),
                                   "-q", *sum((["-o", o] for o in FAST), [])])
    assert res.exit_code == 0, res.output
    result = json.loads(next(tmp_path.glob("refute-*/tables/filter.json")).read_text())
    assert "refute/sample/S01" in result["dropped"]
    assert sorted(result["kept"] + result["dropped"]) == ["refute/sample/S01", "refute/sample/S02"]
    plan = plan_run("refute", limit=1, options=[*FAST, "sandbox=unsafe", "filter=true"])
    out = launch_run(plan, tmp_path / "unsafe", ExecChoice("local", workers=1), progress=False)
    j = _judge(out.rd.root)
    assert list(j["sandbox"]) == ["none"] and j["sandbox_unsafe"].all()
    assert "UNSAFE" in pd.read_csv(out.rd.root / "tables" / "refute_success.csv")["sandbox"][0]


@pytest.mark.slurm
def test_reference_rows_on_the_slurm_cluster(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    """`launch refute` as a user types it, on the real cluster: two shards as a job array,
    then status until complete; the judge runs in bubblewrap inside the SLURM job."""
    env = {**os.environ, **slurm_cluster}
    cli = [sys.executable, "-m", "veribatch"]
    args = ["refute", "--limit", "2", "--shards", "2", "--executor", "slurm", "--profile",
            "local-test", "--runs-dir", str(tmp_path), "-q", *sum((["-o", o] for o in FAST), [])]
    r = subprocess.run([*cli, *args], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = next(tmp_path.glob("refute-*"))
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        st = subprocess.run([*cli, "status", str(run_dir), "--json"], env=env, capture_output=True,
                            text=True, timeout=120)
        if st.returncode in (0, 1):
            break
        time.sleep(3)
    status = json.loads(st.stdout)
    assert status["complete"] and not status["failed"], status
    j = _judge(run_dir)
    assert len(j) == 4 and set(j["shard"]) == {0, 1} and set(j["sandbox"]) == {"bwrap"}
    assert set(j["reason"]) <= set(REASONS)
    assert (run_dir / "tables" / "refute_success.md").is_file()


# ---------------------------------------------------------------- the tiny model


@pytest.fixture(scope="module")
def tiny_model(train_tiny_model) -> Path:
    # six ~1.3k-character prompts: seconds of training on an idle 2-core machine; the cap only
    # matters on a loaded one (training stops as soon as every answer is learned)
    return train_tiny_model(tiny.pairs(), max_train_s=400.0)


def _model_run(tmp_path: Path, model: str, strategy: str, dataset: str | None = None,
               limit: int | None = None, options: tuple[str, ...] = ("prompts=veribatch",)):
    """A model run; the shared tiny model learned our own templates (the named variant).
    Greedy (the harness's 0.2 is the default): the tiny model's answers are what is tested."""
    plan = plan_run("refute", dataset=dataset, model=model, strategy=strategy, limit=limit,
                    options=[*FAST, *options], sampling={"max_tokens": tiny.MAX_TOKENS, "temperature": 0.0})
    out = launch_run(plan, tmp_path / strategy, ExecChoice("local", workers=1), progress=False)
    assert out.ok, out
    return plan, out


def test_tiny_model_zero_shot_on_the_whole_sample(tmp_path: Path, tiny_model: Path) -> None:
    plan, out = _model_run(tmp_path, f"hf:{tiny_model}", "zero-shot")
    assert [s.name for s in plan.stages] == ["generate", "judge"]
    assert plan.config.versions["prompt"] and plan.config.versions["parser"]
    _, stages = load_run(out.rd.root)
    gen = stages["generate"].frame
    assert len(gen) == 12 and (gen["generation_time_s"] > 0).all()
    j = _judge(out.rd.root).set_index("instance_id")
    assert len(j) == 12
    s12 = j.loc["refute/sample/S12"]
    assert (s12["outcome"], s12["reason"], s12["answer_outcome"]) == ("success", "differs", "ok")
    assert s12["input_excerpt"] == "999999999999999999\n"
    # the other prompts were never trained: whatever came out is recorded, never lost
    others = j.drop(index="refute/sample/S12")
    assert set(others["outcome"]) <= {"failure", "success"} and others["reason"].notna().all()


def test_the_filter_row_without_a_blind_generator_is_named_for_the_fuzzer(tmp_path: Path) -> None:
    """Hub data ships no blind generator: the §4.1 row then runs the example fuzzer and must
    not be labelled a generator written from the statement."""
    plan = plan_run("refute", dataset=_export(tmp_path, ("S01",)), options=FAST)
    out = launch_run(plan, tmp_path / "run", ExecChoice("local", workers=1), progress=False)
    assert out.ok, out
    j = _judge(out.rd.root)
    assert set(j["arm"]) == {"fuzzer-random-filter", "trivial-randsearch-oracle"}
    row = j[j["arm"] == "fuzzer-random-filter"].iloc[0]
    assert row["generator_source"] == "trivial example fuzzer" and row["search_limit_s"] == 2


def test_tiny_model_oracle_randsearch_and_randsearch_oracle(tmp_path: Path, tiny_model: Path) -> None:
    dataset = _export(tmp_path, ("S12",))
    _, out = _model_run(tmp_path, f"hf:{tiny_model}", "oracle", dataset)
    o = _judge(out.rd.root).iloc[0]
    assert (o["outcome"], o["reason"]) == ("failure", "invalid_input")
    assert "n out of range" in o["detail"]
    _, out = _model_run(tmp_path, f"hf:{tiny_model}", "randsearch", dataset)
    r = _judge(out.rd.root).iloc[0]
    assert (r["outcome"], r["search_reason"], r["brute_outcome"]) == ("success", "found", "ok")
    assert r["search_iterations"] >= 1 and pd.isna(r["randsearch_failure"])
    _, out = _model_run(tmp_path, f"hf:{tiny_model}", "randsearch-oracle", dataset)
    ro = _judge(out.rd.root).iloc[0]
    assert ro["outcome"] == "success" and ro["search_limit_s"] == 3


def test_tiny_model_agentic_through_an_openai_endpoint(tmp_path: Path, tiny_model: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from veribatch.inference.hf import HFEngine
    from veribatch.inference.serve_http import EngineServer

    dataset = _export(tmp_path, ("S12",))
    engine = HFEngine(str(tiny_model), batch_size=4)
    server = EngineServer(engine, served_name="tiny").start()
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    try:
        plan, out = _model_run(tmp_path, "openai:tiny", "agentic", dataset)
    finally:
        server.stop()
        engine.close()
    assert [s.name for s in plan.stages] == ["agent", "judge"]
    _, stages = load_run(out.rd.root)
    a = stages["agent"].frame.iloc[0]
    assert (a["status"], a["turns"], a["executions"], a["resubmissions"]) == ("submitted", 2, 1, 0)
    transcript = json.loads((out.rd.root / a["transcript"]).read_text())
    roles = [m["role"] for m in transcript["messages"]]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert "1000000000.0" in transcript["messages"][2]["content"]  # the sandboxed execution's output
    assert transcript["events"][0]["kind"] == "execute" and transcript["events"][0]["verdict"] == "OK"
    j = _judge(out.rd.root).iloc[0]
    assert (j["outcome"], j["reason"], j["turns"], j["agent_status"]) == ("success", "differs", 2, "submitted")
    assert j["generation_time_s"] > 0


def test_tiny_model_with_the_authors_templates(tmp_path: Path, prompts_server: Path,
                                              train_tiny_model) -> None:
    """The default prompts: the authors' templates (served locally, checked by sha256), their
    hash in the run id, the answer in the harness's XML.  The tiny model's chat template is
    trained on one user turn, so the run folds the system prompt into it (`system_role=false`);
    one lesson only, the authors' prompts being long for a model trained in seconds."""
    from veribatch.tasks.refute.prompt import messages

    p = next(i.payload for i in data.load("sample") if i.payload["problem_id"] == tiny.PROBLEM)
    (z_msg,) = messages("zero-shot", p, tiny.options(system_role=False))
    model = train_tiny_model([(z_msg["content"], tiny.XML_ZERO_SHOT)], max_train_s=400.0)
    dataset = _export(tmp_path, ("S12",))
    plan, out = _model_run(tmp_path, f"hf:{model}", "zero-shot", dataset, options=("system_role=false",))
    version = plan.config.versions["prompt"]
    assert version.startswith("authors@c3d9e6f:") and plan.config.options["prompts"] == "authors"
    assert plan.run_id != plan_run("refute", dataset=dataset, model=f"hf:{model}", strategy="zero-shot",
                                   options=[*FAST, "system_role=false", "prompts=veribatch"],
                                   sampling={"max_tokens": tiny.MAX_TOKENS, "temperature": 0.0}).run_id
    _, stages = load_run(out.rd.root)
    assert set(stages["generate"].frame["prompt_version"]) == {version}
    z = _judge(out.rd.root).iloc[0]
    assert (z["outcome"], z["reason"], z["answer_outcome"]) == ("success", "differs", "ok")
    assert z["input_excerpt"] == "999999999999999999\n" and not z["truncated"]
    print(f"authors' templates run: run_id={plan.run_id} prompt={version} outcome={z['outcome']} "
          f"input={z['input_excerpt']!r}")


def test_a_node_without_isolation_records_the_refusal(tmp_path: Path, monkeypatch) -> None:
    """`-o sandbox=bwrap` trusts the nodes to have bubblewrap; one that cannot run it records
    `sandbox_refused` on every attempt instead of running model code unsandboxed."""
    plan = plan_run("refute", limit=2, options=[*FAST, "sandbox=bwrap"])
    fake = Path("/tmp") / f"veribatch-fake-bwrap-{os.getpid()}"  # executable by the dropped uid
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("VERIBATCH_BWRAP", str(fake))  # inherited by the shard's worker process
    try:
        out = launch_run(plan, tmp_path / "run", ExecChoice("local", workers=1), progress=False)
    finally:
        fake.unlink()
    assert out.ok, out
    j = _judge(out.rd.root)
    assert len(j) == 4 and set(j["reason"]) == {"sandbox_refused"} and set(j["outcome"]) == {"error"}
    assert "No permissions to create new namespace" in j["detail"].iloc[0]
