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
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from veribatch.tasks.base import CPUS_ENV

from ..ledger import count_lines
from ..rundir import RunDir
from .base import Executor, SubmitResult


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


EXIT_BUSY = 75  # launch.worker: another process holds the shard's lock


class _Outside:
    """The state of a shard this executor does not run (not in its set, or busy elsewhere):
    wait while another process holds its lock, then ok if it is complete, else failed."""

    def __init__(self, rd: RunDir, manifest: dict[str, Any], spans: list[Any]) -> None:
        self.rd, self.manifest, self.spans = rd, manifest, spans
        self.done: set[tuple[str, int]] = set()
        self.last: dict[tuple[str, int], float] = {}

    def state(self, key: tuple[str, int]) -> str:
        from veribatch.aggregate.completeness import completeness_map

        from ..locks import is_locked

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

    def __init__(self, workers: int | None = None, progress: bool = True,
                 console: Console | None = None, poll_s: float = 0.05) -> None:
        self.workers = max(1, workers or available_cpus()[0])
        self.progress = progress
        self.console = console or Console(stderr=True)
        self.poll_s = poll_s

    def submit(self, rd: RunDir, manifest: dict[str, Any], todo: dict[str, list[int]],
               *, aggregate: bool, waiting_on: dict[tuple[str, int], str] | None = None,
               also_after: Sequence[str] = ()) -> SubmitResult:
        stages = [s for s in manifest["stages"] if s.get("added_by") != "launch"]
        needs = {s["name"]: list(s["needs"]) for s in stages}
        # `workers` is a CPU budget: a shard of a stage declaring cpus_per_task=2 takes two.
        cost = {s["name"]: max(1, min(self.workers, int(s.get("cpus_per_task", 1))))
                for s in stages}
        order = [s["name"] for s in stages]
        for s in stages:  # a cap is said, never quiet; the shard is told (VERIBATCH_CPUS)
            asked = int(s.get("cpus_per_task", 1))
            if self.progress and asked > cost[s["name"]]:
                self.console.print(f"[yellow]{s['name']}: asks for {asked} CPUs per shard; the local "
                                   f"executor grants {cost[s['name']]} (its CPU budget)[/]", highlight=False)
        from ..instances import read_spans

        spans = read_spans(rd)
        waiting = [(st, k) for st in order for k in todo.get(st, [])]
        want = set(waiting)
        ok: set[tuple[str, int]] = set()
        failed: list[tuple[str, int]] = []
        blocked: list[tuple[str, int]] = []
        elsewhere: dict[tuple[str, int], None] = {}  # run by another process: wait for it
        outside = _Outside(rd, manifest, spans)
        running: dict[tuple[str, int], subprocess.Popen[bytes]] = {}
        ledgers = _Ledgers()

        # Instances recorded per stage = finished shards' final counts + live ledgers of
        # running shards + what earlier attempts left in waiting shards' ledgers.
        # Only running shards are polled, so 10,000 shards cost nothing per tick.
        recorded = {st: 0 for st in order}
        for st, k in waiting:
            recorded[st] += ledgers.count(rd.ledger(st, k))

        def settle(key: tuple[str, int], before: int) -> None:
            recorded[key[0]] += ledgers.count(rd.ledger(*key)) - before

        def upstream_state(u: tuple[str, int]) -> str:
            """ok | failed | wait for an upstream shard (ours, or run by someone else)."""
            if u in ok:
                return "ok"
            if u in failed or u in blocked:
                return "failed"
            if u in want and u not in elsewhere:
                return "wait"
            return outside.state(u)

        started_with: dict[tuple[str, int], int] = {}
        with Progress(TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[note]}"), TimeElapsedColumn(),
                      console=self.console, disable=not self.progress, transient=False) as bar, \
                _term_interrupts():
            bars = {st: bar.add_task(st, total=sum(spans[k].count for k in todo.get(st, [])),
                                     note="") for st in order if todo.get(st)}
            try:
                while waiting or running or elsewhere:
                    for key, proc in list(running.items()):
                        if proc.poll() is not None:
                            del running[key]
                            # leftovers of the shard (verifier children...) die with it
                            with contextlib.suppress(ProcessLookupError, PermissionError):
                                os.killpg(proc.pid, signal.SIGKILL)
                            settle(key, started_with.pop(key))
                            if proc.returncode == 0:
                                ok.add(key)
                            elif proc.returncode == EXIT_BUSY:
                                # Another process runs this shard (an orphan of a killed
                                # launch, a SLURM job): busy is not failed — wait for it.
                                elsewhere[key] = None
                            else:
                                failed.append(key)
                    for key in list(elsewhere):
                        verdict = outside.state(key)
                        if verdict != "wait":
                            del elsewhere[key]
                            (ok.add(key) if verdict == "ok" else failed.append(key))
                    for key in list(waiting):
                        st, k = key
                        if sum(cost[r[0]] for r in running) + cost[st] > self.workers:
                            break
                        ups = [upstream_state((u, k)) for u in needs[st]]
                        if "failed" in ups:
                            waiting.remove(key)
                            blocked.append(key)
                        elif all(u == "ok" for u in ups):
                            waiting.remove(key)
                            started_with[key] = ledgers.count(rd.ledger(st, k))
                            running[key] = self._start(rd, st, k, cost[st])
                    self._update(bar, bars, rd, recorded, running, started_with, ledgers,
                                 failed + blocked)
                    if waiting or running or elsewhere:
                        time.sleep(self.poll_s)
            except KeyboardInterrupt:
                self._kill_all(running)
                raise
            self._update(bar, bars, rd, recorded, running, started_with, ledgers, failed + blocked)
        msg = ""
        if blocked:
            msg = f"{len(blocked)} shard(s) not started because an upstream shard failed"
        return SubmitResult(submitted={st: list(todo.get(st, [])) for st in order},
                            finished=True, failed=failed + blocked, message=msg)

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

    @staticmethod
    def _update(bar: Progress, bars: dict[str, Any], rd: RunDir, recorded: dict[str, int],
                running: dict[tuple[str, int], Any], started_with: dict[tuple[str, int], int],
                ledgers: _Ledgers, bad: list[tuple[str, int]]) -> None:
        live: dict[str, int] = {}
        for key in running:
            live[key[0]] = live.get(key[0], 0) + \
                ledgers.count(rd.ledger(*key)) - started_with[key]
        for st, tid in bars.items():
            n_bad = sum(1 for s, _ in bad if s == st)
            bar.update(tid, completed=recorded[st] + live.get(st, 0),
                       note=f"[red]{n_bad} shard(s) failed" if n_bad else "")

    @staticmethod
    def _kill_all(running: dict[tuple[str, int], subprocess.Popen[bytes]]) -> None:
        """Ctrl-C: TERM every shard's process group (ledgers are durable), KILL stragglers."""
        for proc in running.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for proc in running.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
