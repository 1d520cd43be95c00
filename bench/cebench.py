"""Build throughput of CE-Bench: counterexamples collected and labelled per CPU-second.

    python bench/cebench.py RUN_DIR [RUN_DIR ...]        # finished build runs, side by side
    python bench/cebench.py --build [--source sample] [--limit N] [--shards S] [--budget-s B]

For each build run (stages collect → label) it prints, from the run's records:

* collection: programs, raw candidates checked, states found, and states per second of
  collection wall time (collection runs in the shard process, one query at a time);
* labelling: counterexamples labelled, the verifier's CPU and wall seconds (as its runner
  measured them, every portfolio process included), **labelled per CPU-second** and per
  wall-second, the same for decided ones (GENUINE/SPURIOUS), the CPU share spent on the
  UNKNOWN ones (runs that hit the budget), and per category;
* the run: shard wall times and the load average while it ran, when ``--load-log`` names
  a file of ``<time> <loadavg>`` lines.

With several runs the columns stand side by side with their ratio to the first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402

from veribatch.aggregate.records import load_run  # noqa: E402

CATEGORIES = ("Inductive", "UNSAT_Pre", "SAT_Pre")


def _per(a: float, b: float) -> float | None:
    return a / b if b else None


def report(run_dir: Path) -> dict[str, Any]:
    """Throughput figures of one build run (only complete shards count)."""
    manifest, stages = load_run(run_dir)
    collect, label = stages["collect"].frame, stages["label"].frame
    progs = collect[collect["kind"] == "program"] if len(collect) else collect
    ces = label[label["kind"] == "counterexample"] if len(label) else label
    decided = ces[ces["label"] != "UNKNOWN"] if len(ces) else ces
    cpu, wall = float(ces["verifier_cpu_s"].sum()), float(ces["verifier_time_s"].sum())
    unknown_cpu = float(ces[ces["label"] == "UNKNOWN"]["verifier_cpu_s"].sum()) if len(ces) else 0.0
    collect_wall = float(pd.to_numeric(progs["collect_time_s"]).sum()) if len(progs) else 0.0
    out: dict[str, Any] = {
        "run_id": manifest.run_id, "verifier": manifest.config["verifier"],
        "budget_s": manifest.config["options"]["budget_s"], "shards": manifest.shards,
        "programs": len(progs),
        "candidates_checked": int(pd.to_numeric(progs.get("candidates_checked"), errors="coerce").fillna(0).sum())
        if len(progs) else 0,
        "states": int(len(collect) - len(progs)), "collect_wall_s": round(collect_wall, 1),
        "states_per_collect_s": _per(len(collect) - len(progs), collect_wall),
        "labelled": len(ces), "decided": len(decided), "verifier_cpu_s": round(cpu, 1),
        "verifier_wall_s": round(wall, 1),
        "labelled_per_cpu_s": _per(len(ces), cpu), "labelled_per_wall_s": _per(len(ces), wall),
        "decided_per_cpu_s": _per(len(decided), cpu),
        "unknown_cpu_share": _per(unknown_cpu, cpu),
        "median_wall_s_decided": statistics.median(decided["verifier_time_s"]) if len(decided) else None,
        "by_category": {},
        "shard_wall_s": {},
    }
    for cat in CATEGORIES:
        part = ces[ces["category"] == cat] if len(ces) else ces
        c = float(part["verifier_cpu_s"].sum()) if len(part) else 0.0
        out["by_category"][cat] = {"labelled": len(part), "decided": int((part["label"] != "UNKNOWN").sum()) if len(part) else 0,
                                   "cpu_s": round(c, 1), "labelled_per_cpu_s": _per(len(part), c)}
    for stage in ("collect", "label"):
        walls = []
        for k in range(int(manifest.shards)):
            try:
                walls.append(json.loads((run_dir / "shards" / stage / str(k) / "stats.json").read_text())["wall_s"])
            except (OSError, ValueError, KeyError):
                walls.append(None)
        out["shard_wall_s"][stage] = walls
    return out


def load_summary(path: Path | None) -> str:
    if path is None or not path.is_file():
        return "n/a"
    one = [float(line.split()[1]) for line in path.read_text().splitlines() if len(line.split()) > 2]
    if not one:
        return "n/a"
    return f"1-min load average: mean {statistics.mean(one):.1f}, max {max(one):.1f} ({len(one)} samples) on {_cores()} cores"


def _cores() -> int:
    import os

    return os.cpu_count() or 0


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
    return str(v)


ROWS = ("programs", "candidates_checked", "states", "collect_wall_s", "states_per_collect_s", "labelled",
        "decided", "verifier_cpu_s", "verifier_wall_s", "labelled_per_cpu_s", "labelled_per_wall_s",
        "decided_per_cpu_s", "unknown_cpu_share", "median_wall_s_decided")


def print_reports(reports: list[dict[str, Any]], load_log: Path | None = None) -> None:
    head = ["figure", *[f"{r['run_id']} ({r['verifier']}, {r['budget_s']:g} s)" for r in reports]]
    if len(reports) > 1:
        head += [f"ratio {i + 1}/1" for i in range(1, len(reports))]
    rows = []
    for key in ROWS:
        vals = [r.get(key) for r in reports]
        ratios = [(_per(float(v), float(vals[0])) if isinstance(v, int | float) and isinstance(vals[0], int | float)
                   else None) for v in vals[1:]]
        rows.append([key, *map(_fmt, vals), *map(_fmt, ratios)])
    for cat in CATEGORIES:
        vals = [r["by_category"][cat]["labelled_per_cpu_s"] for r in reports]
        rows.append([f"labelled_per_cpu_s[{cat}]", *map(_fmt, vals)])
        rows.append([f"decided/labelled[{cat}]", *[f"{r['by_category'][cat]['decided']}/{r['by_category'][cat]['labelled']}"
                                                   for r in reports]])
    for stage in ("collect", "label"):
        rows.append([f"shard wall s [{stage}]", *[", ".join(_fmt(w) for w in r["shard_wall_s"][stage]) for r in reports]])
    widths = [max(len(str(row[i])) if i < len(row) else 0 for row in [head, *rows]) for i in range(len(head))]
    for row in [head, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)))
    print(load_summary(load_log))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path, help="finished build run directories")
    ap.add_argument("--build", action="store_true", help="run a build first (local executor)")
    ap.add_argument("--source", default="sample")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=100.0)
    ap.add_argument("--runs-dir", type=Path, default=Path("/tmp/veribatch-bench-cebench"))
    ap.add_argument("--load-log", type=Path, default=None, help="file of '<time> <loadavg ...>' lines")
    args = ap.parse_args(argv)
    runs = list(args.runs)
    if args.build:
        from veribatch.launch.run_control import ExecChoice, launch_run, plan_run

        plan = plan_run("cebench", dataset=args.source, options=[f"budget_s={args.budget_s}"],
                        shards=args.shards, limit=args.limit)
        t0 = time.monotonic()
        out = launch_run(plan, args.runs_dir / plan.run_id, ExecChoice("local"), progress=False)
        print(f"built {plan.run_id} in {time.monotonic() - t0:.1f} s wall ({'complete' if out.ok else 'INCOMPLETE'})")
        runs.insert(0, out.rd.root)
    if not runs:
        ap.error("give build run directories, or --build")
    print_reports([report(r) for r in runs], args.load_log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
