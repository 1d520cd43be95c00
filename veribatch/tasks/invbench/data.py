"""Loading InvBench instances: the shipped sample, a local copy of the upstream layout,
or the upstream repository itself at a pinned revision.

The upstream layout (github.com/Anjiang-Wei/InvBench, ``Dataset/``)::

    Evaluation/Easy/*.c  Evaluation/Hard/*.c  Evaluation/timing.json
    Training/Programs/*.c  Training/timing.json  Training/invariants.json

A timing file is a list of ``{"result": "TRUE"|"FALSE", "file": ..., "time": s}`` rows
(UAutomizer's verdict and solve time).  Upstream has quirks that a loader must not hide,
so each one is recorded in the instance's ``meta["quirks"]``, counted in a `LoadReport`
and logged: a program present in both evaluation splits, repeated timing rows for one
file, and programs whose recorded verdict is FALSE (the property is violated, so no
invariant can "prove" it; the decision procedure can still refute it via DEC-FALSE).
"""

from __future__ import annotations

import json
import logging
import os
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veribatch.tasks.base import DatasetError, Instance, UnknownNameError
from veribatch.tasks.pinned import hash_files
from veribatch.verifiers.uautomizer import checks_no_specification

log = logging.getLogger(__name__)

TASK = "invbench"
SAMPLE_DIR = Path(__file__).resolve().parent / "sample"
SAMPLE_REFERENCE = SAMPLE_DIR / "reference.json"
ROOT_ENV = "VERIBATCH_INVBENCH_ROOT"

# Where each split lives under ``Dataset/`` and which timing files describe it.
SPLITS: dict[str, tuple[str, tuple[str, ...]]] = {
    "easy": ("Evaluation/Easy", ("Evaluation/timing.json", "Evaluation/timing_easy.json")),
    "hard": ("Evaluation/Hard", ("Evaluation/timing.json", "Evaluation/timing_hard.json")),
    "training": ("Training/Programs", ("Training/timing.json",)),
}
DESCRIPTIONS = {
    "sample": "12 SV-COMP-style loop programs shipped with veribatch (verdicts and times "
    "measured by the embedded z3 verifier; re-measure with `launch invbench measure-sample`)",
    "easy": "InvBench-Easy, 113 programs UAutomizer solves in < 30 s "
    f"(local copy via ${ROOT_ENV} or `easy:<root>`, else upstream at a pinned revision)",
    "hard": "InvBench-Hard, 113 programs UAutomizer solves in 30-600 s (same sources)",
    "training": "InvBench training set, 3589 synthetic programs with UAutomizer invariants",
}


@dataclass
class LoadReport:
    """What a load saw besides the instances: upstream quirks, counted."""

    dataset: str
    root: str
    counts: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    def note(self, kind: str, message: str) -> None:
        self.counts[kind] += 1
        self.notes.append(f"{kind}: {message}")


LAST_REPORT: dict[str, LoadReport] = {}


def split_dataset_name(dataset: str) -> tuple[str, Path | None]:
    """``easy`` → ("easy", None); ``easy:/data/invbench`` → ("easy", Path("/data/invbench"))."""
    name, sep, root = dataset.partition(":")
    if name not in DESCRIPTIONS:
        known = ", ".join(sorted(DESCRIPTIONS))
        raise UnknownNameError(f"unknown invbench dataset {name!r}; known datasets: {known}")
    return name, (Path(root).expanduser() if sep else None)


def dataset_root(candidate: Path) -> Path:
    """Accept the repository root, its ``Dataset/`` folder or a copy of it."""
    for p in (candidate / "Dataset", candidate):
        if (p / "Evaluation").is_dir() or (p / "Training").is_dir():
            return p
    raise DatasetError(
        f"{candidate}: not an InvBench data folder (expected Dataset/Evaluation or "
        "Dataset/Training below it)"
    )


def resolve_root(name: str, explicit: Path | None, root: Path | None = None) -> Path:
    """Local copy first (explicit, task option, environment), then the fetched upstream copy."""
    for cand in (explicit, root, Path(os.environ[ROOT_ENV]) if os.environ.get(ROOT_ENV) else None):
        if cand is not None:
            return dataset_root(cand)
    from veribatch.tasks.invbench import upstream

    return dataset_root(upstream.fetch())


def read_timing(path: Path, report: LoadReport) -> dict[str, dict[str, Any]]:
    """file → {"result", "time", "times"}; repeated rows are kept as a list and reported."""
    try:
        rows = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise DatasetError(f"{path}: cannot read timing file: {e}") from e
    if not isinstance(rows, list):
        raise DatasetError(f"{path}: expected a JSON list of timing rows")
    out: dict[str, dict[str, Any]] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not {"file", "result", "time"} <= set(row):
            raise DatasetError(f"{path}: row {i} lacks file/result/time: {row!r}")
        if row["result"] not in ("TRUE", "FALSE"):
            raise DatasetError(f"{path}: row {i} ({row['file']}): result {row['result']!r}")
        try:
            t = float(row["time"])
        except (TypeError, ValueError):
            raise DatasetError(f"{path}: row {i} ({row['file']}): time {row['time']!r}") from None
        prev = out.get(row["file"])
        if prev is None:
            out[row["file"]] = {"result": row["result"], "time": t, "times": [t]}
            continue
        prev["times"].append(t)
        prev["time"] = statistics.median(prev["times"])
        if prev["result"] != row["result"]:
            raise DatasetError(
                f"{path}: {row['file']} has conflicting verdicts {prev['result']} and "
                f"{row['result']} (rows repeated upstream)"
            )
        report.note("repeated_timing_row", f"{row['file']} listed {len(prev['times'])}x in {path.name}")
    return out


def load_split(
    name: str, root: Path, *, limit: int | None = None, report: LoadReport | None = None
) -> list[Instance]:
    """Instances of one upstream split under `root` (a ``Dataset/`` folder)."""
    report = report or LoadReport(name, str(root))
    rel, timing_names = SPLITS[name]
    folder = root / rel
    if not folder.is_dir():
        raise DatasetError(f"{folder}: split {name!r} not found under {root}")
    timing_path = next((root / t for t in timing_names if (root / t).is_file()), None)
    if timing_path is None:
        raise DatasetError(f"{root}: no timing file for split {name!r} (looked for {timing_names})")
    timing = read_timing(timing_path, report)
    invariants: dict[str, Any] = {}
    if name == "training":
        inv_path = root / "Training" / "invariants.json"
        try:
            invariants = json.loads(inv_path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise DatasetError(f"{inv_path}: cannot read invariants: {e}") from e
    other = {"easy": "hard", "hard": "easy"}.get(name)
    other_files: set[str] = set()
    if other and (root / SPLITS[other][0]).is_dir():
        other_files = {p.name for p in (root / SPLITS[other][0]).glob("*.c")}
    files = sorted(folder.glob("*.c"))
    if not files:
        raise DatasetError(f"{folder}: no .c programs")
    instances: list[Instance] = []
    for path in files:
        if limit is not None and len(instances) >= limit:
            break
        row = timing.get(path.name)
        if row is None:
            raise DatasetError(f"{path}: no row in {timing_path}")
        quirks = []
        if path.name in other_files:
            quirks.append(f"also_in_{other}")
            report.note("in_both_splits", f"{path.name} is in both {name} and {other}")
        if len(row["times"]) > 1:
            quirks.append("repeated_timing_rows")
        if row["result"] == "FALSE":
            quirks.append("expected_false")
            report.note("false_verdict", f"{path.name}: recorded verdict FALSE")
        text = program_text(path)
        vacuous = checks_no_specification(text)
        if vacuous is not None:
            # UAutomizer's TRUE for it was "All specifications hold" of none: a label that checked nothing
            quirks.append("label_without_specification")
            report.note("label_without_specification",
                        f"{path.name}: recorded {row['result']} from a run with no specification ({vacuous})")
        meta: dict[str, Any] = {
            "file": path.name,
            "source": str(path),
            "expected_verdict": row["result"],
            "reference_time_s": row["time"],
            "reference_times_s": json.dumps(row["times"]),
            "reference_tool": "UAutomizer (InvBench timing.json)",
            "quirks": ",".join(quirks),
        }
        if name == "training":
            meta["reference_invariants"] = json.dumps(invariants.get(path.name, []))
        instances.append(
            Instance(
                id=f"{TASK}/{name}/{path.name}",
                task=TASK,
                split=name,
                payload={"program": text, "file": path.name},
                meta=meta,
            )
        )
    _log_report(report)
    LAST_REPORT[name] = report
    return instances


def program_text(path: Path) -> str:
    """A program file as text; a file that is not UTF-8 is a DatasetError naming it."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DatasetError(f"{path}: line {line}: not UTF-8 text (byte 0x{data[e.start]:02x} "
                           f"at offset {e.start})") from None


def load_sample(*, limit: int | None = None) -> list[Instance]:
    """The sample shipped in ``tasks/invbench/sample`` with its self-measured reference."""
    try:
        ref = json.loads(SAMPLE_REFERENCE.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise DatasetError(f"{SAMPLE_REFERENCE}: cannot read sample reference: {e}") from e
    programs = ref.get("programs", {})
    files = sorted(SAMPLE_DIR.glob("*.c"))
    instances = []
    for path in files[: limit if limit is not None else None]:
        row = programs.get(path.name)
        if row is None:
            raise DatasetError(f"{path}: missing from {SAMPLE_REFERENCE}")
        instances.append(
            Instance(
                id=f"{TASK}/sample/{path.name}",
                task=TASK,
                split="sample",
                payload={"program": program_text(path), "file": path.name},
                meta={
                    "file": path.name,
                    "source": str(path),
                    "expected_verdict": row["verdict"],
                    "reference_time_s": row["time_s"],
                    "reference_times_s": json.dumps([row["time_s"]]),
                    "reference_tool": f"{ref.get('tool', 'z3')} {ref.get('tool_version', '')}".strip(),
                    "quirks": "expected_false" if row["verdict"] == "FALSE" else "",
                },
            )
        )
    return instances


def split_hash(name: str, root: Path | None) -> str:
    if name == "sample":
        return hash_files([*SAMPLE_DIR.glob("*.c"), SAMPLE_REFERENCE], SAMPLE_DIR)
    assert root is not None
    rel, timing_names = SPLITS[name]
    paths = list((root / rel).glob("*.c"))
    paths += [root / t for t in timing_names if (root / t).is_file()]
    if name == "training":
        paths.append(root / "Training" / "invariants.json")
    if not paths:
        raise DatasetError(f"{root / rel}: no files to hash for split {name!r}")
    return hash_files(paths, root)


def _log_report(report: LoadReport) -> None:
    if report.counts:
        summary = ", ".join(f"{k}={v}" for k, v in sorted(report.counts.items()))
        log.warning("invbench %s (%s): upstream quirks: %s", report.dataset, report.root, summary)
