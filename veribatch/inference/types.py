"""Requests, completions and the engine interface every model backend implements.

Tasks build `Request`s and read `Completion`s; they never learn which engine
answered.  A request's `key()` is what the completion cache is indexed by, so two
identical requests (same messages, sampling and seed, same model) are asked once.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Sampling:
    n: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int = 0
    stop: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class Request:
    """One prompt; the engine returns `sampling.n` completions for it."""

    id: str
    messages: tuple[Message, ...]
    sampling: Sampling = field(default_factory=Sampling)

    def key(self, model: str) -> str:
        blob = json.dumps(
            {
                "model": model,
                "messages": [asdict(m) for m in self.messages],
                "sampling": self.sampling.to_json(),
            },
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(blob.encode()).hexdigest()


@dataclass
class Completion:
    request_id: str
    index: int  # which of the n samples
    text: str
    finish_reason: str  # "stop" | "length" | "error" | ...
    prompt_tokens: int
    completion_tokens: int
    # The request's own generation time, in wall seconds: from when the engine started
    # working on *this* request (not when a batch of many was handed in, and not time spent
    # queued behind other requests) to the last token of its last sample.  All n completions
    # of one request carry the same value.  Per engine: hf — batch start to the decoding
    # step that produced the request's last token; vllm — vLLM's per-request "scheduled" to
    # "last token" timestamps; openai — the HTTP round trip(s) of this request, retries and
    # back-off included (serving time, as InvBench §6 counts it); replay — the original
    # run's value.  InvBench's speedup denominator and CE-Bench's per-answer time use it.
    latency_s: float
    engine: str
    model: str
    model_revision: str
    sampling: dict[str, Any]
    error: str | None = None  # set when the engine failed for this request; text is then ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Completion:
        return cls(**d)


class Engine(ABC):
    """A model backend.  `generate` must return, for every request, exactly `n` completions
    (errors included, as completions with `error` set) in request order: a failed request
    never aborts the batch."""

    engine: str  # the name it is installed as: "hf" | "vllm" | "openai" | "replay" | a plug-in's
    model: str
    revision: str = ""
    # Facts read from the class without opening an engine (`inference.registry`):
    # whether `replicas=N` may run it as a Ray pool of data-parallel copies, the
    # packages it imports when it opens (checked at launch time, without importing them),
    # and whether opening it reads the model's weights (what sizing charges a load for;
    # a remote server or recorded completions load nothing).
    poolable: ClassVar[bool] = False
    packages: ClassVar[tuple[str, ...]] = ()
    loads_weights: ClassVar[bool] = True
    # Seconds the `open_engine` call that returned this engine spent starting it (imports,
    # weights, the engine's own start-up): measured, so that sizing can use what a load
    # took instead of an assumed read rate.  0.0 when a `shared_engines` scope handed out
    # an engine already loaded; None for an engine that loads nothing (`loads_weights`).
    load_s: float | None = None

    @abstractmethod
    def generate(self, requests: Sequence[Request]) -> list[list[Completion]]: ...

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release GPUs, actors, HTTP clients."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
