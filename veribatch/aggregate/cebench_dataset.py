"""Writing a built CE-Bench dataset: ``RUN/dataset/`` from a build run's records.

A build run's aggregate step (`aggregate.cebench.build_dataset`) writes::

    counterexamples.parquet   one row per counterexample, UNKNOWN ones included (`COLUMNS`)
    card.json                 version, content hash, construction settings, statistics
                              (`aggregate.cebench_card`)
    card.md                   the same for people, with the paper's figures beside ours

This module owns the file format (``SCHEMA_VERSION``; every column is described in
docs/cebench.md, "The built dataset").  The task reads it back to evaluate models on it
(`tasks.cebench.dataset`), which may not import this package: it keeps its own copy of
the few names it checks (file names, schema version, content columns and hash), and
`tests/tasks/cebench/test_dataset_schema.py` fails when the two disagree.

The **content hash** covers what an evaluation depends on — which counterexamples, their
states, programs, prompts and labels (`CONTENT_COLUMNS`) — and not timings or paths, so
two builds that agree on every label have the same hash, and an evaluation run's id
(`RunConfig.dataset_hash`) changes exactly when the benchmark does.  The version string
is ``cebench-<first 12 hex of it>``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
FILE = "counterexamples.parquet"
CARD = "card.json"
CARD_MD = "card.md"
ALL_LABELS = ("GENUINE", "SPURIOUS", "UNKNOWN")
CONTENT_COLUMNS = ("uid", "program", "category", "site", "state_json", "label", "prompt_program",
                   "instrumented")
COLUMNS = ("uid", "program", "category", "site", "state_json", "state_c", "origins_json",
           "bounded_by_type", "n_vars", "n_extremal", "extremal_usage", "label", "verifier",
           "verifier_version", "verifier_status", "verifier_reason", "verifier_time_s",
           "verifier_cpu_s", "budget_s", "evidence", "evidence_json", "program_text",
           "prompt_program", "instrumented", "precondition", "guard", "invariant", "log_file")


def content_hash(rows: list[dict[str, Any]]) -> str:
    """sha256 over the canonical JSON of `CONTENT_COLUMNS` of every row, sorted by uid."""
    h = hashlib.sha256()
    for r in sorted(rows, key=lambda r: r["uid"]):
        h.update(json.dumps([r.get(c) for c in CONTENT_COLUMNS], separators=(",", ":")).encode() + b"\n")
    return h.hexdigest()


def version_of(digest: str) -> str:
    return f"cebench-{digest[:12]}"


def write(folder: Path, rows: list[dict[str, Any]], card: dict[str, Any], card_md: str) -> None:
    """Parquet first, card last (a card names a complete parquet file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    columns = {c: [r.get(c) for r in rows] for c in COLUMNS}
    table = pa.table(columns) if rows else pa.table({c: pa.array([], pa.string()) for c in COLUMNS})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    _atomic_write_bytes(folder / FILE, sink.getvalue().to_pybytes())
    (folder / CARD_MD).write_text(card_md)
    _atomic_write_bytes(folder / CARD, (json.dumps(card, indent=1, sort_keys=True) + "\n").encode())


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
