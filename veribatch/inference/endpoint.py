"""A `launch serve` directory as its clients read it: where the server is and how to be let in.

The serve job (`inference.serve_job`) writes these files; the ``openai:`` engine with
``serve_dir=`` and any other client only read them (and register themselves), so the
client side needs nothing of the server's code::

    endpoint.json     url, health_url, host, port, pid, model, token (mode 0600)
    clients/          one file per client while it uses the server (renamed *.done after)
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ENDPOINT = "endpoint.json"
CLIENTS = "clients"
TOKEN_HEADER = "Authorization"


def read_endpoint(serve_dir: Path) -> dict[str, Any] | None:
    """endpoint.json, or None while the server is not (or no longer) answering."""
    try:
        return json.loads((Path(serve_dir) / ENDPOINT).read_text())
    except (OSError, ValueError):
        return None


def auth_headers(serve_dir: Path) -> dict[str, str]:
    """The header a client of the serve job must send (empty when it has no token)."""
    ep = read_endpoint(serve_dir) or {}
    return {TOKEN_HEADER: f"Bearer {ep['token']}"} if ep.get("token") else {}


@contextlib.contextmanager
def registered_client(serve_dir: Path, name: str) -> Iterator[str]:
    """Register as a client of the serve job for the duration; yields the endpoint URL.

    On exit the registration is renamed ``*.done`` rather than deleted, so the server
    knows a client came and went even if both happened between two heartbeats.
    """
    ep = read_endpoint(serve_dir)
    if not ep:
        raise RuntimeError(f"{serve_dir}: no endpoint.json (server not ready or stopped)")
    d = Path(serve_dir) / CLIENTS
    d.mkdir(exist_ok=True)
    mark = d / f"{name}.{socket.gethostname()}.{os.getpid()}"
    mark.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}))
    try:
        yield ep["url"]
    finally:
        with contextlib.suppress(FileNotFoundError):
            mark.rename(mark.with_name(mark.name + ".done"))
