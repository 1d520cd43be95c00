"""Executors by name: the installed `Executor` classes (entry point group ``veribatch.executors``).

Classes are imported on first use (`veribatch.registry`), so the CLI can list the names
without loading an executor (rich's progress bars, submitit), and the base class never
imports its subclasses.  Every executor calls `launch.shard_loop.run_shard`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from veribatch import registry

if TYPE_CHECKING:
    from .base import Executor


def executor_names() -> list[str]:
    """The installed executors' names, `local` first (the default); imports none of them."""
    names = registry.names(registry.EXECUTORS)
    return sorted(names, key=lambda n: (n != "local", n))


def executor_class(name: str) -> type[Executor]:
    from .base import Executor

    try:
        cls = registry.load(registry.EXECUTORS, name)
    except registry.UnregisteredNameError:
        raise ValueError(f"unknown executor {name!r}; known executors: "
                         + ", ".join(executor_names())) from None
    if not (isinstance(cls, type) and issubclass(cls, Executor)):
        raise TypeError(f"{registry.target(registry.EXECUTORS, name)} is not a "
                        "launch.executors.base.Executor")
    return cls
