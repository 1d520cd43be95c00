"""The run directory's format has one reader and writer, `veribatch.rundir`: no other module
names its files, and the typed manifest reads a planned run's manifest.json as written."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from veribatch.launch.manifest import create_or_reuse
from veribatch.launch.plan import make_config, make_plan
from veribatch.rundir.manifest import Manifest
from veribatch.rundir.paths import RunDirError
from veribatch.tasks.base import get_task


def _plan(shards: int):  # noqa: ANN202
    task = get_task("selftest")
    return make_plan(task, make_config(task, shards=shards))


PACKAGE = Path(__file__).resolve().parents[2] / "veribatch"
FILES = {"manifest.json", "shards.json", "instances.jsonl", "DONE"}


def _names_a_file(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and (
        node.value in FILES or node.value.endswith("/DONE"))


def test_no_module_outside_rundir_names_the_run_directorys_files() -> None:
    """A second parser starts with a second spelling of the file name (docstrings and
    messages aside: an exact file name as a value is how code opens one)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "rundir" in path.relative_to(PACKAGE).parts[:1]:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(PACKAGE)}:{n.lineno}: {n.value!r}"  # type: ignore[attr-defined]
                  for n in ast.walk(tree) if _names_a_file(n)]
    assert not found, "run-directory files named outside veribatch/rundir/:\n" + "\n".join(found)


def test_a_planned_manifest_reads_typed_with_the_task_stages_filtered_once(tmp_path: Path) -> None:
    plan = _plan(2)
    rd, _ = create_or_reuse(plan, tmp_path / "run")
    raw = json.loads(rd.manifest.read_text())
    m = Manifest.read(rd)
    assert (m.run_id, m.identity, m.shards, m.task) == (plan.run_id, raw["identity"], 2, "selftest")
    assert [s.name for s in m.stages][-1] == "aggregate"
    assert [s.name for s in m.task_stages] == [s.name for s in plan.stages]
    assert m.task_stage("aggregate") is None and m.stage("aggregate") is not None
    assert m.raw == raw


@pytest.mark.parametrize("damage", [
    lambda raw: {**raw, "shards": "two"},
    lambda raw: {**raw, "stages": [{"resource": "cpu"}]},
])
def test_a_damaged_manifest_is_an_error_naming_the_file(tmp_path: Path, damage) -> None:
    rd, _ = create_or_reuse(_plan(2), tmp_path / "run")
    rd.manifest.write_text(json.dumps(damage(json.loads(rd.manifest.read_text()))))
    with pytest.raises(RunDirError, match=str(rd.manifest)):
        Manifest.read(rd)
