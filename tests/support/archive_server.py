"""A local stand-in for codeload.github.com (the pinned-download tests; the fixture that
starts it is `archive_server` in tests/conftest.py)."""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path


@dataclass
class ArchiveServer:
    """A local HTTP server in the place of codeload.github.com, for the pinned-download tests:
    `url` is a task's archive URL template, `publish` serves a repository folder as one
    commit's archive (GitHub's layout: one top folder)."""

    root: Path
    url: str

    def archive(self, revision: str) -> Path:
        return self.root / f"{revision}.tar.gz"

    def publish(self, repo: Path, revision: str) -> None:
        with tarfile.open(self.archive(revision), "w:gz") as tar:
            tar.add(repo, arcname=repo.name)
