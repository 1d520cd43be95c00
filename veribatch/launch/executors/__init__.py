"""Executors by name: the one place that knows which class an `--executor` name means.

Classes are imported lazily by dotted path (as `verifiers/registry.py` does for tools), so
`launch status` never loads rich's progress bars or submitit, and the base class never
imports its subclasses.  Every executor calls `launch.shard_loop.run_shard`.
"""

from __future__ import annotations

import importlib

from .base import Executor, SubmitResult

EXECUTORS: dict[str, str] = {
    "local": "veribatch.launch.executors.local:LocalExecutor",
    "slurm": "veribatch.launch.executors.slurm:SlurmExecutor",
}

__all__ = ["EXECUTORS", "Executor", "SubmitResult", "executor_class", "executor_names"]


def executor_names() -> list[str]:
    return list(EXECUTORS)


def executor_class(name: str) -> type[Executor]:
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
