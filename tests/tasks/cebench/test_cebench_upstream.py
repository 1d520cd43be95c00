"""Fetching LaM4Inv at the pinned commit (served from a local HTTP server), checked by sha256;
offline, a clear error that names the alternatives."""

from __future__ import annotations

import functools
import http.server
import shutil
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.base import DatasetError
from tasks.cebench import data, upstream


def _repo_copy(lam4inv_root: Path, dst: Path) -> Path:
    repo = dst / f"LaM4Inv-{upstream.pins()['revision']}"
    for rel in ("Benchmarks/Linear/c", "Result/GPT4TurboFull"):
        shutil.copytree(lam4inv_root / rel, repo / rel)
    return repo


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setattr(upstream, "URL", f"http://127.0.0.1:{httpd.server_address[1]}/{{revision}}.tar.gz")
    monkeypatch.setenv("VERIBATCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("VERIBATCH_LAM4INV_ROOT", raising=False)
    try:
        yield root
    finally:
        httpd.shutdown()


def _publish(repo: Path, www: Path) -> None:
    with tarfile.open(www / f"{upstream.pins()['revision']}.tar.gz", "w:gz") as tar:
        tar.add(repo, arcname=repo.name)


def test_fetch_verifies_caches_and_gives_the_same_instances(lam4inv_root: Path, served: Path, tmp_path: Path) -> None:
    _publish(_repo_copy(lam4inv_root, tmp_path / "src"), served)
    where = data.resolve("lam4inv")
    assert isinstance(where, data.Source) and (where.root / ".verified").is_file()
    (served / f"{upstream.pins()['revision']}.tar.gz").unlink()
    assert data.resolve("lam4inv").root == where.root  # cached: no second download
    local = data.Source("lam4inv", lam4inv_root)
    assert data.source_hash(where) == data.source_hash(local)
    assert [i.id for i in data.load_source(where, limit=5)] == [i.id for i in data.load_source(local, limit=5)]


def test_a_changed_log_is_refused(lam4inv_root: Path, served: Path, tmp_path: Path) -> None:
    repo = _repo_copy(lam4inv_root, tmp_path / "src")
    log = repo / "Result/GPT4TurboFull/1.txt"
    log.write_text(log.read_text().replace("x >= y", "x > y", 1))
    _publish(repo, served)
    with pytest.raises(DatasetError, match="does not match the pinned tree"):
        data.resolve("lam4inv")
    assert not (Path(str(tmp_path / "cache")) / "lam4inv" / upstream.pins()["revision"]).exists()


def test_offline_names_the_alternatives(served: Path) -> None:  # nothing published: 404
    with pytest.raises(DatasetError, match="VERIBATCH_LAM4INV_ROOT") as err:
        data.resolve("lam4inv")
    assert "sample" in str(err.value)


def test_the_shared_copy_is_the_pinned_revision(lam4inv_root: Path) -> None:
    upstream.verify(lam4inv_root)
