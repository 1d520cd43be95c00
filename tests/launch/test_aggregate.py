"""aggregate/: merging shard records with coverage, the generic summary, and rendering."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aggregate.build import build
from aggregate.records import load_stage
from aggregate.render import to_html, to_latex, to_markdown, write_table
from aggregate.table import Table


def fake_run(root, shards_done, shards=3, per_shard=2):
    """A run directory of a task with no aggregate module, written as launch would."""
    ids = [f"fake/{i}" for i in range(shards * per_shard)]
    (root / "instances.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    (root / "manifest.json").write_text(json.dumps({
        "run_id": "faketask-0123456789ab", "shards": shards, "config": {"task": "faketask"},
        "stages": [{"name": "solve"}, {"name": "aggregate", "added_by": "launch"}]}))
    for k in shards_done:
        d = root / "shards" / "solve" / str(k)
        d.mkdir(parents=True)
        mine = ids[k * per_shard:(k + 1) * per_shard]
        pq.write_table(pa.table({"instance_id": mine, "stage": ["solve"] * len(mine),
                                 "shard": [k] * len(mine), "status": ["TRUE", "FALSE"][:len(mine)]}),
                       d / "records.parquet")
        digest = hashlib.sha256((d / "records.parquet").read_bytes()).hexdigest()
        (d / "DONE").write_text(json.dumps({"output_sha256": digest}))
    return ids


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
