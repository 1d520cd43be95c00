"""The append-only per-shard ledger: one JSON line per finished instance.

Why a ledger and not just parquet: a shard may be killed at any moment (SIGKILL,
node loss, time limit).  Each instance's records are appended and fsynced as soon
as the stage yields them, so a killed shard loses at most the instance in flight.
A torn last line (the writer died mid-write) is cut off on the next open and that
instance is simply redone; nothing already recorded is ever redone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.base import InstanceResult


@dataclass
class LedgerContents:
    """What a ledger holds for the instances of its shard."""

    results: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    torn_bytes: int = 0            # bytes cut off the end (an unfinished last line)
    bad_lines: list[int] = field(default_factory=list)  # 1-based lines that did not parse
    foreign: list[str] = field(default_factory=list)    # ids not assigned to this shard


def _parse(line: bytes) -> tuple[str, list[dict[str, Any]]] | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    iid, records = obj.get("instance_id"), obj.get("records")
    if not isinstance(iid, str) or not isinstance(records, list):
        return None
    if not all(isinstance(r, dict) for r in records):
        return None
    return iid, records


def read_ledger(path: Path, expected: Iterable[str], *, repair: bool = True) -> LedgerContents:
    """Read a ledger, keeping the first complete line per expected instance.

    With `repair`, an unterminated or unparsable last line is truncated away so the
    next append starts on a fresh line (otherwise it would be glued to the torn one).
    """
    out = LedgerContents()
    if not path.exists():
        return out
    wanted = set(expected)
    data = path.read_bytes()
    end = len(data)
    if data and not data.endswith(b"\n"):
        end = data.rfind(b"\n") + 1  # 0 when there is no complete line at all
    lines = data[:end].split(b"\n")[:-1] if end else []
    # A complete but unparsable last line is torn as well (e.g. zero-filled after a crash).
    if lines and _parse(lines[-1]) is None:
        end -= len(lines[-1]) + 1
        lines = lines[:-1]
    out.torn_bytes = len(data) - end
    for lineno, line in enumerate(lines, start=1):
        parsed = _parse(line)
        if parsed is None:
            out.bad_lines.append(lineno)
            continue
        iid, records = parsed
        if iid not in wanted:
            out.foreign.append(iid)
        elif iid not in out.results:
            out.results[iid] = records
    if repair and out.torn_bytes:
        with open(path, "r+b") as f:
            f.truncate(end)
            os.fsync(f.fileno())
    return out


class LedgerWriter:
    """Appends one line per `InstanceResult`, fsynced before `append` returns."""

    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._fsync = fsync

    def append(self, result: InstanceResult) -> None:
        line = json.dumps(
            {"instance_id": result.instance_id, "records": result.records},
            separators=(",", ":"), allow_nan=True,
        ).encode() + b"\n"
        # One write() of the whole line: O_APPEND makes it land contiguously.
        view = memoryview(line)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        if self._fsync:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> LedgerWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
