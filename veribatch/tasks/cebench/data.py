"""CE-Bench's two kinds of dataset, and their instances.

* A **source** — LaM4Inv's programs and logs — is what a *build* run reads: one instance
  per program.  ``sample`` (shipped, written by us in LaM4Inv's format), ``lam4inv``
  (``$VERIBATCH_LAM4INV_ROOT``, else the pinned upstream download), ``lam4inv:/path``, or
  a path to a folder with LaM4Inv's layout.  Instance ids are
  ``cebench/<sample|lam4inv>/<file>`` whichever copy is read, so a local copy and the
  download give the same run.
* A **built** dataset (`tasks.cebench.dataset`) is what an *evaluation* run reads: one
  instance per labelled counterexample (UNKNOWN ones are excluded, as in the paper).  Given
  as a path to the dataset folder or to the build run directory (its ``dataset/``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veribatch.tasks.base import DatasetError, Instance, UnknownNameError
from veribatch.tasks.cebench import lam4inv
from veribatch.tasks.pinned import hash_files

TASK = "cebench"
SAMPLE_DIR = Path(__file__).resolve().parent / "sample"
DESCRIPTIONS = {
    "sample": "6 Code2Inv-style loop programs with LaM4Inv-format logs, written for veribatch "
    "(a build runs in about a minute on the embedded verifier)",
    "lam4inv": "LaM4Inv's 316 linear programs and GPT-4-Turbo logs, the paper's input "
    "($VERIBATCH_LAM4INV_ROOT, `lam4inv:<root>`, else upstream at the pinned commit)",
    "PATH": "a built CE-Bench dataset (folder with card.json, or a build run directory) — "
    "evaluated with --model, or its reference rows without",
}


@dataclass(frozen=True)
class Source:
    """A LaM4Inv-layout folder and the name its instance ids use."""

    name: str   # "sample" | "lam4inv"
    root: Path


def resolve(dataset: str) -> Source | Path:
    """A dataset spec → a `Source` (build) or the folder of a built dataset (evaluate)."""
    from veribatch.tasks.cebench import dataset as built

    name, sep, rest = dataset.partition(":")
    if name == "sample" and not sep:
        return Source("sample", SAMPLE_DIR)
    if name == "lam4inv":
        if sep:
            return Source("lam4inv", _lam4inv_root(Path(rest).expanduser()))
        env = os.environ.get("VERIBATCH_LAM4INV_ROOT")
        if env:
            return Source("lam4inv", _lam4inv_root(Path(env)))
        from veribatch.tasks.cebench import upstream

        return Source("lam4inv", upstream.fetch())
    path = Path(dataset).expanduser()
    if "/" in dataset or dataset.startswith(".") or path.exists():
        if not path.exists():
            raise DatasetError(f"{path}: no such folder (expected a LaM4Inv copy, a built CE-Bench "
                               "dataset or a build run directory)")
        folder = built.dataset_folder(path)
        if folder is not None:
            return folder
        return Source("lam4inv", _lam4inv_root(path))
    known = ", ".join(sorted(DESCRIPTIONS))
    raise UnknownNameError(f"unknown cebench dataset {dataset!r}; known datasets: {known}")


def _lam4inv_root(path: Path) -> Path:
    if lam4inv.is_lam4inv_root(path):
        return path
    raise DatasetError(f"{path}: not a LaM4Inv folder (expected {lam4inv.PROGRAMS_DIR}/ and "
                       f"{lam4inv.LOGS_DIR}/ below it), nor a built CE-Bench dataset (card.json)")


def source_hash(src: Source) -> str:
    programs = lam4inv.program_files(src.root)
    logs = list((src.root / lam4inv.LOGS_DIR).glob("*.txt"))
    if not programs:
        raise DatasetError(f"{src.root / lam4inv.PROGRAMS_DIR}: no .c programs")
    return hash_files([*programs, *logs], src.root)


def load_source(src: Source, *, limit: int | None = None) -> list[Instance]:
    """One instance per program; the log is parsed here (its skips travel in the payload)."""
    programs = lam4inv.program_files(src.root)
    if not programs:
        raise DatasetError(f"{src.root / lam4inv.PROGRAMS_DIR}: no .c programs")
    out = []
    for path in programs[: limit if limit is not None else None]:
        log_path = lam4inv.log_for(src.root, path)
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            text = None
            read_error = f"{path}: cannot read: {e}"
        else:
            read_error = None
        log: dict[str, Any] | None = None
        skips: list[dict[str, Any]] = []
        if read_error:
            skips.append({"file": path.name, "line": None, "kind": "source_unreadable", "reason": read_error})
        if not log_path.is_file():
            skips.append({"file": log_path.name, "line": None, "kind": "no_log",
                          "reason": f"no LaM4Inv log for this program ({lam4inv.LOGS_DIR}/{log_path.name})"})
        else:
            try:
                parsed = lam4inv.parse_log(log_path.read_text(errors="replace"), log_path.name)
            except OSError as e:
                skips.append({"file": log_path.name, "line": None, "kind": "log_unreadable",
                              "reason": f"cannot read: {e}"})
            else:
                log = parsed.to_json()
        out.append(Instance(
            id=f"{TASK}/{src.name}/{path.name}",
            task=TASK,
            split=src.name,
            payload={"file": path.name, "program": text, "log_file": log_path.name, "log": log,
                     "skips": skips},
            meta={"source": str(path), "log_path": str(log_path)},
        ))
    return out


def load_built(folder: Path, *, limit: int | None = None) -> list[Instance]:
    """One instance per GENUINE/SPURIOUS counterexample of a built dataset."""
    from veribatch.tasks.cebench import dataset as built

    card = built.read_card(folder)
    rows = built.read_rows(folder)
    labelled = [r for r in rows if r["label"] in built.LABELS]
    out = []
    for r in labelled[: limit if limit is not None else None]:
        out.append(Instance(
            id=f"{TASK}/{card['version']}/{r['uid']}",
            task=TASK,
            split=str(r["category"]),
            payload={k: r[k] for k in built.EVAL_COLUMNS},
            meta={"verifier_time_s": r.get("verifier_time_s"), "dataset_version": card["version"]},
        ))
    return out

