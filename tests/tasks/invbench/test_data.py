"""Loaders on the shared InvBench data, including the upstream quirks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from veribatch.tasks.base import DatasetError, UnknownNameError, get_task
from veribatch.tasks.invbench import data


def test_easy_split_from_shared_data(shared_data: Path) -> None:
    task = get_task("invbench")
    root = shared_data / "invbench"
    insts = task.load(f"easy:{root}")
    assert len(insts) == 113
    assert insts[0].id == "invbench/easy/benchmark24_conjunctive_1.c"
    assert all(i.id.startswith("invbench/easy/") and i.split == "easy" for i in insts)
    false = [i for i in insts if i.meta["expected_verdict"] == "FALSE"]
    assert len(false) == 12  # upstream FALSE verdicts are kept, marked and counted
    assert all("expected_false" in i.meta["quirks"] for i in false)
    assert data.LAST_REPORT["easy"].counts["false_verdict"] == 12
    # a split folder path works too, and gives the same ids
    again = task.load(str(root / "Dataset" / "Evaluation" / "Easy"), limit=5)
    assert [i.id for i in again] == [i.id for i in insts[:5]]


def test_training_carries_reference_invariants(shared_data: Path) -> None:
    insts = get_task("invbench").load(f"training:{shared_data / 'invbench'}", limit=3)
    assert len(insts) == 3
    invs = json.loads(insts[0].meta["reference_invariants"])
    assert invs and {"line", "invariant"} <= set(invs[0])


def _copy_layout(shared_data: Path, tmp_path: Path, n: int = 6) -> Path:
    src = shared_data / "invbench" / "Dataset" / "Evaluation"
    dst = tmp_path / "InvBench" / "Dataset" / "Evaluation"
    (dst / "Easy").mkdir(parents=True)
    (dst / "Hard").mkdir()
    files = sorted((src / "Easy").glob("*.c"))[:n]
    for f in files:
        shutil.copy(f, dst / "Easy" / f.name)
    rows = [r for r in json.loads((src / "timing_easy.json").read_text()) if r["file"] in {f.name for f in files}]
    # Upstream quirks, built from real rows: one program in both splits, one row repeated.
    shutil.copy(files[0], dst / "Hard" / files[0].name)
    shutil.copy(files[1], dst / "Hard" / "other_hard.c")
    rows.append(dict(rows[2], time=rows[2]["time"] + 2.0))
    rows.append({"result": "TRUE", "file": "other_hard.c", "time": 120.0})
    (dst / "timing.json").write_text(json.dumps(rows))
    return tmp_path / "InvBench"


def test_quirks_are_recorded_not_hidden(shared_data: Path, tmp_path: Path) -> None:
    root = _copy_layout(shared_data, tmp_path)
    task = get_task("invbench")
    easy = {i.meta["file"]: i for i in task.load(f"easy:{root}")}
    hard = {i.meta["file"]: i for i in task.load(f"hard:{root}")}
    both = sorted(set(easy) & set(hard))
    assert len(both) == 1
    assert "also_in_hard" in easy[both[0]].meta["quirks"]
    assert "also_in_easy" in hard[both[0]].meta["quirks"]
    repeated = [i for i in easy.values() if "repeated_timing_rows" in i.meta["quirks"]]
    assert len(repeated) == 1
    times = json.loads(repeated[0].meta["reference_times_s"])
    assert len(times) == 2 and repeated[0].meta["reference_time_s"] == pytest.approx(sum(times) / 2)
    assert data.LAST_REPORT["easy"].counts["repeated_timing_row"] == 1


def test_bad_data_names_the_file(shared_data: Path, tmp_path: Path) -> None:
    root = _copy_layout(shared_data, tmp_path)
    timing = root / "Dataset" / "Evaluation" / "timing.json"
    rows = json.loads(timing.read_text())
    victim = rows[0]["file"]
    timing.write_text(json.dumps(rows[1:]))
    with pytest.raises(DatasetError, match=victim):
        get_task("invbench").load(f"easy:{root}")
    rows[1]["result"] = "MAYBE"
    timing.write_text(json.dumps(rows))
    with pytest.raises(DatasetError, match="row 1"):
        get_task("invbench").load(f"easy:{root}")


def test_dataset_hash_follows_content(shared_data: Path, tmp_path: Path) -> None:
    root = _copy_layout(shared_data, tmp_path)
    task = get_task("invbench")
    h1 = task.dataset_hash(f"easy:{root}")
    assert h1 == task.dataset_hash(f"easy:{root}")
    prog = sorted((root / "Dataset" / "Evaluation" / "Easy").glob("*.c"))[-1]
    prog.write_text(prog.read_text() + "\n/* changed */\n")
    assert task.dataset_hash(f"easy:{root}") != h1


def test_unknown_and_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    task = get_task("invbench")
    with pytest.raises(UnknownNameError, match="known datasets"):
        task.load("medium")
    monkeypatch.delenv(data.ROOT_ENV, raising=False)
    monkeypatch.setenv("VERIBATCH_CACHE", str(tmp_path))
    monkeypatch.setattr("veribatch.tasks.invbench.upstream.ARCHIVE_URL", "http://127.0.0.1:9/{revision}.tar.gz")
    with pytest.raises(DatasetError, match="Offline"):
        task.load("easy")


def test_sample_ships_with_measured_reference() -> None:
    insts = get_task("invbench").load("sample")
    assert len(insts) == 12
    assert {i.meta["expected_verdict"] for i in insts} == {"TRUE", "FALSE"}
    assert all(i.meta["reference_time_s"] > 0 for i in insts)


def test_labels_from_a_run_that_checked_nothing_are_marked(shared_data: Path) -> None:
    """InvBench's TRUE for a program whose code calls reach_error nowhere came from a
    UAutomizer run that had no specification to check: kept, and marked."""
    root = shared_data / "invbench" / "Dataset"
    marked = {i.meta["file"]: i.meta["expected_verdict"] for i in data.load_split("easy", root)
              if "label_without_specification" in i.meta["quirks"].split(",")}
    assert len(marked) == 13 and set(marked.values()) == {"TRUE"}
    assert {"prodbin-ll_unwindbound2_3.c", "dll-rb-cnstr_1-2_4.c"} <= set(marked)
    assert "bh2017-ex-add_2.c" not in marked
    assert data.LAST_REPORT["easy"].counts["label_without_specification"] == 13
