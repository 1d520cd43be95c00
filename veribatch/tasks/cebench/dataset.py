"""The built CE-Bench dataset: one parquet file and its card, written by a build run.

A build run's aggregate step (`aggregate.cebench`) writes ``RUN/dataset/``::

    counterexamples.parquet   one row per counterexample, UNKNOWN ones included (schema below)
    card.json                 version, content hash, construction settings, statistics (`card`)
    card.md                   the same for people, with the paper's figures beside ours

The **content hash** covers what an evaluation depends on — which counterexamples, their
states, programs, prompts and labels (`CONTENT_COLUMNS`) — and not timings or paths, so
two builds that agree on every label have the same hash, and an evaluation run's id
(`RunConfig.dataset_hash`) changes exactly when the benchmark does.  The version string
is ``cebench-<first 12 hex of it>``.

Row schema (``SCHEMA_VERSION`` 1):

| column | type | meaning |
|---|---|---|
| uid | str | ``<program>/<category>/<k>``, k = 0.. in the order collection found them |
| program | str | LaM4Inv file name (``12.c``) |
| category | str | Inductive, UNSAT_Pre, SAT_Pre (paper: Inductive_CEs, OMT_UNSAT_Pre_CEs, OMT_SAT_Pre_CEs) |
| site | str | body_start / body_end: where ``assert(!(state))`` was placed (§3.2.1) |
| state_json | str | the state, ``{"x": 1, "y": 0}`` in declaration order |
| state_c | str | the same as a C condition (``x == 1 && y == 0``) |
| origins_json | str | where the state came from: candidates (text, log line, post-state) or objectives |
| bounded_by_type | bool | an objective behind it had no optimum and was bounded by the C type |
| n_vars, n_extremal | int | variables, and those at a bound of their C type (Table 1) |
| extremal_usage | str | all / one / multiple / none (Table 1's rows) |
| label | str | GENUINE, SPURIOUS or UNKNOWN |
| verifier, verifier_version, verifier_status, verifier_reason | str | the labelling run |
| verifier_time_s, verifier_cpu_s, budget_s | float | its wall and CPU time, and its limit |
| evidence | str | replayed-trace, checked-proof:<kind>, trusted-verdict:<tool> or none |
| evidence_json | str | the trace's inputs and replay result, or the proof's invariants |
| program_text | str | the normalised SV-COMP program (original post-condition kept) |
| prompt_program | str | what a model is shown: no post-condition, a CHECK POINT comment at `site` |
| instrumented | str | the program the verifier labelled |
| precondition, guard, invariant | str | P, B and LaM4Inv's final invariant I (OMT categories) |
| log_file | str | the LaM4Inv log the program's candidates came from |
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
ALL_LABELS = ("GENUINE", "SPURIOUS", "UNKNOWN")
CONTENT_COLUMNS = ("uid", "program", "category", "site", "state_json", "label", "prompt_program",
                   "instrumented")
EVAL_COLUMNS = ("uid", "program", "category", "site", "state_json", "state_c", "label",
                "prompt_program")
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


def dataset_folder(path: Path) -> Path | None:
    """`path` itself or its ``dataset/`` when it holds a built dataset, else None."""
    for cand in (path, path / "dataset"):
        if (cand / CARD).is_file():
            return cand
    return None


def write(folder: Path, rows: list[dict[str, Any]], card: dict[str, Any], card_md: str) -> None:
    """Parquet first, card last (a card names a complete parquet file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    columns = {c: [r.get(c) for r in rows] for c in COLUMNS}
    table = pa.table(columns) if rows else pa.table({c: pa.array([], pa.string()) for c in COLUMNS})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    atomic_write_bytes(folder / FILE, sink.getvalue().to_pybytes())
    (folder / CARD_MD).write_text(card_md)
    atomic_write_bytes(folder / CARD, (json.dumps(card, indent=1, sort_keys=True) + "\n").encode())


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


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
