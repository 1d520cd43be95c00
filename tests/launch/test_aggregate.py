"""aggregate/: merging shard records with coverage, the generic summary, and rendering."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest

from tests.support.plugins import installed
from veribatch import registry
from veribatch.aggregate.build import build
from veribatch.aggregate.records import load_stage
from veribatch.aggregate.render import to_html, to_latex, to_markdown, write_table
from veribatch.aggregate.table import Table
from veribatch.launch.manifest import create_or_reuse
from veribatch.launch.run_control import plan_run
from veribatch.launch.shard_loop import run_shard
from veribatch.tasks.base import Instance, InstanceResult, RunConfig, Stage, Task


class FakeTask(Task):
    """A test-only task without an `aggregate.faketask` module: two records' worth per shard."""

    name = "faketask"
    default_dataset = "six"

    def datasets(self) -> dict[str, str]:
        return {"six": "6 instances"}

    def load(self, dataset: str, *, limit: int | None = None) -> list[Instance]:
        return [Instance(f"fake/{i}", self.name, "six", {"i": i}) for i in range(6)]

    def dataset_hash(self, dataset: str) -> str:
        return "1" * 64

    def stages(self, config: RunConfig) -> list[Stage]:
        def solve(instances, ctx):
            for inst in instances:
                yield InstanceResult(inst.id, [{"status": ["TRUE", "FALSE"][inst.payload["i"] % 2]}])

        return [Stage("solve", "cpu", solve)]


@pytest.fixture(autouse=True)
def _installed() -> Iterator[None]:
    with installed(registry.TASKS, FakeTask.name, FakeTask):
        yield


def fake_run(root, shards_done, shards=3):
    """A real run directory of `faketask` (planned by launch), with only `shards_done` run."""
    rd, _ = create_or_reuse(plan_run("faketask", shards=shards), root)
    for k in shards_done:
        run_shard(rd.root, "solve", k, fsync=False)
    return [f"fake/{i}" for i in range(6)]


def test_coverage_counts_only_verified_shards(tmp_path):
    fake_run(tmp_path, shards_done=[0, 2])
    # shard 2's file is damaged after its DONE was written: it must count as missing
    (tmp_path / "shards/solve/2/records.parquet").write_bytes(b"PAR1 not really PAR1")
    sr = load_stage(tmp_path, "solve")
    assert sr.missing_shards == [1, 2]
    assert sr.covered == 2 and sr.missing == 4
    assert list(sr.frame["instance_id"]) == ["fake/0", "fake/1"]


def test_generic_summary_for_a_task_without_aggregate_module(tmp_path):
    fake_run(tmp_path, shards_done=[0, 1])
    res = build(tmp_path, ("md", "csv", "tex", "html"))
    assert [t.key for t in res.tables] == ["summary_faketask"]
    row = pd.read_csv(tmp_path / "tables/summary_faketask.csv").iloc[0]
    assert (row["covered"], row["missing"], row["shards_missing"]) == (4, 2, 1)
    assert row["status=TRUE"] == 2 and row["status=FALSE"] == 2
    assert {p.suffix for p in res.paths} == {".md", ".csv", ".tex", ".html", ".json"}  # + table sidecar
    assert "| solve | 3 | 1 | 4 | 2 | 4 |" in res.markdown


def test_renderers_escape_what_their_format_needs():
    t = Table(key="t1", title="A & B", frame=pd.DataFrame({"x_y": ["a|b", "<i>"], "n": [1.23456, None]}),
              caption="c")
    md = to_markdown(t)
    assert "a\\|b" in md and "1.235" in md
    tex = to_latex(t)
    assert r"x\_y" in tex and r"A \& B" in tex and r"\label{tab:t1}" in tex
    assert "&lt;i&gt;" in to_html(t)


def test_unknown_format_is_an_error(tmp_path):
    t = Table(key="t", title="t", frame=pd.DataFrame({"a": [1]}))
    with pytest.raises(ValueError, match="unknown table format.*'pdf'"):
        write_table(t, tmp_path, ("pdf",))
