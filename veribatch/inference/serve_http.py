"""A minimal OpenAI-compatible HTTP server over any `Engine`.

What `launch serve` runs when vLLM's own server is not available (a CPU node, the tiny
smoke model, an `hf:` model), and what the `openai:` engine is tested against.  It
speaks the subset clients of this toolkit use: ``POST /v1/chat/completions`` (no
streaming), ``GET /v1/models``, ``GET /health``.

With a `token`, every route but ``/health`` needs ``Authorization: Bearer TOKEN``
(401 otherwise); `launch serve` always sets one (see `inference.serve_job`).  Connections,
time and request fields are bounded as `inference.serve_guard` says (400 naming the field).

Concurrent HTTP requests are queued and handed to the engine in micro-batches by one
worker thread, so the engine (which is not thread-safe) sees batches as it would in an
offline run, and many clients still get batched throughput.

    python -m veribatch.inference.serve_http --model hf:/path/to/model --port 8000
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from veribatch.inference.serve_guard import BadRequest, GuardedHandler, GuardedServer, Limits
from veribatch.inference.types import Completion, Engine, Message, Request, Sampling

__all__ = ["BadRequest", "EngineServer", "chat_response", "parse_chat_request"]


def parse_chat_request(body: Any) -> Request:
    """An OpenAI chat-completions body → `Request`; `BadRequest` names the bad field."""
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("'messages' must be a non-empty list")
    messages = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(
            m.get("content"), str
        ):
            raise BadRequest(f"messages[{i}] must have string 'role' and 'content'")
        messages.append(Message(m["role"], m["content"]))
    if body.get("stream"):
        raise BadRequest("streaming is not supported by this server")
    stop = body.get("stop") or ()
    if isinstance(stop, str):
        stop = (stop,)
    try:
        sampling = Sampling(
            n=int(body.get("n", 1)),
            temperature=float(body.get("temperature", 0.0) if body.get("temperature") is not None else 0.0),
            top_p=float(body.get("top_p", 1.0) if body.get("top_p") is not None else 1.0),
            max_tokens=int(body.get("max_tokens") or body.get("max_completion_tokens") or 512),
            seed=int(body.get("seed") or 0),
            stop=tuple(str(s) for s in stop),
        )
    except (TypeError, ValueError, OverflowError) as exc:
        raise BadRequest(f"bad sampling parameter: {exc}") from None
    if sampling.n < 1 or sampling.max_tokens < 1:
        raise BadRequest("'n' and 'max_tokens' must be >= 1")
    return Request(id="chatcmpl-" + uuid.uuid4().hex[:24], messages=tuple(messages), sampling=sampling)


def chat_response(request: Request, comps: Sequence[Completion], served_name: str) -> dict[str, Any]:
    prompt_tokens = comps[0].prompt_tokens if comps else 0
    completion_tokens = sum(c.completion_tokens for c in comps)
    return {
        "id": request.id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": served_name,
        "system_fingerprint": comps[0].model_revision if comps else "",
        "choices": [
            {
                "index": c.index,
                "message": {"role": "assistant", "content": c.text},
                "finish_reason": c.finish_reason,
            }
            for c in comps
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class EngineServer:
    """Serves `engine` over HTTP on (host, port); port 0 picks a free port."""

    def __init__(
        self,
        engine: Engine,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        served_name: str | None = None,
        max_batch: int = 16,
        batch_wait_s: float = 0.005,
        token: str | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.engine = engine
        self.token = token
        self.served_name = served_name or f"{engine.engine}:{engine.model}"
        self.max_batch = max_batch
        self.batch_wait_s = batch_wait_s
        self._queue: queue.Queue[tuple[Request, Future] | None] = queue.Queue()
        self.ready = threading.Event()
        self.last_request = time.time()
        self.requests_served = 0
        self.limits = limits or Limits()
        self.httpd = GuardedServer((host, port), self._handler_class(), self.limits, token)
        host_, port_ = self.httpd.server_address[:2]
        self.host = host_.decode() if isinstance(host_, bytes) else str(host_)
        self.port = int(port_)
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> EngineServer:
        for target in (self._batch_loop, self.httpd.serve_forever):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)
        self.ready.set()
        return self

    def stop(self) -> None:
        self.ready.clear()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._queue.put(None)
        for t in self._threads:
            t.join(timeout=10)

    def submit(self, request: Request) -> Future:
        fut: Future = Future()
        self._queue.put((request, fut))
        return fut

    def _batch_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            deadline = time.monotonic() + self.batch_wait_s
            while len(batch) < self.max_batch:
                try:
                    nxt = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)
                    break
                batch.append(nxt)
            try:
                results = self.engine.generate([r for r, _ in batch])
                for (_, fut), comps in zip(batch, results, strict=True):
                    fut.set_result(comps)
            except Exception as exc:  # noqa: BLE001 (answer every waiting client)
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)

    def _handler_class(self) -> type[GuardedHandler]:
        server = self

        class Handler(GuardedHandler):
            def do_GET(self) -> None:
                self._watch.cancel()
                if self.path == "/health":
                    if server.ready.is_set():
                        # no model name: it is often a local path, and /health needs no token
                        self.send_json(200, {"status": "ok"})
                    else:
                        self.send_error_json(503, "not ready", "unavailable")
                    return
                if not self.authorized():
                    return
                if self.path in ("/v1/models", "/models"):
                    self.send_json(200, {"object": "list", "data": [
                        {"id": server.served_name, "object": "model", "owned_by": "veribatch"}]})
                else:
                    self.send_error_json(404, f"no route {self.path}", "not_found")

            def do_POST(self) -> None:
                if not self.authorized():
                    return
                if self.path not in ("/v1/chat/completions", "/chat/completions"):
                    self.send_error_json(404, f"no route {self.path}", "not_found")
                    return
                server.last_request = time.time()
                try:
                    request = parse_chat_request(self.read_json())
                except BadRequest as exc:
                    self.send_error_json(exc.status, str(exc), "invalid_request_error")
                    return
                try:
                    comps = server.submit(request).result()
                except Exception as exc:  # noqa: BLE001
                    self.send_error_json(500, f"{type(exc).__name__}: {exc}", "server_error")
                    return
                errors = [c.error for c in comps if c.error]
                if errors:
                    self.send_error_json(500, errors[0] or "engine error", "server_error")
                    return
                server.requests_served += 1
                server.last_request = time.time()
                self.send_json(200, chat_response(request, comps, server.served_name))

        return Handler


def main(argv: Sequence[str] | None = None) -> int:
    from veribatch.inference.registry import open_engine

    ap = argparse.ArgumentParser(prog="python -m veribatch.inference.serve_http",
                                 description="Serve an engine as an OpenAI-compatible endpoint.")
    ap.add_argument("--model", required=True, help="engine spec, e.g. hf:/path/to/model")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--served-name", default=None)
    ap.add_argument("--token-env", default=None,
                    help="environment variable holding the bearer token clients must send")
    args = ap.parse_args(argv)
    token = os.environ.get(args.token_env) if args.token_env else None
    with open_engine(args.model) as engine:
        server = EngineServer(engine, host=args.host, port=args.port, served_name=args.served_name,
                              token=token)
        server.start()
        print(f"serving {server.served_name} at {server.url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
