"""Executors by name: the one place that knows which class an `--executor` name means.

Classes are imported lazily by dotted path (as `verifiers/registry.py` does for tools), so
the CLI can list the names without loading an executor (rich's progress bars, submitit),
and the base class never imports its subclasses.  Every executor calls
`launch.shard_loop.run_shard`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Executor

EXECUTORS: dict[str, str] = {
    "local": "veribatch.launch.executors.local:LocalExecutor",
    "slurm": "veribatch.launch.executors.slurm:SlurmExecutor",
}

def executor_names() -> list[str]:
    return list(EXECUTORS)


def executor_class(name: str) -> type[Executor]:
    from .base import Executor

    try:
        target = EXECUTORS[name]
    except KeyError:
        raise ValueError(f"unknown executor {name!r}; known executors: "
                         + ", ".join(executor_names())) from None
    module, _, cls_name = target.partition(":")
    cls = getattr(importlib.import_module(module), cls_name)
    if not (isinstance(cls, type) and issubclass(cls, Executor)):
        raise TypeError(f"{target} is not a launch.executors.base.Executor")
    return cls
