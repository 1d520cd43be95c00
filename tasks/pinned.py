"""Fetching a benchmark's origin repository at a pinned commit, checked by sha256.

Every task that downloads its full data set at run time needs the same few steps: the
GitHub archive of one commit, unpacked into a cache folder keyed by that commit,
checked against checksums shipped with the task *before* anything reads it, and a clear
error when offline that points at the local alternatives.  They live here once; a task
supplies the URL template, the pins and its own offline hint.

Pins (a task's ``upstream_checksums.json``)::

    {"repository": "owner/name", "revision": "<40 hex>",
     "files": {"<path>": "<sha256>", ...},                 # single files
     "trees": {"<folder>": {"count": N, "glob": "*.c", "sha256": "<hash_files digest>"}}}
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import shutil
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tasks.base import DatasetError

log = logging.getLogger(__name__)

GITHUB_ARCHIVE = "https://codeload.github.com/{repository}/tar.gz/{revision}"
VERIFIED = ".verified"


def hash_files(paths: Iterable[Path], base: Path) -> str:
    """sha256 over (relative name, content sha256) pairs in sorted order: a folder's content
    hash that does not depend on file times or on where the folder lies."""
    h = hashlib.sha256()
    for p in sorted(paths):
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        h.update(str(p.relative_to(base)).encode() + b"\0" + digest.encode() + b"\n")
    return h.hexdigest()


def cache_root() -> Path:
    return Path(os.environ.get("VERIBATCH_CACHE", Path.home() / ".cache" / "veribatch"))


def verify_tree(root: Path, pins: dict[str, Any]) -> None:
    """Raise `DatasetError` unless every pinned file and tree under `root` matches."""
    for rel, want in pins.get("files", {}).items():
        path = root / rel
        if not path.is_file():
            raise DatasetError(f"{path}: missing from the fetched revision {pins['revision']}")
        got = hashlib.sha256(path.read_bytes()).hexdigest()
        if got != want:
            raise DatasetError(f"{path}: sha256 {got} does not match the pinned {want}")
    for rel, tree in pins.get("trees", {}).items():
        files = list((root / rel).glob(tree.get("glob", "*")))
        got = hash_files(files, root / rel)
        if len(files) != tree["count"] or got != tree["sha256"]:
            raise DatasetError(
                f"{root / rel}: content does not match the pinned tree ({len(files)} files, "
                f"hash {got[:12]}; pinned {tree['count']} files, hash {tree['sha256'][:12]})")


def fetch(pins: dict[str, Any], *, name: str, url: str = GITHUB_ARCHIVE, offline_hint: str = "",
          timeout_s: float = 60.0) -> Path:
    """The repository root of the pinned revision, downloaded and verified once, then cached
    under ``$VERIBATCH_CACHE/<name>/<revision>``."""
    target = cache_root() / name / pins["revision"]
    if (target / VERIFIED).is_file():
        return target
    address = url.format(repository=pins.get("repository", ""), revision=pins["revision"])
    import httpx

    try:
        resp = httpx.get(address, timeout=timeout_s, follow_redirects=True)
        resp.raise_for_status()
    except httpx.HTTPError as e:
        raise DatasetError(f"cannot fetch {name} from {address} ({type(e).__name__}: {e}). "
                           f"Offline? {offline_hint}".rstrip()) from e
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(resp.content), mode="r:gz") as tar:
            tar.extractall(tmp, filter="data")
        tops = [p for p in tmp.iterdir() if p.is_dir()]
        if len(tops) != 1:
            raise DatasetError(f"{address}: unexpected archive layout {[p.name for p in tops]}")
        verify_tree(tops[0], pins)
        shutil.rmtree(target, ignore_errors=True)
        tops[0].rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    (target / VERIFIED).write_text(json.dumps({"repository": pins.get("repository"),
                                               "revision": pins["revision"]}))
    log.info("%s: fetched and verified %s at %s", name, pins.get("repository"), pins["revision"])
    return target
