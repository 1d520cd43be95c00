"""`replay:RUN_DIR` — completions read back from an earlier run instead of asking a model.

Re-scoring old generations with another verifier or budget must not call the model
again (it would change the candidates and cost GPU hours).  The replay engine reads the
completion columns (`inference.records.COMPLETION_COLUMNS`) from every parquet file of
the earlier run — and, as a fallback, its `completions.jsonl` caches — and answers each
request with the completions recorded for the same request key.

The completions keep the `engine`, `model` and `latency_s` of the run that produced
them: they name the engine that really generated the text, and generation time stays
the original one (InvBench speedups include it).  A request the earlier run never
asked gets an error completion saying so; it is never silently answered.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from veribatch.inference.cache import CACHE_FILE
from veribatch.inference.common import error_completions
from veribatch.inference.errors import EngineError
from veribatch.inference.records import COMPLETION_COLUMNS, cache_identity, completion_from_record
from veribatch.inference.types import Completion, Engine, Request


class ReplayEngine(Engine):
    engine = "replay"
    loads_weights = False  # recorded completions

    def __init__(self, run_dir: str | Path, *, match: str = "key") -> None:
        if match not in ("key", "id"):
            raise EngineError(f"replay: match must be 'key' or 'id', not {match!r}")
        self.run_dir = Path(run_dir).expanduser()
        self.model = str(self.run_dir)
        self.match = match
        if not self.run_dir.is_dir():
            raise EngineError(f"replay: run directory {self.run_dir} does not exist")
        self.by_key: dict[str, list[Completion]] = defaultdict(list)
        self.by_id: dict[str, list[Completion]] = defaultdict(list)
        self.identities: set[str] = set()
        self.sources: list[Path] = []
        self._load_parquet()
        if not self.by_key:
            self._load_caches()
        if not self.by_key:
            raise EngineError(
                f"replay: no completions found under {self.run_dir} (looked for parquet files "
                f"with columns {', '.join(COMPLETION_COLUMNS[:4])}... and for {CACHE_FILE})"
            )
        models = sorted({c.model for cs in self.by_key.values() for c in cs})
        self.revision = "replay-of:" + ",".join(models)

    def _add(self, key: str, comp: Completion) -> None:
        self.by_key[key].append(comp)
        self.by_id[comp.request_id].append(comp)
        self.identities.add(cache_identity(comp.engine, comp.model, comp.model_revision))

    def _load_parquet(self) -> None:
        import pyarrow.parquet as pq

        for path in sorted(self.run_dir.rglob("*.parquet")):
            try:
                names = set(pq.read_schema(path).names)
                if not set(COMPLETION_COLUMNS) <= names:
                    continue
                rows = pq.read_table(path, columns=list(COMPLETION_COLUMNS)).to_pylist()
            except Exception as exc:  # noqa: BLE001
                raise EngineError(f"replay: cannot read {path}: {exc}") from exc
            self.sources.append(path)
            for n, row in enumerate(rows):
                if row["request_key"] is None:
                    continue  # a task's own row without a completion (e.g. unparsable program)
                try:
                    self._add(str(row["request_key"]), completion_from_record(row))
                except (KeyError, TypeError, ValueError) as exc:
                    raise EngineError(f"replay: {path} row {n}: bad completion columns ({exc})") from exc

    def _load_caches(self) -> None:
        for path in sorted(self.run_dir.rglob(CACHE_FILE)):
            self.sources.append(path)
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                    for c in entry["completions"]:
                        self._add(entry["key"], Completion.from_json(c))
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line of a killed shard

    def _lookup(self, request: Request) -> list[Completion]:
        if self.match == "id":
            return self.by_id.get(request.id, [])
        for ident in sorted(self.identities):
            found = self.by_key.get(request.key(ident))
            if found:
                return found
        return []

    def generate(self, requests: Sequence[Request]) -> list[list[Completion]]:
        out = []
        for r in requests:
            seen: dict[int, Completion] = {}
            for c in self._lookup(r):
                seen.setdefault(c.index, c)  # the same completion may be in records and cache
            comps = [seen[i] for i in sorted(seen)][: r.sampling.n]
            if len(comps) < r.sampling.n:
                out.append(error_completions(
                    r, engine=self.engine, model=self.model, revision=self.revision,
                    error=f"replay: {self.run_dir} has {len(comps)} of {r.sampling.n} completions "
                          f"for request {r.id!r} (match by {self.match})",
                ))
                continue
            out.append([
                Completion(**{**c.to_json(), "request_id": r.id}) for c in comps
            ])
        return out
