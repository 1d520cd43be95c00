"""Fetching the InvBench data from its origin at a pinned revision, checked by sha256.

The archive of the pinned commit is downloaded once into the cache
(``$VERIBATCH_CACHE/invbench/<revision>``, default ``~/.cache/veribatch``) and every file
named in ``upstream_checksums.json`` is checked before use; a mismatch is an error, and
files the checksum list does not name (the hard split's programs) are logged as
unverified rather than silently trusted.  The combined timing file — the recorded
UAutomizer verdicts and solve times, which ``-o timeout_source=reference`` uses as the
paper's decision timeouts (§4) — is pinned by its rows: per split, a sha256 over the
sorted unique (file, result, time) rows of that split's programs (`timing_rows_digest`),
so a changed time or verdict is refused while the check does not depend on formatting.  Offline, the error says so and
points at the local alternatives.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import shutil
import tarfile
from pathlib import Path

from tasks.base import DatasetError
from tasks.invbench.data import hash_files

log = logging.getLogger(__name__)

CHECKSUMS = Path(__file__).resolve().parent / "upstream_checksums.json"
ARCHIVE_URL = "https://codeload.github.com/Anjiang-Wei/InvBench/tar.gz/{revision}"


def pinned() -> dict:
    return json.loads(CHECKSUMS.read_text())


def cache_dir() -> Path:
    base = Path(os.environ.get("VERIBATCH_CACHE", Path.home() / ".cache" / "veribatch"))
    return base / "invbench" / pinned()["revision"]


SPLIT_DIRS = {"easy": "Dataset/Evaluation/Easy", "hard": "Dataset/Evaluation/Hard"}


def timing_rows_digest(rows: list[dict], files: set[str]) -> str:
    """sha256 over the sorted unique (file, result, repr(time)) rows of `files`."""
    uniq = sorted({(str(r["file"]), str(r["result"]), repr(float(r["time"]))) for r in rows if r.get("file") in files})
    return hashlib.sha256(json.dumps(uniq, separators=(",", ":")).encode()).hexdigest()


def verify_timing_rows(root: Path, pins: dict) -> None:
    """Each split present under `root` must have exactly the pinned timing rows."""
    for rel, per_split in (pins.get("timing_rows") or {}).items():
        path = root / rel
        try:
            rows = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise DatasetError(f"{path}: cannot read the pinned timing file: {e}") from e
        for split, want in per_split.items():
            folder = root / SPLIT_DIRS[split]
            if not folder.is_dir():
                continue  # an archive without that split (tests serve the easy split only)
            got = timing_rows_digest(rows, {p.name for p in folder.glob("*.c")})
            if got != want:
                raise DatasetError(f"{path}: the {split} rows (recorded UAutomizer verdicts and times) "
                                   f"do not match the pinned rows (sha256 {got}, pinned {want})")


def verify_tree(root: Path) -> list[str]:
    """Check `root` (the repository root) against the pinned checksums; return unverified files."""
    pins = pinned()
    for rel, want in pins["files"].items():
        path = root / rel
        if not path.is_file():
            raise DatasetError(f"{path}: missing from the fetched revision {pins['revision']}")
        got = hashlib.sha256(path.read_bytes()).hexdigest()
        if got != want:
            raise DatasetError(f"{path}: sha256 {got} does not match the pinned {want}")
    for rel, tree in pins["trees"].items():
        progs = list((root / rel).glob("*.c"))
        if len(progs) != tree["count"] or hash_files(progs, root / rel) != tree["sha256"]:
            raise DatasetError(f"{root / rel}: content does not match the pinned tree hash")
    verify_timing_rows(root, pins)
    return [
        str(p.relative_to(root))
        for p in sorted((root / "Dataset").rglob("*"))
        if p.is_file()
        and str(p.relative_to(root)) not in pins["files"]
        and str(p.relative_to(root)) not in (pins.get("timing_rows") or {})
        and str(p.parent.relative_to(root)) not in pins["trees"]
    ]


def fetch(timeout_s: float = 60.0) -> Path:
    """The repository root of the pinned revision, downloading it if it is not cached."""
    target = cache_dir()
    if (target / ".verified").is_file():
        return target
    pins = pinned()
    url = ARCHIVE_URL.format(revision=pins["revision"])
    import httpx

    try:
        resp = httpx.get(url, timeout=timeout_s, follow_redirects=True)
        resp.raise_for_status()
    except httpx.HTTPError as e:
        raise DatasetError(
            f"cannot fetch InvBench from {url} ({type(e).__name__}: {e}). Offline? Use the "
            "shipped `sample` dataset, or point at a local copy with $VERIBATCH_INVBENCH_ROOT "
            "or a dataset spec like `easy:/path/to/InvBench`."
        ) from e
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(resp.content), mode="r:gz") as tar:
            tar.extractall(tmp, filter="data")
        tops = [p for p in tmp.iterdir() if p.is_dir()]
        if len(tops) != 1:
            raise DatasetError(f"{url}: unexpected archive layout {[p.name for p in tops]}")
        unverified = verify_tree(tops[0])
        if unverified:
            log.warning("invbench upstream: %d files have no pinned checksum (e.g. %s)",
                        len(unverified), ", ".join(unverified[:3]))
        shutil.rmtree(target, ignore_errors=True)
        tops[0].rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    (target / ".verified").write_text(json.dumps({"revision": pins["revision"], "unverified": unverified}))
    return target
