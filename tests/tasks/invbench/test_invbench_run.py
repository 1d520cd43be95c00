"""InvBench end to end through `launch` (local executor): reference arms on the shipped
sample, and the tiny real Qwen2 model (`hf:`) on 20 easy programs of the shared data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from aggregate.records import load_run
from launch.api import ExecChoice, launch_run, plan_run
from tasks.invbench.markers import mark
from tasks.invbench.prompt import user_prompt

pytestmark = pytest.mark.slow

# 20 easy programs the embedded verifier answers within ~1 s each: 11 it proves with
# Spacer (so it reports invariants), 3 unsafe ones, 5 outside its C subset (pointers,
# arrays: UNKNOWN) and one whose comment is unterminated upstream (the C front end
# rejects it: every stage must record that, not crash).
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
    rows = [r for r in json.loads((src / "timing_easy.json").read_text()) if r["file"] in EASY20]
    (dst / "timing.json").write_text(json.dumps(rows))
    return tmp_path / "InvBench"


def _verify_frame(run_dir: Path) -> tuple[dict, dict[str, pd.DataFrame]]:
    manifest, stages = load_run(run_dir)
    return manifest, {k: v.frame for k, v in stages.items()}


def test_reference_arms_on_the_sample(tmp_path: Path) -> None:
    plan = plan_run("invbench", options=["budget_s=30"])
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
    assert (decided["correct_invariant"].fillna(False)).sum() >= len(with_inv) - 1
    # ... and instances without any (unsafe, or proved by unrolling) are recorded as such
    assert set(inst[~inst["instance_id"].isin(with_inv)]["status"]) == {"no_valid_candidate"}
    tables = {p.name for p in out.aggregate.paths}
    assert "table2_invbench_sample.md" in tables and "table4_solved_sample.csv" in tables
    t2 = pd.read_csv(out.rd.root / "tables" / "table2_invbench_sample.csv")
    assert t2.loc[0, "covered"] == 12 and t2.loc[0, "missing"] == 0
    assert t2.loc[0, "model"] == "verifier-invariant"


ANSWERS = [
    "location: INVARIANT_MARKER_1\ninvariant: 1",                 # trivially true
    "```\nlocation: INVARIANT_MARKER_1\ninvariant: 0 == 1\n```",  # false at the first head
    "I am not sure about this program.",                         # unparsable
    "location: INVARIANT_MARKER_1\ninvariant: counter++ > 0",     # side effect
]
EXPECTED_STATUS = ["verified|killed", "verified|killed", "unparsable", "invalid_side_effect"]


def test_tiny_model_on_20_easy_programs(shared_data: Path, tmp_path: Path) -> None:
    from inference.tiny_model import MANIFEST, cached_tiny_qwen2

    root = _easy20(shared_data, tmp_path)
    dataset = str(root / "Dataset" / "Evaluation" / "Easy")
    pairs, want = [], {}
    for i, f in enumerate(sorted(EASY20)):
        text = (root / "Dataset" / "Evaluation" / "Easy" / f).read_text()
        try:
            marked = mark(text, filename=f)
        except ValueError:
            continue  # the front end rejects it; no prompt is ever built for it
        pairs.append((user_prompt(marked.text), ANSWERS[i % 4]))
        want[f"invbench/easy/{f}"] = EXPECTED_STATUS[i % 4]
    model = cached_tiny_qwen2(pairs, root=tmp_path.parent / "tiny-models")
    learned = json.loads((model / MANIFEST).read_text())

    plan = plan_run("invbench", dataset=dataset, model=f"hf:{model}", options=["budget_s=10"])
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
    assert len(cand) == 19
    if learned.get("all_pairs_learned"):
        for iid, pattern in want.items():
            assert cand.loc[iid, "status"] in pattern.split("|"), (iid, cand.loc[iid].to_dict())
    # generation time is real and included in every decided instance's total time
    dec = inst[inst["status"] == "decided"]
    assert ((dec["total_time_s"] - dec["decision_time_s"] - dec["generation_time_s"]).abs() < 1e-6).all()
    assert (gen[gen["status"] == "ok"]["generation_time_s"] > 0).all()
    t2 = pd.read_csv(out.rd.root / "tables" / "table2_invbench_easy.csv")
    assert t2.loc[0, "covered"] == 20 and t2.loc[0, "missing"] == 0
    assert t2.loc[0, "model"] == f"hf:{model}"
