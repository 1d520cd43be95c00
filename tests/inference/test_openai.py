"""`openai:` against real local HTTP servers: the tiny model served by `serve_http`, and a
scripted server that answers 429/500/garbage the way flaky endpoints do."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from veribatch.inference import open_engine
from veribatch.inference.serve_http import EngineServer

OK_BODY = {
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "x >= 0"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    "model": "scripted",
}


class Scripted:
    """A real HTTP server replying with a script of (status, body, headers, delay_s)."""

    def __init__(self, script: list[tuple[int, Any, dict[str, str], float]], default=None) -> None:
        self.script = list(script)
        self.default = default or (200, OK_BODY, {}, 0.0)
        self.lock = threading.Lock()
        self.calls = 0
        self.inflight = 0
        self.max_inflight = 0
        self.auth: list[str | None] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with outer.lock:
                    outer.calls += 1
                    outer.inflight += 1
                    outer.max_inflight = max(outer.max_inflight, outer.inflight)
                    outer.auth.append(self.headers.get("Authorization"))
                    status, body, headers, delay = outer.script.pop(0) if outer.script else outer.default
                time.sleep(delay)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass
                finally:
                    with outer.lock:
                        outer.inflight -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def scripted() -> Iterator[Any]:
    servers: list[Scripted] = []

    def make(script, default=None) -> Scripted:
        servers.append(Scripted(script, default))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


@pytest.fixture(scope="module")
def tiny_server(hf_engine) -> Iterator[EngineServer]:
    server = EngineServer(hf_engine, served_name="tiny").start()
    yield server
    server.stop()


def test_answers_from_the_served_tiny_model(tiny_server, tiny_pairs, chat_request) -> None:
    engine = open_engine("openai:tiny", base_url=tiny_server.url, concurrency=4)
    reqs = [chat_request(p, f"r{i}") for i, (p, _) in enumerate(tiny_pairs)] * 3
    out = engine.generate(reqs)
    assert [c[0].text for c in out] == [a for _, a in tiny_pairs] * 3
    assert [c[0].request_id for c in out] == [r.id for r in reqs]
    c = out[0][0]
    assert c.engine == "openai" and c.model == "tiny" and c.finish_reason == "stop"
    assert c.prompt_tokens > 10 and c.completion_tokens > 5 and c.latency_s > 0
    assert c.model_revision.startswith("local-")  # the server's system_fingerprint
    two = engine.generate([chat_request("Say hello.", n=2, temperature=1.0, seed=3)])[0]
    assert [x.index for x in two] == [0, 1] and all(x.error is None for x in two)
    assert engine.retries == 0


def test_server_health_models_and_bad_requests(tiny_server) -> None:
    base = tiny_server.url.removesuffix("/v1")
    assert httpx.get(f"{base}/health").json()["status"] == "ok"
    assert httpx.get(f"{base}/v1/models").json()["data"][0]["id"] == "tiny"
    bad = httpx.post(f"{tiny_server.url}/chat/completions", json={"messages": "hi"})
    assert bad.status_code == 400 and "messages" in bad.json()["error"]["message"]
    assert httpx.post(f"{tiny_server.url}/chat/completions", content=b"{not json").status_code == 400


def test_retries_429_and_500_then_succeeds(scripted, chat_request, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-123")
    srv = scripted([(429, {"error": "slow down"}, {"Retry-After": "0"}, 0.0),
                    (500, {"error": "boom"}, {}, 0.0)])
    engine = open_engine("openai:m", base_url=srv.url, backoff_s=0.01)
    out = engine.generate([chat_request("q")])[0][0]
    assert out.text == "x >= 0" and out.error is None and out.completion_tokens == 3
    assert srv.calls == 3 and engine.retries == 2
    assert srv.auth == ["Bearer sk-test-secret-123"] * 3
    assert "sk-test" not in json.dumps(out.to_json()) and "sk-test" not in repr(engine.__dict__)


def test_gives_up_after_retries_and_records_the_error(scripted, chat_request, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-leak")
    srv = scripted([], default=(503, {"error": "overloaded"}, {}, 0.0))
    engine = open_engine("openai:m", base_url=srv.url, max_retries=2, backoff_s=0.01)
    out = engine.generate([chat_request("q", n=2)])[0]
    assert [c.finish_reason for c in out] == ["error", "error"]
    assert "HTTP 503" in (out[0].error or "") and "3 attempts" in (out[0].error or "")
    assert "sk-never-leak" not in (out[0].error or "")
    assert srv.calls == 3


def test_client_errors_are_not_retried_and_stop_the_batch(scripted, chat_request) -> None:
    from veribatch.inference.errors import ProviderRefusedError

    srv = scripted([(404, {"error": {"message": "The model `m` does not exist",
                                     "code": "model_not_found"}}, {}, 0.0)])
    with pytest.raises(ProviderRefusedError, match=r"HTTP 404\): The model `m` does not exist"):
        open_engine("openai:m", base_url=srv.url, backoff_s=0.01).generate([chat_request("q")])
    assert srv.calls == 1


def test_garbage_and_empty_answers_are_recorded_as_such(scripted, chat_request) -> None:
    empty = {"choices": [{"index": 0, "message": {"role": "assistant", "content": ""},
                          "finish_reason": "stop"}], "usage": {}}
    srv = scripted([(200, b"<html>proxy error</html>", {}, 0.0), (200, empty, {}, 0.0),
                    (200, {"choices": []}, {}, 0.0)])
    engine = open_engine("openai:m", base_url=srv.url, concurrency=1)
    garbage, blank, nochoice = engine.generate([chat_request("a", "a"), chat_request("b", "b"),
                                                chat_request("c", "c")])
    assert garbage[0].finish_reason == "error" and "unparsable" in (garbage[0].error or "")
    assert "proxy error" in (garbage[0].error or "")
    assert blank[0].text == "" and blank[0].finish_reason == "stop" and blank[0].error is None
    assert nochoice[0].finish_reason == "error" and "no choice 0" in (nochoice[0].error or "")


def test_timeout_per_request_then_retry(scripted, chat_request) -> None:
    srv = scripted([(200, OK_BODY, {}, 1.5)])
    engine = open_engine("openai:m", base_url=srv.url, timeout_s=0.3, backoff_s=0.01)
    t0 = time.perf_counter()
    out = engine.generate([chat_request("q")])[0][0]
    assert out.text == "x >= 0" and engine.retries == 1
    assert out.latency_s >= 0.3 and time.perf_counter() - t0 < 1.5


def test_concurrency_limit_is_respected(scripted, chat_request) -> None:
    srv = scripted([], default=(200, OK_BODY, {}, 0.2))
    engine = open_engine("openai:m", base_url=srv.url, concurrency=2)
    t0 = time.perf_counter()
    out = engine.generate([chat_request("q", f"r{i}") for i in range(6)])
    assert len(out) == 6 and srv.max_inflight == 2
    assert time.perf_counter() - t0 >= 0.55  # three waves of two


def test_an_endpoint_gone_for_good_fails_the_shard(chat_request) -> None:
    """Connection refused through every retry: the server is gone, not the model silent."""
    import socket

    from veribatch.inference.errors import EndpointLostError

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = open_engine("openai:m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=2,
                         backoff_s=0.01)
    with pytest.raises(EndpointLostError, match="unreachable after 3 attempts: ConnectError"):
        engine.generate([chat_request("q")])
    assert engine.retries == 2


def test_missing_endpoint_is_a_clear_error(monkeypatch) -> None:
    from veribatch.inference import EngineError

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(EngineError, match="OPENAI_BASE_URL"):
        open_engine("openai:m")
