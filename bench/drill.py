"""The scale drill: the card's command on the multi-node cluster, with the cluster's own faults.

Runs ``launch invbench --executor slurm --profile multinode-test --shards N`` over a seeded
sample of InvBench's training split (the embedded z3 verifier; the tiny Qwen2 model with
``--model tiny``), injects faults at points of the run's progress — a node killed, a node
drained, slurmctld stopped and started, slurmdbd stopped and started, the run folder's file
system full (ENOSPC) — recovers with two `launch resume`s started at once, and checks:

- every instance exactly once per stage (records **lost** / **duplicated**); no **stale**
  result (a verify record whose copy of the baseline differs from the baseline's record);
  no ledger line that did not parse kept as a record;
- **resumes needed** (at most one);
- **nothing left running**: no job of the run in the queue, no process of the run alive.

It prints a table: instances, shards, faults injected, those figures, throughput
(instances per allocated CPU-minute) and CPU use (shards' busy CPU / allocated CPU) beside the
local executor on the same cores (``--local``), the times of submit, status, resume
--dry-run, aggregate (and its peak memory) and report.  The fault injectors live in
tests/support/cluster_faults.py (shared with the tests).

    python bench/drill.py --instances 80 --shards 8 --outage-s 6 --spread 0   # as CI runs it (tests/launch/test_drill.py)
    python bench/drill.py --instances 400 --shards 16 --local --json drill.json
    python bench/drill.py --instances 60 --faults none         # the same run, no faults

Needs root and `.ci/cluster.sh start-multi`; restores nodes and daemons in a finally.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.faults import ProcessWatch  # noqa: E402
from tests.support import cluster_faults as cf  # noqa: E402
from veribatch.launch.ledger import read_ledger  # noqa: E402

FAULTS = ("kill", "drain", "slurmctld", "slurmdbd", "enospc", "resumes")
SHARED_DATA = Path(os.environ.get("VERIBATCH_SHARED_DATA", REPO.parent / "shared" / "data"))
DATASET = SHARED_DATA / "invbench"
SETTLE_S = 1200.0


@dataclass
class Figures:
    instances: int
    shards: int
    model: str
    faults_planned: list[str]
    faults_injected: list[str] = field(default_factory=list)
    lost: dict[str, int] = field(default_factory=dict)
    duplicated: dict[str, int] = field(default_factory=dict)
    stale: int = 0
    bad_ledger_lines: int = 0
    resumes: int = 0
    broken: list[list[str]] = field(default_factory=list)  # failed shards before each resume
    complete: bool = False
    jobs_left: int = 0
    processes_left: int = 0
    submit_s: float = 0.0
    run_wall_s: float = 0.0
    status_s: float = 0.0
    resume_dry_s: float = 0.0
    aggregate_s: float = 0.0
    aggregate_peak_mb: float = 0.0
    report_s: float = 0.0
    status_during: dict[str, str] = field(default_factory=dict)  # fault → exit code, seconds
    concurrent_resumes: list[int] = field(default_factory=list)
    alloc_cpu_s: float = 0.0
    tails: dict[str, str] = field(default_factory=dict)
    busy_cpu_s: float = 0.0
    local: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    log: list[tuple[float, str]] = field(default_factory=list)


class Drill:
    def __init__(self, a: argparse.Namespace, work: Path) -> None:
        self.a = a
        self.work = work
        self.runs = work / "runs"
        self.name = f"drill-{a.instances}x{a.shards}"
        self.rd = self.runs / self.name
        self.env = {**cf.multi_env(), "COLUMNS": "200", "PYTHONPATH": os.pathsep.join(
            [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
        planned = [] if a.faults == "none" else [f for f in a.faults.split(",") if f]
        self.fig = Figures(a.instances, a.shards, a.model, planned)
        self.faults = cf.Faults()
        self.disk: cf.RunFolderDisk | None = None

    # -- commands ------------------------------------------------------------------------
    def cmd(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "veribatch", *args]

    def launch(self, *args: str, env: dict[str, str] | None = None,
               timeout: float = 900) -> tuple[subprocess.CompletedProcess[str], float, float]:
        """(result, wall seconds, peak RSS MB of the command's process tree)."""
        with tempfile.TemporaryFile("w+") as so, tempfile.TemporaryFile("w+") as se:
            t0 = time.monotonic()
            p = subprocess.Popen(self.cmd(*args), env={**self.env, **(env or {})},
                                 stdout=so, stderr=se, text=True)
            try:  # wait4: this command's own rusage (its peak RSS), not all children's
                _, status, usage = os.wait4(p.pid, 0)
            finally:
                if p.returncode is None and p.poll() is None:
                    p.kill()
            p.returncode = os.waitstatus_to_exitcode(status)
            wall = time.monotonic() - t0
            so.seek(0)
            se.seek(0)
            return (subprocess.CompletedProcess(p.args, p.returncode, so.read(), se.read()),
                    wall, usage.ru_maxrss / 1024)

    def task_args(self, executor: str, name: str, runs: Path) -> list[str]:
        args = ["invbench", "--dataset", f"training:{self.a.data}", "--sample", str(self.a.instances),
                "--shards", str(self.a.shards), "-o", f"budget_s={self.a.budget_s:g}",
                "--runs-dir", str(runs), "--run-name", name, "-q", "--executor", executor]
        if executor == "slurm":
            args += ["--profile", "multinode-test"]
        else:
            args += ["--workers", str(self.a.local_workers)]
        if self.a.model == "tiny":
            from veribatch.inference.tiny_model import cached_tiny_qwen2

            args += ["--model", f"hf:{cached_tiny_qwen2()}", "--max-tokens", "8"]
            if executor == "slurm":
                args += ["--partition", "gpu"]
        return args

    # -- SLURM -----------------------------------------------------------------------------
    def job_ids(self) -> list[str]:
        try:
            subs = json.loads((self.rd / "jobs.json").read_text())["submissions"]
        except (OSError, ValueError, KeyError):
            return []
        return sorted({str(s["array_id"]) for s in subs if s.get("array_id")})

    def queued(self) -> dict[str, str] | None:
        """Job → state|reason of the run's jobs in the queue; None when squeue did not answer."""
        ids = self.job_ids()
        if not ids:
            return {}
        r = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T|%r|%N", "-j", ",".join(ids)],
                           capture_output=True, text=True, env=self.env, timeout=60)
        if r.returncode != 0:
            return None if "Invalid job id" not in r.stderr else {}
        return {ln.split("|")[0]: "|".join(ln.split("|")[1:]) for ln in r.stdout.splitlines()}

    def nudge(self, q: dict[str, str]) -> None:
        """A requeued job waits ~2 min on BeginTime: start it now (as an operator would)."""
        for jid, st in q.items():
            if "BeginTime" in st:
                subprocess.run(["scontrol", "update", f"JobId={jid}", "StartTime=now"],
                               capture_output=True, env=self.env)

    def settle(self, watch: ProcessWatch, tick: Callable[[], None] | None = None) -> None:
        end = time.monotonic() + SETTLE_S
        while time.monotonic() < end:
            watch.scan()
            if tick is not None:
                tick()
            q = self.queued()
            if q == {} and not self.faults.undo:
                return
            if q:
                self.nudge(q)
            time.sleep(1.0)
        raise TimeoutError(f"jobs still queued after {SETTLE_S:.0f} s: {self.queued()}")

    def progress(self) -> float:
        n = 0
        for p in self.rd.glob("shards/*/*/ledger.jsonl"):
            with contextlib.suppress(OSError):
                n += max(0, p.read_bytes().count(b"\n") - 1)
        stages = 3 if self.a.model == "tiny" else 2
        return n / (self.a.instances * stages)

    def running_nodes(self, partition: str = "cpu") -> list[str]:
        q = self.queued() or {}
        nodes = [v.split("|")[2] for v in q.values() if v.startswith("RUNNING")]
        return sorted({n for n in nodes if n.startswith(f"vbm-{partition}")})

    # -- the fault schedule --------------------------------------------------------------
    def schedule(self) -> list[tuple[str, float]]:
        """(fault, progress at which it starts), spread over the run in this order."""
        order = [f for f in ("kill", "drain", "slurmctld", "slurmdbd", "enospc")
                 if f in self.fig.faults_planned]
        return [(f, 0.05 + self.a.spread * i / max(1, len(order))) for i, f in enumerate(order)]

    def status_in_background(self, label: str) -> subprocess.Popen[str]:
        p = subprocess.Popen(self.cmd("status", str(self.rd), "--json"), env=self.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        p.started = time.monotonic()  # type: ignore[attr-defined]
        p.label = label  # type: ignore[attr-defined]
        return p

    def run_faulty(self, watch: ProcessWatch) -> None:
        pending = self.schedule()
        active: dict[str, Any] = {}   # fault → (started, undo)
        probes: list[subprocess.Popen[str]] = []

        def inject(kind: str) -> bool:
            if kind == "kill":
                nodes = self.running_nodes()
                if not nodes:
                    return False
                node = nodes[-1]
                # the new slurmd is a new mount namespace: the run folder mounted there
                # before it takes a job
                self.faults.kill_node(node, self.disk.mount_nodes if self.disk else None)
                active[kind] = (time.monotonic(),
                                lambda: self.faults.undo_last(f"restore {node}"))
            elif kind == "drain":
                nodes = self.running_nodes() or ["vbm-cpu1"]
                node = nodes[0]
                self.faults.drain_node(node)
                active[kind] = (time.monotonic(), lambda: self.faults.undo_last(f"resume {node}"))
            elif kind in ("slurmctld", "slurmdbd"):
                self.faults.stop_daemon(kind)
                probes.append(self.status_in_background(kind))
                active[kind] = (time.monotonic(), lambda: self.faults.undo_last(f"start {kind}"))
            elif kind == "enospc":
                if self.disk is None:
                    return True
                self.disk.fill()
                self.faults.note("run folder's file system full (ENOSPC)")
                active[kind] = (time.monotonic(), self._free_disk)
            self.fig.faults_injected.append(kind)
            return True

        def tick() -> None:
            now = time.monotonic()
            for kind, (t, undo) in list(active.items()):
                if now - t >= self.a.outage_s:
                    undo()
                    del active[kind]
            if not active and pending and self.progress() >= pending[0][1]:
                kind, _ = pending[0]
                if inject(kind):
                    pending.pop(0)
            for p in list(probes):
                if p.poll() is not None:
                    probes.remove(p)
                    self.fig.status_during[p.label] = (  # type: ignore[attr-defined]
                        f"exit {p.returncode} after {time.monotonic() - p.started:.0f} s"  # type: ignore[attr-defined]
                        + (f": {p.stderr.read().strip()[-160:]}" if p.returncode not in (0, 1, 4)
                           else ""))

        self.settle(watch, tick)
        while active or probes:
            tick()
            time.sleep(0.5)
        for kind, _ in pending:
            self.fig.notes.append(f"{kind}: not injected (the run ended first)")

    def _free_disk(self) -> None:
        assert self.disk is not None
        self.disk.free()
        self.faults.note("space given back")

    # -- checks ----------------------------------------------------------------------------
    def check(self) -> None:
        from veribatch.aggregate.records import load_stage
        from veribatch.launch.manifest import load_manifest
        from veribatch.rundir.paths import RunDir

        rd = RunDir(self.rd)
        ids = [json.loads(ln)["id"] for ln in (self.rd / "instances.jsonl").read_text().splitlines()]
        frames: dict[str, pd.DataFrame] = {}
        for st in load_manifest(rd).task_stages:
            frame = load_stage(self.rd, st.name).frame
            if "kind" in frame.columns:
                frame = frame[frame["kind"] == "instance"]
            if "sample_index" in frame.columns and st.name == "generate":
                frame = frame[frame["sample_index"].fillna(0) == 0]
            counts = frame["instance_id"].value_counts()
            self.fig.lost[st.name] = sum(1 for i in ids if i not in counts.index)
            self.fig.duplicated[st.name] = int((counts - 1).clip(lower=0).sum())
            frames[st.name] = frame
        if "baseline" in frames and "verify" in frames:
            base = frames["baseline"].set_index("instance_id")
            ver = frames["verify"].drop_duplicates("instance_id").set_index("instance_id")
            common = base.index.intersection(ver.index)
            for col_b, col_v in (("status", "baseline_status"), ("baseline_time_s", "baseline_time_s")):
                a = base.loc[common, col_b].astype(str)
                b = ver.loc[common, col_v].astype(str)
                self.fig.stale = max(self.fig.stale, int((a != b).sum()))
        for p in self.rd.glob("shards/*/*/ledger.jsonl"):
            self.fig.bad_ledger_lines += len(read_ledger(p, ids, repair=False).bad_lines)

    def cpu_figures(self) -> None:
        """Allocated CPU (sacct CPUTimeRAW of every element, requeued ones included) and,
        per stage, the tail: from the first element that ended to the last one — the time
        part of the stage's allocation waits on a few elements."""
        ids = self.job_ids()
        if ids:
            out = subprocess.run(["sacct", "-n", "-P", "-X", "-j", ",".join(ids), "-o",
                                  "JobName,Start,End,CPUTimeRAW,State"], capture_output=True,
                                 text=True, env=self.env)
            ends: dict[str, list[float]] = {}
            for line in out.stdout.splitlines():
                name, start, end, cpu, _state = (line.split("|") + [""] * 5)[:5]
                if cpu.isdigit():
                    self.fig.alloc_cpu_s += float(cpu)
                with contextlib.suppress(ValueError):
                    t = time.mktime(time.strptime(end, "%Y-%m-%dT%H:%M:%S"))
                    ends.setdefault(name.rsplit("-", 1)[-1], []).append(t)
            self.fig.tails = {st: f"{len(v)} elements, last ended {max(v) - min(v):.0f} s "
                              "after the first" for st, v in ends.items() if st != "aggregate"}
        self.fig.busy_cpu_s = busy_cpu(self.rd)

    # -- the drill -------------------------------------------------------------------------
    def run(self) -> Figures:
        fig = self.fig
        watch = ProcessWatch(self.rd)
        with contextlib.ExitStack() as stack:
            if "enospc" in fig.faults_planned:
                self.disk = stack.enter_context(cf.RunFolderDisk(
                    self.runs, self.a.disk_mb, self.work / "runs.img"))
            # LIFO: after the faults are undone and the cluster is whole again, before the
            # run folder goes: a drill that failed half-way leaves no job of its run behind
            stack.callback(self.cancel_leftovers)
            stack.enter_context(cf.cluster_restored())
            stack.enter_context(self.faults)
            t0 = time.monotonic()
            r, fig.submit_s, _ = self.launch(*self.task_args("slurm", self.name, self.runs))
            if r.returncode != 0:
                raise RuntimeError(f"launch failed ({r.returncode}): {r.stderr[-2000:]}")
            self.faults.note(f"submitted in {fig.submit_s:.1f} s")
            self.run_faulty(watch)
            fig.run_wall_s = time.monotonic() - t0
            for attempt in range(3):
                r, _, _ = self.launch("status", str(self.rd), "--json")
                if r.returncode == 0:
                    break
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    fig.broken.append([f"{x['stage']}/{x['shard']}: {x['reason'][:100]}"
                                       for x in json.loads(r.stdout)["failed"]])
                fig.resumes += 1
                if "resumes" in fig.faults_planned and attempt == 0:
                    out = cf.concurrent_resumes(self.rd, self.env)
                    fig.concurrent_resumes = [o.returncode for o in out]
                    fig.faults_injected.append("resumes")
                    self.faults.note(f"two resumes at once: exits {fig.concurrent_resumes}")
                else:
                    rr, _, _ = self.launch("resume", str(self.rd), "-q")
                    self.faults.note(f"resume: exit {rr.returncode}")
                self.settle(watch)
            r, fig.status_s, _ = self.launch("status", str(self.rd))
            fig.complete = r.returncode == 0
            if "resumes" in fig.faults_planned and "resumes" not in fig.faults_injected:
                out = cf.concurrent_resumes(self.rd, self.env)  # on a complete run: no-ops
                fig.concurrent_resumes = [o.returncode for o in out]
                fig.faults_injected.append("resumes")
                fig.notes.append("concurrent resumes met a complete run")
            _, fig.resume_dry_s, _ = self.launch("resume", str(self.rd), "--dry-run")
            r, fig.aggregate_s, fig.aggregate_peak_mb = self.launch("aggregate", str(self.rd))
            _, fig.report_s, _ = self.launch("report", str(self.rd), "--out",
                                             str(self.work / "report.html"))
            self.check()
            self.cpu_figures()
            time.sleep(2.0)
            fig.jobs_left = len(self.queued() or {})
            left = watch.left()
            fig.processes_left = len(left)
            fig.notes += [f"left: {p.pid} {' '.join(p.cmdline())[:100]}" for p in left[:5]]
            if self.a.keep:  # the run folder's file system goes with the drill
                shutil.copytree(self.rd, self.work / "run-copy", dirs_exist_ok=True)
            if self.a.local:
                self.local_run()
        fig.log = self.faults.log
        return fig

    def cancel_leftovers(self) -> None:
        q = self.queued()
        if q:
            subprocess.run(["scancel", *self.job_ids()], capture_output=True, env=self.env)
            self.fig.notes.append(f"cancelled {len(q)} job(s) of the run left queued or running")

    def local_run(self) -> None:
        """The same plan on the local executor, on the cores the cluster's nodes share."""
        runs = self.work / "local-runs"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        r, wall, _ = self.launch(*self.task_args("local", "local", runs))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        self.fig.local = {"exit": r.returncode, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                          "alloc_cpu_s": round(wall * self.a.local_workers, 1),
                          "busy_cpu_s": round(busy_cpu(runs / "local"), 1)}


def busy_cpu(rd: Path) -> float:
    """CPU-seconds the shards held while working: each finished shard's wall (stats.json)
    times its stage's CPUs.  Against the CPUs allocated, what is left is allocation spent
    starting, waiting for upstream or idle while another element works through a tail."""
    try:
        cpus = {s["name"]: int(s.get("cpus_per_task") or 1)
                for s in json.loads((rd / "manifest.json").read_text())["stages"]}
    except (OSError, ValueError, KeyError):
        return 0.0
    total = 0.0
    for p in rd.glob("shards/*/*/stats.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            st = json.loads(p.read_text())
            total += float(st["wall_s"]) * cpus.get(st["stage"], 1)
    return total


def table(f: Figures) -> str:
    per_min = lambda n, s: f"{n / (s / 60):.2f}" if s else "-"  # noqa: E731
    lost = sum(f.lost.values())
    dup = sum(f.duplicated.values())
    rows = [
        ("instances", f"{f.instances} (InvBench training, --sample; model {f.model})"),
        ("shards", f"{f.shards} per stage"),
        ("faults injected", ", ".join(f.faults_injected) or "none"),
        ("records lost / duplicated / stale", f"{lost} / {dup} / {f.stale}  (per stage lost "
         f"{f.lost}, dup {f.duplicated})"),
        ("ledger lines unparsable", str(f.bad_ledger_lines)),
        ("resumes needed", str(f.resumes) + "".join(
            f"\n    before resume {i + 1}: {len(b)} failed shard(s): " + "; ".join(b[:4])
            for i, b in enumerate(f.broken))),
        ("complete", str(f.complete)),
        ("left running", f"{f.jobs_left} jobs, {f.processes_left} processes"),
        ("status during outages", "; ".join(f"{k}: {v}" for k, v in f.status_during.items()) or "-"),
        ("concurrent resumes' exits", str(f.concurrent_resumes or "-")),
        ("run wall (submit → settled)", f"{f.run_wall_s:.0f} s"),
        ("throughput, slurm", f"{per_min(f.instances, f.alloc_cpu_s)} instances / allocated "
         f"CPU-min ({f.alloc_cpu_s / 60:.1f} CPU-min allocated, sacct CPUTimeRAW)"),
        ("CPU use, slurm", f"{f.busy_cpu_s / f.alloc_cpu_s:.0%} (shards' wall x CPUs "
         f"{f.busy_cpu_s:.0f} s / allocated)" if f.alloc_cpu_s else "-"),
    ]
    if f.local:
        lc = f.local
        rows += [
            ("throughput, local", f"{per_min(f.instances, lc['alloc_cpu_s'])} instances / "
             f"CPU-min ({lc['wall_s']} s wall x {lc['alloc_cpu_s'] / max(lc['wall_s'], 1e-9):.0f}"
             f" cores; process CPU {lc['cpu_s']} s; exit {lc['exit']})"),
            ("CPU use, local", f"{lc['busy_cpu_s'] / lc['alloc_cpu_s']:.0%} (shards' wall x "
             f"CPUs {lc['busy_cpu_s']:.0f} s / allocated)" if lc["alloc_cpu_s"] else "-"),
        ]
    rows += [
        ("stage tails", "; ".join(f"{k}: {v}" for k, v in f.tails.items()) or "-"),
        ("submit", f"{f.submit_s:.1f} s"),
        ("status (complete run)", f"{f.status_s:.1f} s"),
        ("resume --dry-run", f"{f.resume_dry_s:.1f} s"),
        ("aggregate", f"{f.aggregate_s:.1f} s, peak RSS {f.aggregate_peak_mb:.0f} MB"),
        ("report", f"{f.report_s:.1f} s"),
    ]
    w = max(len(k) for k, _ in rows)
    out = "\n".join(f"{k:<{w}}  {v}" for k, v in rows)
    if f.notes:
        out += "\nnotes: " + "; ".join(f.notes)
    return out


def ok(f: Figures) -> bool:
    return (f.complete and not sum(f.lost.values()) and not sum(f.duplicated.values())
            and not f.stale and not f.bad_ledger_lines and f.resumes <= 1 and not f.jobs_left
            and not f.processes_left)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", type=int, default=80)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--model", choices=("none", "tiny"), default="none")
    ap.add_argument("--faults", default=",".join(FAULTS),
                    help=f"comma list of {', '.join(FAULTS)}, or none")
    ap.add_argument("--outage-s", type=float, default=20.0,
                    help="how long a daemon stays down, a node dead or drained, the disk full")
    ap.add_argument("--spread", type=float, default=0.6,
                    help="faults start between 5%% and 5%%+SPREAD of the run's progress (one "
                         "after the other); 0: back to back from 5%%")
    ap.add_argument("--budget-s", type=float, default=5.0, help="verifier budget per query")
    ap.add_argument("--disk-mb", type=int, default=0,
                    help="size of the run folder's file system (enospc); default by instances")
    ap.add_argument("--local", action="store_true", help="also run on the local executor")
    ap.add_argument("--local-workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--work-dir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--data", type=Path, default=DATASET, help="InvBench root (holds Dataset/)")
    a = ap.parse_args(argv)
    a.disk_mb = a.disk_mb or max(64, 32 + a.instances // 4)
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    work = a.work_dir or Path(tempfile.mkdtemp(prefix="veribatch-drill-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        fig = Drill(a, work).run()
    finally:
        if not a.keep and a.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(table(fig))
    if a.json:
        a.json.write_text(json.dumps(asdict(fig), indent=2, default=str) + "\n")
    return 0 if ok(fig) else 1


if __name__ == "__main__":
    sys.exit(main())
