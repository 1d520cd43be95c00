"""Verifiers by name: the installed `Tool` classes (entry point group ``veribatch.tools``).

Adding a verifier is its module plus one entry point line, in this project's
``pyproject.toml`` or in another package's (`docs/adding-a-verifier.md`): what a
task or `launch verify` needs to know about a tool — its properties and languages, default
memory and cores, whether its verdicts are certified — is read from the adapter class's
declared facts (`verifiers.base.Tool`), never from a table elsewhere.

Adapters are imported on first use (`veribatch.registry`), so a missing optional adapter (or
one still being written) breaks only the name that needs it, and listing the names stays
cheap (`launch verify --help` lists them without importing any).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from veribatch import registry
from veribatch.verifiers.base import Tool

if TYPE_CHECKING:
    from veribatch.verifiers.verifier import Verifier

def verifier_names() -> list[str]:
    """The installed verifiers' names; imports none of them."""
    return registry.names(registry.TOOLS)


class UnknownToolError(LookupError):
    """An unknown verifier or runtime was asked for; the message lists the known ones.

    Defined here rather than shared with `tasks`, because `verifiers` imports nothing
    of ours above it; callers that want one except-clause for every unknown name catch `LookupError`.
    """


def _unknown(what: str, name: str, known: list[str]) -> Exception:
    return UnknownToolError(f"unknown {what} {name!r}; known: {', '.join(known)}")


def tool_class(name: str) -> type[Tool]:
    """The adapter class of `name`: its facts, without an instance (nothing is run or looked up).

    Raises `UnknownToolError` for an unknown name, `TypeError` for an adapter that is no
    `Tool` or leaves a fact undeclared (the conformance test catches both first)."""
    try:
        cls = registry.load(registry.TOOLS, name)
    except registry.UnregisteredNameError as e:
        raise _unknown("verifier", name, e.known) from None
    target = registry.target(registry.TOOLS, name)
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
