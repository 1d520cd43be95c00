"""Measured costs: what a run's stages actually took, kept for sizing the next run.

Every shard writes `stats.json` (its wall time, instances run, instances resumed from the
ledger) and its records (per instance the verifier's CPU seconds where the stage records
them, the completion tokens of a generate stage).  `measure_run` reads them back per
task stage; `record` keeps them in a small JSON file beside the nightly history
(``HISTORY/costs.json``, written by `launch nightly` for each complete night); sizing
(`launch.sizing`) and the `--dry-run` cost (`executors.cost`) read it, through
``$VERIBATCH_COSTS`` (the file), in place of the profile's assumed figures.  Measurements
are per task × stage × verifier × model: another verifier or model is another cost.

File schema (``schema: 1``)::

    {"schema": 1, "measurements": [
       {"task", "stage", "verifier", "model": str ("" when none),
        "run_id", "run_dir", "dataset", "recorded": str,
        "instances": int,            # instances run (resumed ones are not timed)
        "shards": int,               # shards that ran instances
        "wall_s": float,             # per instance: the shards' wall time / instances run
        "cpu_s": float | null,       # per instance: the records' cpu_s columns, summed
        "tokens_per_s": float | null,  # completion tokens / the shards' wall, less the
                                       # engine loads they recorded (before those were
                                       # recorded: load included)
        "cpus_per_task": int,
        "load_s": float | null},       # seconds per engine load the shards paid (their
                                       # stats.json ``notes.engine_load_s``; null: none)
     ...],
     "instance_s": {"TASK|STAGE|VERIFIER|MODEL": {instance id: float}, ...}}

``instance_s`` (optional; readers that predate it ignore it) holds per key the latest
measured seconds of each instance: the stage's declared `time_column` summed over the
instance's records (those its `record_filter` selects), else its ``cpu_s`` columns.
Planning reads it to spread a run's slow instances over the shards (`expected_costs`,
`launch.plan`): an instance keeps its last measurement until a later run measures it again,
so the map is bounded by the data set, not by the number of nights.

Newest last; `MAX_PER_KEY` are kept per key.  A lookup takes the median of the last
`LOOKUP_LAST` measurements of its key, so one odd night does not resize the next.  A
measured `load_s` replaces the profile's load estimate (weights at ``load_gb_per_s`` +
the engine start-up) in sizing.  Fields this version does not know are ignored on
reading, so a later writer's additions do not make the file unreadable here.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from veribatch.rundir.manifest import Manifest
from veribatch.rundir.paths import RunDir, atomic_write_json, read_json

COSTS_ENV = "VERIBATCH_COSTS"
COSTS_FILE = "costs.json"
SCHEMA = 1
MAX_PER_KEY = 20
LOOKUP_LAST = 5


class CostsError(ValueError):
    """The measured-costs file is unreadable or not of this schema; names the file."""


@dataclass(frozen=True)
class Measurement:
    task: str
    stage: str
    verifier: str
    model: str
    run_id: str
    run_dir: str          # the run's identity here: nightly's nights share one run id
    dataset: str
    recorded: str
    instances: int
    shards: int
    wall_s: float
    cpu_s: float | None
    tokens_per_s: float | None
    cpus_per_task: int
    load_s: float | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.task, self.stage, self.verifier, self.model)


@dataclass(frozen=True)
class Measured:
    """What sizing uses for one stage: medians over the key's latest measurements."""

    wall_s: float
    cpu_s: float | None
    tokens_per_s: float | None
    runs: tuple[str, ...]
    instances: int
    load_s: float | None = None
    load_runs: int = 0

    def describe(self) -> str:
        return (f"measured: {self.wall_s:.3g} s per instance over {self.instances} instance(s) "
                f"of {len(self.runs)} run(s) ({', '.join(self.runs[-2:])})")

    def describe_load(self) -> str:
        return (f"measured: {self.load_s:.3g} s per engine load, median of {self.load_runs} "
                f"run(s) ({', '.join(self.runs[-2:])})")


def key_of(config: Any, stage: str) -> tuple[str, str, str, str]:
    """The measurement key of a run's stage, from its config (manifest ``config``)."""
    def get(k: str) -> str:
        return str(config.get(k) or "")
    return (get("task"), stage, get("verifier"), get("model"))


def measure_run(run_dir: Path) -> list[Measurement]:
    """Per task stage of `run_dir`, what its complete shards took (stages with no shard
    that ran an instance are left out: nothing was measured)."""
    rd = RunDir(run_dir)
    manifest = Manifest.read(rd)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out = []
    for st in manifest.task_stages:
        wall = ran = shards = loads = 0
        cpu, tokens, have_cpu, have_tokens, load_s = 0.0, 0.0, False, False, 0.0
        for k in range(manifest.shards):
            if not rd.done(st.name, k).exists():
                continue
            try:
                stats = read_json(rd.stats(st.name, k))
            except (OSError, ValueError):
                continue
            n = int(stats.get("ran") or 0)
            if n <= 0:
                continue
            wall += float(stats.get("wall_s") or 0.0)
            paid = (stats.get("notes") or {}).get("engine_load_s")
            if isinstance(paid, int | float) and paid > 0:  # 0: an engine loaded before
                loads += 1
                load_s += float(paid)
            ran += n
            shards += 1
            table = pq.read_table(rd.records(st.name, k))
            cols = [c for c in table.column_names if c == "cpu_s" or c.endswith("_cpu_s")]
            for c in cols:
                have_cpu = True
                cpu += sum(v for v in table.column(c).to_pylist() if isinstance(v, int | float))
            if "completion_tokens" in table.column_names:
                have_tokens = True
                tokens += sum(v for v in table.column("completion_tokens").to_pylist()
                              if isinstance(v, int | float))
        if not ran:
            continue
        task, stage, verifier, model = key_of(manifest.config, st.name)
        out.append(Measurement(
            task=task, stage=stage, verifier=verifier, model=model, run_id=manifest.run_id,
            run_dir=str(Path(run_dir).resolve()), dataset=str(manifest.config.get("dataset") or ""), recorded=now, instances=ran,
            shards=shards, wall_s=round(wall / ran, 4),
            cpu_s=round(cpu / ran, 4) if have_cpu else None,
            tokens_per_s=(round(tokens / (wall - load_s), 2)
                          if have_tokens and wall - load_s > 0 else None),
            cpus_per_task=int(st.get("cpus_per_task", 1) or 1),
            load_s=round(load_s / loads, 3) if loads else None))
    return out


def _read(path: Path) -> tuple[list[Measurement], dict[str, dict[str, float]]]:
    path = Path(path)
    if not path.is_file():
        return [], {}
    try:
        data = json.loads(path.read_text())
        if data.get("schema") != SCHEMA:
            raise CostsError(f"{path}: schema {data.get('schema')!r}, expected {SCHEMA}")
        per = {str(k): {str(i): float(s) for i, s in v.items()}
               for k, v in (data.get("instance_s") or {}).items()}
        known = {f.name for f in fields(Measurement)}
        return [Measurement(**{k: v for k, v in m.items() if k in known})
                for m in data["measurements"]], per
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        if isinstance(e, CostsError):
            raise
        raise CostsError(f"{path}: unreadable measured-costs file ({e})") from None


def read_costs(path: Path) -> list[Measurement]:
    return _read(path)[0]


def read_instance_costs(path: Path) -> dict[str, dict[str, float]]:
    """``instance_s`` of the file: per `key_name`, instance id -> seconds."""
    return _read(path)[1]


def key_name(key: tuple[str, str, str, str]) -> str:
    """A measurement key as one string (``instance_s``'s keys)."""
    return "|".join(key)


def record(path: Path, measurements: list[Measurement],
           instance_s: dict[str, dict[str, float]] | None = None) -> int:
    """Append `measurements` (replacing an earlier measurement of the same run directory and
    stage: a night measured twice counts once),
    keep the last `MAX_PER_KEY` per key, and merge `instance_s` (a newer measurement of an
    instance replaces the older); atomic, under a lock.  Returns the count kept."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        old, per = _read(path)
        new = {(m.run_dir, m.stage) for m in measurements}
        kept = [m for m in old if (m.run_dir, m.stage) not in new] + measurements
        per_key: dict[tuple[str, str, str, str], list[Measurement]] = {}
        for m in kept:
            per_key.setdefault(m.key, []).append(m)
        kept = [m for m in kept if m in per_key[m.key][-MAX_PER_KEY:]]
        for k, v in (instance_s or {}).items():
            per[k] = {**per.get(k, {}), **v}
        data: dict[str, Any] = {"schema": SCHEMA, "measurements": [asdict(m) for m in kept]}
        if per:
            data["instance_s"] = {k: dict(sorted(v.items())) for k, v in sorted(per.items())}
        atomic_write_json(path, data)
        return len(kept)


def measure_instances(run_dir: Path) -> dict[str, dict[str, float]]:
    """Per task stage of `run_dir` (as `key_name`), each instance's measured seconds from its
    complete shards' records: the stage's `time_column` over the records its
    `record_filter` selects, else the records' ``cpu_s`` columns; a stage recording
    neither gives none.  Instances resumed from a ledger count too: their records carry
    their own times."""
    rd = RunDir(run_dir)
    manifest = Manifest.read(rd)
    out: dict[str, dict[str, float]] = {}
    for st in manifest.task_stages:
        tcol = st.get("time_column")
        where = dict(st.get("record_filter") or {})
        per: dict[str, float] = {}
        for k in range(manifest.shards):
            if not rd.done(st.name, k).exists():
                continue
            try:
                rows = pq.read_table(rd.records(st.name, k)).to_pylist()
            except (OSError, ValueError):
                continue
            for row in rows:
                if any(row.get(c) != v for c, v in where.items()):
                    continue
                cols = [tcol] if tcol and tcol in row else \
                    [c for c in row if c == "cpu_s" or c.endswith("_cpu_s")]
                vals = [row[c] for c in cols if isinstance(row.get(c), int | float)]
                if vals:
                    iid = str(row["instance_id"])
                    per[iid] = round(per.get(iid, 0.0) + float(sum(vals)), 4)
        if per:
            out[key_name(key_of(manifest.config, st.name))] = per
    return out


@dataclass(frozen=True)
class ExpectedCosts:
    """What planning spreads instances by: per instance its expected seconds over the run's
    stages, and where they came from (the file and its sha256, recorded in shards.json)."""

    seconds: dict[str, float]
    file: str
    sha256: str
    stages: tuple[str, ...]


def expected_costs(path: Path | None, config: Any,
                   stages: list[str]) -> ExpectedCosts | None:
    """Each instance's measured seconds summed over `stages` (the run's task stages) from
    `path`'s ``instance_s``, or None when the file holds none for this task × verifier ×
    model.  Instances without a measurement are left out (the caller decides)."""
    if path is None or not Path(path).is_file():
        return None
    per = read_instance_costs(path)
    seconds: dict[str, float] = {}
    used = []
    for stage in stages:
        got = per.get(key_name(key_of(config, stage)))
        if not got:
            continue
        used.append(stage)
        for iid, s in got.items():
            seconds[iid] = seconds.get(iid, 0.0) + s
    if not seconds:
        return None
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    return ExpectedCosts(seconds, str(Path(path).resolve()), digest, tuple(used))


def lookup(path: Path | None, key: tuple[str, str, str, str]) -> Measured | None:
    """The medians of the last `LOOKUP_LAST` measurements of `key`, or None."""
    if path is None:
        return None
    ms = [m for m in read_costs(path) if m.key == key][-LOOKUP_LAST:]
    if not ms:
        return None
    cpu = [m.cpu_s for m in ms if m.cpu_s is not None]
    tps = [m.tokens_per_s for m in ms if m.tokens_per_s]
    loads = [m.load_s for m in ms if m.load_s]
    return Measured(wall_s=statistics.median(m.wall_s for m in ms),
                    cpu_s=statistics.median(cpu) if cpu else None,
                    tokens_per_s=statistics.median(tps) if tps else None,
                    runs=tuple(m.run_id for m in ms), instances=sum(m.instances for m in ms),
                    load_s=statistics.median(loads) if loads else None, load_runs=len(loads))


def costs_path() -> Path | None:
    """The measured-costs file sizing reads: ``$VERIBATCH_COSTS``, else none."""
    value = os.environ.get(COSTS_ENV)
    return Path(value).expanduser() if value else None


def measured_for(config: Any, stage: str) -> Measured | None:
    """What `$VERIBATCH_COSTS` holds for this run's `stage` (None: the profile's figures)."""
    return lookup(costs_path(), key_of(config, stage))


def main(argv: list[str] | None = None) -> int:
    """``python -m veribatch.launch.measured COSTS_FILE RUN_DIR...``: record what the runs
    took (what `launch nightly` does for each complete night)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m veribatch.launch.measured COSTS_FILE RUN_DIR...", file=sys.stderr)
        return 2
    target, runs = Path(args[0]), [Path(a) for a in args[1:]]
    for run in runs:
        ms = measure_run(run)
        record(target, ms, measure_instances(run))
        for m in ms:
            print(f"{run}: {m.stage}: {m.instances} instance(s), {m.wall_s:.3g} s wall"
                  + (f", {m.cpu_s:.3g} s CPU" if m.cpu_s is not None else "")
                  + (f", {m.tokens_per_s:.3g} tokens/s" if m.tokens_per_s else "")
                  + " per instance"
                  + (f"; {m.load_s:.3g} s per engine load" if m.load_s else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
