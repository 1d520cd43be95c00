"""Fetching LaM4Inv at the pinned commit (served from a local HTTP server), checked by sha256;
offline, a clear error that names the alternatives."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.archive_server import ArchiveServer
from veribatch.tasks.base import DatasetError
from veribatch.tasks.cebench import data, upstream


def _repo_copy(lam4inv_root: Path, dst: Path) -> Path:
    repo = dst / f"LaM4Inv-{upstream.ORIGIN.pins()['revision']}"
    for rel in ("Benchmarks/Linear/c", "Result/GPT4TurboFull"):
        shutil.copytree(lam4inv_root / rel, repo / rel)
    return repo


@pytest.fixture
def served(archive_server: ArchiveServer, monkeypatch: pytest.MonkeyPatch) -> ArchiveServer:
    monkeypatch.setattr(upstream, "URL", archive_server.url)
    monkeypatch.delenv("VERIBATCH_LAM4INV_ROOT", raising=False)
    return archive_server


def test_fetch_verifies_caches_and_gives_the_same_instances(lam4inv_root: Path, served: ArchiveServer, tmp_path: Path) -> None:
    served.publish(_repo_copy(lam4inv_root, tmp_path / "src"), upstream.ORIGIN.pins()["revision"])
    where = data.resolve("lam4inv")
    assert isinstance(where, data.Source) and (where.root / ".verified").is_file()
    served.archive(upstream.ORIGIN.pins()["revision"]).unlink()
    assert data.resolve("lam4inv").root == where.root  # cached: no second download
    local = data.Source("lam4inv", lam4inv_root)
    assert data.source_hash(where) == data.source_hash(local)
    assert [i.id for i in data.load_source(where, limit=5)] == [i.id for i in data.load_source(local, limit=5)]


def test_a_changed_log_is_refused(lam4inv_root: Path, served: ArchiveServer, tmp_path: Path) -> None:
    repo = _repo_copy(lam4inv_root, tmp_path / "src")
    log = repo / "Result/GPT4TurboFull/1.txt"
    log.write_text(log.read_text().replace("x >= y", "x > y", 1))
    served.publish(repo, upstream.ORIGIN.pins()["revision"])
    with pytest.raises(DatasetError, match="does not match the pinned tree"):
        data.resolve("lam4inv")
    assert not (Path(str(tmp_path / "cache")) / "lam4inv" / upstream.ORIGIN.pins()["revision"]).exists()


def test_offline_names_the_alternatives(served: ArchiveServer) -> None:  # nothing published: 404
    with pytest.raises(DatasetError, match="VERIBATCH_LAM4INV_ROOT") as err:
        data.resolve("lam4inv")
    assert "sample" in str(err.value)


def test_the_shared_copy_is_the_pinned_revision(lam4inv_root: Path) -> None:
    upstream.verify(lam4inv_root)
