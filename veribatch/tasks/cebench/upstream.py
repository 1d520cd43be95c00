"""LaM4Inv's programs and logs from their origin at the pinned commit (`tasks.pinned`).

``github.com/SoftWiser-group/LaM4Inv`` at ``a8898c60…``: the archive is downloaded once
into ``$VERIBATCH_CACHE/lam4inv/<revision>`` and its two folders CE-Bench reads
(``Benchmarks/Linear/c``, ``Result/GPT4TurboFull``) are checked against the tree hashes
in ``upstream_checksums.json`` before use.  The pins were computed from the copy in
``../shared/data/lam4inv`` (taken from that commit).
"""

from __future__ import annotations

from pathlib import Path

from veribatch.tasks import pinned

ORIGIN = pinned.Origin("lam4inv", Path(__file__).resolve().parent / "upstream_checksums.json")
ROOT_ENV = "VERIBATCH_LAM4INV_ROOT"
OFFLINE_HINT = (f"Use the shipped `sample` source, or a local copy of LaM4Inv: ${ROOT_ENV}, "
                "`--source lam4inv:/path/to/LaM4Inv` or `--source /path/to/LaM4Inv`.")
URL = pinned.GITHUB_ARCHIVE  # tests point this at a local server


def fetch() -> Path:
    return ORIGIN.fetch_archive(URL, offline_hint=OFFLINE_HINT)


def verify(root: Path) -> None:
    """Check a local copy against the pins (`DatasetError` on any difference)."""
    pinned.verify_tree(root, ORIGIN.pins())
