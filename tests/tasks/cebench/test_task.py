"""Planning CE-Bench runs: build vs evaluate, what is refused (and how it is said), the
stages' regress declarations, the CLI's subcommands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from veribatch.launch.plan import PlanError
from veribatch.launch.run_control import plan_run
from veribatch.tasks.base import DatasetError, UnknownNameError
from veribatch.verifiers import cfront


def test_the_default_plans_a_build_of_the_sample() -> None:
    plan = plan_run("cebench")
    assert plan.config.dataset == "sample" and plan.config.options["mode"] == "build"
    assert [s.name for s in plan.stages] == ["collect", "label"] and len(plan.instances) == 7
    collect, label = plan.stages
    assert (label.needs, label.verdict_column, label.time_column, label.time_limit_column) == \
        (("collect",), "label", "verifier_time_s", "budget_s")
    assert label.record_key == ("kind", "ce_id") and collect.verdict_column == "status"
    assert plan.config.verifier == "z3" and plan.config.verifier_version.startswith("veribatch-z3c/")
    assert plan.config.versions["collection"].startswith("cebench-collect-v3/inductive=lam4inv/P=exact/")
    assert plan.config.options["budget_s"] == 100.0
    # a changed budget or rlimit is a different build
    assert plan_run("cebench", options=["budget_s=10"]).run_id != plan.run_id
    assert plan_run("cebench", options=["solver_rlimit=1000"]).run_id != plan.run_id
    # so is each construction option, and the collection version names it
    other = plan_run("cebench", options=["inductive_rule=consecution", "precondition=lam4inv",
                                         "omt_variables=formula"])
    assert other.run_id != plan.run_id
    assert "/inductive=consecution/P=lam4inv/vars=formula/" in other.config.versions["collection"]
    assert plan_run("cebench", options=["omt_variables=invariant"]).run_id != plan.run_id
    with pytest.raises(ValueError, match="known rules are lam4inv, consecution"):
        plan_run("cebench", options=["inductive_rule=first-failure"])
    with pytest.raises(ValueError, match="known readings are exact, lam4inv"):
        plan_run("cebench", options=["precondition=regex"])
    with pytest.raises(ValueError, match="known choices are visible, invariant, formula"):
        plan_run("cebench", options=["omt_variables=some"])


def test_what_is_refused(lam4inv_root: Path, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")  # a model folder (checked at plan time) ...
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ValueError, match="build it first"):
        plan_run("cebench", model=f"hf:{tmp_path}")  # ... but the dataset is a source
    with pytest.raises(ValueError, match="evaluation runs"):
        plan_run("cebench", strategy="cot")
    with pytest.raises(PlanError, match="unknown strategy 'few-shot'.*zero-shot, one-shot, cot"):
        plan_run("cebench", strategy="few-shot")
    with pytest.raises(UnknownNameError, match="unknown dataset 'lam5inv'"):
        plan_run("cebench", dataset="lam5inv")
    with pytest.raises(DatasetError, match="not a LaM4Inv folder"):
        plan_run("cebench", dataset=str(tmp_path))
    with pytest.raises(DatasetError, match="no such folder"):
        plan_run("cebench", dataset=str(tmp_path / "missing"))
    plan = plan_run("cebench", dataset=f"lam4inv:{lam4inv_root}", limit=3, shards=3)
    assert [i.id for i in plan.instances] == ["cebench/lam4inv/1.c", "cebench/lam4inv/2.c", "cebench/lam4inv/3.c"]


def test_doubly_parenthesised_expressions_parse() -> None:
    # LaM4Inv's invariants are full of them; the cpp-less preprocessor once cut them out
    # as if they were __attribute__((...)) argument lists.
    assert cfront.to_source(cfront.parse_expression("((y >= 0)) && ((x >= y))")) == "(y >= 0) && (x >= y)"
    ast = cfront.parse("extern void f(void) __attribute__((__nothrow__)); int main() { return ((1)); }",
                       use_cpp=False)
    assert "__attribute__" not in cfront.to_source(ast) and "return 1;" in cfront.to_source(ast)


def test_cli_has_the_subcommands() -> None:
    out = subprocess.run([sys.executable, "-m", "veribatch", "cebench", "--help"], capture_output=True, text=True,
                         timeout=120, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin",
                                           "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
    assert out.returncode == 0, out.stderr
    for cmd in ("build", "card", "compare"):
        assert cmd in out.stdout
