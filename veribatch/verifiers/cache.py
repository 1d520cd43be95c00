"""Verifier results cached by content, so a re-run or a resumed shard never re-verifies.

The key is a sha256 over everything that can change a verdict *except the limits*:
tool name, tool version (which for the apptainer runtime carries the image's
sha256), runtime, the query's property/options/data model, and the name and
content of every query file (not its path, so the same program in another run
directory hits).  Under one key, one entry per limits is stored.

Which stored entry may answer a query at limits L (the rule, in one place):

- a decided verdict (TRUE/FALSE) answers any L that the stored run *fits in*:
  its measured wall time, CPU time and peak memory are all within L.  A proof
  found in 4 s under a 600 s limit is the same proof under a 10 s limit, and a
  proof found under a 10 s limit stands under 600 s;
- anything undecided (UNKNOWN, TIMEOUT, OOM) answers only the *same* limits: a
  TIMEOUT at 10 s says nothing about 600 s, and an UNKNOWN may come from a tool's
  internal budget that scales with the limit;
- ERROR and cancelled runs are never stored: they describe the machine or the
  caller, not the query — except an input the tool could not read (an ERROR with
  ``extras["phase"] == "parse"``, `verifiers.result`): that describes the query itself,
  as the FALSE it replaced did, and answers the same limits like an undecided result.

Entries are single JSON files written atomically (temp file + rename), so many
workers on a shared file system can read and write the cache without locks.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from veribatch.verifiers.base import Query
from veribatch.verifiers.result import Limits, Status, VerifierResult


def file_digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def query_key(tool: str, version: str, runtime: str, query: Query) -> str:
    """The content hash of a query (limits excluded; see the module docstring)."""
    blob = {
        "tool": tool,
        "version": version,
        "runtime": runtime,
        "property": query.property,
        "options": list(query.options),
        "data_model": query.data_model,
        "files": [[Path(f).name, file_digest(Path(f))] for f in query.files],
    }
    text = json.dumps(blob, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _limits_id(limits: Limits) -> str:
    text = json.dumps(limits.key(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cacheable(result: VerifierResult) -> bool:
    unreadable = result.status is Status.ERROR and result.extras.get("phase") == "parse"
    return ((result.status is not Status.ERROR or unreadable)
            and result.termination_reason != "cancelled")


def answers(stored_limits: Limits, result: VerifierResult, wanted: Limits) -> bool:
    """Whether a result obtained under `stored_limits` may answer a query at `wanted`."""
    if result.status.decided:
        cpu_limit = wanted.cpu_cap
        return (
            result.wall_s <= wanted.wall_s
            and result.cpu_s <= cpu_limit
            and result.peak_mem_mb <= wanted.memory_mb
        )
    return stored_limits.key() == wanted.key()


class ResultCache:
    """A directory of cached `VerifierResult`s: ``<dir>/<key[:2]>/<key>/<limits-id>.json``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    def get(self, key: str, limits: Limits) -> VerifierResult | None:
        """A stored result that answers `limits`; exact-limits entries first, then decided ones."""
        entries = list(self._entries(key))
        entries.sort(key=lambda e: e[0].key() != limits.key())
        for stored_limits, result in entries:
            if answers(stored_limits, result, limits):
                return result
        return None

    def put(self, key: str, limits: Limits, result: VerifierResult) -> bool:
        if not cacheable(result):
            return False
        d = self._dir(key)
        d.mkdir(parents=True, exist_ok=True)
        record = {"limits": limits.key(), "result": result.to_json()}
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, sort_keys=True)
        os.replace(tmp, d / f"{_limits_id(limits)}.json")
        return True

    def _entries(self, key: str) -> Iterable[tuple[Limits, VerifierResult]]:
        d = self._dir(key)
        if not d.is_dir():
            return
        for path in sorted(d.glob("*.json")):
            try:
                record: dict[str, Any] = json.loads(path.read_text())
                yield Limits(**record["limits"]), VerifierResult.from_json(record["result"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a corrupt entry is a miss, never a verdict
