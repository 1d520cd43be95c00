"""Loading REFUTE problems: the shipped sample, a local export of the hub dataset, or the hub
dataset itself at a pinned revision (`tasks.refute.upstream`).

The hub dataset ``bethgelab/REFUTE`` (split ``train``) has one row per problem, keyed by
``problem_id``; the columns the authors' harness reads (``refute/utils/dataset_parser.py``,
``code_exec.py``) and the metadata the paper's §5 analysis uses are `HUB_COLUMNS`.  A
local export is what the hub serves: parquet (``train-*.parquet``, ``data/train-*``, or
the ``refs/convert/parquet`` layout ``default/train/0000.parquet``) or JSON lines.  Extra
columns are kept; a missing required one, a duplicate ``problem_id``, a language the
judge cannot run or a problem without a correct solution is an error naming the file and
the row — never a silently skipped problem.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from veribatch.tasks.base import DatasetError, Instance, UnknownNameError

TASK = "refute"
SAMPLE_DIR = Path(__file__).resolve().parent / "sample"
SAMPLE_FILE = SAMPLE_DIR / "train.jsonl"
SAMPLE_EXTRAS = SAMPLE_DIR / "extras.json"
EXPORT_ENV = "VERIBATCH_REFUTE_EXPORT"

REQUIRED = ("problem_id", "statement", "input", "output", "wrong_code", "wrong_code_lang",
            "validator")
OPTIONAL = ("problem_name", "example_input", "example_output", "note", "time_limit",
            "memory_limit", "problem_rating", "author_rating", "tags", "correct_cpp",
            "correct_python", "fail_tc")
HUB_COLUMNS = REQUIRED + OPTIONAL
META_COLUMNS = ("problem_rating", "author_rating", "fail_tc", "time_limit", "memory_limit")

DESCRIPTIONS = {
    "sample": "12 REFUTE-style problems written for veribatch (C++ and Python wrong solutions, "
              "validators; every judge outcome), in the hub's schema",
    "hub": "bethgelab/REFUTE, split train (324 problems), downloaded from the Hugging Face hub "
           "at the revision pinned in tasks/refute/hub_pin.json, checked by sha256; or a local "
           f"export: a path to its parquet/JSONL file(s) (or ${EXPORT_ENV})",
}


def parse_lang(language: str | None) -> str | None:
    """Codeforces language names → "cpp" | "python" | None, as the harness's `parse_lang`
    does (any C++; Python 3 or PyPy; Python 2 is not runnable)."""
    if not language:
        return None
    lang = language.lower().strip()
    if "c++" in lang or "cpp" in lang or "g++" in lang:
        return "cpp"
    if "python" in lang or "pypy" in lang:
        digits = "".join(c for c in lang if c.isdigit() or c == ".")
        if not digits:
            return "python" if "pypy" in lang else None
        try:
            return "python" if int(digits.split(".")[0] or 0) >= 3 else None
        except ValueError:
            return None
    return None


def parse_tags(raw: Any) -> list[str]:
    """The hub stores tags as the repr of a list (``"['greedy', 'math']"``); exports may hold
    a real list."""
    if raw is None:
        return []
    if isinstance(raw, list | tuple):
        return [str(t) for t in raw]
    if hasattr(raw, "tolist"):
        return [str(t) for t in raw.tolist()]
    text = str(raw).strip()
    if not text:
        return []
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return [t.strip() for t in text.split(",") if t.strip()]
    return [str(t) for t in value] if isinstance(value, list | tuple) else [str(value)]


def _clean(value: Any) -> Any:
    """Parquet/pandas values → JSON-able scalars (NaN → None, numpy ints → int)."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        try:
            return value.item()
        except (ValueError, AttributeError):
            pass
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


# ---------------------------------------------------------------- reading files


def data_files(path: Path) -> list[Path]:
    """The train-split files of a local export (a file, or a folder in a hub layout)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise DatasetError(f"{path}: no such file or folder (expected a REFUTE export: "
                           "parquet or JSONL as the hub serves it)")
    patterns = ("train-*.parquet", "data/train-*.parquet", "default/train/*.parquet",
                "train/*.parquet", "train.parquet", "train*.jsonl", "data/train*.jsonl",
                "*.parquet", "*.jsonl")
    for pattern in patterns:
        found = sorted(path.glob(pattern))
        if found:
            return found
    raise DatasetError(f"{path}: no train-split parquet or JSONL files (looked for "
                       + ", ".join(patterns) + ")")


def read_rows(path: Path) -> list[tuple[str, int, dict[str, Any]]]:
    """(file, row number, row) for every row of every data file under `path`."""
    out: list[tuple[str, int, dict[str, Any]]] = []
    for f in data_files(path):
        if f.suffix == ".parquet":
            import pyarrow.parquet as pq

            try:
                rows = pq.read_table(f).to_pylist()
            except Exception as e:  # noqa: BLE001 (pyarrow raises many kinds)
                raise DatasetError(f"{f}: cannot read parquet: {e}") from e
        elif f.suffix in (".jsonl", ".json"):
            rows = []
            text = f.read_text()
            if f.suffix == ".json" and text.lstrip().startswith("["):
                rows = json.loads(text)
            else:
                for i, line in enumerate(text.splitlines()):
                    if not line.strip():
                        continue
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        raise DatasetError(f"{f}: line {i + 1}: not JSON ({e})") from e
        else:
            raise DatasetError(f"{f}: unsupported file type (parquet, jsonl or json)")
        out += [(str(f), i, {k: _clean(v) for k, v in r.items()}) for i, r in enumerate(rows)]
    return out


def check_row(where: str, row: dict[str, Any]) -> None:
    pid = row.get("problem_id")
    missing = [c for c in REQUIRED if row.get(c) in (None, "")]
    if missing:
        raise DatasetError(f"{where} (problem_id={pid!r}): missing {', '.join(missing)}")
    if parse_lang(row["wrong_code_lang"]) is None:
        raise DatasetError(f"{where} (problem {pid}): wrong_code_lang {row['wrong_code_lang']!r} "
                           "is neither C++ nor Python 3")
    if not (row.get("correct_cpp") or row.get("correct_python")):
        raise DatasetError(f"{where} (problem {pid}): no correct solution (correct_cpp and "
                           "correct_python are both empty)")


def to_instances(dataset: str, rows: Iterable[tuple[str, int, dict[str, Any]]],
                 extras: dict[str, dict[str, Any]] | None = None,
                 limit: int | None = None) -> list[Instance]:
    instances: list[Instance] = []
    seen: dict[str, str] = {}
    for f, i, row in rows:
        where = f"{f}: row {i}"
        check_row(where, row)
        pid = str(row["problem_id"])
        if pid in seen:
            raise DatasetError(f"{where}: duplicate problem_id {pid!r} (also {seen[pid]})")
        seen[pid] = where
        payload = {k: row.get(k) for k in HUB_COLUMNS}
        payload["problem_id"] = pid
        payload["tags"] = parse_tags(row.get("tags"))
        for k, v in (extras or {}).get(pid, {}).items():
            payload[f"x_{k}"] = v
        meta = {k: row.get(k) for k in META_COLUMNS}
        meta.update(wrong_lang=parse_lang(row["wrong_code_lang"]),
                    correct_lang="cpp" if row.get("correct_cpp") else "python",
                    tags=",".join(payload["tags"]), source=where)
        instances.append(Instance(id=f"{TASK}/{dataset}/{pid}", task=TASK, split=dataset,
                                  payload=payload, meta=meta))
    instances.sort(key=lambda inst: inst.id)
    return instances[:limit] if limit is not None else instances


# ---------------------------------------------------------------- datasets


def _local_export(dataset: str) -> Path | None:
    if "/" in dataset or dataset.startswith("."):
        return Path(dataset).expanduser().resolve()
    if dataset == "hub" and os.environ.get(EXPORT_ENV):
        return Path(os.environ[EXPORT_ENV]).expanduser().resolve()
    return None


def resolve(dataset: str) -> tuple[str, Path]:
    """Dataset spec → (name used in instance ids, the path holding its data files)."""
    local = _local_export(dataset)
    if local is not None:
        return "hub", local
    if dataset == "sample":
        return "sample", SAMPLE_FILE
    if dataset == "hub":
        from veribatch.tasks.refute import upstream

        return "hub", upstream.fetch()
    known = ", ".join(sorted(DESCRIPTIONS))
    raise UnknownNameError(f"unknown refute dataset {dataset!r}; known datasets: {known}, or a "
                           "path to a local export (parquet/JSONL)")


def load(dataset: str, *, limit: int | None = None) -> list[Instance]:
    name, path = resolve(dataset)
    extras = json.loads(SAMPLE_EXTRAS.read_text()) if name == "sample" else None
    instances = to_instances(name, read_rows(path), extras, limit)
    if not instances:
        raise DatasetError(f"{path}: no problems")
    return instances


def dataset_hash(dataset: str) -> str:
    name, path = resolve(dataset)
    files = data_files(path) + ([SAMPLE_EXTRAS] if name == "sample" else [])
    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            h.update(f.name.encode() + b"\0" + hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()
