"""How a completion is stored: as a cache line, and as flat columns of a run's records.

One module owns both shapes so that the cache (`inference.cache`), the `replay:` engine
and the tasks that write generate-stage records agree on names.  A task that wants its
run to be replayable later writes ``completion_to_record(engine, request, completion)``
into each generate record (plus its own columns); `replay:` finds those columns in any
parquet file of the run directory.
"""

from __future__ import annotations

import json
from typing import Any

from veribatch.inference.types import Completion, Engine, Request

# Flat record columns (all scalars, so they fit one parquet schema with the task's own).
COMPLETION_COLUMNS = (
    "request_key",
    "request_id",
    "sample_index",
    "completion_text",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "engine",
    "model",
    "model_revision",
    "sampling_json",
    "completion_error",
)


def cache_identity(engine: str, model: str, revision: str) -> str:
    """The model string that request keys are computed with: changed weights ⇒ new keys."""
    return f"{engine}:{model}@{revision}" if revision else f"{engine}:{model}"


def request_key(engine: Engine, request: Request) -> str:
    """The cache/replay key of `request` when asked of `engine`."""
    ident = getattr(engine, "cache_identity", None)
    if isinstance(ident, str):
        return request.key(ident)
    return request.key(cache_identity(engine.engine, engine.model, engine.revision))


def completion_to_record(engine: Engine, request: Request, completion: Completion) -> dict[str, Any]:
    return {
        "request_key": request_key(engine, request),
        "request_id": completion.request_id,
        "sample_index": completion.index,
        "completion_text": completion.text,
        "finish_reason": completion.finish_reason,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "latency_s": completion.latency_s,
        "engine": completion.engine,
        "model": completion.model,
        "model_revision": completion.model_revision,
        "sampling_json": json.dumps(completion.sampling, sort_keys=True),
        "completion_error": completion.error,
    }


def completion_from_record(row: dict[str, Any]) -> Completion:
    """Inverse of `completion_to_record` (ignores the task's own columns)."""
    err = row.get("completion_error")
    return Completion(
        request_id=str(row["request_id"]),
        index=int(row["sample_index"]),
        text=str(row["completion_text"] or ""),
        finish_reason=str(row["finish_reason"]),
        prompt_tokens=int(row["prompt_tokens"]),
        completion_tokens=int(row["completion_tokens"]),
        latency_s=float(row["latency_s"]),
        engine=str(row["engine"]),
        model=str(row["model"]),
        model_revision=str(row["model_revision"] or ""),
        sampling=json.loads(row["sampling_json"]) if row.get("sampling_json") else {},
        error=None if err is None or (isinstance(err, float) and err != err) else str(err),
    )
