"""Loading DafnyComp instances: the shipped sample, a local copy of the upstream layout, or
ReForm's repository at a pinned revision (`upstream`).

The upstream layout (github.com/Veri-Code/ReForm,
``LLaMA-Factory/dafny_process/DafnyComp/code_wspec/Chain_300/``) is one folder per
program, ``main_<K>node_<i>-<ids>/``, holding ``dafny_code.dfy`` (the verified program with
its specifications) and ``input_python_code.py`` (the Python it was translated from; not
used).  K is the number of chained functions, the paper's "number of functions" (§3.4);
helpers the translation added (``isqrt``, lemmas...) are counted separately by the strip
stage.  The shipped sample (``sample/*.dfy``, written for this project) follows the same
naming, one file per program.

Instance ids are ``dafnycomp/<split>/<program>``; the payload holds the original program
(with its specs), never a stripped copy: stripping is a stage, so its version is part of
the run identity.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from veribatch.tasks.base import DatasetError, Instance, UnknownNameError
from veribatch.tasks.pinned import hash_files

TASK = "dafnycomp"
SAMPLE_DIR = Path(__file__).resolve().parent / "sample"
ROOT_ENV = "VERIBATCH_DAFNYCOMP_ROOT"
PROGRAM_FILE = "dafny_code.dfy"
_CHAIN = re.compile(r"^main_(\d+)node")

DESCRIPTIONS = {
    "sample": "6 small multi-function Dafny programs shipped with veribatch (written for it; "
    "2-4 chained methods with requires/ensures/reads/modifies/decreases)",
    "chain300": "DafnyComp's 300 programs (Chain_300): a local copy via "
    f"${ROOT_ENV} or `chain300:<folder>`, else ReForm at a pinned revision (CC-BY-NC-4.0)",
}


def chain_length(name: str) -> int | None:
    """K of ``main_<K>node...``: the number of chained functions."""
    m = _CHAIN.match(name)
    return int(m.group(1)) if m else None


def split_dataset_name(dataset: str) -> tuple[str, Path | None]:
    """``chain300`` → ("chain300", None); ``chain300:/data/Chain_300`` → (name, path);
    a path to a folder of program folders → ("chain300", path)."""
    if "/" in dataset and ":" not in dataset:
        return "chain300", Path(dataset).expanduser()
    name, sep, root = dataset.partition(":")
    if name not in DESCRIPTIONS:
        known = ", ".join(sorted(DESCRIPTIONS))
        raise UnknownNameError(f"unknown dafnycomp dataset {name!r}; known datasets: {known}")
    return name, (Path(root).expanduser() if sep else None)


def resolve_root(explicit: Path | None) -> Path:
    """A local copy first (explicit, then $VERIBATCH_DAFNYCOMP_ROOT), else the pinned download."""
    env = os.environ.get(ROOT_ENV)
    for cand in (explicit, Path(env) if env else None):
        if cand is not None:
            return chain_folder(cand)
    from veribatch.tasks.dafnycomp import upstream

    return upstream.fetch()


def chain_folder(candidate: Path) -> Path:
    """Accept the Chain_300 folder itself or the repository root above it."""
    for p in (candidate, candidate / "LLaMA-Factory" / "dafny_process" / "DafnyComp" / "code_wspec" / "Chain_300"):
        if p.is_dir() and any((d / PROGRAM_FILE).is_file() for d in p.iterdir() if d.is_dir()):
            return p
    raise DatasetError(f"{candidate}: not a DafnyComp program folder (expected <program>/{PROGRAM_FILE} "
                       "folders, e.g. ReForm's .../DafnyComp/code_wspec/Chain_300)")


def program_files(root: Path) -> list[Path]:
    """The program files of a Chain_300-style folder, sorted; a folder without one is an error."""
    dirs = sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    missing = [d for d in dirs if not (d / PROGRAM_FILE).is_file()]
    if missing:
        raise DatasetError(f"{missing[0]}: no {PROGRAM_FILE} (and {len(missing) - 1} more such folders)"
                           if len(missing) > 1 else f"{missing[0]}: no {PROGRAM_FILE}")
    if not dirs:
        raise DatasetError(f"{root}: no program folders")
    return [d / PROGRAM_FILE for d in dirs]


def _instance(split: str, name: str, path: Path) -> Instance:
    try:
        program = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: cannot read program: {e}") from e
    if not program.strip():
        raise DatasetError(f"{path}: empty program")
    return Instance(
        id=f"{TASK}/{split}/{name}",
        task=TASK,
        split=split,
        payload={"program": program, "name": name},
        meta={"source": str(path), "chain_length": chain_length(name)},
    )


def load_folder(root: Path, *, split: str = "chain300", limit: int | None = None) -> list[Instance]:
    files = program_files(root)
    return [_instance(split, f.parent.name, f) for f in files[:limit]]


def load_sample(*, limit: int | None = None) -> list[Instance]:
    files = sorted(SAMPLE_DIR.glob("*.dfy"))
    if not files:
        raise DatasetError(f"{SAMPLE_DIR}: the shipped sample is missing")
    return [_instance("sample", f.stem, f) for f in files[:limit]]


def dataset_hash(name: str, root: Path | None) -> str:
    if name == "sample":
        return hash_files(SAMPLE_DIR.glob("*.dfy"), SAMPLE_DIR)
    assert root is not None
    return hash_files(program_files(root), root)
