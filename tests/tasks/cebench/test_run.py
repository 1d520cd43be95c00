"""CE-Bench end to end through `launch`: the no-model default builds the shipped sample and
prints the card and reference rows; labels are sound (replayed traces, re-checked proofs);
the built dataset is versioned and evaluated — reference rows, and the tiny real Qwen2
model (`hf:`), whose answers may be junk but whose parsing outcomes are all recorded."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from tests.support import cli
from veribatch.aggregate.records import load_run
from veribatch.launch.run_control import ExecChoice, launch_run, plan_run
from veribatch.tasks.base import DatasetError
from veribatch.tasks.cebench import dataset as ds
from veribatch.tasks.cebench.answer import OUTCOMES
from veribatch.tasks.cebench.dataset import version_of
from veribatch.tasks.cebench.prompt import user_prompt

pytestmark = pytest.mark.slow


_launch = functools.partial(cli.launch, timeout=900)  # `launch ...` in a fresh process


def _frames(run_dir: Path) -> dict[str, pd.DataFrame]:
    _, stages = load_run(run_dir)
    return {k: v.frame for k, v in stages.items()}


@pytest.fixture(scope="module")
def sample_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """`launch cebench` with nothing else (as `make run`-style users type it)."""
    runs = tmp_path_factory.mktemp("cebench-runs")
    r = _launch("cebench", "--runs-dir", str(runs), "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    (rd,) = [p for p in runs.iterdir() if (p / "manifest.json").is_file()]
    shown = _launch("aggregate", str(rd))
    assert shown.returncode == 0, shown.stderr
    return rd, shown.stdout


def test_default_builds_the_sample_and_prints_card_and_reference_rows(sample_build: tuple[Path, str]) -> None:
    rd, shown = sample_build
    for title in ("Figure 2", "Figure 3", "Table 1", "Named skips", "RQ1", "always-GENUINE", "always-SPURIOUS"):
        assert title in shown, title
    card = ds.read_card(rd / "dataset")
    assert card["complete"] and card["verifier"] == "z3" and card["budget_s"] == 100.0
    assert card["programs"]["files"] == 7 and card["programs"]["by_status"]["skipped"] == 2
    assert card["version"] == version_of(card["content_sha256"])
    kinds = card["skips"]["by_kind"]
    for kind in ("no_log", "program_unsupported", "log_unparsable", "candidate_not_c", "no_final_invariant"):
        assert kinds.get(kind), (kind, kinds)
    bad_line = next(s for s in card["skips"]["list"] if s["kind"] == "log_unparsable")
    assert (bad_line["file"], bad_line["line"]) == ("5.txt", 9)
    rows = ds.read_rows(rd / "dataset")
    counts = card["counts"]
    assert sum(counts[c]["total"] for c in counts) == len(rows) > 15
    assert {r["category"] for r in rows} == {"Inductive", "UNSAT_Pre", "SAT_Pre"}
    assert all(r["label"] == "GENUINE" for r in rows if r["category"] == "SAT_Pre")  # reachable by construction
    fig2 = pd.read_csv(rd / "tables" / "cebench_fig2_categories.csv").set_index("category")
    assert fig2.loc["all", "total"] == len(rows) and fig2.loc["Inductive", "paper_total"] == 615
    # the card names who labelled it first, and the construction options that chose the states
    md = (rd / "dataset" / "card.md").read_text().splitlines()
    assert md[0].startswith(f"# CE-Bench dataset {card['version']}, labelled by z3 ")
    assert "NOT the paper's Ultimate Automizer" in md[0]
    assert (card["inductive_rule"], card["precondition"]) == ("lam4inv", "exact")
    assert any(line.startswith("- construction: inductive rule `lam4inv`") and "OMT objectives `visible`" in line for line in md)
    # like with like: the paper's "16 programs with none" is after UNKNOWN states are removed
    labelled = {r["program"] for r in rows if r["label"] != "UNKNOWN"}
    collected = {r["program"] for r in rows}
    assert card["programs"]["without_counterexamples"] == card["programs"]["files"] - len(labelled)
    assert card["programs"]["without_counterexamples_before_labelling"] == card["programs"]["files"] - len(collected)


def test_labels_come_with_their_evidence(sample_build: tuple[Path, str]) -> None:
    from veribatch.tasks.cebench.counterexamples import LOOP
    from veribatch.verifiers import cfront
    from veribatch.verifiers.z3c.api import check_candidate
    from veribatch.verifiers.z3c.replay import replay

    rd, _ = sample_build
    rows = ds.read_rows(rd / "dataset")
    genuine = [r for r in rows if r["label"] == "GENUINE"]
    spurious = [r for r in rows if r["label"] == "SPURIOUS"]
    assert genuine and spurious
    for r in genuine:  # a concrete input sequence that gcc runs into reach_error, again here
        assert r["evidence"] == "replayed-trace" and r["verifier_status"] == "FALSE"
        trace = json.loads(r["evidence_json"])
        again = replay(cfront.parse(r["instrumented"]), trace["inputs"])
        assert again.confirmed, (r["uid"], again.detail)
    rechecked = 0
    for r in spurious:  # a proof: its loop invariants re-checked (inductive and safe) here
        assert r["verifier_status"] == "TRUE" and r["evidence"].startswith("checked-proof:")
        proof = json.loads(r["evidence_json"])
        for inv in proof["invariants"]:
            assert inv["loop"] == LOOP
            assert check_candidate(r["instrumented"], inv["loop"], inv["invariant"], 5000).ok, (r["uid"], inv)
            rechecked += 1
    assert rechecked >= 1


def test_dataset_version_and_tampering(sample_build: tuple[Path, str], tmp_path: Path) -> None:
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    rd, _ = sample_build
    card = ds.read_card(rd / "dataset")
    # re-aggregating the same records gives the same content hash (timings are not content)
    assert _launch("aggregate", str(rd)).returncode == 0
    assert ds.read_card(rd / "dataset")["content_sha256"] == card["content_sha256"]
    copy = tmp_path / "copy"
    shutil.copytree(rd / "dataset", copy)
    table = pq.read_table(copy / ds.FILE)
    labels = table.column("label").to_pylist()
    flipped = ["SPURIOUS" if x == "GENUINE" else x for x in labels]
    pq.write_table(table.set_column(table.schema.get_field_index("label"), "label", pa.array(flipped)), copy / ds.FILE)
    with pytest.raises(DatasetError, match="content hash"):
        ds.read_rows(copy)
    (copy / ds.CARD).write_text(json.dumps({**card, "complete": False, "missing_programs": 2}))
    with pytest.raises(DatasetError, match="incomplete"):
        ds.read_card(copy)


def test_evaluation_reference_rows_and_run_identity(sample_build: tuple[Path, str], tmp_path: Path) -> None:
    rd, _ = sample_build
    card = ds.read_card(rd / "dataset")
    plan = plan_run("cebench", dataset=str(rd))
    assert [s.name for s in plan.stages] == ["judge"]
    assert plan.config.dataset_hash == card["content_sha256"] and plan.config.options["mode"] == "evaluate"
    labelled = card["totals"]["after_labelling"]
    assert len(plan.instances) == labelled
    assert plan_run("cebench", dataset=str(rd / "dataset")).run_id == plan.run_id  # same content, same id
    out = launch_run(plan, tmp_path / "ref", ExecChoice("local", workers=1), progress=False)
    assert out.ok
    judge = _frames(out.rd.root)["judge"]
    assert len(judge) == 3 * labelled and set(judge["arm"]) == {"verifier", "always-GENUINE", "always-SPURIOUS"}
    rq1 = pd.read_csv(out.rd.root / "tables" / "cebench_rq1_models.csv").set_index("arm")
    g = card["totals"]["GENUINE"]
    assert rq1.loc["verifier", "correct"] == labelled and rq1.loc["always-GENUINE", "correct"] == g
    assert rq1.loc["always-SPURIOUS", "correct"] == labelled - g


@pytest.fixture(scope="module")
def tiny_cebench_model(sample_build: tuple[Path, str], train_tiny_model: Callable[..., Path]) -> Path:
    """A tiny Qwen2 trained on two zero-shot prompts of the sample (answers GENUINE and a
    SPURIOUS answer line); on the other prompts it says whatever it says."""
    rows = [r for r in ds.read_rows(sample_build[0] / "dataset") if r["label"] != "UNKNOWN"]
    pairs = []
    for r, answer in ((rows[0], "GENUINE"), (rows[-1], "The state cannot be reached.\nAnswer: SPURIOUS")):
        pairs.append((user_prompt("zero-shot", r["prompt_program"], json.loads(r["state_json"])), answer))
    return train_tiny_model(pairs, max_train_s=120.0)


def test_tiny_model_evaluation_records_every_parsing_outcome(sample_build: tuple[Path, str],
                                                              tiny_cebench_model: Path, tmp_path: Path) -> None:
    rd, _ = sample_build
    plan = plan_run("cebench", dataset=str(rd), model=f"hf:{tiny_cebench_model}", strategy="zero-shot",
                    sampling={"max_tokens": 32})
    assert [s.name for s in plan.stages] == ["generate", "judge"]
    assert plan.config.sampling["temperature"] == 0.0 and set(plan.config.versions) == {"prompt", "parser"}
    other = plan_run("cebench", dataset=str(rd), model=f"hf:{tiny_cebench_model}", strategy="cot",
                     sampling={"max_tokens": 16})
    assert other.run_id != plan.run_id and other.config.versions["prompt"] != plan.config.versions["prompt"]
    out = launch_run(plan, tmp_path / "model", ExecChoice("local", workers=1), progress=False)
    assert out.ok
    frames = _frames(out.rd.root)
    gen, judge = frames["generate"], frames["judge"]
    model = judge[judge["arm"] == "model"].set_index("instance_id")
    assert len(model) == len(plan.instances) and set(model["outcome"]) <= set(OUTCOMES)
    # the per-request generation time of each answer is the engine's own latency for it
    lat = gen.set_index("instance_id")["latency_s"]
    assert (model["time_s"] == lat.reindex(model.index)).all()
    # the two trained prompts are answered as learnt, and parsed (a bare word; an answer line)
    first, last = plan.instances[0].id, plan.instances[-1].id
    assert (model.loc[first, "outcome"], model.loc[first, "predicted"]) == ("ok", "GENUINE")
    assert (model.loc[last, "outcome"], model.loc[last, "predicted"]) == ("ok", "SPURIOUS")
    rq1 = pd.read_csv(out.rd.root / "tables" / "cebench_rq1_models.csv").set_index("arm")
    assert rq1.loc["model", "unparsable"] == int((model["outcome"] != "ok").sum())
    assert rq1.loc["model", "correct"] == int(model["correct"].sum())
    assert {"verifier", "always-GENUINE", "always-SPURIOUS"} <= set(rq1.index)


def test_bench_reports_throughput_of_the_build(sample_build: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[3] / "bench" / "cebench.py"
    spec = importlib.util.spec_from_file_location("bench_cebench", path)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rd, _ = sample_build
    card = ds.read_card(rd / "dataset")
    r = bench.report(rd)
    assert r["labelled"] == card["totals"]["before_labelling"] and r["decided"] == card["totals"]["after_labelling"]
    cpu = r["verifier_cpu_s"]  # printed rounded to 0.1 s: the rate is of the unrounded figure
    assert r["labelled"] / (cpu + 0.05) * 0.999 <= r["labelled_per_cpu_s"] <= r["labelled"] / (cpu - 0.05) * 1.001
    bench.print_reports([r, r])
    printed = capsys.readouterr().out
    assert "labelled_per_cpu_s" in printed and "ratio 2/1" in printed
