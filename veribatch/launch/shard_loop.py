"""The shard loop: the one place where a (stage, shard) is run, for every executor.

In the spirit of datatrove's `_run_for_rank`, the order of the steps *is* the
reliability guarantee:

1. lock the shard (a second copy of the same shard exits at once);
2. skip if its DONE marker matches its inputs and its records are intact;
3. read the ledger, cutting off a torn last line; pending = not yet recorded;
4. run the stage on the pending instances, appending + fsyncing each result;
5. write records.parquet atomically, then stats.json, then — last — DONE.

An exception escaping the stage (or SIGTERM from `scancel`/preemption) fails the
*shard*: the traceback goes to error.json, nothing is recorded as a verdict, and
`launch resume` redoes only the instances missing from the ledger.

A *requeue* is not a failure: when the executor has put the shard's job back in
the queue (SLURM: USR2 before the time limit), the shard ends with
`ShardRequeued`, attempt.json notes the requeue, no error.json is written, and
the same job continues from the ledger.  The SIGTERM the scheduler sends the
old instance as part of the requeue is therefore not a cancel (`requeue_on_signal`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from veribatch.rundir.completeness import expected_input_hash
from veribatch.rundir.done import check_output, read_done, write_done
from veribatch.rundir.paths import RunDir, atomic_write_bytes, atomic_write_json, read_json
from veribatch.rundir.shards import read_spans
from veribatch.tasks.base import InstanceResult, get_task

from .context import LAUNCH_COLUMNS, ShardContext
from .instances import read_shard_instances
from .ledger import LedgerWriter, make_header, read_ledger
from .locks import is_locked, try_lock
from .manifest import code_version, config_from_manifest, load_manifest

log = logging.getLogger("launch.shard")


class ShardError(RuntimeError):
    """The shard cannot be completed (bad stage output, missing upstream...)."""


class ShardBusyError(ShardError):
    """Another process holds this shard's lock (it is running right now)."""


class ShardInterrupted(BaseException):  # noqa: N818  (a signal, like KeyboardInterrupt)
    """SIGTERM arrived (scancel, preemption, local cancel); the ledger is already durable."""


class ShardRequeued(BaseException):  # noqa: N818  (a signal, like KeyboardInterrupt)
    """The executor requeued this shard's job; the same job resumes from the ledger.

    A BaseException so that no stage's `except Exception` can swallow it; run_shard
    records it in attempt.json, never in error.json.
    """


@dataclass
class _RequeueState:
    """Process-wide, because signal handlers are: is a requeue under way, and did a SIGTERM
    arrive meanwhile (the scheduler killing the old instance, or a genuine scancel)."""

    active: bool = False
    term: int | None = None


_requeue = _RequeueState()


@dataclass
class ShardOutcome:
    stage: str
    shard: int
    skipped: bool          # DONE was already valid
    instances: int
    resumed: int           # instances found in the ledger and not redone
    records: int
    wall_s: float


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _slurm_job() -> str | None:
    job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if job and task:
        return f"{job}_{task}"
    return os.environ.get("SLURM_JOB_ID")


@contextmanager
def shard_lock(path: Path, *, wait: bool = False) -> Iterator[None]:
    """Hold the shard's lock; a second copy of the shard raises ShardBusyError — or, with
    `wait`, waits for the first to end and then carries on (finding the shard done, or
    resuming from its ledger), which is what a duplicate SLURM job or a second local
    resume should do rather than fail."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        if not try_lock(fd, path):
            if not wait:
                raise ShardBusyError(f"{path.parent} is being run by another process")
            log.warning("%s is being run by another process: waiting for it to end",
                        path.parent)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextmanager
def _term_raises() -> Iterator[None]:
    """SIGTERM → ShardInterrupted inside the stage (overrides submitit's 'bypass')."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if _requeue.active:  # the requeue's own kill, or one its outcome decides on
            _requeue.term = signum
            log.info("%s during the requeue: left to the requeue", signal.Signals(signum).name)
            return
        raise ShardInterrupted(f"received {signal.Signals(signum).name} "
                               "(scancel, preemption or cancel)")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def requeue_on_signal(signum: int,
                      request: Callable[[int, Any], bool]) -> Iterator[None]:
    """While the block runs, `signum` asks the executor to requeue this job.

    `request(signum, frame)` returns True once the job is back in the queue, False if
    this process is not the one to requeue it (the shard then carries on), or raises if
    the requeue failed (a genuine failure: recorded in error.json).  On True the shard
    ends with ShardRequeued.  A SIGTERM arriving while the request runs — SLURM kills the
    old instance as part of `scontrol requeue`, often before the command returns — waits
    for the outcome: ignored after a requeue, ShardInterrupted otherwise.  Main thread only.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if _requeue.active:
            return  # a second request while the first runs or after it succeeded
        _requeue.active, _requeue.term = True, None
        requeued = False
        try:
            requeued = request(signum, frame)
        finally:
            if not requeued:
                _requeue.active = False
        if requeued:
            raise ShardRequeued(f"received {signal.Signals(signum).name}: job requeued, "
                                "the same job resumes from the ledger")
        if _requeue.term is not None:
            raise ShardInterrupted(f"received {signal.Signals(_requeue.term).name} "
                                   "(scancel, preemption or cancel)")

    old = signal.signal(signum, handler)
    try:
        yield
    finally:
        signal.signal(signum, old)
        _requeue.active, _requeue.term = False, None


@contextmanager
def _shard_log(path: Path) -> Iterator[None]:
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()


def run_shard(run_dir: str | Path, stage: str, shard: int, *,
              on_progress: Callable[[int], None] | None = None,
              fsync: bool = True, wait: bool = False) -> ShardOutcome:
    """Run one (stage, shard) to completion, or raise; see the module docstring for the order.

    `wait`: when another process runs the shard, wait for it instead of raising
    ShardBusyError (then skip the shard if that process completed it)."""
    rd = RunDir(run_dir)
    rd.shard_dir(stage, shard).mkdir(parents=True, exist_ok=True)
    with shard_lock(rd.lock(stage, shard), wait=wait), _shard_log(rd.log(stage, shard)):
        reserve = _reserve(rd.shard_dir(stage, shard))
        try:
            with _term_raises():
                return _run_locked(rd, stage, shard, on_progress, fsync)
        except ShardRequeued as e:
            _record_requeue(rd, stage, shard, e)
            log.warning("shard %s/%s requeued: %s", stage, shard, e)
            raise
        except BaseException as e:
            _record_error(rd, stage, shard, e, reserve)
            log.error("shard %s/%s failed: %s", stage, shard, e)
            raise
        finally:
            reserve.unlink(missing_ok=True)


def run_shard_if_free(run_dir: str | Path, stage: str, shard: int) -> ShardOutcome | None:
    """Run the shard only if no process runs it, it is not done and its upstream is: what an
    array element that finished its own shards takes from the others' (`executors.element`
    elements of a CPU stage), so a few long shards do not keep one element running while
    the rest of the array is idle.  Never waits; None when the shard was not free.

    Taking a shard is safe for the same reason a duplicate job is: the shard's lock, its
    ledger and its DONE marker — the element that owns it finds it done, or waits for the
    lock and resumes from the ledger if the taker died."""
    rd = RunDir(run_dir)
    # Cheapest first: an element scans the whole array.  A DONE marker, even one a changed
    # upstream made stale, is the owner's to judge.
    if is_locked(rd.lock(stage, shard)) or rd.done(stage, shard).exists():
        return None
    manifest = load_manifest(rd)
    spans = read_spans(rd)
    expected, _ = expected_input_hash(rd, manifest, spans, stage, shard)
    if expected is None:  # its upstream is not done: not ours to wait for
        return None
    try:
        return run_shard(run_dir, stage, shard, wait=False)
    except ShardBusyError:
        return None


def _record_requeue(rd: RunDir, stage: str, shard: int, e: ShardRequeued) -> None:
    """Note the requeue on the attempt it ended (additive keys): status and the next attempt
    see a shard that was put back in the queue, not one that failed (so an error.json from
    an earlier attempt, if the signal came before this one cleared it, goes too)."""
    rd.error(stage, shard).unlink(missing_ok=True)
    try:
        attempt = read_json(rd.attempt(stage, shard))
        if not isinstance(attempt, dict):
            attempt = {}
    except (OSError, ValueError):
        attempt = {}
    attempt.update({"requeued": _now(), "requeue_reason": str(e)})
    atomic_write_json(rd.attempt(stage, shard), attempt)


RESERVE_NAME = ".reserve"
RESERVE_BYTES = 64 * 1024


def _reserve(shard_dir: Path) -> Path:
    """Space set aside for the shard's failure record.  A run folder whose file system
    fills up fails every shard writing to it with ENOSPC — and would leave no error.json
    to say so (status would guess SIGKILL or OOM).  Best effort: on a disk already full
    the shard fails at its first write anyway, and there is nothing to set aside."""
    path = shard_dir / RESERVE_NAME
    with contextlib.suppress(OSError), open(path, "wb") as f:
        os.posix_fallocate(f.fileno(), 0, RESERVE_BYTES)
    return path


def _record_error(rd: RunDir, stage: str, shard: int, e: BaseException,
                  reserve: Path | None = None) -> None:
    record = {
        "stage": stage, "shard": shard, "type": type(e).__name__, "message": str(e),
        "traceback": "".join(traceback.format_exception(e)), "time": _now(),
        "host": socket.gethostname(), "pid": os.getpid(), "slurm_job": _slurm_job(),
    }
    try:
        atomic_write_json(rd.error(stage, shard), record)
    except OSError as full:
        if full.errno != errno.ENOSPC or reserve is None or not reserve.exists():
            raise
        # Written into the blocks set aside (freed, they would go to whichever of the
        # other shards writing to the full disk asks first), then renamed into place.
        data = json.dumps(record, indent=2, sort_keys=True, default=str).encode()
        if len(data) > RESERVE_BYTES:
            record["traceback"] = record["traceback"][-RESERVE_BYTES // 2:]
            data = json.dumps(record, indent=2, sort_keys=True, default=str).encode()
        with open(reserve, "r+b") as f:
            f.write(data)
            f.truncate(len(data))
            os.fsync(f.fileno())
        os.replace(reserve, rd.error(stage, shard))


def _run_locked(rd: RunDir, stage: str, shard: int,
                on_progress: Callable[[int], None] | None, fsync: bool) -> ShardOutcome:
    t0 = time.monotonic()
    manifest = load_manifest(rd)
    spans = read_spans(rd)
    if not 0 <= shard < len(spans):
        raise ShardError(f"shard {shard} out of range: run has {len(spans)} shards")
    entry = manifest.task_stage(stage)
    if entry is None:
        raise ShardError(f"run {manifest.run_id} has no task stage {stage!r}")
    expected, why = expected_input_hash(rd, manifest, spans, stage, shard)
    while expected is None and _upstream_running(rd, entry.needs, shard):
        # Started before its upstream finished (an upstream run by another process, or a
        # job submitted behind one): wait for it rather than fail and need a second resume.
        log.info("%s/%s waits for its upstream, which is running: %s", stage, shard, why)
        time.sleep(2.0)
        expected, why = expected_input_hash(rd, manifest, spans, stage, shard)
    if expected is None:
        raise ShardError(f"{stage}/{shard} cannot start: {why}")
    marker = read_done(rd, stage, shard)
    if marker and marker.get("input_hash") == expected and \
            check_output(rd, stage, shard, marker, deep=True) is None:
        return ShardOutcome(stage, shard, True, spans[shard].count, spans[shard].count,
                            int(marker.get("records", 0)), 0.0)
    for stale in (rd.done(stage, shard), rd.records(stage, shard), rd.stats(stage, shard),
                  rd.error(stage, shard)):
        stale.unlink(missing_ok=True)
    attempt = _bump_attempt(rd, stage, shard)
    log.info("start %s/%s attempt %d (host %s, pid %d, slurm %s)", stage, shard, attempt,
             socket.gethostname(), os.getpid(), _slurm_job())

    instances = read_shard_instances(rd, spans[shard], shard)
    ids = [i.id for i in instances]
    version = code_version()
    ledger = read_ledger(rd.ledger(stage, shard), ids, input_hash=expected,
                         accept_headerless=not entry.needs)
    if ledger.discarded:
        log.warning("ledger set aside as %s.stale, every instance is redone: %s",
                    rd.ledger(stage, shard).name, ledger.discarded)
    if ledger.torn_bytes or ledger.bad_lines or ledger.foreign:
        log.warning("ledger repaired: %d torn bytes cut, unparsable lines %s, foreign ids %s",
                    ledger.torn_bytes, ledger.bad_lines[:5], ledger.foreign[:5])
    ledger_version = (ledger.header or {}).get("code_version")
    if ledger.results and ledger_version and ledger_version != version:
        log.warning("resuming from a ledger written by code %s with code %s: this shard's "
                    "records mix both", ledger_version, version)
    recorded = ledger.results
    resumed = len(recorded)
    pending = [i for i in instances if i.id not in recorded]

    config = config_from_manifest(manifest)
    task_stages = {s.name: s for s in get_task(config.task).stages(config)}
    if stage not in task_stages:
        raise ShardError(f"task {config.task} no longer defines stage {stage!r}")
    st = task_stages[stage]
    ctx = ShardContext(rd, stage, shard, config, tuple(st.needs), on_progress)
    pending_ids = {i.id for i in pending}
    with LedgerWriter(rd.ledger(stage, shard), fsync=fsync,
                      header=make_header(expected, version)) as writer:
        if pending:
            for result in st.run(pending, ctx):
                _check_result(stage, result, pending_ids, recorded)
                try:
                    writer.append(result)
                except (TypeError, ValueError) as e:
                    raise ShardError(f"stage {stage!r}, instance {result.instance_id!r}: "
                                     f"records are not JSON-serializable ({e})") from None
                recorded[result.instance_id] = result.records
    missing = [i for i in ids if i not in recorded]
    if missing:
        raise ShardError(f"stage {stage!r} returned without results for {len(missing)} "
                         f"instance(s) of shard {shard}, e.g. {missing[:3]}")

    n_records = _write_records(rd, stage, shard, ids, recorded)
    atomic_write_json(rd.stats(stage, shard), {
        "stage": stage, "shard": shard, "instances": len(ids), "resumed_from_ledger": resumed,
        "ran": len(pending), "records": n_records, "attempt": attempt,
        "wall_s": round(time.monotonic() - t0, 3), "finished": _now(),
        "host": socket.gethostname(), "slurm_job": _slurm_job(), "code_version": version,
        **({"ledger_code_version": ledger_version}
           if ledger.results and ledger_version != version else {}),
        **({"ledger_discarded": ledger.discarded} if ledger.discarded else {}),
        **({"notes": ctx.notes} if ctx.notes else {}),
    })
    write_done(rd, stage, shard, input_hash=expected, records=n_records, finished=_now(),
               code_version=version)
    log.info("done %s/%s: %d instances (%d from ledger), %d records", stage, shard, len(ids),
             resumed, n_records)
    return ShardOutcome(stage, shard, False, len(ids), resumed, n_records,
                        time.monotonic() - t0)


def _upstream_running(rd: RunDir, needs: Sequence[str], shard: int) -> bool:
    return any(is_locked(rd.lock(need, shard)) for need in needs)


def _bump_attempt(rd: RunDir, stage: str, shard: int) -> int:
    try:
        previous = int(read_json(rd.attempt(stage, shard)).get("attempt", 0))
    except (OSError, ValueError, AttributeError):
        previous = 0
    atomic_write_json(rd.attempt(stage, shard), {
        "attempt": previous + 1, "started": _now(), "host": socket.gethostname(),
        "pid": os.getpid(), "slurm_job": _slurm_job(),
    })
    return previous + 1


def _check_result(stage: str, result: Any, pending: set[str],
                  recorded: dict[str, Any]) -> None:
    if not isinstance(result, InstanceResult):
        raise ShardError(f"stage {stage!r} yielded {type(result).__name__}, not InstanceResult")
    if result.instance_id not in pending:
        raise ShardError(f"stage {stage!r} yielded a result for {result.instance_id!r}, "
                         "which is not a pending instance of this shard")
    if result.instance_id in recorded:
        raise ShardError(f"stage {stage!r} yielded {result.instance_id!r} twice")
    for rec in result.records:
        if not isinstance(rec, dict):
            raise ShardError(f"stage {stage!r}, instance {result.instance_id!r}: "
                             f"record is {type(rec).__name__}, not dict")
        clash = [c for c in LAUNCH_COLUMNS[1:] if c in rec]
        if clash or rec.get("instance_id", result.instance_id) != result.instance_id:
            raise ShardError(f"stage {stage!r}, instance {result.instance_id!r}: records may "
                             f"not set launch's columns {list(LAUNCH_COLUMNS)}")


def records_table(stage: str, shard: int, ids: list[str],
                  recorded: dict[str, list[dict[str, Any]]]) -> pa.Table:
    """One row per record, in instance order; launch's columns first, then first-seen order."""
    columns: dict[str, list[Any]] = {c: [] for c in LAUNCH_COLUMNS}
    n = 0
    for iid in ids:
        for rec in recorded[iid]:
            for key in rec:
                if key not in columns:
                    columns[key] = [None] * n
            columns["instance_id"].append(iid)
            columns["stage"].append(stage)
            columns["shard"].append(shard)
            for key, values in columns.items():
                if key not in LAUNCH_COLUMNS:
                    values.append(rec.get(key))
            n += 1
    arrays = {}
    for key, values in columns.items():
        try:
            arrays[key] = pa.array(values, type=pa.int64() if key == "shard" else
                                   (pa.string() if key in LAUNCH_COLUMNS else None))
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise ShardError(f"stage {stage!r}, shard {shard}: column {key!r} mixes types "
                             f"across records ({e})") from None
    return pa.table(arrays)


def _write_records(rd: RunDir, stage: str, shard: int, ids: list[str],
                   recorded: dict[str, list[dict[str, Any]]]) -> int:
    table = records_table(stage, shard, ids, recorded)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    atomic_write_bytes(rd.records(stage, shard), sink.getvalue().to_pybytes())
    return table.num_rows
