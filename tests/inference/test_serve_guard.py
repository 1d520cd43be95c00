"""`launch serve`'s guard: every route behind the token (vLLM's real route table included),
loopback unless asked, bounded connections and time (slow clients), request fields checked
with a 400 that names the field."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from veribatch.inference.serve_guard import ALLOWED, Limits, ServeGate
from veribatch.inference.serve_http import EngineServer
from veribatch.inference.serve_job import ServeJob, node_address

TOKEN = "guard-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SMALL = Limits(max_connections=4, read_timeout_s=1.0, request_timeout_s=2.0, max_body_bytes=4096,
               max_tokens=1000, max_n=4)


def _raw(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send `data` on a fresh loopback connection; everything the server answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def _post(port: int, body: bytes, headers: str = "") -> bytes:
    return _raw(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                      + f"Authorization: Bearer {TOKEN}\r\n{headers}".encode() + b"\r\n" + body)


@pytest.fixture
def server(hf_engine):
    s = EngineServer(hf_engine, served_name="tiny", token=TOKEN, limits=SMALL).start()
    yield s
    s.stop()


def test_request_fields_are_checked_with_a_400_naming_the_field(server: EngineServer) -> None:
    msgs = '"messages": [{"role": "user", "content": "Say hello."}]'
    for body, field in ((f'{{{msgs}, "max_tokens": 1e309}}', "'max_tokens' must be an integer"),
                        (f'{{{msgs}, "max_tokens": 1000000}}', "'max_tokens' must be between 1 and 1000"),
                        (f'{{{msgs}, "max_completion_tokens": -1}}', "'max_completion_tokens'"),
                        (f'{{{msgs}, "n": 1000000}}', "'n' must be between 1 and 4"),
                        (f'{{{msgs}, "n": true}}', "'n' must be an integer"),
                        ("[1]", "body must be a JSON object"), ("{", "body is not JSON")):
        data = body.encode()
        out = _post(server.port, data, f"Content-Length: {len(data)}\r\n")
        assert out.startswith(b"HTTP/1.0 400") and field.encode() in out, (body, out)
    for headers, want in (("Content-Length: -5\r\n", b"400"), ("Content-Length: 9999999\r\n", b"413"),
                          ("", b"411"), ("Transfer-Encoding: chunked\r\n", b"411")):
        t0 = time.monotonic()
        out = _post(server.port, b"", headers)
        assert out.split(b"\r\n")[0].endswith(want + out.split(b"\r\n")[0][12:]) or want in out[:20], out
        assert time.monotonic() - t0 < 1.0  # answered at once, no thread left waiting for a body
    ok = httpx.post(f"{server.url}/chat/completions", headers=AUTH, timeout=60, json={
        "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 48, "n": 1})
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == "hello"


def test_slow_and_idle_clients_are_bounded(server: EngineServer) -> None:
    """Idle connections fill the cap (one more gets 503), and each is closed after the read
    timeout; a client trickling its headers under the read timeout is cut at the request
    deadline; afterwards the server's threads are back to what they were."""
    before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(SMALL.max_connections)]
    time.sleep(0.3)
    assert _raw(server.port, b"GET /health HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.0 503")
    t0 = time.monotonic()
    for s in idle:
        s.settimeout(10)
        assert s.recv(10) == b""  # closed by the server
        s.close()
    assert time.monotonic() - t0 < SMALL.read_timeout_s + 2
    trickle = socket.create_connection(("127.0.0.1", server.port))
    trickle.settimeout(0.2)
    t0 = time.monotonic()
    closed = False
    for i in range(40):  # bounded: 40 × 0.3 s at most
        try:
            trickle.sendall(b"GET /health HTTP/1.1\r\n" if i == 0 else f"X-{i}: y\r\n".encode())
            if trickle.recv(10) == b"":
                closed = True
                break
        except TimeoutError:
            pass
        except OSError:
            closed = True
            break
        time.sleep(0.1)
    trickle.close()
    assert closed and time.monotonic() - t0 < SMALL.request_timeout_s + 2
    end = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < end:
        time.sleep(0.1)
    assert threading.active_count() <= before
    assert httpx.get(server.url.replace("/v1", "/health"), timeout=10).status_code == 200


def test_serve_binds_loopback_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERIBATCH_SERVE_HOST", raising=False)
    assert ServeJob(tmp_path, "hf:/m").host == "127.0.0.1"
    assert ServeJob(tmp_path, "hf:/m", host="node").host == node_address({})
    monkeypatch.setenv("VERIBATCH_SERVE_HOST", "node")
    assert ServeJob(tmp_path, "hf:/m").host == node_address({})


VLLM_APP = """
import json, sys, warnings
warnings.simplefilter("ignore")
import uvicorn
from vllm.entrypoints.openai import api_server
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser

uds, key = sys.argv[1], sys.argv[2]
args = make_arg_parser(FlexibleArgumentParser()).parse_args(["--model", "m", "--api-key", key])
app = api_server.build_app(args, ("generate",))
routes = [[m, r.path] for r in app.routes for m in sorted(getattr(r, "methods", None) or [])]
print("ROUTES " + json.dumps(routes), flush=True)
uvicorn.run(app, uds=uds, lifespan="off", log_level="warning")
"""


@pytest.mark.vllm
def test_every_vllm_route_is_behind_the_gate(vllm_python: Path, tmp_path: Path) -> None:
    """vLLM's own app (its route table and its API-key middleware, no model loaded) on a Unix
    socket; before: its middleware answers 401 on /v1/chat/completions but lets /invocations
    through to the handler.  Through the gate: every route of the table is 401 without the
    token, and with it only `ALLOWED` routes reach vLLM (the rest 404 at the gate)."""
    from tests.support import REPO

    uds = str(tmp_path / "v.sock")
    proc = subprocess.Popen([str(vllm_python), "-c", VLLM_APP, uds, TOKEN], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("ROUTES "), (line, proc.stderr.read() if proc.stderr else "")
        routes = [(m, p.replace("{", "").replace("}", "")) for m, p in json.loads(line[7:])]
        direct = httpx.Client(transport=httpx.HTTPTransport(uds=uds), base_url="http://vllm", timeout=30)
        end = time.monotonic() + 60
        while not os.path.exists(uds) and time.monotonic() < end:
            time.sleep(0.1)
        before = {p: direct.post(p, json={"messages": [{"role": "user", "content": "x"}]}).status_code
                  for p in ("/v1/chat/completions", "/invocations")}
        assert before["/v1/chat/completions"] == 401 and before["/invocations"] != 401, before
        print(f"vLLM's own server, no token: {before}; {len(routes)} (method, route) pairs")
        gate = ServeGate(uds, host="127.0.0.1", port=0, token=TOKEN).start()
        try:
            url = f"http://127.0.0.1:{gate.port}"
            assert ("POST", "/invocations") in routes and ("POST", "/v1/chat/completions") in routes
            forwarded = []
            for method, path in routes:
                body = b'{"messages": [{"role": "user", "content": "x"}]}' if method != "GET" else None
                kw = {"content": body, "headers": {"Content-Type": "application/json"}} if body else {}
                no_token = httpx.request(method, url + path, timeout=30, **kw)
                if (method, path) == ("GET", "/health"):
                    # answered by the gate from vLLM's /health (no engine here: 503), nothing more
                    assert no_token.status_code in (200, 503) and set(no_token.json()) == {"status"}
                    continue
                assert no_token.status_code == 401, (method, path, no_token.status_code)
                kw.setdefault("headers", {}).update(AUTH)
                with_token = httpx.request(method, url + path, timeout=30, **kw)
                if (method, path) in ALLOWED:
                    assert "no route" not in with_token.text, (method, path)
                    forwarded.append(f"{method} {path}: {with_token.status_code}")
                else:
                    assert with_token.status_code == 404, (method, path)
                    assert method == "HEAD" or "no route" in with_token.text, (method, path)  # the gate's
            assert len(forwarded) == len(ALLOWED)
            print("forwarded with the token:", forwarded)
        finally:
            gate.stop()
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
