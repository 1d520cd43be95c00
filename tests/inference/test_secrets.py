"""Keys and URL credentials never reach a message, a log, a record or a file; a key with
surrounding whitespace is refused at plan time; a run's files are its user's alone.

The leaks these tests replay: a key ending in ``\\r`` makes httpx refuse the header with an
error quoting ``Bearer <key>``, which became `EndpointLostError`'s message (console,
error.json, log.txt, worker.err); ``http://user:pw@host`` in ``OPENAI_BASE_URL`` was printed
by httpx's request log and in every error naming the endpoint."""

from __future__ import annotations

import logging
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO
from veribatch.inference.errors import EndpointLostError, ProviderRefusedError
from veribatch.inference.openai_http import OpenAIEngine
from veribatch.inference.redact import REDACTED, redact
from veribatch.inference.serve_http import EngineServer
from veribatch.launch.plan import PlanError, check_model_spec

KEY = "sk-test-9f8e7d6c5b4a3210"
PW = "pw-Zq81xx"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when we return: connection refused


def _all_text(exc: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception(exc))


def test_redact_shapes() -> None:
    for raw in (f"Illegal header value b'Bearer {KEY}\\r'", f"Authorization: Basic {KEY}",
                f"http://user:{PW}@10.0.0.1:8000/v1", f"api_key={KEY}&x=1", f'"token": "{KEY}"'):
        out = redact(raw)
        assert KEY not in out and PW not in out and REDACTED in out, out
    for prose in ("max_tokens=48, completion_tokens: 3", "missing or wrong bearer token (see x)"):
        assert redact(prose) == prose
    assert redact(f"x {KEY} y", secrets=[KEY]) == f"x {REDACTED} y"


def test_key_with_a_carriage_return_never_in_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    listener = socket.socket()  # connections complete (the backlog); httpx then refuses the header
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    engine = OpenAIEngine("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    monkeypatch.setenv("OPENAI_API_KEY", KEY + "\r")  # read per request: the Windows-saved file
    from tests.inference.conftest import chat

    with listener, pytest.raises(EndpointLostError) as info:
        engine.generate([chat("hi")])
    text = _all_text(info.value)
    assert "unreachable" in text and "Bearer <redacted>" in text
    assert KEY not in text, text
    # refused before any request when the key is already bad at start
    with pytest.raises(Exception, match=r"OPENAI_API_KEY has a trailing whitespace.*Windows") as bad:
        OpenAIEngine("m", base_url="http://127.0.0.1:1/v1")
    assert KEY not in str(bad.value)


def test_url_credentials_never_in_the_error_or_httpx_log(monkeypatch: pytest.MonkeyPatch, hf_engine,
                                                          chat_request, caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server = EngineServer(hf_engine, served_name="tiny", token="another-token-abcdef").start()
    try:
        url = server.url.replace("http://", f"http://user:{PW}@")
        engine = OpenAIEngine("tiny", base_url=url, max_retries=0)
        with caplog.at_level(logging.DEBUG), pytest.raises(ProviderRefusedError) as info:
            engine.generate([chat_request("Say hello.")])  # 401: the key is not the server's token
    finally:
        server.stop()
    text = _all_text(info.value)
    assert "HTTP 401" in text and f"user:{PW}" not in text and KEY not in text, text
    logged = [r.getMessage() for r in caplog.records if r.name.startswith(("httpx", "httpcore"))]
    assert any("HTTP Request: POST" in m for m in logged)  # the log line is there, credentials not
    assert not any(PW in m or KEY in m for m in logged), logged


def test_key_with_whitespace_refused_at_plan_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY + "\r")
    with pytest.raises(PlanError, match=r"--model openai:m: \$OPENAI_API_KEY has a trailing") as info:
        check_model_spec("openai:m")
    assert KEY not in str(info.value)
    monkeypatch.setenv("OPENAI_API_KEY", " " + KEY)
    with pytest.raises(PlanError, match="leading whitespace"):
        check_model_spec("openai:m")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    check_model_spec("openai:m")


def _launch(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`launch ...` in a fresh process started under a permissive umask (0022)."""
    return subprocess.run([sys.executable, "-m", "veribatch", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(REPO), **env},
                          preexec_fn=lambda: os.umask(0o022))


def _shared(root: Path) -> list[str]:
    """Every file or folder under `root` (itself included) its group or others may read."""
    out = []
    for p in [root, *root.rglob("*")]:
        mode = p.lstat().st_mode
        if not stat.S_ISLNK(mode) and mode & 0o077:
            out.append(f"{oct(mode & 0o777)} {p.relative_to(root.parent)}")
    return out


def test_a_failed_run_leaks_no_credentials_and_keeps_its_files_private(tmp_path: Path,
                                                                       shared_data: Path) -> None:
    """A whole run whose endpoint (credentials in its URL) is gone: the shard fails saying
    so, and no file of the run, nor the console, holds the password or the key; every file
    and folder of the run is 0600/0700 though the user's umask is 0022."""
    runs = tmp_path / "runs"
    env = {"OPENAI_BASE_URL": f"http://user:{PW}@127.0.0.1:{_closed_port()}/v1",
           "OPENAI_API_KEY": KEY, "VERIBATCH_SERVE_DIR": ""}
    r = _launch("invbench", "--dataset", f"easy:{shared_data / 'invbench'}", "--limit", "1",
                "--model", "openai:m", "--max-tokens", "8", "--runs-dir", str(runs),
                "--run-name", "lost", "-q", env=env)
    assert r.returncode == 1 and "is unreachable after" in r.stderr, r.stdout + r.stderr
    assert PW not in r.stdout + r.stderr and KEY not in r.stdout + r.stderr
    files = [p for p in (runs / "lost").rglob("*") if p.is_file()]
    assert any(p.name == "error.json" for p in files) and any(p.name == "log.txt" for p in files)
    for p in files:
        data = p.read_bytes()
        assert PW.encode() not in data and KEY.encode() not in data, p
    assert _shared(runs) == []
    status = _launch("status", str(runs / "lost"), env=env)
    assert PW not in status.stdout + status.stderr


def test_the_cli_makes_a_plain_run_private(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    r = _launch("selftest", "--runs-dir", str(runs), "--run-name", "ok", "-q", env={})
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(list((runs / "ok").rglob("*"))) > 10
    assert _shared(runs) == []
