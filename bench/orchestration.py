"""The scale of the orchestration itself, on a real SLURM cluster (the multi-node CI cluster of
`.ci/cluster.sh start-multi`, or any other `SLURM_CONF`).

One run through `launch ... --executor slurm`, then SLURM's own accounting (`sacct`: Submit,
Eligible, Start, End of every array element) beside what each shard measured itself
(stats.json `wall_s`: the shard loop, from its first instance to its records on disk):

- **submission**: the wall time of the `launch` command (planning + every `sbatch`);
- **scheduling latency per array**: Start − Eligible of its elements (median, p95, max) —
  how long an element that may run waits, dependencies excluded (on a full cluster that is
  mostly waiting for a slot), and the **slot refill gap**: Start − the last End on the same
  node before it — how fast SLURM gives a freed slot to the next element;
- **status**: `launch status --json` while the run is queued and once it is over;
- **aggregate**: the aggregate job's elapsed time, and `launch aggregate` run again locally;
- **orchestration share**: of the node time the run's jobs held (Σ Elapsed), the part outside
  the shard loops (Σ Elapsed − Σ wall_s: interpreter start, imports, submitit's pickles, the
  aggregate job), plus the submission — what `launch` costs on top of the work.

Figures are printed, never asserted.  Examples:

    export SLURM_CONF=/tmp/veribatch-slurm-multi/etc/slurm.conf
    python bench/orchestration.py selftest --dataset large --shards 1000 --timeout-s 600
    python bench/orchestration.py invbench --dataset easy:../shared/data/invbench --shards 64

`spread` (no cluster needed) is the tail of slow instances, per shard: the instances of run B
(default A) assigned by the per-instance costs measured in run A (`launch.measured`) —
contiguous by id (the assignment without measurements), round-robin, and longest first
onto the least loaded shard (`launch.assignment`, what planning does with a costs file) —
each shard's cost then taken from what B itself measured (out of sample when B is not A;
an instance A did not measure counts as A's median).  It prints max/mean shard cost, the
makespan over the perfect balance:

    python bench/orchestration.py spread RUN_A [--on RUN_B] [--shards S]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def launch(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "veribatch", *args], capture_output=True, text=True,
                       env=env, timeout=3600)
    return r, time.perf_counter() - t


def _ts(value: str) -> float | None:
    if not value or value in ("Unknown", "None"):
        return None
    return dt.datetime.fromisoformat(value).timestamp()


def sacct(ids: list[str]) -> list[dict[str, Any]]:
    fields = "JobID,JobName,Submit,Eligible,Start,End,ElapsedRaw,NodeList,State"
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o", fields],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        job, name, submit, elig, start, end, elapsed, nodes, state = line.split("|")
        rows.append({"job": job, "stage": name.rsplit("-", 1)[1], "submit": _ts(submit),
                     "eligible": _ts(elig), "start": _ts(start), "end": _ts(end),
                     "elapsed": float(elapsed or 0), "nodes": nodes, "state": state})
    return rows


def active(ids: list[str]) -> bool:
    r = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(ids)], capture_output=True, text=True)
    return r.returncode != 0 or bool(r.stdout.strip())


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def spread(argv: list[str]) -> int:
    """max/mean shard cost of run B's instances under three assignments (module docstring)."""
    sys.path.insert(0, str(REPO))
    from veribatch.launch.assignment import assign, contiguous, filled_costs, lpt
    from veribatch.launch.measured import measure_instances
    from veribatch.rundir.instances import instance_ids

    ap = argparse.ArgumentParser(prog="orchestration.py spread")
    ap.add_argument("costs_from", type=Path)
    ap.add_argument("--on", type=Path, default=None)
    ap.add_argument("--shards", type=int, default=None)
    a = ap.parse_args(argv)
    on = a.on or a.costs_from

    def totals(run: Path) -> dict[str, float]:
        per: dict[str, float] = {}
        for v in measure_instances(run).values():  # summed over the run's stages
            for i, sec in v.items():
                per[i] = per.get(i, 0.0) + sec
        return per

    ids = sorted(instance_ids(on))
    truth = totals(on)
    missing = [i for i in ids if i not in truth]
    if missing:
        print(f"{on}: {len(missing)} instance(s) without a measured cost, e.g. {missing[:3]}")
        return 2
    known = totals(a.costs_from)
    from veribatch.rundir.manifest import Manifest

    shards = a.shards or Manifest.read(on).shards
    predicted = filled_costs(ids, known)
    ways = {"contiguous": [list(s) for s in contiguous(ids, shards).shards],
            "round-robin": [ids[k::shards] for k in range(shards)],
            "lpt": lpt(ids, predicted, shards)}
    planned = assign(ids, shards, known)  # what planning with A's costs would choose
    mean = sum(truth.values()) / shards
    hits = sum(1 for i in ids if i in known)
    print(f"shard cost spread: {len(ids)} instance(s) of {on} on {shards} shard(s), "
          f"costs predicted from {a.costs_from} ({hits} measured there), each shard's cost "
          f"measured in {on}: sum {sum(truth.values()):.1f} s, mean {mean:.1f} s per shard, "
          f"slowest instance {max(truth.values()):.1f} s")
    for name, parts in ways.items():
        cost = [sum(truth[i] for i in p) for p in parts]
        print(f"  {name:12} max {max(cost):8.1f} s  min {min(cost):8.1f} s  "
              f"max/mean {max(cost) / mean:5.2f}")
    rr = max(sum(truth[i] for i in p) for p in ways["round-robin"])
    lp = max(sum(truth[i] for i in p) for p in ways["lpt"])
    print(f"  lpt/round-robin max shard cost {lp / rr:.2f}; planning would use: {planned.method}")
    return 0


def main() -> int:
    if sys.argv[1:2] == ["spread"]:
        return spread(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("task")
    ap.add_argument("--dataset", default=None)
    ap.add_argument("--shards", type=int, default=64)
    ap.add_argument("--profile", default="multinode-test")
    ap.add_argument("-o", "--option", action="append", default=[])
    ap.add_argument("--runs-dir", type=Path, default=None)
    ap.add_argument("--timeout-s", type=float, default=3600)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    runs = a.runs_dir or Path(tempfile.mkdtemp(prefix="orchestration-"))
    args = [a.task, "--executor", "slurm", "--profile", a.profile, "--shards", str(a.shards),
            "--runs-dir", str(runs), "-q"]
    if a.dataset:
        args += ["--dataset", a.dataset]
    for o in a.option:
        args += ["-o", o]
    t_submit0 = time.time()
    r, submit_s = launch(*args)
    if r.returncode != 0:
        print(r.stdout + r.stderr, file=sys.stderr)
        return 1
    (rd,) = [p for p in runs.iterdir() if (p / "manifest.json").exists()]
    subs = json.loads((rd / "jobs.json").read_text())["submissions"]
    ids = sorted({s["array_id"] for s in subs})
    # An element may run several shards (docs/configuration.md, "How many start-ups").
    elements = len({j for s in subs for j in s["jobs"].values()})
    _, status_queued_s = launch("status", str(rd), "--json")
    end = time.monotonic() + a.timeout_s
    while active(ids) and time.monotonic() < end:
        time.sleep(2)
    capped = active(ids)
    if capped:  # --timeout-s reached: figures from what ran; the rest is cancelled
        launch("cancel", str(rd))
        while active(ids):
            time.sleep(2)
    _, status_done_s = launch("status", str(rd), "--json")
    _, aggregate_local_s = launch("aggregate", str(rd))
    rows = sacct(ids)
    held = sum(x["elapsed"] for x in rows)
    # Every shard loop of the run's jobs, whichever element ran it (stats.json names it).
    jobs = {x["job"] for x in rows}
    shard_wall, ran_by = 0.0, {}
    for stats in rd.glob("shards/*/*/stats.json"):
        st = json.loads(stats.read_text())
        if st.get("slurm_job") in jobs:
            shard_wall += float(st.get("wall_s") or 0)
            ran_by.setdefault(st["slurm_job"], 0)
            ran_by[st["slurm_job"]] += 1
    last_end = max((x["end"] for x in rows if x["end"]), default=time.time())
    run_wall = last_end - t_submit0
    orchestration = (held - shard_wall) + submit_s
    fig: dict[str, Any] = {
        "task": a.task, "dataset": a.dataset, "shards": a.shards, "stages": len({s["stage"] for s in subs}),
        "array_elements": elements, "arrays": len(ids), "submit_s": round(submit_s, 2),
        "status_queued_s": round(status_queued_s, 2), "status_done_s": round(status_done_s, 2),
        "aggregate_local_s": round(aggregate_local_s, 2),
        "run_wall_s": round(run_wall, 1), "node_time_held_s": round(held, 1),
        "shard_loop_s": round(shard_wall, 1),
        "elements_that_ran_shards": len(ran_by),
        "orchestration_share": round(orchestration / (held + submit_s), 4) if held else None,
        "states": {s: sum(1 for x in rows if x["state"] == s) for s in {x["state"] for x in rows}},
        "capped_at_s": a.timeout_s if capped else None,
        "arrays_latency": {},
    }
    for stage in dict.fromkeys(s["stage"] for s in subs):
        xs = [x for x in rows if x["stage"] == stage and x["start"] and x["eligible"]]
        lat = [x["start"] - x["eligible"] for x in xs]
        first = min((x["start"] for x in xs), default=None)
        sub = min((x["submit"] for x in xs if x["submit"]), default=None)
        gaps = []
        for x in xs:
            before = [y["end"] for y in rows if y["nodes"] == x["nodes"] and y["end"]
                      and y["end"] <= x["start"] and y is not x]
            if before and x["start"] - x["eligible"] > 0:  # it waited: for a slot to free
                gaps.append(x["start"] - max(before))
        fig["arrays_latency"][stage] = {
            "refill_gap_median_s": round(statistics.median(gaps), 2) if gaps else None,
            "refill_gap_p95_s": round(pct(gaps, 0.95), 2) if gaps else None,
            "elements": len(xs), "median_s": round(statistics.median(lat), 2) if lat else None,
            "p95_s": round(pct(lat, 0.95), 2), "max_s": round(max(lat, default=0), 2),
            "first_start_after_submit_s": round(first - sub, 2) if first and sub else None,
            "elapsed_median_s": round(statistics.median([x["elapsed"] for x in xs]), 2) if xs else None}
        if stage == "aggregate" and xs:
            fig["aggregate_job_s"] = xs[0]["elapsed"]
    print(f"{a.task} {a.dataset or ''}: {elements} array elements in {len(ids)} arrays "
          f"({fig['stages']} stages × {a.shards} shards; {len(ran_by)} elements ran shards, "
          f"the rest found theirs taken), run {rd}")
    print(f"submission {fig['submit_s']} s | status --json while queued {fig['status_queued_s']} s, "
          f"after {fig['status_done_s']} s | aggregate job {fig.get('aggregate_job_s')} s, "
          f"`launch aggregate` again {fig['aggregate_local_s']} s")
    for stage, v in fig["arrays_latency"].items():
        print(f"  {stage:10s} scheduling latency (Start−Eligible) median {v['median_s']} s, p95 "
              f"{v['p95_s']} s, max {v['max_s']} s; slot refill gap median {v['refill_gap_median_s']} s, "
              f"p95 {v['refill_gap_p95_s']} s; first start {v['first_start_after_submit_s']} s "
              f"after submit; element elapsed median {v['elapsed_median_s']} s")
    print(f"run wall {fig['run_wall_s']} s; node time held {fig['node_time_held_s']} s, in shard "
          f"loops {fig['shard_loop_s']} s → orchestration share {fig['orchestration_share']:.1%} "
          f"(goal ≤ 5 % on easy with --shards 64); SLURM states {fig['states']}"
          + (f"; stopped (launch cancel) after --timeout-s {a.timeout_s:g}" if capped else ""))
    if a.json:
        a.json.write_text(json.dumps(fig, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
