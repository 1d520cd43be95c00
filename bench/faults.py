"""Fault injection: real runs, real faults, one `launch resume`, and the figures that prove it.

Each run plans a small `selftest` run (two stages: `work`, then `check` which recomputes
and compares what `work` recorded), runs it on the local executor or on the SLURM cluster,
injects faults at random points (the seed is printed; the same seed injects the same
faults at the same points of progress), then recovers with `launch resume` and checks:

- every stage's records against a fault-free run of the same plan (with the same
  executor): records **lost** (an instance without its record), **duplicated** (an
  instance recorded twice), **stale** (a record that differs from what the run's inputs
  now imply — e.g. a `check` verdict computed from an upstream value that was changed);
- **resumes needed** until `launch status` says complete with a fresh aggregate (must be 1);
- **processes left behind** once the run is over: every process that carried the run's
  marker (VERIBATCH_RUN_DIR in its environment, or the run directory in its command line)
  or descended from one, tracked with psutil while the run went on, still alive at the end;
- the **wall-time cost of recovery**: the faulty run plus its recovery, against the clean run.

Fault kinds (where they apply):

    kill9              SIGKILL of a running shard process                     local, slurm
    full_disk          one shard's directory on a tiny, filled tmpfs (root)   local, slurm
    hung_verifier      a verifier child that never returns (wall limit)       local, slurm
    fork_verifier      a verifier that forks a daemon and exits               local, slurm
    corrupt_parquet    bytes flipped inside a finished records.parquet        local, slurm
    truncate_parquet   a finished records.parquet cut in half                 local, slurm
    delete_done        a finished shard's DONE marker deleted                 local, slurm
    torn_ledger        a shard's ledger cut mid-line, its outputs gone        local, slurm
    changed_upstream   a `work` ledger value changed, its parquet deleted     local, slurm
    concurrent_resumes two `launch resume` started at once for the recovery   local, slurm
    scancel_element    scancel of one array element                           slurm
    scancel_run        `launch cancel` of the whole run while it runs         slurm
    requeue            `scontrol requeue` of a running element                slurm
    node_lost          the node of a running element lost: every process in   slurm, multi-node
                       its namespace SIGKILLed (slurmd, its jobs), the node    (.ci/cluster.sh
                       set DOWN; put back once the run is recovered            start-multi)

Usage:
    python bench/faults.py --executor local --runs 6 --seed 7
    python bench/faults.py --executor slurm --profile local-test --runs 3 --tag i8a
    python bench/faults.py --executor both --json figures.json
    SLURM_CONF=/tmp/veribatch-slurm-multi/etc/slurm.conf \
        python bench/faults.py --executor slurm --profile multinode-test --kinds node_lost --runs 2

The process containment that makes "processes left behind" 0 for fork_verifier (and for
kill9 while a verifier child runs) lives in verifiers/runner.py; this suite only counts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from veribatch.launch.ledger import count_records  # noqa: E402

LOCAL_KINDS = ("kill9", "full_disk", "hung_verifier", "fork_verifier", "corrupt_parquet",
               "truncate_parquet", "delete_done", "torn_ledger", "changed_upstream",
               "concurrent_resumes")
SLURM_KINDS = (*LOCAL_KINDS, "scancel_element", "scancel_run", "requeue")
MULTINODE_KINDS = ("node_lost",)  # only where nodes can be lost: the multi-node CI cluster
CLUSTER_SH = REPO / ".ci" / "cluster.sh"
POST_RUN = ("corrupt_parquet", "truncate_parquet", "delete_done", "torn_ledger",
            "changed_upstream")
IN_PLAN = ("hung_verifier", "fork_verifier")
STAGES = ("work", "check")
SHARDS = 3
INSTANCES = 12
PER_SHARD = INSTANCES // SHARDS
SETTLE_S = 900.0


@dataclass
class Fault:
    kind: str
    stage: str = "work"
    shard: int = 0
    at: int = 1                # in-run faults: after this many records of the target shard
    injected: bool = False
    note: str = ""


@dataclass
class RunFigures:
    executor: str
    seed: int
    run: int
    faults: list[Fault]
    lost: int = 0
    duplicated: int = 0
    stale: int = 0
    processes_left: int = 0
    left_detail: list[str] = field(default_factory=list)
    reference_processes_left: int = 0  # by the clean run of the same plan (not a fault's doing)
    resumes: int = 0
    incomplete_before: list[str] = field(default_factory=list)  # what the faults broke
    complete: bool = False
    clean_s: float = 0.0
    faulty_s: float = 0.0
    recovery_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def cost(self) -> float:
        """(faulty run + recovery) / clean run: what the faults cost in wall time."""
        return (self.faulty_s + self.recovery_s) / self.clean_s if self.clean_s else 0.0


def is_root() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


class ProcessWatch:
    """Every process of a run, seen by psutil while it ran: the run's marker (its directory in
    the environment or command line), and every descendant of a marked process."""

    def __init__(self, run_dir: Path) -> None:
        self.mark = str(run_dir.resolve())
        self.seen: dict[int, tuple[float, str]] = {}
        self.me = os.getpid()
        self.last = 0.0

    def _marked(self, p: psutil.Process) -> bool:
        try:
            if any(self.mark in a for a in p.cmdline()):
                return True
            return p.environ().get("VERIBATCH_RUN_DIR", "").rstrip("/") == self.mark
        except (psutil.Error, OSError):
            return False

    def scan(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < 0.25:  # a full process scan costs CPU: 4 per second
            return
        self.last = now
        for p in psutil.process_iter():
            if p.pid == self.me or p.pid in self.seen or not self._marked(p):
                continue
            self._add(p)
            with contextlib.suppress(psutil.Error):
                for c in p.children(recursive=True):
                    self._add(c)
        for pid in list(self.seen):  # descendants of known processes that appeared since
            with contextlib.suppress(psutil.Error):
                p = psutil.Process(pid)
                if p.create_time() == self.seen[pid][0]:
                    for c in p.children(recursive=True):
                        self._add(c)

    def _add(self, p: psutil.Process) -> None:
        with contextlib.suppress(psutil.Error):
            self.seen.setdefault(p.pid, (p.create_time(), " ".join(p.cmdline())[:120]))

    def left(self) -> list[psutil.Process]:
        """Processes of the run still alive (zombies excluded: they are already dead)."""
        self.scan(force=True)
        alive = []
        for pid, (created, _) in self.seen.items():
            with contextlib.suppress(psutil.Error):
                p = psutil.Process(pid)
                if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
        return alive


class Harness:
    def __init__(self, executor: str, work: Path, *, profile: str | None, tag: str,
                 sleep_s: float, keep: bool = False) -> None:
        self.executor = executor
        self.work = work
        self.profile = profile
        self.tag = tag
        self.sleep_s = sleep_s
        self.keep = keep
        self.references: dict[tuple[str, ...], tuple[dict[str, pd.DataFrame], float]] = {}
        self.reference_left = 0  # processes the fault-free reference runs left behind
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]), "COLUMNS": "200"}

    # -- launching ---------------------------------------------------------------------
    def cmd(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "veribatch", *args]

    def run_args(self, options: list[str], runs: Path, name: str) -> list[str]:
        args = ["selftest", "--shards", str(SHARDS), "--runs-dir", str(runs), "--run-name", name,
                "-q", "--executor", self.executor, "--workers", "2"]
        if self.profile:
            args += ["--profile", self.profile]
        for o in options:
            args += ["-o", o]
        return args

    def launch(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.cmd(*args), capture_output=True, text=True, timeout=timeout,
                              env=self.env)

    def status(self, rd: Path) -> dict[str, Any]:
        r = self.launch("status", str(rd), "--json")
        try:
            return json.loads(r.stdout)
        except ValueError:
            return {"complete": False, "aggregate": "unknown", "error": r.stderr[-500:]}

    # -- SLURM -------------------------------------------------------------------------
    def job_ids(self, rd: Path) -> list[str]:
        try:
            subs = json.loads((rd / "jobs.json").read_text())["submissions"]
        except (OSError, ValueError, KeyError):
            return []
        return sorted({str(s["array_id"]) for s in subs if s.get("array_id")})

    def queued(self, rd: Path) -> dict[str, str]:
        ids = self.job_ids(rd)
        if not ids:
            return {}
        out = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T|%r", "-j", ",".join(ids)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            return {"?": "squeue failed"}
        rows = {}
        for line in out.stdout.splitlines():
            jid, state, reason = (line.split("|") + ["", ""])[:3]
            rows[jid.strip()] = f"{state}|{reason}"
        return rows

    def element(self, rd: Path, stage: str, shard: int) -> str | None:
        try:
            subs = json.loads((rd / "jobs.json").read_text())["submissions"]
        except (OSError, ValueError, KeyError):
            return None
        job = None
        for s in subs:
            if s.get("stage") == stage and str(shard) in s.get("jobs", {}):
                job = s["jobs"][str(shard)]
        return job

    # -- reference ---------------------------------------------------------------------
    def reference(self, options: list[str]) -> tuple[dict[str, pd.DataFrame], float]:
        key = tuple(options)
        if key not in self.references:
            runs = Path(tempfile.mkdtemp(prefix="ref-", dir=self.work))
            name = f"faults-{self.tag}-ref-{len(self.references)}"
            t0 = time.monotonic()
            rd = runs / name
            watch = ProcessWatch(rd)
            proc = subprocess.Popen(self.cmd(*self.run_args(options, runs, name)),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=self.env)
            while proc.poll() is None:
                watch.scan()
                time.sleep(0.05)
            _, err = proc.communicate()
            if proc.returncode != 0:
                raise RuntimeError(f"reference run failed: {err[-2000:]}")
            if self.executor == "slurm":
                self.wait_settled(rd, watch)
            wall = time.monotonic() - t0
            time.sleep(1.0)
            left = watch.left()  # a clean run leaves processes behind too (fork_verifier)
            self.reference_left += len(left)
            for p in left:
                with contextlib.suppress(psutil.Error):
                    p.kill()
            st = self.status(rd)
            if not st.get("complete"):
                raise RuntimeError(f"reference run incomplete: {st}")
            self.references[key] = ({s: records(rd, s) for s in STAGES}, wall)
        return self.references[key]

    def wait_settled(self, rd: Path, watch: ProcessWatch, until: float = SETTLE_S,
                     on_tick: Any = None) -> None:
        """SLURM: until no job of the run is queued or running (held requeues released)."""
        end = time.monotonic() + until
        asked = 0.0
        while time.monotonic() < end:
            watch.scan()
            if on_tick is not None:
                on_tick()  # in-run faults look at the shards 20 times a second
            if time.monotonic() - asked < 0.5:
                time.sleep(0.05)
                continue
            asked = time.monotonic()
            q = self.queued(rd)
            if not q:
                return
            for jid, st in q.items():  # a requeued job waits ~2 min on BeginTime: skip that
                if "BeginTime" in st:
                    subprocess.run(["scontrol", "update", f"JobId={jid}", "StartTime=now"],
                                   capture_output=True)
        raise RuntimeError(f"{rd}: jobs still queued after {until:.0f} s: {self.queued(rd)}")

    # -- one run -----------------------------------------------------------------------
    def run_once(self, seed: int, index: int, kinds: list[str]) -> RunFigures:
        rng = random.Random(f"{seed}-{index}")
        faults = plan_faults(rng, kinds)
        options = [f"sleep_s={self.sleep_s}", f"check_sleep_s={self.sleep_s / 3:.3f}"]
        for f in faults:
            if f.kind in IN_PLAN:
                n = f.shard * PER_SHARD + rng.randrange(PER_SHARD)
                options.append(f"{'hang' if f.kind == 'hung_verifier' else 'fork'}_verifier={n}")
                options.append("verifier_wall_s=1.5")
                f.note = f"instance {n}"
        options = sorted(set(options))
        ref, clean_s = self.reference(options)
        fig = RunFigures(self.executor, seed, index, faults, clean_s=clean_s)
        runs = Path(tempfile.mkdtemp(prefix=f"run{index}-", dir=self.work))
        name = f"faults-{self.tag}-{seed}-{index}"
        rd = runs / name
        watch = ProcessWatch(rd)
        mounts: list[Path] = []
        self.lost_nodes: list[str] = []
        try:
            t0 = time.monotonic()
            self._faulty_run(rd, options, faults, watch, mounts, fig)
            fig.faulty_s = time.monotonic() - t0
            changed = self._post_run(rd, faults, rng, mounts)
            st = self.status(rd)
            fig.incomplete_before = [f"{f['stage']}/{f['shard']}" for f in st.get("failed", [])] \
                + [f"{b['stage']}/{b['shard']}(blocked)" for b in st.get("blocked", [])]
            t1 = time.monotonic()
            self._recover(rd, faults, watch, fig)
            fig.recovery_s = time.monotonic() - t1
            expected = expect(ref, changed)
            for stage in STAGES:
                lost, dup, stale = compare(records(rd, stage), expected[stage])
                fig.lost += lost
                fig.duplicated += dup
                fig.stale += stale
            time.sleep(1.0)  # let the run's last processes exit as they should
            left = watch.left()
            fig.processes_left = len(left)
            for p in left:
                with contextlib.suppress(psutil.Error):
                    fig.left_detail.append(f"{p.pid} {' '.join(p.cmdline())[:80]}")
                    p.kill()
        finally:
            for m in mounts:
                subprocess.run(["umount", "-l", str(m)], capture_output=True)
            for node in self.lost_nodes:
                restore_node(node)
            if self.executor == "slurm" and rd.exists():
                with contextlib.suppress(Exception):
                    self.launch("cancel", str(rd))
            if not self.keep:
                shutil.rmtree(runs, ignore_errors=True)
        return fig

    def _faulty_run(self, rd: Path, options: list[str], faults: list[Fault],
                    watch: ProcessWatch, mounts: list[Path], fig: RunFigures) -> None:
        args = self.run_args(options, rd.parent, rd.name)
        pending = [f for f in faults if f.kind in ("kill9", "full_disk", "scancel_element",
                                                   "scancel_run", "requeue", "node_lost")]
        for f in faults:
            if f.kind in IN_PLAN:
                f.injected = True  # part of the plan (the clean reference has it too)
        proc = subprocess.Popen(self.cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=self.env)

        def tick() -> None:
            watch.scan()
            for f in list(pending):
                others = [g for g in pending if g is not f and g.kind != "full_disk"]
                if f.kind == "scancel_run" and others:
                    continue  # the whole run goes last, or the others never get their chance
                if inject_in_run(self, rd, f, mounts):
                    pending.remove(f)

        end = time.monotonic() + SETTLE_S
        while proc.poll() is None and time.monotonic() < end:
            tick()
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
            fig.notes.append("faulty launch did not return in time")
        out, err = proc.communicate()
        if proc.returncode not in (0, 1):
            fig.notes.append(f"faulty launch exit {proc.returncode}: {err[-300:]}")
        if self.executor == "slurm":
            self.wait_settled(rd, watch, on_tick=tick)
        for f in pending:
            f.note = f.note or "target finished before the trigger"

    def _post_run(self, rd: Path, faults: list[Fault], rng: random.Random,
                  mounts: list[Path]) -> dict[str, int]:
        changed: dict[str, int] = {}
        used = {(f.stage, f.shard) for f in faults if f.kind in POST_RUN}
        for f in faults:
            if f.kind in POST_RUN and not (rd / "shards" / f.stage / str(f.shard) / "DONE").exists():
                # its shard did not finish (an in-run fault got it): damage a finished one
                done = sorted((s, k) for s in STAGES for k in range(SHARDS)
                              if (rd / "shards" / s / str(k) / "DONE").exists()
                              and (s, k) not in used
                              and (f.kind != "changed_upstream" or s == "work"))
                if done:
                    used.discard((f.stage, f.shard))
                    f.stage, f.shard = rng.choice(done)
                    used.add((f.stage, f.shard))
            if f.kind == "full_disk" and f.injected:
                filler = rd / "shards" / f.stage / str(f.shard) / ".filler"
                filler.unlink(missing_ok=True)  # the disk has room again
            if f.kind not in POST_RUN:
                continue
            d = rd / "shards" / f.stage / str(f.shard)
            p, done, ledger = d / "records.parquet", d / "DONE", d / "ledger.jsonl"
            if f.kind == "corrupt_parquet" and p.exists():
                data = bytearray(p.read_bytes())
                mid = len(data) // 2
                data[mid:mid + 8] = bytes(b ^ 0xFF for b in data[mid:mid + 8])
                p.write_bytes(bytes(data))
                f.injected = True
            elif f.kind == "truncate_parquet" and p.exists():
                p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
                f.injected = True
            elif f.kind == "delete_done" and done.exists():
                done.unlink()
                f.injected = True
            elif f.kind == "torn_ledger" and ledger.exists():
                data = ledger.read_bytes()
                cut = data.rstrip(b"\n").rfind(b"\n") + 1 + 7  # 7 bytes into the last line
                if 0 < cut < len(data):
                    ledger.write_bytes(data[:cut])
                    done.unlink(missing_ok=True)
                    p.unlink(missing_ok=True)
                    f.injected = True
            elif f.kind == "changed_upstream" and ledger.exists():
                header, *lines = ledger.read_text().splitlines()
                if lines:
                    i = rng.randrange(len(lines))
                    obj = json.loads(lines[i])
                    if obj["records"] and obj["records"][0].get("value") is not None:
                        value = 424242 + i
                        obj["records"][0]["value"] = value
                        lines[i] = json.dumps(obj)
                        ledger.write_text("\n".join([header, *lines]) + "\n")
                        p.unlink(missing_ok=True)
                        changed[obj["instance_id"]] = value
                        f.injected = True
            if not f.injected:
                f.note = f.note or "nothing to damage (shard not finished)"
        return changed

    def _recover(self, rd: Path, faults: list[Fault], watch: ProcessWatch,
                 fig: RunFigures) -> None:
        concurrent = any(f.kind == "concurrent_resumes" for f in faults)
        for attempt in range(1, 4):
            fig.resumes = attempt
            if concurrent and attempt == 1:
                procs = [subprocess.Popen(self.cmd("resume", str(rd), "-q"), env=self.env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True) for _ in range(2)]
                codes = []
                for p in procs:
                    while p.poll() is None:
                        watch.scan()
                        time.sleep(0.1)
                    codes.append(p.returncode)
                    p.communicate()
                for f in faults:
                    if f.kind == "concurrent_resumes":
                        f.injected, f.note = True, f"exit codes {codes}"
            else:
                p = subprocess.Popen(self.cmd("resume", str(rd), "-q"), env=self.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                while p.poll() is None:
                    watch.scan()
                    time.sleep(0.1)
                _, err = p.communicate()
                if p.returncode not in (0, 1):
                    fig.notes.append(f"resume {attempt} exit {p.returncode}: {err[-300:]}")
            if self.executor == "slurm":
                self.wait_settled(rd, watch)
            st = self.status(rd)
            if st.get("complete") and st.get("aggregate") == "complete":
                fig.complete = True
                return
            fig.notes.append(f"after resume {attempt}: " + json.dumps(
                {k: st.get(k) for k in ("stages", "failed", "aggregate")})[:600])


def plan_faults(rng: random.Random, kinds: list[str]) -> list[Fault]:
    """Targets and trigger points for the chosen kinds, drawn from `rng` (so: from the seed).
    Post-run damage goes to distinct shards, so that one fault does not hide another."""
    faults = []
    free = [(s, k) for s in STAGES for k in range(SHARDS)]
    rng.shuffle(free)
    for kind in kinds:
        stage = rng.choice(STAGES)
        shard = rng.randrange(SHARDS)
        if kind in ("full_disk",):
            stage = "check"
        if kind in ("changed_upstream",):
            stage = "work"
        if kind in ("hung_verifier", "fork_verifier", "node_lost"):
            stage = "work"  # node_lost: `work` is the stage that runs long enough to lose
        if kind in POST_RUN and kind != "changed_upstream":
            stage, shard = free.pop()
        elif kind == "changed_upstream":
            cands = [x for x in free if x[0] == "work"] or [("work", shard)]
            stage, shard = cands[0]
            if cands[0] in free:
                free.remove(cands[0])
        faults.append(Fault(kind, stage, shard, at=rng.randint(1, PER_SHARD - 1)))
    return faults


def inject_in_run(h: Harness, rd: Path, f: Fault, mounts: list[Path]) -> bool:
    """Inject `f` if its moment has come; True when done (or when it never can be)."""
    d = rd / "shards" / f.stage / str(f.shard)
    if f.kind == "full_disk":
        if not (rd / "manifest.json").exists():
            return False
        if not is_root():
            f.note = "needs root (mount)"
            return True
        if d.exists():
            f.note = "shard already started"
            return True
        d.mkdir(parents=True)
        ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32k", "tmpfs", str(d)],
                            capture_output=True, text=True)
        if ok.returncode != 0:
            f.note = f"mount failed: {ok.stderr.strip()}"
            return True
        mounts.append(d)
        with contextlib.suppress(OSError), open(d / ".filler", "wb") as fh:
            fh.write(b"\0" * (32 * 1024 - 2 * 4096))  # two pages left
        f.injected = True
        return True
    if f.kind == "scancel_run":
        if any(count_records(p) >= f.at for p in rd.glob("shards/*/*/ledger.jsonl")):
            r = h.launch("cancel", str(rd))
            f.injected, f.note = r.returncode == 0, r.stdout.strip()[:120]
            return True
        return False
    running = _locked(d)
    if f.kind == "kill9":
        if running and count_records(d / "ledger.jsonl") >= f.at:
            with contextlib.suppress(OSError, ValueError, KeyError):
                pid = int(json.loads((d / "attempt.json").read_text())["pid"])
                os.kill(pid, signal.SIGKILL)
                f.injected = True
                return True
        return (d / "DONE").exists()
    if f.kind == "scancel_element":
        job = h.element(rd, f.stage, f.shard)
        if job and not (d / "DONE").exists():
            subprocess.run(["scancel", job], capture_output=True)
            f.injected, f.note = True, f"scancel {job}"
            return True
        return (d / "DONE").exists()
    if f.kind == "node_lost":
        job = h.element(rd, f.stage, f.shard)
        if job and running and count_records(d / "ledger.jsonl") >= f.at:
            node = subprocess.run(["squeue", "-h", "-j", job, "-o", "%N"], capture_output=True,
                                  text=True).stdout.strip()
            if not node:
                return False  # between states: try on the next tick
            subprocess.run(["bash", str(CLUSTER_SH), "kill-node", node], capture_output=True,
                           check=True)
            r = subprocess.run(["scontrol", "update", f"NodeName={node}", "State=DOWN",
                                "Reason=faults.py node_lost"], capture_output=True, text=True)
            h.lost_nodes.append(node)
            f.injected, f.note = r.returncode == 0, f"{node} lost with {job} {r.stderr.strip()[:80]}"
            return True
        return (d / "DONE").exists()
    if f.kind == "requeue":
        job = h.element(rd, f.stage, f.shard)
        if job and running and count_records(d / "ledger.jsonl") >= f.at:
            r = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True)
            f.injected, f.note = r.returncode == 0, f"requeue {job} {r.stderr.strip()[:80]}"
            return True
        return (d / "DONE").exists()
    return True


def _locked(d: Path) -> bool:
    from veribatch.launch.locks import is_locked

    return is_locked(d / "lock")


def records(rd: Path, stage: str) -> pd.DataFrame:
    """The stage's records as the run reports them: every complete shard (one definition of
    complete, rundir/completeness.py), nothing else."""
    from veribatch.aggregate.records import load_stage

    try:
        frame = load_stage(rd, stage).frame
    except (OSError, ValueError):
        return pd.DataFrame(columns=["instance_id"])
    # selftest's work_time_s is a measured time (its regress time column): two runs of one
    # plan differ in it, so it says nothing about a stale record
    return frame.drop(columns=["stage", "shard", "work_time_s"], errors="ignore")


def expect(ref: dict[str, pd.DataFrame], changed: dict[str, int]) -> dict[str, pd.DataFrame]:
    """The fault-free records, with what a changed upstream value must change downstream."""
    out = {s: df.copy() for s, df in ref.items()}
    for iid, value in changed.items():
        out["work"].loc[out["work"]["instance_id"] == iid, "value"] = value
        out["check"].loc[out["check"]["instance_id"] == iid, "verdict"] = "disagree"
    return out


def compare(got: pd.DataFrame, want: pd.DataFrame) -> tuple[int, int, int]:
    """(lost, duplicated, stale) of `got` against `want` (one record per instance)."""
    counts = Counter(got["instance_id"]) if len(got) else Counter()
    lost = sum(1 for iid in want["instance_id"] if counts[iid] == 0)
    duplicated = sum(n - 1 for n in counts.values() if n > 1)
    stale = 0
    cols = [c for c in want.columns if c != "instance_id"]
    first = got.drop_duplicates("instance_id").set_index("instance_id") if len(got) else None
    for row in want.itertuples(index=False):
        iid = row.instance_id
        if first is None or iid not in first.index:
            continue
        have = first.loc[iid]
        for c in cols:
            a, b = getattr(row, c), have.get(c) if c in have.index else None
            if not (pd.isna(a) and pd.isna(b)) and a != b:
                stale += 1
                break
    return lost, duplicated, stale


def kinds_for(executor: str) -> tuple[str, ...]:
    if executor != "slurm":
        return LOCAL_KINDS
    return (*SLURM_KINDS, *MULTINODE_KINDS) if multinode_cluster() else SLURM_KINDS


def multinode_cluster() -> bool:
    """Whether SLURM_CONF's cluster has nodes that can be lost: namespaced nodes of
    `.ci/cluster.sh start-multi` (a node is an `ip netns`; its processes are killable)."""
    try:
        nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True,
                               timeout=20).stdout.split()
        spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                timeout=20).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return False
    return len(set(nodes)) > 1 and set(nodes) <= set(spaces)


def restore_node(node: str) -> None:
    """A lost node back in service: its slurmd restarted in its namespace, then RESUME."""
    subprocess.run(["bash", str(CLUSTER_SH), "start-node", node], capture_output=True)
    end = time.monotonic() + 90
    while time.monotonic() < end:
        state = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%t"], capture_output=True,
                               text=True).stdout.strip()
        if state and not state.endswith("*"):
            break
        time.sleep(0.5)
    subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], capture_output=True)


def choose_kinds(rng: random.Random, available: list[str], per_run: int, runs: int,
                 ) -> list[list[str]]:
    """Each run gets `per_run` kinds; over the runs every available kind comes up."""
    pool: list[str] = []
    out = []
    for _ in range(runs):
        picked: list[str] = []
        while len(picked) < min(per_run, len(available)):
            if not pool:
                pool = list(available)
                rng.shuffle(pool)
            k = pool.pop()
            if k not in picked:
                picked.append(k)
        out.append(sorted(picked))
    return out


def run_suite(executor: str, *, runs: int, seed: int, kinds: list[str] | None = None,
              per_run: int = 3, profile: str | None = None, tag: str = "faults",
              sleep_s: float = 0.3, work: Path | None = None, keep: bool = False,
              echo: bool = True) -> list[RunFigures]:
    available = [k for k in (kinds or kinds_for(executor)) if k in kinds_for(executor)]
    if "full_disk" in available and not is_root():
        available.remove("full_disk")
    rng = random.Random(seed)
    plan = choose_kinds(rng, available, per_run, runs)
    base = work or Path(tempfile.mkdtemp(prefix=f"faults-{executor}-"))
    base.mkdir(parents=True, exist_ok=True)
    h = Harness(executor, base, profile=profile, tag=tag, sleep_s=sleep_s, keep=keep)
    out = []
    try:
        for i, ks in enumerate(plan):
            before = h.reference_left
            fig = h.run_once(seed, i, ks)
            fig.reference_processes_left = h.reference_left - before
            out.append(fig)
            if echo:
                print(line(fig), flush=True)
    finally:
        if not keep and work is None:
            shutil.rmtree(base, ignore_errors=True)
    return out


def line(f: RunFigures) -> str:
    kinds = ", ".join(f"{x.kind}@{x.stage}/{x.shard}" + ("" if x.injected else "(not injected)")
                      for x in f.faults)
    return (f"[{f.executor} seed {f.seed} run {f.run}] {kinds}: lost {f.lost}, dup "
            f"{f.duplicated}, stale {f.stale}, left {f.processes_left}, resumes {f.resumes}, "
            f"complete {f.complete}; broken {','.join(f.incomplete_before) or '-'}; clean {f.clean_s:.1f}s faulty {f.faulty_s:.1f}s "
            f"recovery {f.recovery_s:.1f}s (x{f.cost:.2f})"
            + (f"; notes: {'; '.join(f.notes)}" if f.notes else "")
            + (f"; left: {f.left_detail}" if f.left_detail else ""))


def summary(figs: list[RunFigures]) -> dict[str, Any]:
    injected = Counter(x.kind for f in figs for x in f.faults if x.injected)
    by_kind_left = Counter()
    for f in figs:
        if f.processes_left:
            for x in f.faults:
                by_kind_left[x.kind] += f.processes_left
    rec = [f.recovery_s for f in figs]
    return {
        "runs": len(figs), "faults_injected": dict(sorted(injected.items())),
        "faults_injected_total": sum(injected.values()),
        "records_lost": sum(f.lost for f in figs),
        "records_duplicated": sum(f.duplicated for f in figs),
        "records_stale": sum(f.stale for f in figs),
        "processes_left": sum(f.processes_left for f in figs),
        "processes_left_in_runs_with": dict(by_kind_left),
        "processes_left_by_clean_reference_runs": sum(f.reference_processes_left for f in figs),
        "resumes_needed_max": max((f.resumes for f in figs), default=0),
        "resumes_needed": [f.resumes for f in figs],
        "complete": sum(f.complete for f in figs),
        "clean_s_mean": round(sum(f.clean_s for f in figs) / max(1, len(figs)), 2),
        "faulty_s_mean": round(sum(f.faulty_s for f in figs) / max(1, len(figs)), 2),
        "recovery_s_mean": round(sum(rec) / max(1, len(rec)), 2),
        "recovery_s_max": round(max(rec, default=0.0), 2),
        "cost_ratio_mean": round(sum(f.cost for f in figs) / max(1, len(figs)), 2),
    }


def print_summary(executor: str, figs: list[RunFigures], seed: int) -> dict[str, Any]:
    s = summary(figs)
    print(f"\n== {executor}: seed {seed}, {s['runs']} runs ==")
    print(f"faults injected ({s['faults_injected_total']}): "
          + ", ".join(f"{k} {v}" for k, v in s["faults_injected"].items()))
    print(f"records lost {s['records_lost']} | duplicated {s['records_duplicated']} | stale "
          f"{s['records_stale']} | processes left {s['processes_left']} "
          f"{s['processes_left_in_runs_with'] or ''}(clean reference runs: "
          f"{s['processes_left_by_clean_reference_runs']}) | resumes needed max "
          f"{s['resumes_needed_max']} {s['resumes_needed']} | complete {s['complete']}/{s['runs']}")
    print(f"wall: clean run {s['clean_s_mean']} s, faulty run {s['faulty_s_mean']} s, recovery "
          f"{s['recovery_s_mean']} s (max {s['recovery_s_max']} s); (faulty + recovery) / clean "
          f"= {s['cost_ratio_mean']}x")
    return s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--executor", choices=("local", "slurm", "both"), default="local")
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    ap.add_argument("--kinds", default="", help="comma list (default: all that apply)")
    ap.add_argument("--per-run", type=int, default=3, help="fault kinds per run")
    ap.add_argument("--profile", default="local-test", help="SLURM profile")
    ap.add_argument("--tag", default="faults", help="in run and SLURM job names")
    ap.add_argument("--sleep-s", type=float, default=0.3, help="work per instance")
    ap.add_argument("--work-dir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep run directories")
    ap.add_argument("--json", type=Path, default=None, help="write figures here")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(10**6)
    print(f"seed {seed}", flush=True)
    kinds = [k for k in a.kinds.split(",") if k] or None
    out: dict[str, Any] = {"seed": seed}
    for ex in (("local", "slurm") if a.executor == "both" else (a.executor,)):
        figs = run_suite(ex, runs=a.runs, seed=seed, kinds=kinds, per_run=a.per_run,
                         profile=a.profile if ex == "slurm" else None, tag=a.tag,
                         sleep_s=a.sleep_s, work=a.work_dir, keep=a.keep)
        out[ex] = {"summary": print_summary(ex, figs, seed),
                   "runs": [{**asdict(f), "cost": f.cost} for f in figs]}
    if a.json:
        a.json.write_text(json.dumps(out, indent=2, default=str) + "\n")
    bad = any(v["summary"]["records_lost"] or v["summary"]["records_duplicated"]
              or v["summary"]["records_stale"] or v["summary"]["resumes_needed_max"] > 1
              for k, v in out.items() if k != "seed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
