"""Orchestration overhead of `launch`: what the spine costs on top of the work itself.

1. A local run of N trivial `selftest` instances (two stages): wall time versus the
   sum of the instances' own work, per instance and as a ratio.
2. Planning on a synthetic run directory with 10,000 shards per stage: the time of
   `status` (cheap completeness check) and of `resume` planning (deep check by digest).

Aims (issue 2): < 10 ms of overhead per instance; < 1 s to plan 10,000 shards.
Usage: python bench/overhead.py [--instances 1000] [--shards 10000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from veribatch.launch.manifest import create_or_reuse, load_manifest
from veribatch.launch.resume_set import resume_set_for
from veribatch.launch.run_control import ExecChoice, launch_run, plan_run
from veribatch.launch.status import run_state
from veribatch.rundir.done import input_hash
from veribatch.rundir.paths import RunDir, atomic_write_json
from veribatch.rundir.shards import file_sha256, read_spans
from veribatch.tasks.selftest import compute

DATASETS = {12: "smoke", 100: "small", 1000: "large", 10000: "huge"}


def local_overhead(n: int, shards: int, workers: int, sleep_s: float, iterations: int) -> dict:
    dataset = DATASETS[n]
    t = time.perf_counter()
    for k in range(n):  # `work` and `check` each compute once per instance
        compute(k, iterations)
        compute(k, iterations)
    work = time.perf_counter() - t + n * sleep_s
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        plan = plan_run("selftest", dataset=dataset, shards=shards,
                        options=[f"sleep_s={sleep_s}", f"iterations={iterations}"])
        out = launch_run(plan, Path(tmp) / "run", ExecChoice(workers=workers), progress=False)
        wall = time.perf_counter() - t
        assert out.ok, "benchmark run failed"
    ideal = work / min(workers, shards)
    return {"instances": n, "shards": shards, "workers": workers, "wall_s": wall,
            "work_s": work, "overhead_ms_per_instance": (wall - ideal) / n * 1000,
            "wall_over_ideal": wall / ideal}


def synthetic_run(root: Path, shards: int) -> RunDir:
    """A 10,000-shard selftest run: 60% done, 10% failed, 10% half-way (ledger), 20% untouched."""
    plan = plan_run("selftest", dataset="huge", shards=shards)
    rd, _ = create_or_reuse(plan, root)
    manifest = load_manifest(rd)
    spans = read_spans(rd)
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"instance_id": ["x"], "stage": ["s"], "shard": [0]}), sink)
    blob = sink.getvalue().to_pybytes()
    for k in range(shards):
        kind = k % 10
        up: list[tuple[str, str]] = []
        for stage in ("work", "check"):
            d = rd.shard_dir(stage, k)
            d.mkdir(parents=True)
            if kind < 6:
                rd.records(stage, k).write_bytes(blob)
                digest = file_sha256(rd.records(stage, k))
                h = input_hash(manifest.identity, stage, k, shards, spans[k], up)
                rd.done(stage, k).write_text(json.dumps({
                    "input_hash": h, "output_sha256": digest, "parquet_bytes": len(blob),
                    "parquet_mtime_ns": rd.records(stage, k).stat().st_mtime_ns,
                    "records": 1}))
                up = [("work", digest)]
            elif kind == 6 and stage == "work":
                atomic_write_json(rd.attempt(stage, k), {"attempt": 1, "pid": 0})
                atomic_write_json(rd.error(stage, k), {"type": "RuntimeError", "message": "x"})
            elif kind == 7 and stage == "work":
                atomic_write_json(rd.attempt(stage, k), {"attempt": 1, "pid": 0})
                rd.ledger(stage, k).write_text('{"instance_id":"x","records":[]}\n')
    return rd


def planning(shards: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        rd = synthetic_run(Path(tmp) / "run", shards)
        build = time.perf_counter() - t
        status_s, resume_s = [], []
        for _ in range(3):  # first pass: cold dentry/page cache; best: a login node that looked before
            t = time.perf_counter()
            st = run_state(rd, live=False)
            status_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            todo = resume_set_for(run_state(rd, live=False, deep=True)).shards
            resume_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        cli = subprocess.run([sys.executable, "-m", "veribatch", "status", str(rd.root), "--json",
                              "--no-live"], capture_output=True, text=True)
        cli_s = time.perf_counter() - t
        counts = {s: dict(st.counts(s)) for s in st.shards}
        assert counts["work"]["done"] == shards * 6 // 10, counts
        assert cli.returncode == 1, cli.stderr
    return {"shards_per_stage": shards, "build_s": build, "status_s": status_s,
            "resume_planning_s": resume_s, "cli_status_s": cli_s, "counts": counts,
            "resume_would_run": {s: len(v) for s, v in todo.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=1000, choices=sorted(DATASETS))
    ap.add_argument("--shards", type=int, default=10000)
    ap.add_argument("--sleep-s", type=float, default=0.002)
    ap.add_argument("--iterations", type=int, default=2000)
    a = ap.parse_args()
    print("== local run overhead (selftest: work + check per instance) ==")
    for shards, workers in ((1, 1), (4, 2)):
        r = local_overhead(a.instances, shards, workers, a.sleep_s, a.iterations)
        print(f"N={r['instances']} shards={shards} workers={workers}: wall {r['wall_s']:.2f} s, "
              f"work {r['work_s']:.2f} s, overhead {r['overhead_ms_per_instance']:.2f} ms/instance, "
              f"wall/ideal {r['wall_over_ideal']:.2f}")
    print(f"== planning on {a.shards} shards per stage (2 stages) ==")
    p = planning(a.shards)
    print(f"synthetic run written in {p['build_s']:.1f} s; states {p['counts']}")
    st, rs = p["status_s"], p["resume_planning_s"]
    print(f"status (cheap check): first {st[0]:.3f} s, best {min(st):.3f} s; resume planning "
          f"(digest check): first {rs[0]:.3f} s, best {min(rs):.3f} s")
    print(f"`launch status --json` end to end (with interpreter start): {p['cli_status_s']:.3f} s;"
          f" resume would run {p['resume_would_run']}")


if __name__ == "__main__":
    main()
