"""Helpers every engine uses to turn raw model output into `Completion`s the same way.

Stop-string handling and error completions live here so that `hf:`, `vllm:` and
`openai:` agree on what a completion looks like: the stop string is cut off (as the
OpenAI API does), and a failed request becomes ``n`` completions with `error` set and
``finish_reason="error"`` instead of an exception that would abort the shard.
"""

from __future__ import annotations

from collections.abc import Sequence

from veribatch.inference.types import Completion, Request


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Cut `text` before the earliest stop string; return (text, whether one was found)."""
    cut = min((i for s in stop if s and (i := text.find(s)) >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def error_completions(
    request: Request, *, engine: str, model: str, revision: str, error: str, latency_s: float = 0.0
) -> list[Completion]:
    """`n` completions that record that `request` failed (the shard goes on)."""
    return [
        Completion(
            request_id=request.id,
            index=i,
            text="",
            finish_reason="error",
            prompt_tokens=0,
            completion_tokens=0,
            latency_s=latency_s,
            engine=engine,
            model=model,
            model_revision=revision,
            sampling=request.sampling.to_json(),
            error=error,
        )
        for i in range(request.sampling.n)
    ]


def messages_json(request: Request) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in request.messages]
