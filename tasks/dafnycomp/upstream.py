"""Fetching DafnyComp's 300 programs from ReForm at a pinned revision, checked by sha256.

The archive of the pinned commit is streamed once into the cache
(``$VERIBATCH_CACHE/dafnycomp/<revision>``, default ``~/.cache/veribatch``), keeping only
the ``Chain_300`` folder.  Every file named in ``upstream_checksums.json`` must be present
and match; the number of program folders must be the pinned count; files the checksum list
does not name are logged as unverified rather than silently trusted (the list was recorded
from the project's shared copy of 125 of the 300 programs; ``python -m
tasks.dafnycomp.upstream --pin`` records the rest from a verified fetch).  Offline, the
error says so and points at the local alternatives.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from tasks.base import DatasetError

log = logging.getLogger(__name__)

CHECKSUMS = Path(__file__).resolve().parent / "upstream_checksums.json"
ARCHIVE_URL = "https://codeload.github.com/Veri-Code/ReForm/tar.gz/{revision}"


def pinned() -> dict:
    return json.loads(CHECKSUMS.read_text())


def cache_dir() -> Path:
    base = Path(os.environ.get("VERIBATCH_CACHE", Path.home() / ".cache" / "veribatch"))
    return base / "dafnycomp" / pinned()["revision"]


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def verify_tree(chain: Path) -> list[str]:
    """Check a Chain_300 folder against the pins; return the files that have no pin."""
    pins = pinned()
    for rel, want in pins["files"].items():
        path = chain / rel
        if not path.is_file():
            raise DatasetError(f"{path}: missing from the fetched revision {pins['revision']}")
        got = _sha256(path)
        if got != want:
            raise DatasetError(f"{path}: sha256 {got} does not match the pinned {want}")
    programs = sorted(p.relative_to(chain).as_posix() for p in chain.glob("*/dafny_code.dfy"))
    if len(programs) != pins["count"]:
        raise DatasetError(f"{chain}: {len(programs)} programs, the pinned revision has {pins['count']}")
    return [p for p in programs if p not in pins["files"]]


def _download(url: str, dst: Path, timeout_s: float) -> None:
    import httpx

    try:
        with httpx.stream("GET", url, timeout=timeout_s, follow_redirects=True) as resp:
            resp.raise_for_status()
            with open(dst, "wb") as f:
                for chunk in resp.iter_bytes(1 << 20):
                    f.write(chunk)
    except httpx.HTTPError as e:
        raise DatasetError(
            f"cannot fetch DafnyComp from {url} ({type(e).__name__}: {e}). Offline? Use the "
            "shipped `sample` dataset, or point at a local copy of Chain_300 with "
            "$VERIBATCH_DAFNYCOMP_ROOT or a dataset spec like `chain300:/path/to/Chain_300`."
        ) from e


def _extract(archive: Path, folder: str, dst: Path) -> Path:
    """Stream the archive, keeping only `<top>/<folder>/...`; return the extracted folder."""
    found: Path | None = None
    with tarfile.open(archive, mode="r|gz") as tar:
        for member in tar:
            top, _, rest = member.name.partition("/")
            if rest == folder or rest.startswith(folder + "/"):
                tar.extract(member, dst, filter="data")
                found = dst / top / folder
    if found is None or not found.is_dir():
        raise DatasetError(f"{archive.name}: no {folder} in the archive")
    return found


def fetch(timeout_s: float = 300.0) -> Path:
    """The pinned Chain_300 folder, downloading it if it is not cached."""
    target = cache_dir()
    if (target / ".verified").is_file():
        return target
    pins = pinned()
    url = ARCHIVE_URL.format(revision=pins["revision"])
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        archive = tmp / "archive.tar.gz"
        _download(url, archive, timeout_s)
        chain = _extract(archive, pins["folder"], tmp / "x")
        unverified = verify_tree(chain)
        if unverified:
            log.warning("dafnycomp upstream: %d of %d programs have no pinned checksum (e.g. %s)",
                        len(unverified), pins["count"], ", ".join(unverified[:3]))
        (chain / ".verified").write_text(json.dumps({"revision": pins["revision"],
                                                     "unverified": unverified}))
        shutil.rmtree(target, ignore_errors=True)
        chain.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def pin(chain: Path) -> int:
    """Record the sha256 of every program of a verified fetch in the checksum file."""
    verify_tree(chain)  # the existing pins must hold before more are added
    doc = pinned()
    doc["files"] = {p.relative_to(chain).as_posix(): _sha256(p) for p in sorted(chain.glob("*/dafny_code.dfy"))}
    CHECKSUMS.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return len(doc["files"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tasks.dafnycomp.upstream",
                                 description="Fetch (and verify) DafnyComp's Chain_300 at the pinned revision.")
    ap.add_argument("--pin", action="store_true", help="also record checksums of every program")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    try:
        chain = fetch()
    except DatasetError as e:
        print(e, file=sys.stderr)
        return 2
    print(chain)
    if args.pin:
        print(f"{pin(chain)} checksums written to {CHECKSUMS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
