"""What stands between the network and a served model: the token, an allow-list of routes,
bounded connections and time, checked request fields.

Both `launch serve` backends answer through this module.  `GuardedServer` is the HTTP
server (`serve_http.EngineServer` subclasses its handler); `ServeGate` is the same server
as a reverse proxy in front of vLLM, which itself listens only on a Unix socket in a
private folder — so vLLM's own routes that its API-key middleware does not guard
(``/invocations``, ``/tokenize``, ``/metrics``, ``/scale_elastic_ep`` …) are out of reach
of anyone but this process, and the gate forwards only `ALLOWED` routes.

Every route needs ``Authorization: Bearer TOKEN`` except ``GET /health``, which the gate
answers itself with ``{"status": "ok"}`` (nothing of the model).  Limits (`Limits`):

- at most `max_connections` open connections; one more gets 503 and is closed;
- a socket read or write idle for `read_timeout_s` ends the connection, and a request
  must be received whole within `request_timeout_s` (a client trickling a byte at a time
  holds a thread for no longer);
- a body needs a sane ``Content-Length`` (no chunked upload) of at most `max_body_bytes`;
- ``max_tokens``/``max_completion_tokens`` in 1…`max_tokens`, ``n``/``best_of`` in
  1…`max_n`, as finite integers; a 400 names the field.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import math
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

ALLOWED: frozenset[tuple[str, str]] = frozenset({
    ("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("POST", "/v1/completions"),
})
"""(method, path) the gate forwards to vLLM; everything else is 404 (after the token)."""


class BadRequest(ValueError):
    """A request this server refuses; the message names the field."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Limits:
    max_connections: int = 64
    read_timeout_s: float = 30.0
    request_timeout_s: float = 60.0
    max_body_bytes: int = 4 << 20
    max_tokens: int = 32768
    max_n: int = 16


def _bounded_int(body: dict[str, Any], field: str, lo: int, hi: int) -> None:
    v = body.get(field)
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int | float) or (
            isinstance(v, float) and not (math.isfinite(v) and v.is_integer())):
        raise BadRequest(f"'{field}' must be an integer, got {json.dumps(v)[:40]}")
    if not lo <= v <= hi:
        raise BadRequest(f"'{field}' must be between {lo} and {hi}, got {json.dumps(v)[:40]}")


def check_fields(body: Any, limits: Limits) -> dict[str, Any]:
    """`body` if it is a JSON object whose generation size fields are in bounds."""
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    for field in ("max_tokens", "max_completion_tokens"):
        _bounded_int(body, field, 1, limits.max_tokens)
    for field in ("n", "best_of"):
        _bounded_int(body, field, 1, limits.max_n)
    return body


class GuardedServer(ThreadingHTTPServer):
    """A threading HTTP server with a cap on open connections."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 limits: Limits, token: str | None) -> None:
        self.limits = limits
        self.token = token
        self._slots = threading.BoundedSemaphore(limits.max_connections)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.settimeout(1.0)
                request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                b"Connection: close\r\n\r\n")
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class GuardedHandler(BaseHTTPRequestHandler):
    """One request per connection, read under the server's `Limits`, token checked."""

    protocol_version = "HTTP/1.0"
    server: GuardedServer

    def setup(self) -> None:
        self.timeout = self.server.limits.read_timeout_s  # socket timeout, reads and writes
        super().setup()
        self._watch = threading.Timer(self.server.limits.request_timeout_s, self._expire)
        self._watch.daemon = True
        self._watch.start()

    def _expire(self) -> None:
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        self._watch.cancel()
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # quiet: no per-request lines
        pass

    def send_json(self, code: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_error_json(self, code: int, message: str, kind: str) -> None:
        self.send_json(code, {"error": {"message": message, "type": kind, "code": code}})

    def authorized(self) -> bool:
        token = self.server.token
        if token is None:
            return True
        got = self.headers.get("Authorization") or ""
        if hmac.compare_digest(got.encode("utf-8", "replace"), f"Bearer {token}".encode()):
            return True
        self.send_error_json(401, "missing or wrong bearer token (see endpoint.json of the serve "
                                  "directory)", "authentication_error")
        return False

    def read_body(self) -> bytes:
        """The request body, whole, within the limits (then the request deadline is off)."""
        if self.headers.get("Transfer-Encoding"):
            raise BadRequest("chunked bodies are not accepted: send Content-Length", 411)
        raw = self.headers.get("Content-Length")
        if raw is None:
            raise BadRequest("Content-Length is required", 411)
        if not raw.strip().isdigit():
            raise BadRequest(f"Content-Length must be a non-negative integer, got {raw[:20]!r}")
        length = int(raw)
        if length > self.server.limits.max_body_bytes:
            raise BadRequest(f"body of {length} bytes exceeds the limit of "
                             f"{self.server.limits.max_body_bytes} bytes", 413)
        data = self.rfile.read(length)
        if len(data) != length:
            raise BadRequest("body shorter than its Content-Length")
        self._watch.cancel()
        return data

    def read_json(self) -> dict[str, Any]:
        data = self.read_body()
        try:
            body = json.loads(data or b"null")
        except ValueError as exc:
            raise BadRequest(f"body is not JSON: {exc}") from None
        return check_fields(body, self.server.limits)


class ServeGate:
    """The guarded server in front of vLLM's Unix socket (`upstream_uds`)."""

    def __init__(self, upstream_uds: str, *, host: str, port: int, token: str,
                 limits: Limits | None = None, upstream_timeout_s: float = 3600.0) -> None:
        self.uds = upstream_uds
        self.token = token
        self.limits = limits or Limits()
        self.last_request = 0.0
        self.requests_served = 0
        self._client = httpx.Client(transport=httpx.HTTPTransport(uds=upstream_uds),
                                    base_url="http://vllm", timeout=httpx.Timeout(
                                        upstream_timeout_s, connect=10.0))
        self.httpd = GuardedServer((host, port), self._handler(), self.limits, token)
        self.port = int(self.httpd.server_address[1])
        self._thread: threading.Thread | None = None

    def healthy(self) -> bool:
        with contextlib.suppress(httpx.HTTPError):
            return self._client.get("/health", timeout=5).status_code == 200
        return False

    def start(self) -> ServeGate:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._client.close()

    def _forward(self, method: str, path: str, body: bytes | None) -> Iterator[Any]:
        headers = {"Authorization": f"Bearer {self.token}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        with self._client.stream(method, path, content=body, headers=headers) as r:
            yield r

    def _handler(self) -> type[GuardedHandler]:
        gate = self

        class Handler(GuardedHandler):
            def _serve(self, method: str) -> None:
                path = self.path.split("?", 1)[0]
                if method == "GET" and path == "/health":
                    self._watch.cancel()
                    ok = gate.healthy()
                    self.send_json(200 if ok else 503, {"status": "ok" if ok else "unavailable"})
                    return
                if not self.authorized():
                    return
                if (method, path) not in ALLOWED:
                    self.send_error_json(404, f"no route {method} {path}", "not_found")
                    return
                try:
                    body = json.dumps(self.read_json()).encode() if method == "POST" else None
                except BadRequest as exc:
                    self.send_error_json(exc.status, str(exc), "invalid_request_error")
                    return
                gate.last_request = time.time()
                try:
                    for r in gate._forward(method, path, body):
                        self.send_response(r.status_code)
                        self.send_header("Content-Type", r.headers.get("content-type", "application/json"))
                        self.end_headers()
                        for chunk in r.iter_raw():
                            self.wfile.write(chunk)
                except httpx.HTTPError as exc:
                    self.send_error_json(502, f"model server unavailable: {type(exc).__name__}",
                                         "server_error")
                    return
                gate.requests_served += 1
                gate.last_request = time.time()

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_PUT(self) -> None:
                self._serve("PUT")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

            def do_PATCH(self) -> None:
                self._serve("PATCH")

            def do_HEAD(self) -> None:
                self._serve("HEAD")

            def do_OPTIONS(self) -> None:
                self._serve("OPTIONS")

        return Handler
