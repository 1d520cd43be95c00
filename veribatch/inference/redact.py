"""Secrets never leave the inference layer: keys and URL credentials are cut out of every
error message and log line on their way out.

An engine's error text is built from its HTTP library's exceptions and the provider's
answers, which can quote what was sent: httpx refuses a header value with a ``\\r`` in it
by quoting the whole header (``Bearer <key>``), a URL with ``user:pw@`` is printed as is by
httpx's request log.  Such text becomes an exception message, then a shard's error.json,
log.txt and worker.err, then `launch status`.  Rather than trusting every message to be
built carefully, everything leaving passes through `redact` once:

- `redact` removes bearer/basic credentials, ``key=`` / ``token:`` style values, URL
  user-info, and every current value of the environment variables that hold secrets;
- `scrub_errors` applies it to an engine's completions (their ``error`` field) and to an
  exception leaving `Engine.generate` (re-raised, same type, without the original chain);
- `LogRedactor` is a logging filter on httpx's and httpcore's loggers.

`check_secret_value` refuses at plan time a key that would make such an error in the
first place (surrounding whitespace, a ``\\r`` from a file saved on Windows).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

REDACTED = "<redacted>"
SECRET_ENV = ("OPENAI_API_KEY", "VLLM_API_KEY", "VERIBATCH_SERVE_TOKEN", "HF_TOKEN",
              "HUGGING_FACE_HUB_TOKEN", "ANTHROPIC_API_KEY")
"""Environment variables whose values are secrets wherever they appear."""

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization: Bearer <key> / Basic <b64>, quoted or not, up to a quote or whitespace
    # (8 characters at least: "wrong bearer token" is prose, not a credential)
    (re.compile(r"(?i)\b(bearer|basic)(\s+|%20)[^\s'\"\\,;)}\]]{8,}"), rf"\1 {REDACTED}"),
    # URL user-info: scheme://user:pw@host  or  scheme://token@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"]+@"), rf"\1{REDACTED}@"),
    # api_key=..., "api-key": "...", token: ..., password=...
    (re.compile(r"(?i)\b((?:api[-_]?key|access[-_]?token|token|secret|password|passwd)['\"]?\s*[:=]\s*['\"]?)"
                r"[^\s'\",;&)}\]]+"), rf"\1{REDACTED}"),
)

E = TypeVar("E", bound=BaseException)


def _env_secrets(extra_env: Iterable[str] = ()) -> list[str]:
    out = []
    for name in (*SECRET_ENV, *extra_env):
        value = os.environ.get(name)
        if value and value.strip() and len(value.strip()) >= 6:  # a 1-char "key" would eat every text
            out += [value, value.strip()]
    return sorted(set(out), key=len, reverse=True)


def redact(text: str, secrets: Sequence[str] = (), extra_env: Iterable[str] = ()) -> str:
    """`text` without credentials: the given `secrets`, secret environment values, and
    anything shaped like a credential (see the module doc)."""
    for s in (*sorted((s for s in secrets if s and len(s.strip()) >= 6), key=len, reverse=True),
              *_env_secrets(extra_env)):
        text = text.replace(s, REDACTED)
        if s.strip() != s:
            text = text.replace(s.strip(), REDACTED)
        text = text.replace(repr(s)[1:-1], REDACTED)  # as a repr shows it: '\r' → '\\r'
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


def redact_exception(exc: E, secrets: Sequence[str] = (), extra_env: Iterable[str] = ()) -> E | None:
    """A copy of `exc` (same type) with its message redacted, or None when nothing changed.

    The caller raises it ``from None``: a chained original would print the secret in the
    traceback that the worker writes to error.json and worker.err."""
    msg = str(exc)
    clean = redact(msg, secrets, extra_env)
    if clean == msg and not (exc.__cause__ or exc.__context__):
        return None
    try:
        new = type(exc)(clean)
    except Exception:  # noqa: BLE001 (an exception type with another signature)
        new = RuntimeError(f"{type(exc).__name__}: {clean}")  # type: ignore[assignment]
    return new  # type: ignore[return-value]


def scrub_errors(results: list[list[Any]], secrets: Sequence[str] = (),
                 extra_env: Iterable[str] = ()) -> list[list[Any]]:
    """Redact the ``error`` field of every completion in `results` (in place; returned)."""
    for comps in results:
        for c in comps:
            if getattr(c, "error", None):
                c.error = redact(c.error, secrets, extra_env)
    return results


class LogRedactor(logging.Filter):
    """Rewrites a record's message redacted (formatted first, so an argument holding a URL
    with user-info is covered too)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 (a bad format string: leave it to logging)
            return True
        clean = redact(msg)
        if clean != msg:
            record.msg, record.args = clean, None
        return True


_INSTALLED = False


def install_log_redaction() -> None:
    """Filter httpx's request log (``HTTP Request: POST http://user:pw@host/...``) and keep
    httpcore's header-level debug log quiet.  Idempotent."""
    global _INSTALLED
    if _INSTALLED:
        return
    _INSTALLED = True
    logging.getLogger("httpx").addFilter(LogRedactor())
    core = logging.getLogger("httpcore")
    core.addFilter(LogRedactor())
    if core.level == logging.NOTSET or core.level < logging.WARNING:
        core.setLevel(logging.WARNING)  # its children log request internals at DEBUG


def check_secret_value(name: str, value: str | None) -> str | None:
    """Why the secret in environment variable `name` cannot work, or None.  Never quotes
    the value."""
    if value is None or value == "":
        return None
    if value != value.strip():
        where = "a trailing" if value.rstrip() != value else "a leading"
        cr = " (a '\\r': a file saved with Windows line endings?)" if "\r" in value else ""
        return (f"${name} has {where} whitespace or line-break character{cr}; HTTP refuses it in a "
                f"header. Strip it, e.g. export {name}=\"$(tr -d ' \\r\\n' < key.txt)\"")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return f"${name} contains whitespace or a control character; HTTP refuses it in a header"
    return None
