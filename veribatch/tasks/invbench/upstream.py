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
import json
import logging
from pathlib import Path

from veribatch.tasks import pinned as pinning
from veribatch.tasks.base import DatasetError

log = logging.getLogger(__name__)

ORIGIN = pinning.Origin("invbench", Path(__file__).resolve().parent / "upstream_checksums.json")
ARCHIVE_URL = "https://codeload.github.com/Anjiang-Wei/InvBench/tar.gz/{revision}"
OFFLINE_HINT = ("Use the shipped `sample` dataset, or point at a local copy with $VERIBATCH_INVBENCH_ROOT "
                "or a dataset spec like `easy:/path/to/InvBench`.")


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
    pins = ORIGIN.pins()
    pinning.verify_tree(root, pins)
    verify_timing_rows(root, pins)
    return [
        str(p.relative_to(root))
        for p in sorted((root / "Dataset").rglob("*"))
        if p.is_file()
        and str(p.relative_to(root)) not in pins["files"]
        and str(p.relative_to(root)) not in (pins.get("timing_rows") or {})
        and str(p.parent.relative_to(root)) not in pins["trees"]
    ]


def _verified(root: Path) -> list[str]:
    unverified = verify_tree(root)
    if unverified:
        log.warning("invbench upstream: %d files have no pinned checksum (e.g. %s)",
                    len(unverified), ", ".join(unverified[:3]))
    return unverified


def fetch(timeout_s: float = 60.0) -> Path:
    """The repository root of the pinned revision, downloading it if it is not cached."""
    return ORIGIN.fetch_archive(ARCHIVE_URL, title="InvBench", offline_hint=OFFLINE_HINT,
                                timeout_s=timeout_s, verify=_verified)
