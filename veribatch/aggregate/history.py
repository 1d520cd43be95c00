"""The nightly history: one parquet file, one row per night × suite entry × table row × metric.

`launch nightly` appends a night's figures once its runs are complete (replacing that
night's rows of the entry, so running it twice a night leaves one copy); `launch report
--history` draws trends from it.  Schema (docs/nightly.md):

| column | type | meaning |
|---|---|---|
| suite | string | suite name (the YAML file's stem) |
| night | string | night label, ISO date by default (sorts in time order) |
| entry | string | the suite entry's `name` |
| run_id, task, dataset, dataset_hash, model, code_version | string | from the run's manifest |
| recorded | string | UTC time the row was written |
| reference_night | string | the night compared with ("" on the first night) |
| regress_exit | int64 | 0 no regression, 1 regressions, 2 not comparable, -1 no reference |
| regressions | int64 | regressions found against the reference (records + cells) |
| table, row, metric | string | table key, JSON of the row's index values, metric column |
| kind, unit | string | the metric's declaration (`Metric.kind`, `Metric.unit`) |
| sampled | bool | the metric comes from sampled generations |
| value | float64 | the cell (null when empty) |
| n | float64 | the row's `Metric.n_column` value (instances behind the cell) |

Each entry also gets one row with table ``(run)``, metric ``regressions``.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from veribatch.rundir.manifest import Manifest

from .table import Table

SCHEMA = pa.schema([
    ("suite", pa.string()), ("night", pa.string()), ("entry", pa.string()),
    ("run_id", pa.string()), ("task", pa.string()), ("dataset", pa.string()),
    ("dataset_hash", pa.string()), ("model", pa.string()), ("code_version", pa.string()),
    ("recorded", pa.string()), ("reference_night", pa.string()), ("regress_exit", pa.int64()),
    ("regressions", pa.int64()), ("table", pa.string()), ("row", pa.string()),
    ("metric", pa.string()), ("kind", pa.string()), ("unit", pa.string()),
    ("sampled", pa.bool_()), ("value", pa.float64()), ("n", pa.float64()),
])
RUN_TABLE = "(run)"


def _float(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _row_label(row: Mapping[str, Any], index: tuple[str, ...], pos: int) -> str:
    from .render import json_value

    values = {c: json_value(row.get(c)) for c in index} if index else {"row": pos}
    return json.dumps(values, default=str)  # index order: the label reads like the row


def night_rows(*, suite: str, night: str, entry: str, manifest: Manifest,
               tables: list[Table], reference_night: str, regress_exit: int,
               regressions: int) -> pd.DataFrame:
    config = manifest.config
    common = {
        "suite": suite, "night": night, "entry": entry, "run_id": manifest.run_id,
        "task": str(config.get("task", "")), "dataset": str(config.get("dataset", "")),
        "dataset_hash": str(config.get("dataset_hash", "")), "model": str(config.get("model") or ""),
        "code_version": manifest.code_version or "",
        "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "reference_night": reference_night, "regress_exit": regress_exit, "regressions": regressions,
    }
    rows = [{**common, "table": RUN_TABLE, "row": "{}", "metric": "regressions", "kind": "count",
             "unit": "", "sampled": False, "value": float(regressions), "n": None}]
    for t in tables:
        for pos, rec in enumerate(t.frame.to_dict("records")):
            label = _row_label(rec, t.index, pos)
            for col, m in t.metrics.items():
                if col not in rec:
                    continue
                rows.append({**common, "table": t.key, "row": label, "metric": col, "kind": m.kind,
                             "unit": m.unit, "sampled": m.sampled, "value": _float(rec.get(col)),
                             "n": _float(rec.get(m.n_column))})
    return pd.DataFrame(rows, columns=SCHEMA.names)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read_history(path: Path) -> pd.DataFrame:
    """The whole history (empty, with the schema's columns, when there is none yet)."""
    if not Path(path).is_file():
        return SCHEMA.empty_table().to_pandas()
    try:
        return pq.read_table(path, schema=SCHEMA).to_pandas()
    except (OSError, pa.ArrowException) as e:
        raise ValueError(f"{path}: unreadable history parquet ({e})") from None


def append_night(path: Path, rows: pd.DataFrame) -> int:
    """Replace the rows of each (suite, night, entry) in `rows`, keep every other row; atomic
    (temp file + rename, under a lock), so a crash or a second nightly leaves one copy.
    Returns the row count of the file."""
    path = Path(path)
    with _locked(path):
        old = read_history(path)
        if len(rows):
            keys = set(zip(rows["suite"], rows["night"], rows["entry"], strict=True))
            keep = [(s, n, e) not in keys for s, n, e in zip(old["suite"], old["night"], old["entry"],
                                                               strict=True)]
            old = old[keep]
        frames = [f for f in (old, rows) if len(f)]
        merged = pd.concat(frames, ignore_index=True) if frames else old
        merged = merged.sort_values(["suite", "night", "entry"], kind="stable")
        table = pa.Table.from_pandas(merged, schema=SCHEMA, preserve_index=False)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.close(fd)
        try:
            pq.write_table(table, tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return table.num_rows
