"""`ShardContext`: the launch-side implementation of `tasks.base.StageContext`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from veribatch.rundir.paths import RunDir
from veribatch.tasks.base import RunConfig

LAUNCH_COLUMNS = ("instance_id", "stage", "shard")


class ShardContext:
    """What a running stage may ask: its upstream records, a scratch dir, a progress hook."""

    def __init__(self, rd: RunDir, stage: str, shard: int, config: RunConfig,
                 needs: tuple[str, ...],
                 on_progress: Callable[[int], None] | None = None) -> None:
        self.run_dir = rd.root
        self.stage = stage
        self.shard = shard
        self.config = config
        self._rd = rd
        self._needs = needs
        self._on_progress = on_progress
        self.ticks = 0
        self.notes: dict[str, Any] = {}

    def upstream(self, stage: str) -> dict[str, list[dict[str, Any]]]:
        """Records of shard `self.shard` of `stage`, keyed by instance id, in recorded order.

        The shard loop has already checked (by digest) that this upstream shard is
        complete before the stage started.  Records come back as the stage wrote
        them, minus the `stage`/`shard` columns launch added; a key another record
        of the same stage had and this one lacked reads as None.
        """
        if stage not in self._needs:
            raise KeyError(f"stage {self.stage!r} does not declare {stage!r} in needs={self._needs}")
        rows = pq.read_table(self._rd.records(stage, self.shard)).to_pylist()
        out: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            iid = row["instance_id"]
            rec = {k: v for k, v in row.items() if k not in ("stage", "shard")}
            out.setdefault(iid, []).append(rec)
        return out

    def scratch_dir(self) -> Path:
        path = self._rd.scratch(self.stage, self.shard)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def note(self, key: str, value: Any) -> None:
        """Kept in the shard's stats.json under ``notes`` (`tasks.base.StageContext.note`)."""
        self.notes[key] = value

    def progress(self, advance: int = 1) -> None:
        """Forwarded to an in-process listener; executors also count ledger lines themselves."""
        self.ticks += advance
        if self._on_progress is not None:
            self._on_progress(advance)
