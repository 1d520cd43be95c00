"""manifest.json, read into a typed `Manifest`.

`launch` writes the file once at plan time (`launch/manifest.py: build_manifest`, whose
bytes the run id's tests pin); everything that reads it — launch's status, resume and shard
loop, aggregation, every benchmark's tables — goes through `Manifest`, so a key is spelled
once.  The raw dict is kept (`raw`) for what is written back or shown verbatim.

Reading is lenient about keys a tables test's hand-made manifest leaves out (defaults
below), and strict about types: a wrong one is a RunDirError naming the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .paths import AGGREGATE_STAGE, INSTANCES, RunDir, RunDirError, read_json


@dataclass(frozen=True)
class StageEntry:
    """One entry of the manifest's `stages`: what a stage needs and where it may run."""

    name: str
    resource: str = "cpu"
    needs: tuple[str, ...] = ()
    added_by: str | None = None                  # "launch" for the aggregate stage it adds
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> StageEntry:
        return cls(name=str(d["name"]), resource=str(d.get("resource", "cpu")),
                   needs=tuple(str(n) for n in d.get("needs", ())),
                   added_by=d.get("added_by"), raw=d)

    @property
    def is_task_stage(self) -> bool:
        """A stage of the task itself, not the aggregate stage launch adds."""
        return self.added_by != "launch" and self.name != AGGREGATE_STAGE

    def get(self, key: str, default: Any = None) -> Any:
        """A field launch's sizing and regress read as declared (cpus, memory, columns…)."""
        return self.raw.get(key, default)


@dataclass(frozen=True)
class Manifest:
    """What a run is: its id, identity, config, shard count and stages."""

    run_id: str
    identity: str
    config: Mapping[str, Any]
    shards: int
    stages: tuple[StageEntry, ...]
    instance_count: int | None = None
    instances_file: str = INSTANCES
    code_version: str | None = None
    created: str | None = None
    hostname: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, m: Mapping[str, Any], *, source: str = "manifest") -> Manifest:
        """Raises RunDirError naming `source` when a field has the wrong type."""
        try:
            count = m.get("instance_count")
            return cls(
                run_id=str(m.get("run_id", "")), identity=str(m.get("identity", "")),
                config=dict(m.get("config") or {}),
                shards=int(m.get("shards", (m.get("config") or {}).get("shards", 1))),
                stages=tuple(StageEntry.from_json(s) for s in m.get("stages", ())),
                instance_count=None if count is None else int(count),
                instances_file=str(m.get("instances_file", INSTANCES)),
                code_version=_opt(m.get("code_version")), created=_opt(m.get("created")),
                hostname=_opt(m.get("hostname")), raw=m)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise RunDirError(f"{source}: unreadable manifest ({type(e).__name__}: {e})") from None

    @classmethod
    def read(cls, run_dir: RunDir | Path | str) -> Manifest:
        """The manifest of a run directory; RunDirError naming the file when unreadable."""
        rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
        try:
            data = read_json(rd.manifest)
        except (OSError, ValueError) as e:
            raise RunDirError(f"{rd.manifest}: unreadable manifest ({e})") from None
        if not isinstance(data, dict):
            raise RunDirError(f"{rd.manifest}: unreadable manifest (not a JSON object)")
        return cls.from_json(data, source=str(rd.manifest))

    @property
    def task(self) -> str:
        return str(self.config.get("task", ""))

    @property
    def model(self) -> str | None:
        return self.config.get("model") or None

    @cached_property
    def task_stages(self) -> tuple[StageEntry, ...]:
        """The task's stages, upstream first, without the aggregate stage launch adds: the
        one place the stage list is filtered."""
        return tuple(s for s in self.stages if s.is_task_stage)

    def stage(self, name: str) -> StageEntry | None:
        """The stage called `name` (the aggregate stage included), or None."""
        return next((s for s in self.stages if s.name == name), None)

    def task_stage(self, name: str) -> StageEntry | None:
        """The task stage called `name`, or None (also for the aggregate stage)."""
        return next((s for s in self.task_stages if s.name == name), None)


def _opt(v: Any) -> str | None:
    return None if v is None else str(v)
