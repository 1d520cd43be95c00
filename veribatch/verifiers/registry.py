"""Verifiers by name: the one place that knows which adapter class a name means.

Adapters are imported lazily by dotted path, so a missing optional adapter (or
one still being written) breaks only the name that needs it, and importing the
registry stays cheap.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from veribatch.verifiers.base import Tool
from veribatch.verifiers.verifier import RUNTIMES, Verifier

_TOOLS: dict[str, str] = {
    "z3": "veribatch.verifiers.z3c.tool:EmbeddedZ3Tool",
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


def get_tool(name: str) -> Tool:
    """A fresh adapter instance for `name`."""
    try:
        target = _TOOLS[name]
    except KeyError:
        raise _unknown("verifier", name, verifier_names()) from None
    module, _, cls_name = target.partition(":")
    cls = getattr(importlib.import_module(module), cls_name)
    tool = cls()
    if not isinstance(tool, Tool):
        raise TypeError(f"{target} is not a verifiers.base.Tool")
    return tool


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
    if runtime not in RUNTIMES:
        raise _unknown("runtime", runtime, list(RUNTIMES))
    return Verifier(get_tool(name), runtime=runtime, image=image, cache_dir=cache_dir)
