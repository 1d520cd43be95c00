"""Re-timing instances a nightly comparison flagged `slower`: their CPU stage run again, same
inputs, a few more times, so that one timing does not raise an alarm alone.

`aggregate.regress` judges and runs nothing (it reads files); this module runs.  For each
flagged (stage, instance) of a complete run it reads the instance from the run's frozen
instance list and its upstream records from the run's own shard (InvBench's verify stage:
the same candidate invariant the night generated), runs the stage's function on that one
instance `k` times and reads the declared `time_column` of each record (the stage's
`record_filter` and `record_key` select and match them).  Records and ledgers of the run
are not touched: the re-runs write only into a scratch folder of their own.  A model
stage (`resource` gpu) is not re-run: that would ask the model again, not time the same
work.

One process for all of a run's instances (`python -m veribatch.launch.retime`, like a
local shard worker: a stage that crashes or leaks takes only it down), started by
`launch nightly` where it runs — for a SLURM suite the login node, so the re-timings are
measured beside, not on, the compute nodes of the night: at most `retime_max` instances x
`retime_k` runs (docs/nightly.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from veribatch.rundir.paths import RunDir
from veribatch.rundir.shards import read_spans, shard_of_ids
from veribatch.tasks.base import get_task

from .context import ShardContext
from .instances import read_shard_instances
from .manifest import config_from_manifest, load_manifest

RecordKey = tuple[str, str, tuple[tuple[str, Any], ...]]


class _RetimeContext(ShardContext):
    """A shard's context whose scratch is a folder of its own (the run's is left as is)."""

    def __init__(self, rd: RunDir, stage: str, shard: int, config: Any,
                 needs: tuple[str, ...], scratch: Path) -> None:
        super().__init__(rd, stage, shard, config, needs)
        self._scratch = scratch

    def scratch_dir(self) -> Path:
        self._scratch.mkdir(parents=True, exist_ok=True)
        return self._scratch


def _plain(v: Any) -> Any:
    """A record value as `aggregate.regress` matches it (integral floats as ints)."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def retime_run(run_dir: Path, wanted: Sequence[tuple[str, str]], k: int, scratch: Path
               ) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Run each (stage, instance id) of `wanted` `k` more times.  Returns (timings: per
    record {stage, instance_id, key, times}, failed: {stage, instance_id, why})."""
    rd = RunDir(run_dir)
    manifest = load_manifest(rd)
    config = config_from_manifest(manifest)
    stages = {s.name: s for s in get_task(config.task).stages(config)}
    shard_of = shard_of_ids(rd)
    spans = read_spans(rd)
    timings: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    for stage, iid in wanted:
        entry, st = manifest.task_stage(stage), stages.get(stage)
        why = ""
        if entry is None or st is None:
            why = f"the task has no stage {stage!r}"
        elif st.resource != "cpu":
            why = f"a {st.resource} stage is not re-run (it would ask the model again)"
        elif not entry.get("time_column"):
            why = f"stage {stage!r} declares no time column"
        elif iid not in shard_of:
            why = f"instance {iid!r} is not in the run's plan"
        if why:
            failed.append({"stage": stage, "instance_id": iid, "why": why})
            continue
        assert entry is not None and st is not None
        shard = shard_of[iid]
        inst = next(i for i in read_shard_instances(rd, spans[shard], shard) if i.id == iid)
        tcol = str(entry.get("time_column"))
        where = dict(entry.get("record_filter") or {})
        keys = tuple(entry.get("record_key") or ())
        times: dict[tuple[tuple[str, Any], ...], list[float]] = {}
        safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in iid)
        try:
            for n in range(k):
                ctx = _RetimeContext(rd, stage, shard, config, tuple(st.needs),
                                     scratch / stage / safe / str(n))
                for result in st.run([inst], ctx):
                    for rec in result.records:
                        if any(_plain(rec.get(c)) != v for c, v in where.items()):
                            continue
                        t = rec.get(tcol)
                        if isinstance(t, int | float) and not isinstance(t, bool):
                            key = tuple(sorted((c, _plain(rec.get(c))) for c in keys))
                            times.setdefault(key, []).append(float(t))
        except Exception as e:  # noqa: BLE001  (a failed re-run leaves the flag as it was)
            failed.append({"stage": stage, "instance_id": iid,
                           "why": f"{type(e).__name__}: {e}"})
            continue
        for key, ts in times.items():
            timings.append({"stage": stage, "instance_id": iid, "key": dict(key), "times": ts})
    return timings, failed


def retime(run_dir: Path, wanted: Sequence[tuple[str, str]], k: int, scratch: Path,
           timeout_s: float) -> tuple[dict[RecordKey, list[float]], dict[tuple[str, str], str]]:
    """`retime_run` in a process of its own (`python -m veribatch.launch.retime`), the run
    directory in its environment as a shard worker has it.  Returns (re-timings by
    `aggregate.regress.RecordChange.record_key`, why per (stage, instance) not re-timed)."""
    if not wanted or k <= 0:
        return {}, {}
    root = Path(run_dir).resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    request = scratch / "request.json"
    request.write_text(json.dumps({"k": k, "wanted": [list(w) for w in wanted]}))
    env = {**os.environ, "VERIBATCH_RUN_DIR": str(root)}
    argv = [sys.executable, "-m", "veribatch.launch.retime", str(root), str(request)]
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env,
                           start_new_session=True)
    except subprocess.TimeoutExpired:
        why = f"re-timing did not finish within {timeout_s:.0f} s"
        return {}, {tuple(w): why for w in wanted}  # type: ignore[misc]
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or [f"exit {p.returncode}"]
        return {}, {tuple(w): f"re-timing process failed: {tail[0]}" for w in wanted}  # type: ignore[misc]
    out = json.loads(p.stdout)
    (scratch / "result.json").write_text(json.dumps({**out, "wall_s": time.monotonic() - t0},
                                                    indent=1))
    timings = {(t["stage"], t["instance_id"], tuple(sorted(t["key"].items()))): t["times"]
               for t in out["timings"]}
    failed = {(f["stage"], f["instance_id"]): f["why"] for f in out["failed"]}
    return timings, failed


def main(argv: list[str] | None = None) -> int:
    """``python -m veribatch.launch.retime RUN_DIR REQUEST.json``: the re-timings as JSON on
    stdout (REQUEST: ``{"k": int, "wanted": [[stage, instance id], ...]}``; the scratch
    folder is REQUEST's)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m veribatch.launch.retime RUN_DIR REQUEST.json", file=sys.stderr)
        return 2
    request = Path(args[1])
    req = json.loads(request.read_text())
    # what the stage or its children print goes to stderr: stdout carries only the answer
    sys.stdout.flush()
    answer = os.dup(1)
    os.dup2(2, 1)
    try:
        timings, failed = retime_run(Path(args[0]), [(str(s), str(i)) for s, i in req["wanted"]],
                                     int(req["k"]), request.parent)
    finally:
        sys.stdout.flush()
        os.dup2(answer, 1)
        os.close(answer)
    json.dump({"timings": timings, "failed": failed}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
