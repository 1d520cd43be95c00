"""A local chat-completions server that refuses what the hosted providers document refusing,
and keeps every request body it received, for the `openai:` engine's tests.

Rules (OpenAI's reasoning-models guide and API errors, as a client sees them):
- o-series names (o1, o1-mini, o3, o3-mini, o4-mini): HTTP 400 ``unsupported_parameter`` for
  ``max_tokens``; 400 ``unsupported_value`` for a ``temperature``/``top_p`` other than 1;
  o1-mini also refuses ``reasoning_effort``;
- other names refuse ``reasoning_effort`` (400 ``unrecognized_request_argument``);
- the first `rate_limited` requests get 429 with ``Retry-After: <retry_after>`` (seconds).
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

O_SERIES = re.compile(r"^o\d+(-mini)?$")


def _error(message: str, param: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param,
                      "code": code}}


def refusal(body: dict[str, Any]) -> dict[str, Any] | None:
    """The 400 body a provider answers to `body`, or None when it is accepted."""
    model = str(body.get("model", ""))
    if O_SERIES.match(model):
        if "max_tokens" in body:
            return _error("Unsupported parameter: 'max_tokens' is not supported with this model. "
                          "Use 'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter")
        for p in ("temperature", "top_p"):
            if p in body and body[p] != 1:
                return _error(f"Unsupported value: '{p}' does not support {body[p]} with this "
                              "model. Only the default (1) value is supported.", p,
                              "unsupported_value")
        if model == "o1-mini" and "reasoning_effort" in body:
            return _error("Unsupported parameter: 'reasoning_effort' is not supported with this "
                          "model.", "reasoning_effort", "unsupported_parameter")
    elif "reasoning_effort" in body:
        return _error("Unrecognized request argument supplied: reasoning_effort",
                      "reasoning_effort", "unrecognized_request_argument")
    return None


class ProviderServer:
    """A real HTTP server on 127.0.0.1 answering as above; `bodies` holds what it received."""

    def __init__(self, *, rate_limited: int = 0, retry_after: str = "1",
                 answer: str = "x >= 0") -> None:
        self.bodies: list[dict[str, Any]] = []
        self.arrivals: list[float] = []
        self.rate_limited = rate_limited
        self.lock = threading.Lock()
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                headers: dict[str, str] = {}
                with outer.lock:
                    outer.bodies.append(body)
                    outer.arrivals.append(time.monotonic())
                    limited = outer.rate_limited > 0
                    outer.rate_limited -= 1 if limited else 0
                if limited:
                    status, reply = 429, {"error": {"message": "Rate limit reached for requests",
                                                    "type": "requests", "code": "rate_limit_exceeded"}}
                    headers["Retry-After"] = retry_after
                elif (refused := refusal(body)) is not None:
                    status, reply = 400, refused
                else:
                    n = int(body.get("n", 1))
                    status, reply = 200, {
                        "id": "chatcmpl-local", "object": "chat.completion", "model": body["model"],
                        "choices": [{"index": i, "message": {"role": "assistant", "content": answer},
                                     "finish_reason": "stop"} for i in range(n)],
                        "usage": {"prompt_tokens": 11, "completion_tokens": 4 * n}}
                data = json.dumps(reply).encode()
                self.send_response(status)
                for k, v in {**headers, "Content-Type": "application/json"}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
