"""A built CE-Bench dataset (``RUN/dataset/``): its file format, written by a build run's
tables step and read back to evaluate models on it — one module, so there is one format.

A build run's aggregate step (`tasks.cebench.tables.build_dataset`) writes::

    counterexamples.parquet   one row per counterexample, UNKNOWN ones included (`COLUMNS`)
    card.json                 version, content hash, construction settings, statistics
                              (`tasks.cebench.card`)
    card.md                   the same for people, with the paper's figures beside ours

``SCHEMA_VERSION`` names the format; every column is described in docs/cebench.md, "The
built dataset".  The **content hash** covers what an evaluation depends on — which
counterexamples, their states, programs, prompts and labels (`CONTENT_COLUMNS`) — and not
timings or paths, so two builds that agree on every label have the same hash, and an
evaluation run's id (`RunConfig.dataset_hash`) changes exactly when the benchmark does.
The version string is ``cebench-<first 12 hex of it>``.

Reading refuses a folder whose card is of another schema version, whose build was
incomplete, or whose rows no longer match the card's content hash.
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
LABELS = ("GENUINE", "SPURIOUS")  # what an evaluation asks a model to tell apart
ALL_LABELS = ("GENUINE", "SPURIOUS", "UNKNOWN")  # what a build labels
# What the content hash covers: not timings or paths.
CONTENT_COLUMNS = ("uid", "program", "category", "site", "state_json", "label", "prompt_program",
                   "instrumented")
# Every column a build writes (docs/cebench.md, "The built dataset").
COLUMNS = ("uid", "program", "category", "site", "state_json", "state_c", "origins_json",
           "bounded_by_type", "n_vars", "n_extremal", "extremal_usage", "label", "verifier",
           "verifier_version", "verifier_status", "verifier_reason", "verifier_time_s",
           "verifier_cpu_s", "budget_s", "evidence", "evidence_json", "program_text",
           "prompt_program", "instrumented", "precondition", "guard", "invariant", "log_file")
# What an evaluation instance carries (its payload).
EVAL_COLUMNS = ("uid", "program", "category", "site", "state_json", "state_c", "label",
                "prompt_program")


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
