"""Start-up cost of `launch --help` and `launch status` (issue 8: < 0.3 s, so polling is cheap).

Runs each command N times in a fresh interpreter and prints, side by side with a bare
`python -c pass`: the wall time and the CPU time (user + sys, from rusage — far less
sensitive to other load on a shared machine than wall time), min and median, and the
`-X importtime` sum of the top-level imports with its largest entries.  `status` runs on
a synthetic 1,000-shard × 2-stage run directory (no squeue/sacct involved: --no-live).

Usage: python bench/startup.py [--repeat 7] [--tree PATH ...]   (trees to compare, e.g.
another checkout; default: this one)
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def synthetic_run(root: Path, tree: Path) -> Path:
    """A complete 1,000-shard selftest run, written through launch's own planner."""
    code = (
        "import sys; from pathlib import Path\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from bench.overhead import synthetic_run\n"
        "synthetic_run(Path(sys.argv[2]), 1000)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tree), str(root)], check=True, cwd=tree,
                   env={**os.environ, "PYTHONPATH": str(tree)})
    return root


def timed(argv: list[str], env: dict[str, str], repeat: int,
          cwd: Path) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        # cwd = the tree: `python -m` puts the working directory first on sys.path
        subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def import_profile(argv: list[str], env: dict[str, str],
                   cwd: Path) -> tuple[float, list[tuple[str, float]]]:
    r = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], env=env, cwd=cwd,
                       capture_output=True, text=True)
    top: dict[str, float] = {}
    for line in r.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if m and len(m.group(2)) == 1:
            top[m.group(3)] = int(m.group(1)) / 1000
    return sum(top.values()), sorted(top.items(), key=lambda kv: -kv[1])[:4]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--tree", type=Path, action="append", default=None)
    a = ap.parse_args()
    trees = a.tree or [REPO]
    with tempfile.TemporaryDirectory() as tmp:
        run = synthetic_run(Path(tmp) / "run", REPO)
        rows = [("python -c pass", REPO, [sys.executable, "-c", "pass"])]
        for tree in trees:
            rows += [(f"launch --help [{tree}]", tree, [sys.executable, "-m", "veribatch", "--help"]),
                     (f"launch status 1000x2 [{tree}]", tree,
                      [sys.executable, "-m", "veribatch", "status", str(run), "--no-live"]),
                     (f"launch status --json [{tree}]", tree,
                      [sys.executable, "-m", "veribatch", "status", str(run), "--json", "--no-live"])]
        print(f"{'command':60} {'wall min':>9} {'wall med':>9} {'cpu min':>8} {'cpu med':>8}"
              f" {'imports':>8}  largest top-level imports (ms)")
        for label, tree, argv in rows:
            env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "120"}
            walls, cpus = timed(argv, env, a.repeat, tree)
            imp, big = import_profile(argv, env, tree) if "launch" in argv else (0.0, [])
            print(f"{label:60} {min(walls):9.3f} {statistics.median(walls):9.3f} "
                  f"{min(cpus):8.3f} {statistics.median(cpus):8.3f} {imp / 1000:8.3f}  "
                  + ", ".join(f"{k} {v:.0f}" for k, v in big))
    return 0


if __name__ == "__main__":
    sys.exit(main())
