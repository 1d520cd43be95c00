"""What a task asks of a verifier, and the one way every task gets its verifier.

A task does not list verifier names: it says what its queries need — the property they
ask and the language of its programs — and which tool is its default
(`AcceptedVerifiers`).  The names ``--verifier`` accepts are then every registered tool
that declares both (`verifiers.base.Tool.properties`/`languages`), the default first, so
adding a verifier to the registry adds it to every task that can use it and to no other.
What a task needs to know about the chosen tool (memory and cores per query, whether its
verdicts are certified) is read from the same declared facts (`tool_facts`).

The verifiers layer is imported only when one of these is used, so importing a task stays
cheap.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veribatch.tasks.base import RunConfig

if TYPE_CHECKING:
    from veribatch.verifiers.base import Tool
    from veribatch.verifiers.verifier import Verifier


@dataclass(frozen=True)
class AcceptedVerifiers:
    """`Task.verifiers` derived from the registry: ``verifiers = AcceptedVerifiers(
    "unreach-call", "C", default="z3")`` in a task class reads as the tuple of names (the
    default first, the others sorted), computed on first use."""

    property: str
    language: str
    default: str

    def __get__(self, obj: object, owner: type | None = None) -> tuple[str, ...]:
        return accepted_verifiers(self.property, self.language, self.default)


@functools.cache
def accepted_verifiers(property: str, language: str, default: str) -> tuple[str, ...]:
    """Every registered tool that checks `property` on programs in `language`, `default` first.

    Raises `LookupError` when `default` is not among them (a task's declaration that no
    registered tool fulfils is a bug, not a user error)."""
    from veribatch.verifiers.registry import tool_class, verifier_names

    able = [n for n in verifier_names()
            if property in tool_class(n).properties and language in tool_class(n).languages]
    if default not in able:
        raise LookupError(f"default verifier {default!r} does not check {property!r} on {language} "
                          f"programs; the registered tools that do: {', '.join(able) or 'none'}")
    return (default, *(n for n in able if n != default))


def tool_facts(name: str) -> type[Tool]:
    """The declared facts of verifier `name` (its adapter class; nothing is run or looked up)."""
    from veribatch.verifiers.registry import tool_class

    return tool_class(name)


def verifier_for(config: RunConfig, *, name: str | None = None,
                 cache_dir: Path | None = None) -> Verifier:
    """The run's verifier: `name` (default: the config's ``--verifier``) on the runtime and image
    the config's ``-o runtime``/``-o image`` name, results cached under `cache_dir` if given."""
    from veribatch.verifiers.registry import get_verifier

    image = str(config.options.get("image") or "")
    return get_verifier(name or config.verifier, runtime=str(config.options.get("runtime", "native")),
                        image=Path(image) if image else None, cache_dir=cache_dir)


def query_memory_mb(config: RunConfig) -> int:
    """The per-query memory limit: ``-o memory_mb``, else the verifier's declared default."""
    given: Any = config.options.get("memory_mb")
    return int(given) if given not in (None, "") else tool_facts(config.verifier).memory_mb


def query_cores(config: RunConfig) -> int:
    """Cores one query of the run's verifier keeps busy (its declared `query_cores`)."""
    return tool_facts(config.verifier).query_cores
