"""`openai:NAME` — any OpenAI-compatible ``/v1/chat/completions`` endpoint.

A `launch serve` job, a vLLM server or a cloud API.  Requests go out concurrently
(bounded by `concurrency`), each with its own time limit (`timeout_s`, recorded in every
completion's ``sampling["time_limit_s"]``); 429, 5xx, timeouts and dropped connections are
retried with exponential backoff honouring ``Retry-After``.  What still fails after the
retries, or comes back unparsable, becomes an error completion for that request — the
batch goes on.

A request the provider refuses (another 4xx: an unsupported parameter, a wrong model name,
a bad key) is not that request's failure but the run's: every other request carries the
same parameters.  It raises `ProviderRefusedError` with the provider's own message, which
fails the shard at once (an infrastructure failure, `launch resume` after a fix) instead of
recording one error per instance and a table of zeros.  A prompt longer than the model's
context (400 ``context_length_exceeded``, 413) is that request's own and stays a record.
An endpoint still unreachable after the retries (connection refused or dropped: the server
is gone) raises `EndpointLostError` for the same reason: the shard fails, what was answered
stays in the completion cache, and `launch resume` asks only for the rest.

The body is built from the model family's declared rules (`inference.providers`): which
token-limit parameter, whether temperature/top_p/seed are sent, ``reasoning_effort``.
What was sent is recorded (``sampling["sent"]``).

Why hand-written on httpx rather than the ``openai`` SDK: the SDK would send whatever
parameters we give it (the per-family rules are ours either way), its retry/back-off is
the same rule as `_delay`, and its per-request timeout and concurrency would still be ours;
it is a large, fast-moving dependency (3.x) of every install for ~100 lines it would save.

The API key is read from the environment (``OPENAI_API_KEY`` by default) — or, for a
`launch serve` directory, from its endpoint.json (mode 0600) — at the moment a request is
sent, and is never stored on the engine, in completions, logs or errors.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from veribatch.inference.common import error_completions, messages_json
from veribatch.inference.endpoint import auth_headers, read_endpoint
from veribatch.inference.errors import EndpointLostError, EngineError, ProviderRefusedError
from veribatch.inference.providers import rules_for
from veribatch.inference.redact import (
    check_secret_value,
    install_log_redaction,
    redact_exception,
    scrub_errors,
)
from veribatch.inference.types import Completion, Engine, Request

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
REQUEST_OWN = frozenset({"context_length_exceeded", "string_above_max_length"})
"""Error codes of a 400 that concern one request's prompt, not the run's parameters."""


class OpenAIEngine(Engine):
    engine = "openai"
    packages = ("httpx",)
    loads_weights = False  # the server holds the model

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        serve_dir: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 8,
        timeout_s: float = 120.0,
        max_retries: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        reasoning_effort: str | None = None,
    ) -> None:
        if not base_url and not serve_dir and not os.environ.get("OPENAI_BASE_URL"):
            serve_dir = os.environ.get("VERIBATCH_SERVE_DIR") or None
        if serve_dir and not base_url:  # a `launch serve` directory: read its endpoint file
            ep = read_endpoint(Path(serve_dir))
            if not ep:
                raise EngineError(f"openai: {serve_dir} has no endpoint.json; is the serve job up?")
            base_url = ep["url"]
            self.serve_dir: Path | None = Path(serve_dir)
        else:
            self.serve_dir = None
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not base_url:
            raise EngineError(
                "openai: no endpoint; pass base_url=... or set OPENAI_BASE_URL (any server), "
                "or serve_dir=... / VERIBATCH_SERVE_DIR (a `launch serve` directory: URL and "
                "token from its endpoint.json)"
            )
        install_log_redaction()
        problem = check_secret_value(api_key_env, os.environ.get(api_key_env))
        if problem:
            raise EngineError(f"openai:{model}: {problem}")
        self.model = model
        self.rules = rules_for(model)
        try:
            self.rules.check(model, reasoning_effort=reasoning_effort)
        except ValueError as exc:
            raise EngineError(str(exc)) from None
        self.reasoning_effort = reasoning_effort
        self.revision = ""
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.concurrency = max(1, int(concurrency))
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.retries = 0  # total retries made, for stats and tests

    # -- public sync API ----------------------------------------------------------------
    def generate(self, requests: Sequence[Request]) -> list[list[Completion]]:
        """The batch's completions; what leaves here — completions' errors, an exception —
        is redacted (`inference.redact`): no key, token or URL password in a record or log."""
        try:
            return scrub_errors(self._generate(requests), self._secrets(), (self.api_key_env,))
        except Exception as exc:
            clean = redact_exception(exc, self._secrets(), (self.api_key_env,))
            if clean is None:
                raise
            raise clean from None

    def _secrets(self) -> list[str]:
        out = [os.environ.get(self.api_key_env) or ""]
        if self.serve_dir is not None:
            out.append((read_endpoint(self.serve_dir) or {}).get("token") or "")
        return [s for s in out if s]

    def _generate(self, requests: Sequence[Request]) -> list[list[Completion]]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.agenerate(requests))
        # Called from inside an event loop (a notebook, an async task): use a thread.
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["r"] = asyncio.run(self.agenerate(requests))
            except BaseException as exc:  # noqa: BLE001 (re-raised in the caller's thread)
                box["e"] = exc

        t = threading.Thread(target=run)
        t.start()
        t.join()
        if "e" in box:
            raise box["e"]
        return box["r"]

    async def agenerate(self, requests: Sequence[Request]) -> list[list[Completion]]:
        sem = asyncio.Semaphore(self.concurrency)
        limits = httpx.Limits(max_connections=self.concurrency)
        async with httpx.AsyncClient(timeout=self.timeout_s, limits=limits) as client:

            async def one(r: Request) -> list[Completion]:
                async with sem:
                    return await self._ask(client, r)

            return list(await asyncio.gather(*(one(r) for r in requests)))

    # -- one request --------------------------------------------------------------------
    def _payload(self, r: Request) -> dict[str, Any]:
        return self.rules.body(self.model, messages_json(r), r.sampling, self.reasoning_effort)

    def _recorded_sampling(self, r: Request) -> dict[str, Any]:
        """The run's sampling plus what was sent and the per-request time limit."""
        sent = {k: v for k, v in self._payload(r).items() if k not in ("model", "messages")}
        return {**r.sampling.to_json(), "sent": sent, "time_limit_s": self.timeout_s}

    def _headers(self) -> dict[str, str]:
        if self.serve_dir is not None:
            return auth_headers(self.serve_dir)
        key = os.environ.get(self.api_key_env)
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None:
            ra = response.headers.get("retry-after")
            if ra:
                try:
                    return min(float(ra), self.max_backoff_s)
                except ValueError:
                    pass
        base = min(self.backoff_s * (2**attempt), self.max_backoff_s)
        return base * (0.5 + random.random() / 2)

    async def _ask(self, client: httpx.AsyncClient, r: Request) -> list[Completion]:
        url = f"{self.base_url}/chat/completions"
        t0 = time.perf_counter()
        last = ""
        for attempt in range(self.max_retries + 1):
            response: httpx.Response | None = None
            unreachable = False
            try:
                response = await client.post(url, json=self._payload(r), headers=self._headers(),
                                             timeout=self.timeout_s)
            except httpx.TimeoutException:
                last = f"timed out after {self.timeout_s:g} s"
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
                unreachable = True
            else:
                if response.status_code == 200:
                    return self._parse(r, response, time.perf_counter() - t0)
                last = f"HTTP {response.status_code}: {response.text[:200]!r}"
                if response.status_code not in RETRY_STATUS:
                    if _refuses_the_run(response):
                        raise ProviderRefusedError(
                            f"openai:{self.model} at {self.base_url}: the provider refused the "
                            f"request (HTTP {response.status_code}): {_provider_message(response)}"
                            f" -- request parameters: {json.dumps(self._recorded_sampling(r)['sent'])}")
                    break
            if attempt < self.max_retries:
                self.retries += 1
                await asyncio.sleep(self._delay(attempt, response))
        if unreachable:
            raise EndpointLostError(f"openai:{self.model}: the endpoint {self.base_url} is "
                                    f"unreachable after {attempt + 1} attempts: {last}")
        return self._errors(r, f"openai: {last} (after {attempt + 1} attempts)", t0)

    def _errors(self, r: Request, error: str, t0: float) -> list[Completion]:
        out = error_completions(r, engine=self.engine, model=self.model, revision=self.revision,
                                error=error, latency_s=time.perf_counter() - t0)
        for c in out:
            c.sampling = self._recorded_sampling(r)
        return out

    def _parse(self, r: Request, response: httpx.Response, latency: float) -> list[Completion]:
        try:
            body = response.json()
            choices = body["choices"]
            if not isinstance(choices, list):
                raise TypeError("'choices' is not a list")
        except (ValueError, KeyError, TypeError) as exc:
            snippet = response.text[:200]
            out = error_completions(
                r, engine=self.engine, model=self.model, revision=self.revision, latency_s=latency,
                error=f"openai: unparsable response ({exc}): {snippet!r}",
            )
            for c in out:
                c.sampling = self._recorded_sampling(r)
            return out
        usage = body.get("usage") or {}
        revision = str(body.get("system_fingerprint") or body.get("model") or "")
        n = r.sampling.n
        total = int(usage.get("completion_tokens") or 0)
        share = [total // n + (1 if i < total % n else 0) for i in range(n)]
        by_index: dict[int, Any] = {}
        for pos, ch in enumerate(choices):
            if isinstance(ch, dict):
                by_index.setdefault(int(ch.get("index", pos)), ch)
        out = []
        for i in range(n):
            ch = by_index.get(i)
            msg = (ch or {}).get("message") if isinstance(ch, dict) else None
            content = msg.get("content") if isinstance(msg, dict) else None
            if ch is None or not isinstance(msg, dict):
                out.append(Completion(
                    request_id=r.id, index=i, text="", finish_reason="error",
                    prompt_tokens=int(usage.get("prompt_tokens") or 0), completion_tokens=0,
                    latency_s=latency, engine=self.engine, model=self.model,
                    model_revision=revision, sampling=self._recorded_sampling(r),
                    error=f"openai: response has no choice {i}: {json.dumps(ch)[:200]}",
                ))
                continue
            out.append(Completion(
                request_id=r.id, index=i, text=content if isinstance(content, str) else "",
                finish_reason=str(ch.get("finish_reason") or "unknown"),
                prompt_tokens=int(usage.get("prompt_tokens") or 0), completion_tokens=share[i],
                latency_s=latency, engine=self.engine, model=self.model, model_revision=revision,
                sampling=self._recorded_sampling(r),
            ))
        return out


def _provider_message(response: httpx.Response) -> str:
    """The provider's own error message (OpenAI's ``{"error": {"message": ...}}``), verbatim."""
    try:
        err = response.json().get("error")
    except (ValueError, AttributeError):
        err = None
    if isinstance(err, dict) and err.get("message"):
        extra = ", ".join(f"{k}={err[k]}" for k in ("type", "param", "code") if err.get(k))
        return str(err["message"]) + (f" ({extra})" if extra else "")
    if isinstance(err, str):
        return err
    try:  # vLLM's server: {"object": "error", "message": ..., "type": ...}
        body = response.json()
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])
    except ValueError:
        pass
    return response.text[:500]


def _refuses_the_run(response: httpx.Response) -> bool:
    """A 4xx that every request of the run would get (parameters, model, key), not one
    prompt's own (too long for the context)."""
    if response.status_code == 413 or not 400 <= response.status_code < 500:
        return False
    try:
        err = response.json().get("error")
    except (ValueError, AttributeError):
        err = None
    code = err.get("code") if isinstance(err, dict) else None
    return code not in REQUEST_OWN and "maximum context length" not in response.text
