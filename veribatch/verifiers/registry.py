"""Verifiers by name: the one place that knows which adapter class a name means.

Adding a verifier is one line here plus its module (`docs/adding-a-verifier.md`): what a
task or `launch verify` needs to know about a tool — its properties and languages, default
memory and cores, whether its verdicts are certified — is read from the adapter class's
declared facts (`verifiers.base.Tool`), never from a table elsewhere.

Adapters are imported lazily by dotted path, so a missing optional adapter (or
one still being written) breaks only the name that needs it, and importing the
registry stays cheap (`launch verify --help` lists the names without importing any).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from veribatch.verifiers.base import Tool

if TYPE_CHECKING:
    from veribatch.verifiers.verifier import Verifier

_TOOLS: dict[str, str] = {
    "z3": "veribatch.verifiers.z3c.tool:EmbeddedZ3Tool",  # z3 — the embedded C verifier (package z3c)
    "uautomizer": "veribatch.verifiers.uautomizer:UAutomizerTool",
    "dafny": "veribatch.verifiers.dafny:DafnyTool",
    "judge": "veribatch.verifiers.judge.tool:JudgeTool",
}

def verifier_names() -> list[str]:
    return sorted(_TOOLS)


class UnknownToolError(LookupError):
    """An unknown verifier or runtime was asked for; the message lists the known ones.

    Defined here rather than shared with `tasks`, because `verifiers` imports nothing
    of ours; callers that want one except-clause for every unknown name catch `LookupError`.
    """


def _unknown(what: str, name: str, known: list[str]) -> Exception:
    return UnknownToolError(f"unknown {what} {name!r}; known: {', '.join(known)}")


def tool_class(name: str) -> type[Tool]:
    """The adapter class of `name`: its facts, without an instance (nothing is run or looked up).

    Raises `UnknownToolError` for an unknown name, `TypeError` for an adapter that is no
    `Tool` or leaves a fact undeclared (the conformance test catches both first)."""
    try:
        target = _TOOLS[name]
    except KeyError:
        raise _unknown("verifier", name, verifier_names()) from None
    module, _, cls_name = target.partition(":")
    cls = getattr(importlib.import_module(module), cls_name)
    if not (isinstance(cls, type) and issubclass(cls, Tool)):
        raise TypeError(f"{target} is not a verifiers.base.Tool")
    missing = cls.missing_facts()
    if missing:
        raise TypeError(f"{target} does not declare {', '.join(missing)} (see verifiers.base.Tool)")
    if cls.name != name:
        raise TypeError(f"{target} is registered as {name!r} but names itself {cls.name!r}")
    return cls


def get_tool(name: str) -> Tool:
    """A fresh adapter instance for `name`."""
    return tool_class(name)()


def get_verifier(
    name: str,
    *,
    runtime: str = "native",
    image: Path | None = None,
    cache_dir: Path | None = None,
) -> Verifier:
    """The verifier `name` on `runtime`; results cached under `cache_dir` when given.

    Raises `UnknownToolError` for an unknown name or runtime; a tool that is not
    installed raises `ToolNotFoundError` only when it is first used (`version`,
    `run`, `start`), so listing and planning work on machines without it.
    """
    from veribatch.verifiers.verifier import RUNTIMES, Verifier

    if runtime not in RUNTIMES:
        raise _unknown("runtime", runtime, list(RUNTIMES))
    return Verifier(get_tool(name), runtime=runtime, image=image, cache_dir=cache_dir)
