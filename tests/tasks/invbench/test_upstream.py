"""Fetching the pinned upstream revision: served from a local HTTP server, checked by sha256."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.archive_server import ArchiveServer
from veribatch.tasks.base import DatasetError
from veribatch.tasks.invbench import upstream


def _repo_copy(shared_data: Path, dst: Path) -> Path:
    """The pinned files laid out as the upstream repository (InvBench-<rev>/Dataset/...)."""
    repo = dst / f"InvBench-{upstream.ORIGIN.pins()['revision']}"
    src = shared_data / "invbench" / "Dataset"
    shutil.copytree(src / "Evaluation" / "Easy", repo / "Dataset" / "Evaluation" / "Easy")
    shutil.copy(src / "Evaluation" / "timing_easy.json", repo / "Dataset" / "Evaluation" / "timing.json")
    shutil.copytree(src / "Training", repo / "Dataset" / "Training")
    return repo


def test_fetch_verifies_and_caches(shared_data: Path, tmp_path: Path, archive_server: ArchiveServer, monkeypatch) -> None:
    repo = _repo_copy(shared_data, tmp_path / "src")
    archive_server.publish(repo, upstream.ORIGIN.pins()["revision"])
    monkeypatch.setattr(upstream, "ARCHIVE_URL", archive_server.url)
    got = upstream.fetch()
    assert (got / ".verified").is_file()
    assert len(list((got / "Dataset" / "Evaluation" / "Easy").glob("*.c"))) == 113
    archive_server.archive(upstream.ORIGIN.pins()["revision"]).unlink()
    assert upstream.fetch() == got  # cached: no second download


def test_a_changed_file_is_rejected(shared_data: Path, tmp_path: Path, archive_server: ArchiveServer, monkeypatch) -> None:
    repo = _repo_copy(shared_data, tmp_path / "src")
    victim = sorted((repo / "Dataset" / "Evaluation" / "Easy").glob("*.c"))[3]
    victim.write_text(victim.read_text().replace("main", "main ", 1))
    archive_server.publish(repo, upstream.ORIGIN.pins()["revision"])
    monkeypatch.setattr(upstream, "ARCHIVE_URL", archive_server.url)
    with pytest.raises(DatasetError, match=victim.name):
        upstream.fetch()
    assert not (upstream.ORIGIN.cache_dir() / ".verified").exists()
    assert not upstream.ORIGIN.cache_dir().with_name(upstream.ORIGIN.cache_dir().name + ".partial").exists()


def test_the_recorded_times_are_pinned(shared_data: Path, tmp_path: Path, archive_server: ArchiveServer, monkeypatch) -> None:
    """timeout_source=reference uses upstream's UAutomizer times: a changed time is refused."""
    import json

    repo = _repo_copy(shared_data, tmp_path / "src")
    timing = repo / "Dataset" / "Evaluation" / "timing.json"
    rows = json.loads(timing.read_text())
    assert upstream.timing_rows_digest(rows, {r["file"] for r in rows}) == \
        upstream.ORIGIN.pins()["timing_rows"]["Dataset/Evaluation/timing.json"]["easy"]
    rows[7]["time"] = rows[7]["time"] * 0.5
    timing.write_text(json.dumps(rows, indent=2))  # reformatted too: only the rows count
    archive_server.publish(repo, upstream.ORIGIN.pins()["revision"])
    monkeypatch.setattr(upstream, "ARCHIVE_URL", archive_server.url)
    with pytest.raises(DatasetError, match="easy rows"):
        upstream.fetch()
