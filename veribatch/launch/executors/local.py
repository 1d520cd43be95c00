"""The local executor: every shard in its own process on this machine, as SLURM would.

Shards are pipelined: shard k of a stage starts as soon as shard k of every
stage it needs has finished, while the running shards' `cpus_per_task` fit in
`workers` CPUs (default: the CPUs this process may use — its affinity mask, and
inside a SLURM allocation no more than ``SLURM_CPUS_ON_NODE`` — not every core of
the node: on a login node or in an allocation that would oversubscribe others').
Progress is read from the ledgers (what is recorded is what counts), so the bars
show exactly what a resume would keep.

A shard that another process runs (its worker exits 75, "busy": a leftover of a killed
launch, a SLURM job of the same run) is waited for and then judged by its DONE marker,
never counted as failed; so is an upstream shard outside this executor's set.  SIGTERM
(`launch cancel`) stops the run like Ctrl-C: every shard process is told to stop.
Aggregation runs in this process once every shard has ended.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from veribatch.rundir.completeness import completeness_map
from veribatch.rundir.paths import RunDir
from veribatch.tasks.base import CPUS_ENV

from ..ledger import count_lines
from ..locks import RUNNING_LOCALLY, is_locked
from .base import Choice, Executor, Key, SubmitResult, Work

if TYPE_CHECKING:
    from ..plan import Plan


class _Ledgers:
    """Counts ledger lines incrementally (only the bytes appended since the last look)."""

    def __init__(self) -> None:
        self.pos: dict[Path, int] = {}
        self.lines: dict[Path, int] = {}
        self.ino: dict[Path, int] = {}

    def count(self, path: Path) -> int:
        try:
            st = path.stat()
        except OSError:
            return self.lines.get(path, 0)
        size = st.st_size
        pos = self.pos.get(path, 0)
        if size < pos or self.ino.get(path, st.st_ino) != st.st_ino:
            pos, self.lines[path] = 0, 0  # truncated (torn line cut) or replaced: recount
        self.ino[path] = st.st_ino
        if size > pos:
            with open(path, "rb") as f:
                f.seek(pos)
                chunk = f.read(size - pos)
            self.lines[path] = self.lines.get(path, 0) + count_lines(chunk, from_start=pos == 0)
            self.pos[path] = size
        return self.lines.get(path, 0)


class _Tally:
    """Instances recorded per stage, for the progress bars: finished shards' final counts +
    the live ledgers of running shards + what earlier attempts left in waiting shards'
    ledgers.  Only running shards are read per tick, so 10,000 shards cost nothing."""

    def __init__(self, work: Work, bar: Progress) -> None:
        self.rd, self.bar = work.rd, bar
        self.ledgers = _Ledgers()
        self.recorded = {st: 0 for st in work.order}
        for st, shards in work.shards.items():
            for k in shards:
                self.recorded[st] += self.ledgers.count(self.rd.ledger(st, k))
        self.started_with: dict[Key, int] = {}
        self.bars = {st: bar.add_task(st, total=sum(work.spans[k].count for k in shards), note="")
                     for st, shards in work.shards.items()}

    def started(self, key: Key) -> None:
        self.started_with[key] = self.ledgers.count(self.rd.ledger(*key))

    def ended(self, key: Key) -> None:
        self.recorded[key[0]] += self.ledgers.count(self.rd.ledger(*key)) - self.started_with.pop(key)

    def show(self, running: Sequence[Key], bad: Sequence[Key]) -> None:
        live: dict[str, int] = {}
        for key in running:
            live[key[0]] = live.get(key[0], 0) + \
                self.ledgers.count(self.rd.ledger(*key)) - self.started_with[key]
        for st, tid in self.bars.items():
            n_bad = sum(1 for s, _ in bad if s == st)
            self.bar.update(tid, completed=self.recorded[st] + live.get(st, 0),
                            note=f"[red]{n_bad} shard(s) failed" if n_bad else "")


EXIT_BUSY = 75  # launch.worker: another process holds the shard's lock


class _Outside:
    """The state of a shard this executor does not run (not in its set, or busy elsewhere):
    wait while another process holds its lock, then ok if it is complete, else failed."""

    def __init__(self, work: Work) -> None:
        self.rd, self.manifest, self.spans = work.rd, work.manifest, work.spans
        self.done: set[Key] = set()
        self.last: dict[Key, float] = {}

    def state(self, key: Key) -> str:
        if key in self.done:
            return "ok"
        now = time.monotonic()
        if now - self.last.get(key, 0.0) < 0.5:  # a lock and a few stats per half second
            return "wait"
        self.last[key] = now
        if is_locked(self.rd.lock(*key)):
            return "wait"
        comp = completeness_map(self.rd.root, self.manifest, self.spans, only=key)
        if comp[key[0]][key[1]].complete:
            self.done.add(key)
            return "ok"
        return "failed"


class _Schedule:
    """The shards of one local run and where each stands: waiting (for CPUs or its
    upstream), running (our worker process), elsewhere (another process runs it: waited
    for), then ok, failed, or blocked (an upstream shard failed, so it never starts).

    `step` settles what ended, then starts what may start, in the order of `work.shards`
    (upstream stages first) while the running shards' CPUs fit the budget."""

    def __init__(self, work: Work, workers: int, cpus: dict[str, int],
                 start: Callable[[str, int, int], subprocess.Popen[bytes]], tally: _Tally) -> None:
        self.workers, self.cpus, self.start, self.tally = workers, cpus, start, tally
        self.needs = {s.name: list(s.needs) for s in work.stages}
        self.waiting: list[Key] = [(st, k) for st, shards in work.shards.items() for k in shards]
        self.ours = set(self.waiting)
        self.running: dict[Key, subprocess.Popen[bytes]] = {}
        self.elsewhere: dict[Key, None] = {}
        self.ok: set[Key] = set()
        self.failed: list[Key] = []
        self.blocked: list[Key] = []
        self.outside = _Outside(work)

    @property
    def pending(self) -> bool:
        return bool(self.waiting or self.running or self.elsewhere)

    @property
    def bad(self) -> list[Key]:
        return self.failed + self.blocked

    def step(self) -> None:
        self._reap()
        self._settle_elsewhere()
        self._start_ready()
        self.tally.show(list(self.running), self.bad)

    def _reap(self) -> None:
        for key, proc in list(self.running.items()):
            if proc.poll() is None:
                continue
            del self.running[key]
            # leftovers of the shard (verifier children...) die with it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            self.tally.ended(key)
            if proc.returncode == 0:
                self.ok.add(key)
            elif proc.returncode == EXIT_BUSY:
                # Another process runs this shard (an orphan of a killed launch, a SLURM
                # job): busy is not failed — wait for it.
                self.elsewhere[key] = None
            else:
                self.failed.append(key)

    def _settle_elsewhere(self) -> None:
        for key in list(self.elsewhere):
            verdict = self.outside.state(key)
            if verdict != "wait":
                del self.elsewhere[key]
                (self.ok.add(key) if verdict == "ok" else self.failed.append(key))

    def _start_ready(self) -> None:
        for key in list(self.waiting):
            st, k = key
            if sum(self.cpus[r[0]] for r in self.running) + self.cpus[st] > self.workers:
                break
            ups = [self._upstream((u, k)) for u in self.needs[st]]
            if "failed" in ups:
                self.waiting.remove(key)
                self.blocked.append(key)
            elif all(u == "ok" for u in ups):
                self.waiting.remove(key)
                self.tally.started(key)
                self.running[key] = self.start(st, k, self.cpus[st])

    def _upstream(self, u: Key) -> str:
        """ok | failed | wait for an upstream shard (ours, or run by someone else)."""
        if u in self.ok:
            return "ok"
        if u in self.failed or u in self.blocked:
            return "failed"
        if u in self.ours and u not in self.elsewhere:
            return "wait"
        return self.outside.state(u)

    def kill_all(self) -> None:
        """Ctrl-C: TERM every shard's process group (ledgers are durable), KILL stragglers."""
        for proc in self.running.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for proc in self.running.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def _term_interrupts() -> Iterator[None]:
    """SIGTERM (`launch cancel`, a killed terminal) stops the run like Ctrl-C: every shard
    process is told to stop (their ledgers are durable) instead of being orphaned."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def available_cpus(env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """CPUs this process may use, and why: the affinity mask, capped by SLURM's allocation."""
    env = os.environ if env is None else env
    try:
        n, why = len(os.sched_getaffinity(0)), "affinity mask"
    except (AttributeError, OSError):  # not Linux
        n, why = os.cpu_count() or 1, "all CPUs"
    slurm = env.get("SLURM_CPUS_ON_NODE", "")
    if slurm.isdigit() and 0 < int(slurm) < n:
        n, why = int(slurm), f"SLURM_CPUS_ON_NODE={slurm}"
    return max(1, n), why


class LocalExecutor(Executor):
    name = "local"
    foreground = True
    lock_phase = RUNNING_LOCALLY

    def __init__(self, workers: int | None = None, progress: bool = True,
                 console: Console | None = None, poll_s: float = 0.05) -> None:
        self.workers = max(1, workers or available_cpus()[0])
        self.progress = progress
        self.console = console or Console(stderr=True, markup=False)
        self.poll_s = poll_s

    @classmethod
    def from_choice(cls, choice: Choice, resources: Sequence[str], *, progress: bool = True,
                    console: Console | None = None) -> LocalExecutor:
        return cls(workers=choice.workers, progress=progress, console=console)

    @classmethod
    def describe_plan(cls, choice: Choice, plan: Plan) -> list[str]:
        n, why = available_cpus()
        budget = choice.workers or n
        lines = [f"  local executor: {budget} CPU(s) for shard processes"
                 + ("" if choice.workers else f" ({why})")]
        for s in plan.stages:  # a resource cap is said, not applied quietly
            if s.cpus_per_task > budget:
                lines.append(f"  {s.name}: asks for {s.cpus_per_task} CPUs per shard, capped "
                             f"at {budget} (the shard is told; see the task's docs for what "
                             "it does about it)")
        return lines

    def run_stages(self, work: Work, result: SubmitResult) -> None:
        cpus = self._cpu_grants(work)
        with Progress(TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[note]}"), TimeElapsedColumn(),
                      console=self.console, disable=not self.progress, transient=False) as bar, \
                _term_interrupts():
            schedule = _Schedule(work, self.workers, cpus, functools.partial(self._start, work.rd),
                                 _Tally(work, bar))
            try:
                while schedule.pending:
                    schedule.step()
                    if schedule.pending:
                        time.sleep(self.poll_s)
            except KeyboardInterrupt:
                schedule.kill_all()
                raise
            schedule.tally.show(list(schedule.running), schedule.bad)
        result.failed = schedule.bad
        if schedule.blocked:
            result.message = (f"{len(schedule.blocked)} shard(s) not started because an "
                              "upstream shard failed")

    def aggregate(self, work: Work, result: SubmitResult, after: list[str]) -> None:
        """Here and now: every shard this executor ran has ended (live jobs of earlier
        submissions, in `after`, are not waited for: their shards count as missing)."""
        from ..finalize import aggregate_run  # pandas: only once the shards are done

        result.aggregate = aggregate_run(work.rd)

    def _cpu_grants(self, work: Work) -> dict[str, int]:
        """CPUs granted per shard of each stage: `workers` is a CPU budget, so a shard of a
        stage declaring cpus_per_task=2 takes two; a cap is said, never quiet, and the
        shard is told (VERIBATCH_CPUS)."""
        grants = {}
        for s in work.stages:
            asked = int(s.get("cpus_per_task", 1))
            grants[s.name] = max(1, min(self.workers, asked))
            if self.progress and asked > grants[s.name]:
                self.console.print(f"[yellow]{s.name}: asks for {asked} CPUs per shard; the "
                                   f"local executor grants {grants[s.name]} (its CPU "
                                   "budget)[/]", highlight=False, markup=True)
        return grants

    def _start(self, rd: RunDir, stage: str, shard: int, cpus: int) -> subprocess.Popen[bytes]:
        out = rd.shard_dir(stage, shard)
        argv = [sys.executable, "-m", "veribatch.launch.worker", str(rd.root.resolve()), stage, str(shard)]
        # As in a SLURM job: the run directory in the environment marks the shard's processes
        # (and whatever they start) as this run's.
        # ...and the CPUs granted, which may be fewer than the stage asked for
        env = {**os.environ, "VERIBATCH_RUN_DIR": str(rd.root.resolve()), CPUS_ENV: str(cpus)}
        try:
            out.mkdir(parents=True, exist_ok=True)
            err = open(out / "worker.err", "ab")  # noqa: SIM115  (closed right below)
        except OSError:
            # A full or read-only disk: the worker will fail and say so in error.json where it
            # can; the run must not die with it.
            err = open(os.devnull, "ab")  # noqa: SIM115
        with err:
            return subprocess.Popen(argv, stdout=err, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=env)
