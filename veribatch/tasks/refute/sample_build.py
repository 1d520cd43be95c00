"""Build the shipped `sample` dataset from its editable sources, in the hub's schema.

Each problem lives in ``sample/problems/<id>/`` (statement.md with ``---input``,
``---output``, ``---example_input``, ``---example_output``, ``---note`` sections;
``wrong.cpp|py``; ``correct.cpp|py``; ``validator.py``; ``generator.py``; ``meta.json``).
This module turns them into what the loader reads:

- ``sample/train.jsonl``: one row per problem with exactly the columns of the hub dataset
  ``bethgelab/REFUTE`` (`tasks.refute.data.HUB_COLUMNS`), so the sample exercises the same
  loader as the real data;
- ``sample/extras.json``: what only the sample has — the blind random generator written
  from the statement alone (the §4.1 reference row without a model), a program printing a
  known counterexample (tests, the tiny model) and which judge outcomes it covers.

    python -m veribatch.tasks.refute.sample_build          # rewrite train.jsonl and extras.json
    python -m veribatch.tasks.refute.sample_build --check  # exit 1 if they are out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

SAMPLE_DIR = Path(__file__).resolve().parent / "sample"
PROBLEMS = SAMPLE_DIR / "problems"
SECTIONS = ("input", "output", "example_input", "example_output", "note")


def _statement(path: Path) -> dict[str, str | None]:
    parts = path.read_text().split("\n---")
    out: dict[str, str | None] = {"statement": parts[0].strip()}
    for part in parts[1:]:
        name, _, body = part.partition("\n")
        if name not in SECTIONS:
            raise ValueError(f"{path}: unknown section ---{name}")
        if name.startswith("example"):
            out[name] = body.rstrip("\n") + "\n"
        else:
            out[name] = body.strip() or None
    missing = [s for s in SECTIONS if s not in out]
    if missing:
        raise ValueError(f"{path}: missing sections {missing}")
    return out


def _code(folder: Path, stem: str) -> tuple[str | None, str | None]:
    """(cpp source, python source) of `stem`, whichever exist."""
    cpp, py = folder / f"{stem}.cpp", folder / f"{stem}.py"
    return (cpp.read_text() if cpp.exists() else None, py.read_text() if py.exists() else None)


def build() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    rows, extras = [], {}
    for folder in sorted(p for p in PROBLEMS.iterdir() if p.is_dir()):
        meta = json.loads((folder / "meta.json").read_text())
        wrong_cpp, wrong_py = _code(folder, "wrong")
        correct_cpp, correct_py = _code(folder, "correct")
        if (wrong_cpp is None) == (wrong_py is None):
            raise ValueError(f"{folder}: exactly one of wrong.cpp / wrong.py")
        row: dict[str, Any] = {
            "problem_id": meta["problem_id"],
            "problem_name": meta["name"],
            **_statement(folder / "statement.md"),
            "time_limit": meta["time_limit"],
            "memory_limit": meta["memory_limit"],
            "problem_rating": meta["problem_rating"],
            "author_rating": meta["author_rating"],
            "tags": str(meta["tags"]),  # the hub stores the Codeforces tag list as its repr
            "wrong_code": wrong_cpp or wrong_py,
            "wrong_code_lang": meta["wrong_code_lang"],
            "correct_cpp": correct_cpp,
            "correct_python": correct_py,
            "validator": (folder / "validator.py").read_text(),
            "fail_tc": meta["fail_tc"],
        }
        rows.append(row)
        known = meta.get("known_counterexample")
        ce_gen = meta.get("known_counterexample_generator") or (
            f"print({known!r}, end='')\n" if known is not None else None)
        extras[meta["problem_id"]] = {
            "blind_generator": (folder / "generator.py").read_text(),
            "counterexample_generator": ce_gen,
            "covers": meta.get("covers", []),
        }
    return rows, extras


def render() -> tuple[str, str]:
    rows, extras = build()
    jsonl = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
    return jsonl, json.dumps(extras, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m veribatch.tasks.refute.sample_build")
    ap.add_argument("--check", action="store_true", help="only check the built files are current")
    a = ap.parse_args(argv)
    jsonl, extras = render()
    targets = {SAMPLE_DIR / "train.jsonl": jsonl, SAMPLE_DIR / "extras.json": extras}
    if a.check:
        stale = [str(p) for p, text in targets.items() if not p.exists() or p.read_text() != text]
        if stale:
            print("out of date (run python -m veribatch.tasks.refute.sample_build): " + ", ".join(stale))
            return 1
        return 0
    for path, text in targets.items():
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
