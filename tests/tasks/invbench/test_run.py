"""InvBench end to end through `launch` (local executor): reference arms on the shipped
sample, and the tiny real Qwen2 model (`hf:`) on 20 easy programs of the shared data."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.support.cli import launch
from veribatch.aggregate.records import load_run
from veribatch.launch.run_control import ExecChoice, launch_run, plan_run
from veribatch.tasks.invbench.decision import decide
from veribatch.tasks.invbench.markers import mark
from veribatch.tasks.invbench.prompt import user_prompt
from veribatch.verifiers.result import Status

pytestmark = pytest.mark.slow

# 20 easy programs the embedded verifier answers within ~1 s each: 11 it proves with
# Spacer (so it reports invariants), 3 unsafe ones, 3 unsafe ones with arrays (BMC on the
# memory model), 2 outside its C subset (structs: UNKNOWN) and one the C front end
# rejects (every stage must record that, not crash): prodbin-ll_unwindbound1_2 lost its
# header comment's `*/` upstream; the front end closes such a comment before the first
# line of code (`cfront.close_lost_comment`), so `_easy20` cuts the copy to the comment.
EASY20 = [
    "bh2017-ex-add_2.c", "cohendiv-ll_unwindbound10_5.c", "cohencu-ll_unwindbound5_1.c", "cohencu_1.c",
    "geo3-ll_valuebound2_1.c", "benchmark24_conjunctive_1.c", "hard2_unwindbound1_1.c",
    "hard-u_unwindbound1_5.c", "ps6-ll_valuebound1_3.c", "benchmark46_disjunctive_1.c",
    "sqrt1-ll_unwindbound50_4.c",
    "ps5-ll_unwindbound1_3.c", "lcm1_unwindbound2_5.c", "trex01-1_1.c",
    "brs2f_1.c", "sll-01-1_9.c", "dll-queue-1_4.c", "s42iff_1.c", "condmf_1.c",
    "prodbin-ll_unwindbound1_2.c",
]


def _easy20(shared_data: Path, tmp_path: Path) -> Path:
    src = shared_data / "invbench" / "Dataset" / "Evaluation"
    dst = tmp_path / "InvBench" / "Dataset" / "Evaluation"
    (dst / "Easy").mkdir(parents=True)
    for f in EASY20:
        shutil.copy(src / "Easy" / f, dst / "Easy" / f)
    broken = dst / "Easy" / "prodbin-ll_unwindbound1_2.c"
    lines = broken.read_text().splitlines(keepends=True)
    broken.write_text("".join(lines[:5]))  # only the comment left open: no C at all
    rows = [r for r in json.loads((src / "timing_easy.json").read_text()) if r["file"] in EASY20]
    (dst / "timing.json").write_text(json.dumps(rows))
    return tmp_path / "InvBench"


def _verify_frame(run_dir: Path) -> tuple[dict, dict[str, pd.DataFrame]]:
    manifest, stages = load_run(run_dir)
    return manifest, {k: v.frame for k, v in stages.items()}


def test_reference_arms_on_the_sample(tmp_path: Path) -> None:
    # timeout_source=budget: the decision queries get the whole budget, not the baseline's
    # own (sub-second) time, so the verifier's invariants are checked to the end.
    plan = plan_run("invbench", options=["budget_s=30", "timeout_source=budget"])
    assert [s.name for s in plan.stages] == ["baseline", "verify"]
    out = launch_run(plan, tmp_path / "run", ExecChoice("local", workers=1), progress=False)
    assert out.ok, out
    _, frames = _verify_frame(out.rd.root)
    base, verify = frames["baseline"], frames["verify"]
    assert len(base) == 12 and set(base["status"]) <= {"TRUE", "FALSE"}
    # the baseline agrees with the sample's measured reference
    assert not base["verdict_conflict"].fillna(False).any()
    inst = verify[verify["kind"] == "instance"]
    assert len(inst) == 12 and set(inst["arm"]) == {"verifier-invariant"}
    assert (inst["generation_time_s"].dropna() == 0).all()
    with_inv = base[base["n_invariants"] > 0]["instance_id"]
    decided = inst[inst["instance_id"].isin(with_inv)]
    # the verifier's own invariants are proved by the verifier (DEC-PROP, TRUE) ...
    assert len(with_inv) >= 6
    assert decided["correct_invariant"].fillna(False).all()
    assert set(decided["decision"]) == {"TRUE"} and set(decided["rule"]) == {"DEC-PROP"}
    assert (decided["timeout_s"] == 30).all() and set(inst["timeout_source"].dropna()) == {"budget"}
    # §5.4: all of a program's invariants are supplied together, as one candidate
    cand = verify[verify["kind"] == "candidate"].set_index("instance_id")
    for iid, n in base.set_index("instance_id").loc[with_inv, "n_invariants"].items():
        assert cand.loc[iid, "n_invariants"] == n and len(cand.loc[[iid]]) == 1
        assert len(cand.loc[iid, "labels"].split(",")) == n  # z3 reports one per loop
    # ... and instances without any (unsafe, or proved by unrolling) are recorded as such
    assert set(inst[~inst["instance_id"].isin(with_inv)]["status"]) == {"no_valid_candidate"}
    tables = {p.name for p in out.aggregate.paths}
    assert {"table2_invbench_sample.md", "table4_verifiers_sample.csv", "solved_baseline_vs_arm_sample.csv"} <= tables
    t2 = pd.read_csv(out.rd.root / "tables" / "table2_invbench_sample.csv")
    assert t2.loc[0, "covered"] == 12 and t2.loc[0, "missing"] == 0
    assert t2.loc[0, "model"] == "verifier-invariant"

    # the InvBench subcommands read the same run directory
    from typer.testing import CliRunner

    from veribatch.launch.cli import app

    cli = CliRunner()
    threshold = float(base["baseline_time_s"].median())
    res = cli.invoke(app, ["invbench", "build-splits", str(out.rd.root), "--threshold-s", str(threshold)])
    assert res.exit_code == 0, res.output
    splits = json.loads((out.rd.root / "tables" / "splits.json").read_text())
    fast = set(base[base["baseline_time_s"] < threshold]["instance_id"])
    assert set(splits["easy"]) == fast and len(splits["easy"]) + len(splits["hard"]) == 12
    res = cli.invoke(app, ["invbench", "compare", str(out.rd.root), str(out.rd.root), "--out", str(tmp_path / "cmp")])
    assert res.exit_code == 0, res.output
    cmp = pd.read_csv(tmp_path / "cmp" / "table6_compare.csv")
    assert len(cmp) == 2 and (cmp["covered"] == 12).all()


# One answer (wrapped in a code fence, which the parser must peel), trained on 4 of the
# prompts: a tiny model learns that in ~10 s of CPU, while 20 long prompts with 20
# different answers would need minutes.  The parser's and validator's other outcomes
# are covered by their own tests.
ANSWER = "```\nlocation: INVARIANT_MARKER_1\ninvariant: 0 <= 1\n```"
TRAINED = ["bh2017-ex-add_2.c", "trex01-1_1.c", "cohencu_1.c", "s42iff_1.c"]
CANDIDATE_STATUSES = {"verified", "killed", "unparsable", "engine_error", "duplicate", "instrumentation_error",
                      "invalid_unparsable", "invalid_side_effect", "invalid_unknown_variable",
                      "invalid_non_boolean", "invalid_unsupported"}


@pytest.fixture(scope="module")
def tiny20(shared_data: Path, tmp_path_factory: pytest.TempPathFactory, train_tiny_model) -> tuple[str, Path]:
    """(dataset path of the 20 easy programs, tiny Qwen2 model folder that answers ANSWER)."""
    tmp = tmp_path_factory.mktemp("tiny20")
    root = _easy20(shared_data, tmp)
    easy = root / "Dataset" / "Evaluation" / "Easy"
    pairs = [(user_prompt(mark((easy / f).read_text(), filename=f).text), ANSWER) for f in TRAINED]
    # ~40 steps; the generous cap only matters on a loaded machine (training stops once learned)
    return str(easy), train_tiny_model(pairs, max_train_s=150.0)


def test_tiny_model_on_20_easy_programs(tiny20: tuple[str, Path], tmp_path: Path) -> None:
    dataset, model = tiny20
    # timeout_source=budget: with the learnt invariant `0 <= 1`, d_b is as hard as the baseline,
    # so under the default (the baseline's own time) whether it decides is a coin toss
    plan = plan_run("invbench", dataset=dataset, model=f"hf:{model}",
                    options=["budget_s=10", "timeout_source=budget"], sampling={"max_tokens": 48})
    assert [s.name for s in plan.stages] == ["baseline", "generate", "verify"]
    assert len(plan.instances) == 20
    out = launch_run(plan, tmp_path / "run", ExecChoice("local", workers=1), progress=False)
    assert out.ok, out
    _, frames = _verify_frame(out.rd.root)
    gen, verify = frames["generate"], frames["verify"]
    assert gen["instance_id"].nunique() == 20
    assert (gen["status"] == "program_parse_error").sum() == 1
    inst = verify[verify["kind"] == "instance"]
    assert inst["instance_id"].nunique() == 20 and set(inst["arm"]) == {"model"}
    assert (inst["status"] == "program_parse_error").sum() == 1
    cand = verify[verify["kind"] == "candidate"].set_index("instance_id")
    assert len(cand) == 19 and set(cand["status"]) <= CANDIDATE_STATUSES
    # the learned answer went all the way: parsed, validated, both queries run
    trained = cand.loc[[f"invbench/easy/{f}" for f in TRAINED]]
    assert set(trained["canonical"]) == {"0 <= 1"} and set(trained["status"]) == {"verified"}
    ran = inst[inst["status"].isin(["decided", "undecided"])]
    assert len(ran) >= len(TRAINED)
    cand = cand[cand["status"] == "verified"]
    assert cand["d_a_status"].notna().all() and cand["d_b_status"].notna().all()
    # generation time is real and part of every instance's total time
    assert ((ran["total_time_s"] - ran["decision_time_s"] - ran["generation_time_s"]).abs() < 1e-6).all()
    assert (ran["generation_time_s"] > 0).all()
    # ... and it is the instance's own request's time (inference's per-request latency_s), not
    # its engine batch's: the §4 speedup is baseline / (own generation + decision)
    own = gen.groupby("instance_id")["latency_s"].max()
    assert (ran.set_index("instance_id")["generation_time_s"] == own.loc[ran["instance_id"]]).all()
    sped = inst[inst["speedup"].notna()]
    assert len(sped) >= 1
    assert (sped["speedup"] == sped["baseline_time_s"] / (sped["generation_time_s"] + sped["decision_time_s"])).all()
    assert set(inst.loc[inst["speedup"].isna() & inst["decision"].isin(["TRUE", "FALSE"]), "baseline_solved"]) <= {False}
    # each instance's decision follows §3.2 from its candidate's two verdicts
    by_id = inst.set_index("instance_id")
    for iid, c in cand.iterrows():
        want = decide(None if c["d_a_status"] == "CANCELLED" else Status(c["d_a_status"]), Status(c["d_b_status"]))
        assert want is not None and by_id.loc[iid, "decision"] == want[0], (iid, c.to_dict())
    t2 = pd.read_csv(out.rd.root / "tables" / "table2_invbench_easy.csv")
    assert t2.loc[0, "covered"] == 20 and t2.loc[0, "missing"] == 0
    assert t2.loc[0, "model"] == f"hf:{model}"

    # `replay:RUN` re-scores the same generations without the model: it reads the completion
    # columns of the records (the completion cache is deleted first, so nothing else can answer)
    shutil.rmtree(out.rd.root / "cache")
    replay = plan_run("invbench", dataset=dataset, model=f"replay:{out.rd.root}",
                      options=["budget_s=10"], sampling={"max_tokens": 48})
    again = launch_run(replay, tmp_path / "replay", ExecChoice("local", workers=1), progress=False)
    assert again.ok, again
    _, replayed = _verify_frame(again.rd.root)
    key = ["instance_id", "sample_index"]
    first = gen[gen["status"] == "ok"].set_index(key).sort_index()
    second = replayed["generate"][replayed["generate"]["status"] == "ok"].set_index(key).sort_index()
    assert len(first) == 19
    assert second["completion_text"].equals(first["completion_text"])
    assert set(second["engine"]) == {"hf"}  # the engine that really generated the text
    assert second["latency_s"].equals(first["latency_s"])  # generation time stays the original




@pytest.mark.slurm
def test_tiny_model_and_reference_arms_on_slurm(slurm_cluster: dict[str, str], tiny20: tuple[str, Path], tmp_path: Path) -> None:
    dataset, model = tiny20
    common = ["--dataset", dataset, "-o", "budget_s=10", "--shards", "2", "--executor", "slurm",
              "--profile", "local-test"]
    runs = {"model": tmp_path / "model", "reference": tmp_path / "reference"}
    # the CI cluster's gpu partition has no GPUs (its profile says gpus_per_task: 0):
    # the tiny model runs there on CPU
    r = launch("invbench", *common, "--model", f"hf:{model}", "--max-tokens", "48",
                "--runs-dir", str(runs["model"]))
    assert r.returncode == 0, r.stdout + r.stderr
    r = launch("invbench", *common, "--runs-dir", str(runs["reference"]))
    assert r.returncode == 0, r.stdout + r.stderr
    for arm, base in runs.items():
        (rd,) = [p for p in base.iterdir() if (p / "manifest.json").is_file()]
        deadline = time.monotonic() + 600
        while not (rd / "aggregate.json").is_file() and time.monotonic() < deadline:
            time.sleep(2)
        agg = json.loads((rd / "aggregate.json").read_text())
        assert agg["status"] == "complete", agg
        shown = launch("aggregate", str(rd))
        assert shown.returncode == 0, shown.stderr
        assert "Table 2" in shown.stdout and "Table 4: solved instances per verifier" in shown.stdout
        t2 = pd.read_csv(rd / "tables" / "table2_invbench_easy.csv")
        assert t2.loc[0, "covered"] == 20 and t2.loc[0, "missing"] == 0
        assert t2.loc[0, "arm"] == ("model" if arm == "model" else "verifier-invariant")


def test_the_speedup_numerator_comes_from_the_timeout_source() -> None:
    """timeout_source=reference cuts the queries at the published UAutomizer time; the speedup's
    baseline time is then that time too, not this run's own baseline (another machine's)."""
    from veribatch.tasks.base import Instance, RunConfig
    from veribatch.tasks.invbench.stages import _decision_timeout, _speedup_numerator

    inst = Instance(id="invbench/easy/p.c", task="invbench", split="easy", payload={}, meta={"reference_time_s": 12.0})
    solved, unsolved = {"solved": True, "baseline_time_s": 3.0}, {"solved": False, "baseline_time_s": 600.0}
    got = {}
    for source in ("baseline", "reference", "budget"):
        config = RunConfig(task="invbench", dataset="easy", dataset_hash="x", options={"budget_s": 600.0, "timeout_source": source})
        for name, base in (("solved", solved), ("unsolved", unsolved)):
            timeout, label = _decision_timeout(config, base, inst)
            got[source, name] = (timeout, label, *_speedup_numerator(label, base, inst))
    assert got["reference", "solved"] == (12.0, "reference", 12.0, "reference")
    assert got["reference", "unsolved"] == (12.0, "reference", 12.0, "reference")
    assert got["baseline", "solved"] == (3.0, "baseline", 3.0, "baseline")
    assert got["baseline", "unsolved"] == (600.0, "budget-fallback", None, "baseline")
    assert got["budget", "solved"] == (600.0, "budget", 3.0, "baseline")
