"""Reading a built CE-Bench dataset (``RUN/dataset/``) back, to evaluate models on it.

The dataset is written by a build run's aggregate step (`aggregate.cebench_dataset`, which
owns the format; docs/cebench.md, "The built dataset", describes every column).  The task
may not import `aggregate`, so it names here what it relies on — the file names, the
schema version it reads, the columns an evaluation uses, and the content hash it checks
the rows against — and `tests/tasks/cebench/test_dataset_schema.py` keeps these
equal to the writer's.

A folder is refused when its card is of another schema version, when the build that wrote
it was incomplete, or when the rows no longer match the card's content hash.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from veribatch.tasks.base import DatasetError

SCHEMA_VERSION = 1
FILE = "counterexamples.parquet"
CARD = "card.json"
CARD_MD = "card.md"
LABELS = ("GENUINE", "SPURIOUS")
# What the content hash covers (the writer's `CONTENT_COLUMNS`): not timings or paths.
CONTENT_COLUMNS = ("uid", "program", "category", "site", "state_json", "label", "prompt_program",
                   "instrumented")
# What an evaluation instance carries (its payload).
EVAL_COLUMNS = ("uid", "program", "category", "site", "state_json", "state_c", "label",
                "prompt_program")


def content_hash(rows: list[dict[str, Any]]) -> str:
    """sha256 over the canonical JSON of `CONTENT_COLUMNS` of every row, sorted by uid."""
    h = hashlib.sha256()
    for r in sorted(rows, key=lambda r: r["uid"]):
        h.update(json.dumps([r.get(c) for c in CONTENT_COLUMNS], separators=(",", ":")).encode() + b"\n")
    return h.hexdigest()


def dataset_folder(path: Path) -> Path | None:
    """`path` itself or its ``dataset/`` when it holds a built dataset, else None."""
    for cand in (path, path / "dataset"):
        if (cand / CARD).is_file():
            return cand
    return None


def read_card(folder: Path) -> dict[str, Any]:
    try:
        card = json.loads((folder / CARD).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise DatasetError(f"{folder / CARD}: cannot read the dataset card: {e}") from e
    if card.get("schema_version") != SCHEMA_VERSION:
        raise DatasetError(f"{folder / CARD}: schema_version {card.get('schema_version')!r}; this "
                           f"veribatch reads {SCHEMA_VERSION}")
    if not card.get("complete", False):
        raise DatasetError(f"{folder}: the build that wrote it was incomplete "
                           f"({card.get('missing_programs', '?')} programs missing); finish it with "
                           "`launch resume` first")
    return card


def read_rows(folder: Path) -> list[dict[str, Any]]:
    """The rows, checked against the card's content hash (a changed file is refused)."""
    import pyarrow.parquet as pq

    card = read_card(folder)
    try:
        rows = pq.read_table(folder / FILE).to_pylist()
    except (OSError, ValueError) as e:
        raise DatasetError(f"{folder / FILE}: cannot read: {e}") from e
    got = content_hash(rows)
    if got != card.get("content_sha256"):
        raise DatasetError(f"{folder / FILE}: content hash {got[:12]} does not match its card "
                           f"({str(card.get('content_sha256'))[:12]}); the dataset was changed")
    return rows


def dataset_hash(folder: Path) -> str:
    """The built dataset's content hash (verified against the rows)."""
    read_rows(folder)
    return str(read_card(folder)["content_sha256"])
