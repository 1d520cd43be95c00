"""A real headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
NUL-separated JSON on file descriptors 3 and 4), so tests need no websocket library and no port.

`load(url)` returns what a reader of the page would meet: console errors and uncaught
exceptions, the result of a DOM query, and a full-page PNG screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Flags that work on the CI machines (no sandbox as root, no GPU, nothing fetched from outside).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1280,900"]


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageResult:
    errors: list[str] = field(default_factory=list)
    value: Any = None
    screenshot: bytes = b""


class Browser:
    def __init__(self, profile_dir: Path, binary: str | None = None, timeout_s: float = 60.0) -> None:
        binary = binary or chromium_binary()
        if binary is None:
            raise FileNotFoundError("chromium not found on PATH")
        self.timeout_s = timeout_s
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()

        def child_fds() -> None:  # move the pipe ends to 3 (commands in) and 4 (responses out)
            a = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 100)
            b = fcntl.fcntl(res_w, fcntl.F_DUPFD, 100)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile_dir}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            close_fds=False, preexec_fn=child_fds, start_new_session=True)
        os.close(cmd_r)
        os.close(res_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._res_r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._res_r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return json.loads(raw)

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method: str, session: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        for i, e in enumerate(self.events):
            if e.get("method") == method and e.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            m = self._read_message(deadline)
            if m.get("method") == method and m.get("sessionId") == session:
                return m
            self.events.append(m)

    def load(self, url: str, expression: str = "null") -> PageResult:
        """Open `url` in a new tab, wait for its load event, evaluate `expression` (JSON-able
        result), take a full-page screenshot, and collect console errors and exceptions."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.send(f"{domain}.enable", session=session)
        self.events.clear()
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session)
        out = PageResult()
        out.value = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                              session=session).get("result", {}).get("value")
        size = self.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
        shot = self.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}},
            session=session)
        out.screenshot = base64.b64decode(shot["data"])
        for e in self.events:
            if e.get("sessionId") != session:
                continue
            p = e.get("params", {})
            if e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.errors.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                                         for a in p.get("args", [])))
            elif e.get("method") == "Runtime.exceptionThrown":
                out.errors.append("exception: " + str(p.get("exceptionDetails", {}).get("text")))
            elif e.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.errors.append("log: " + str(p["entry"].get("text")) + " " + str(p["entry"].get("url", "")))
        self.send("Target.closeTarget", {"targetId": target})
        return out

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.send("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        for fd in (self._cmd_w, self._res_r):
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
