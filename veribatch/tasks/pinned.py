"""Fetching a benchmark's data from its origin at a pinned revision, checked by sha256.

Every task that downloads its full data set at run time needs the same steps: one
commit's archive (or a task's own list of files), unpacked into a cache folder keyed by
that revision (``$VERIBATCH_CACHE/<name>/<revision>``, default ``~/.cache/veribatch``),
checked against checksums shipped with the task *before* anything reads it, installed
whole or not at all (a ``.verified`` marker says it passed), and a clear error when
offline that points at the local alternatives.  They live here once; a task supplies the
URL template, its pins, what to check beyond them and its own offline hint.

A task declares its origin once, as an `Origin` in its ``upstream`` module (the cache
folder's name and the pin file; the repository and revision are in the pin file), and
keeps there only what is its own: the URL, the checks beyond the pinned checksums, the
offline hint.  Reading the pins, the cache folder and the fetch-verify-install-once
sequence are `Origin`'s, whatever the files come from (a repository archive, single
raw files, the Hugging Face hub).

Pins (a task's ``upstream_checksums.json``; `verify_tree` checks the two keys below, a
task may check more of its own)::

    {"repository": "owner/name", "revision": "<commit>",
     "files": {"<path>": "<sha256>", ...},                 # single files
     "trees": {"<folder>": {"count": N, "glob": "*.c", "sha256": "<hash_files digest>"}}}
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tarfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veribatch.tasks.base import DatasetError

log = logging.getLogger(__name__)

GITHUB_ARCHIVE = "https://codeload.github.com/{repository}/tar.gz/{revision}"
VERIFIED = ".verified"


def cache_root() -> Path:
    return Path(os.environ.get("VERIBATCH_CACHE", Path.home() / ".cache" / "veribatch"))


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def hash_files(paths: Iterable[Path], base: Path) -> str:
    """sha256 over (relative name, content sha256) pairs in sorted order: a folder's content
    hash that does not depend on file times or on where the folder lies."""
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.relative_to(base)).encode() + b"\0" + file_sha256(p).encode() + b"\n")
    return h.hexdigest()


def check_sha256(where: Path | str, got: str, want: str) -> None:
    if got != want:
        raise DatasetError(f"{where}: sha256 {got} does not match the pinned {want}")


def verify_files(root: Path, files: dict[str, str], revision: str) -> None:
    """Every pinned file is under `root` with its pinned sha256."""
    for rel, want in files.items():
        path = root / rel
        if not path.is_file():
            raise DatasetError(f"{path}: missing from the fetched revision {revision}")
        check_sha256(path, file_sha256(path), want)


def verify_trees(root: Path, trees: dict[str, dict[str, Any]]) -> None:
    """Every pinned folder holds the pinned number of files, with the pinned `hash_files`."""
    for rel, tree in trees.items():
        files = list((root / rel).glob(tree.get("glob", "*")))
        got = hash_files(files, root / rel)
        if len(files) != tree["count"] or got != tree["sha256"]:
            raise DatasetError(
                f"{root / rel}: content does not match the pinned tree ({len(files)} files, "
                f"hash {got[:12]}; pinned {tree['count']} files, hash {tree['sha256'][:12]})")


def verify_tree(root: Path, pins: dict[str, Any]) -> None:
    """Raise `DatasetError` unless every pinned file and tree under `root` matches."""
    verify_files(root, pins.get("files") or {}, pins["revision"])
    verify_trees(root, pins.get("trees") or {})


def download(url: str, dst: Path, *, what: str, offline_hint: str = "", timeout_s: float = 60.0) -> None:
    """Stream `url` into `dst`; any HTTP failure is the offline error naming the alternatives."""
    import httpx

    try:
        with httpx.stream("GET", url, timeout=timeout_s, follow_redirects=True) as resp:
            resp.raise_for_status()
            with open(dst, "wb") as f:
                for chunk in resp.iter_bytes(1 << 20):
                    f.write(chunk)
    except httpx.HTTPError as e:
        raise DatasetError(f"cannot fetch {what} from {url} ({type(e).__name__}: {e}). "
                           f"Offline? {offline_hint}".rstrip()) from e


def extract(archive: Path, dst: Path, folder: str | None = None) -> Path:
    """Stream a repository archive (one top-level folder) into `dst`; return that folder, or
    with `folder` extract only ``<top>/<folder>/...`` and return it."""
    tops: set[str] = set()
    with tarfile.open(archive, mode="r|gz") as tar:
        for member in tar:
            top, _, rest = member.name.partition("/")
            if folder is None or rest == folder or rest.startswith(folder + "/"):
                tar.extract(member, dst, filter="data")
                tops.add(top)
    if folder is not None:
        found = [dst / top / folder for top in sorted(tops) if (dst / top / folder).is_dir()]
        if len(found) != 1:
            raise DatasetError(f"{archive.name}: no {folder} in the archive")
        return found[0]
    dirs = [p for p in dst.iterdir() if p.is_dir()] if dst.is_dir() else []
    if len(dirs) != 1:
        raise DatasetError(f"{archive.name}: unexpected archive layout {[p.name for p in dirs]}")
    return dirs[0]


@contextmanager
def staging(target: Path) -> Iterator[Path]:
    """A fresh ``<target>.partial`` folder beside `target`, removed afterwards whatever happens:
    a failed or interrupted fetch leaves neither a half-written cache nor a marker."""
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def install(src: Path, target: Path, marker: dict[str, Any]) -> Path:
    """Mark the verified `src` and move it to `target` (replacing an unmarked leftover)."""
    (src / VERIFIED).write_text(json.dumps(marker))
    shutil.rmtree(target, ignore_errors=True)
    src.rename(target)
    return target


@dataclass(frozen=True)
class Origin:
    """Where a task's data comes from at a pinned revision: the pin file, and the cache folder
    ``$VERIBATCH_CACHE/<name>/<revision>`` the verified copy lives in.

    `env` names an environment variable that may point at another pin file (a test's, or a
    new pin being tried); `what` names the pin file in errors."""

    name: str
    pin_file: Path
    env: str | None = None
    what: str = "the pinned checksums"

    def path(self) -> Path:
        """The pin file in use: `env`'s when it is set, else the task's own."""
        return Path(os.environ[self.env]) if self.env and os.environ.get(self.env) else self.pin_file

    def pins(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.path().read_text()))
        except (OSError, json.JSONDecodeError) as e:
            raise DatasetError(f"{self.path()}: cannot read {self.what}: {e}") from e

    def cache_dir(self, revision: str | None = None) -> Path:
        """The verified copy's folder (the pinned revision's unless another is named)."""
        return cache_root() / self.name / (revision or str(self.pins()["revision"]))

    def once(self, fill: Callable[[Path], tuple[Path, dict[str, Any]]], revision: str | None = None) -> Path:
        """The verified copy of `revision` (default: the pinned one), made on first use.

        `fill(staging)` downloads and checks the files into the empty folder `staging` and
        returns (the folder to keep, the ``.verified`` marker's content); anything it
        raises leaves no cache behind (`staging`, `install`)."""
        target = self.cache_dir(revision)
        if (target / VERIFIED).is_file():
            return target
        with staging(target) as tmp:
            root, marker = fill(tmp)
            install(root, target, marker)
        return target

    def fetch_archive(self, url: str = GITHUB_ARCHIVE, *, offline_hint: str = "", timeout_s: float = 60.0,
                      title: str | None = None, folder: str | None = None,
                      verify: Callable[[Path], list[str] | None] | None = None) -> Path:
        """The repository root (or its `folder`) at the pinned revision: one archive,
        downloaded, checked and cached once.

        `url` is formatted with ``repository`` and ``revision``; `title` names the data set
        in the offline error (default `name`); `verify(root)` replaces `verify_tree` and
        returns the files it could not check (recorded in the marker; the task says why
        they are acceptable)."""
        pins = self.pins()
        revision = pins["revision"]

        def fill(tmp: Path) -> tuple[Path, dict[str, Any]]:
            archive = tmp / "archive.tar.gz"
            address = url.format(repository=pins.get("repository", ""), revision=revision)
            download(address, archive, what=title or self.name, offline_hint=offline_hint, timeout_s=timeout_s)
            root = extract(archive, tmp / "x", folder)
            if verify is None:
                verify_tree(root, pins)
                unverified = None
            else:
                unverified = verify(root)
            log.info("%s: fetched and verified %s at %s", self.name, pins.get("repository"), revision)
            return root, {"repository": pins.get("repository"), "revision": revision,
                          "unverified": unverified or []}

        return self.once(fill, revision)
