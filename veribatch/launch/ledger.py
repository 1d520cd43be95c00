"""The append-only per-shard ledger: one JSON line per finished instance.

Why a ledger and not just parquet: a shard may be killed at any moment (SIGKILL,
node loss, time limit).  Each instance's records are appended and fsynced as soon
as the stage yields them, so a killed shard loses at most the instance in flight.
A torn last line (the writer died mid-write) is cut off on the next open and that
instance is simply redone; nothing already recorded is ever redone.

The first line is a header naming the input hash of the shard (the hash its DONE
marker will hold) and the code version that wrote it.  Records are only as good as
the inputs they were computed from: when an upstream shard is redone and its output
changes, the downstream ledger no longer matches and is set aside, never replayed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veribatch.tasks.base import InstanceResult

HEADER_KEY = "ledger_header"
LEDGER_FORMAT = 1
STALE_SUFFIX = ".stale"


@dataclass
class LedgerContents:
    """What a ledger holds for the instances of its shard."""

    results: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    torn_bytes: int = 0            # bytes cut off the end (an unfinished last line)
    bad_lines: list[int] = field(default_factory=list)  # 1-based lines that did not parse
    foreign: list[str] = field(default_factory=list)    # ids not assigned to this shard
    header: dict[str, Any] | None = None  # the first line: the inputs it was written for
    discarded: str = ""            # why the whole ledger was set aside ("" when it was not)


def make_header(input_hash: str, code_version: str | None) -> dict[str, Any]:
    return {HEADER_KEY: LEDGER_FORMAT, "input_hash": input_hash, "code_version": code_version,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _header(line: bytes) -> dict[str, Any] | None:
    if not line.startswith(b'{"' + HEADER_KEY.encode()):
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) and HEADER_KEY in obj else None


def read_header(path: Path | str) -> dict[str, Any] | None:
    """The ledger's header line, reading only the file's first line (for `status`)."""
    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 16)
    except OSError:
        return None
    return _header(first) if first.endswith(b"\n") else None


def count_records(path: Path | str) -> int:
    """Instances recorded in a ledger: its complete lines, less the header."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return 0
    return count_lines(data, from_start=True)


def count_lines(chunk: bytes, *, from_start: bool) -> int:
    """Instances recorded in `chunk`, a piece of a ledger: its complete lines, less the
    header when the chunk is the file's beginning.  Progress bars count a growing ledger
    piece by piece with it, so they and `count_records` agree on what the header is."""
    n = chunk.count(b"\n")
    return n - 1 if from_start and n and _header(chunk[:chunk.index(b"\n") + 1]) else n


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


def read_ledger(path: Path, expected: Iterable[str], *, input_hash: str | None = None,
                accept_headerless: bool = False, repair: bool = True) -> LedgerContents:
    """Read a ledger, keeping the first complete line per expected instance.

    With `repair`, an unterminated or unparsable last line is truncated away so the
    next append starts on a fresh line (otherwise it would be glued to the torn one).

    With `input_hash`, a ledger whose header names other inputs — an upstream shard was
    redone since, so these records were built on outputs that no longer exist — is not
    used: it is renamed to ``ledger.jsonl.stale`` (kept for post-mortems) and the shard
    starts afresh.  A ledger without a header predates headers; `accept_headerless` keeps
    it (right for a stage without upstream, whose inputs the run identity already fixes).
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
    header = _header(lines[0]) if lines else None
    first = 1 if header is not None else 0
    # A complete but unparsable last line is torn as well (e.g. zero-filled after a crash).
    if len(lines) > first and _parse(lines[-1]) is None:
        end -= len(lines[-1]) + 1
        lines = lines[:-1]
    out.torn_bytes = len(data) - end
    out.header = header
    if input_hash is not None and lines:
        if header is None and not accept_headerless:
            out.discarded = "the ledger has no header (written before headers existed)"
        elif header is not None and header.get("input_hash") != input_hash:
            out.discarded = ("the ledger was written for other inputs (an upstream shard "
                             "was redone since)")
        if out.discarded:
            if repair:
                os.replace(path, path.with_name(path.name + STALE_SUFFIX))
            return out
    for lineno, line in enumerate(lines[first:], start=first + 1):
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

    def __init__(self, path: Path, *, fsync: bool = True,
                 header: dict[str, Any] | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        self._fsync = fsync
        if header is not None and os.fstat(self._fd).st_size == 0:
            # First line, before any record: it ties every line below to these inputs.
            self._write(json.dumps(header, separators=(",", ":")).encode() + b"\n")

    def append(self, result: InstanceResult) -> None:
        line = json.dumps(
            {"instance_id": result.instance_id, "records": result.records},
            separators=(",", ":"), allow_nan=True,
        ).encode() + b"\n"
        self._write(line)

    def _write(self, line: bytes) -> None:
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
