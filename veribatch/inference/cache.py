"""Completion cache: an append-only JSONL file in the run directory, keyed by request hash.

A generate shard killed half-way (preemption, time limit, ``kill -9``) must not pay
again for the requests it already got answers to.  Every answered request is appended
as one JSON line (all its `n` completions) and flushed + fsynced before `generate`
returns, so the cache is never behind the shard's ledger.  A torn last line (killed
while writing) is ignored on load.  Failed requests (``finish_reason == "error"``) are
*not* cached: a resumed shard asks again.  Garbage or empty answers *are* cached — they
are the model's answer, and re-asking could change a result that was already recorded.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
from collections.abc import Sequence
from pathlib import Path

from veribatch.inference.records import cache_identity
from veribatch.inference.types import Completion, Engine, Request

CACHE_FILE = "completions.jsonl"


class CompletionCache:
    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / CACHE_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._entries: dict[str, list[dict]] = {}
        self.torn_lines = 0
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("r", encoding="utf-8") as fh:
            for line in fh:
                try:
                    entry = json.loads(line)
                    self._entries[entry["key"]] = entry["completions"]
                except (ValueError, KeyError, TypeError):
                    self.torn_lines += 1

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str, request: Request) -> list[Completion] | None:
        raw = self._entries.get(key)
        if raw is None or len(raw) != request.sampling.n:
            return None
        # The cached answer may have been asked under another request id (same prompt).
        return [dataclasses.replace(Completion.from_json(c), request_id=request.id) for c in raw]

    def put_many(self, items: Sequence[tuple[str, list[Completion]]]) -> None:
        lines = []
        for key, comps in items:
            data = [c.to_json() for c in comps]
            self._entries[key] = data
            lines.append(json.dumps({"key": key, "completions": data}, separators=(",", ":")))
        if not lines:
            return
        blob = ("\n".join(lines) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # shards may share one run-level cache
            if os.fstat(fd).st_size:
                # a torn last line from a killed writer must not swallow our first line
                with open(self.path, "rb") as fh:
                    fh.seek(-1, os.SEEK_END)
                    if fh.read(1) != b"\n":
                        blob = b"\n" + blob
            os.write(fd, blob)
            os.fsync(fd)
        finally:
            os.close(fd)


class CachingEngine(Engine):
    """Wraps an engine; asks it only for requests the cache cannot answer."""

    def __init__(self, inner: Engine, directory: Path) -> None:
        self.inner = inner
        self.engine = inner.engine
        self.model = inner.model
        self.revision = inner.revision
        self.cache_identity = cache_identity(inner.engine, inner.model, inner.revision)
        self.cache = CompletionCache(directory)
        self.hits = 0
        self.misses = 0

    def generate(self, requests: Sequence[Request]) -> list[list[Completion]]:
        keys = [r.key(self.cache_identity) for r in requests]
        out: list[list[Completion] | None] = [self.cache.get(k, r) for k, r in zip(keys, requests, strict=True)]
        todo = [i for i, c in enumerate(out) if c is None]
        self.hits += len(requests) - len(todo)
        self.misses += len(todo)
        if todo:
            fresh = self.inner.generate([requests[i] for i in todo])
            for i, comps in zip(todo, fresh, strict=True):
                out[i] = comps
            self.cache.put_many(
                [(keys[i], comps) for i, comps in zip(todo, fresh, strict=True)
                 if not any(c.finish_reason == "error" for c in comps)]
            )
        return [c for c in out if c is not None]

    def close(self) -> None:
        self.inner.close()
