"""The executor interface: take the (stage, shard) pairs to run, run or submit them.

Executors are thin on purpose.  What a shard does, when it counts as done and
what survives a crash are decided in `shard_loop.py` and `completion.py`; an
executor only decides *where* and *when* `run_shard` is called.  So a local run
and a SLURM run of the same plan produce the same records.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..rundir import RunDir


@dataclass
class SubmitResult:
    submitted: dict[str, list[int]]      # stage → shards run or submitted
    finished: bool                       # True when the executor ran everything in the foreground
    failed: list[tuple[str, int]] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""


class Executor(ABC):
    name: str

    @abstractmethod
    def submit(self, rd: RunDir, manifest: dict[str, Any], todo: dict[str, list[int]],
               *, aggregate: bool, waiting_on: dict[tuple[str, int], str] | None = None,
               also_after: Sequence[str] = ()) -> SubmitResult:
        """Run or submit the shards in `todo` (stage order = manifest order), then aggregation.

        `waiting_on`: upstream shards not in `todo` that a job already runs or queues
        (shard → job id); a downstream shard in `todo` must start only after them.
        `also_after`: other live jobs of the run the aggregation must wait for."""


def make_executor(name: str, **kwargs: Any) -> Executor:
    if name == "local":
        from .local import LocalExecutor

        return LocalExecutor(**kwargs)
    if name == "slurm":
        from .slurm import SlurmExecutor

        return SlurmExecutor(**kwargs)
    raise ValueError(f"unknown executor {name!r}; known executors: local, slurm")
