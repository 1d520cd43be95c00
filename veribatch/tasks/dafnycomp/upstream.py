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
import json
import logging
import sys
from pathlib import Path

from veribatch.tasks import pinned as pinning
from veribatch.tasks.base import DatasetError

log = logging.getLogger(__name__)

ORIGIN = pinning.Origin("dafnycomp", Path(__file__).resolve().parent / "upstream_checksums.json")
ARCHIVE_URL = "https://codeload.github.com/Veri-Code/ReForm/tar.gz/{revision}"
OFFLINE_HINT = ("Use the shipped `sample` dataset, or point at a local copy of Chain_300 with "
                "$VERIBATCH_DAFNYCOMP_ROOT or a dataset spec like `chain300:/path/to/Chain_300`.")


def verify_tree(chain: Path) -> list[str]:
    """Check a Chain_300 folder against the pins; return the files that have no pin."""
    pins = ORIGIN.pins()
    pinning.verify_files(chain, pins["files"], pins["revision"])
    programs = sorted(p.relative_to(chain).as_posix() for p in chain.glob("*/dafny_code.dfy"))
    if len(programs) != pins["count"]:
        raise DatasetError(f"{chain}: {len(programs)} programs, the pinned revision has {pins['count']}")
    return [p for p in programs if p not in pins["files"]]


def _verified(chain: Path) -> list[str]:
    unverified = verify_tree(chain)
    if unverified:
        log.warning("dafnycomp upstream: %d of %d programs have no pinned checksum (e.g. %s)",
                    len(unverified), ORIGIN.pins()["count"], ", ".join(unverified[:3]))
    return unverified


def fetch(timeout_s: float = 300.0) -> Path:
    """The pinned Chain_300 folder, downloading it if it is not cached (only that folder of
    the archive is extracted)."""
    return ORIGIN.fetch_archive(ARCHIVE_URL, title="DafnyComp", offline_hint=OFFLINE_HINT,
                                timeout_s=timeout_s, folder=ORIGIN.pins()["folder"], verify=_verified)


def pin(chain: Path) -> int:
    """Record the sha256 of every program of a verified fetch in the checksum file."""
    verify_tree(chain)  # the existing pins must hold before more are added
    doc = ORIGIN.pins()
    doc["files"] = {p.relative_to(chain).as_posix(): pinning.file_sha256(p) for p in sorted(chain.glob("*/dafny_code.dfy"))}
    ORIGIN.pin_file.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return len(doc["files"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m veribatch.tasks.dafnycomp.upstream",
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
        print(f"{pin(chain)} checksums written to {ORIGIN.pin_file}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
