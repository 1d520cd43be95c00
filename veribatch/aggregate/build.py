"""`build(run_dir, formats)`: manifest + shard records → tables/ (md, csv, tex, html).

The caller passes the task's `build_tables(run_dir, manifest, stages)` (its `tables`
module, which returns `Table`s); a task without one gets a generic per-stage summary, so
every run — even of a brand-new task — ends with a table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from veribatch.rundir.completeness import Completeness
from veribatch.rundir.manifest import Manifest

from .records import StageRecords, load_run
from .render import to_markdown, write_table
from .table import Metric, Table


@dataclass
class BuildResult:
    tables: list[Table] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)
    markdown: str = ""


def summary_table(manifest: Manifest, stages: dict[str, StageRecords]) -> Table:
    """Per stage: coverage, records, and the distribution of a `status` column if any."""
    rows = []
    for name, sr in stages.items():
        row = {"stage": name, "shards": manifest.shards,
               "shards_missing": len(sr.missing_shards), "covered": sr.covered,
               "missing": sr.missing, "records": len(sr.frame)}
        if "status" in sr.frame.columns:
            for status, n in sr.frame["status"].value_counts(dropna=False).items():
                row[f"status={status}"] = int(n)
        rows.append(row)
    return Table(key=f"summary_{manifest.task}",
                 title=f"Run {manifest.run_id}: records per stage",
                 frame=pd.DataFrame(rows).fillna(0), index=("stage",),
                 metrics={"covered": Metric("count"),
                          "missing": Metric("count", higher_is_better=False)},
                 caption="covered/missing: instances with/without records in complete shards.")


TablesFn = Callable[[Path, Manifest, dict[str, pd.DataFrame]], Iterable[Table]]


def build(run_dir: Path | str, formats: tuple[str, ...] = ("md", "csv"),
          completeness: Completeness | None = None,
          tables_fn: TablesFn | None = None) -> BuildResult:
    """`completeness`: the shards' completeness when the caller has checked it already;
    `tables_fn`: the task's `build_tables`, None for the summary alone."""
    run_dir = Path(run_dir)
    manifest, stages = load_run(run_dir, completeness)
    tables = [summary_table(manifest, stages)]
    if tables_fn is not None:
        frames = {name: sr.frame for name, sr in stages.items()}
        tables += list(tables_fn(run_dir, manifest, frames))
    out = BuildResult(tables=tables)
    for t in tables:
        out.paths += write_table(t, run_dir / "tables", formats)
    out.markdown = "\n".join(to_markdown(t) for t in tables)
    return out
