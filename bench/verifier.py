"""Benchmark of the embedded Z3 verifier on InvBench (issue 3).

    python bench/verifier.py [--timeout 60] [--jobs 2] [--split easy|training] [--limit N]

Prints: decided rate, wrong verdicts against UAutomizer's (must be 0), median/p90
wall time, the reasons that keep the rest undecided (grouped by construct), and
candidate-check latency (median ms per `check_candidate` on the training set's
UAutomizer invariants).  Exit code 1 when any verdict is wrong.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from verifiers import cfront  # noqa: E402
from verifiers.base import FinishedRun, Query  # noqa: E402
from verifiers.result import Limits  # noqa: E402
from verifiers.z3 import Z3Tool  # noqa: E402
from verifiers.z3c import api  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "invbench" / "Dataset"


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def _reason_group(reason: str | None) -> str:
    if not reason:
        return "?"
    m = re.search(r"unsupported: (.*?)(?: \(line \d+\))?$", reason)
    if m:
        return re.sub(r"'[^']*'", "'…'", m.group(1))
    if reason.startswith("parse error"):
        return "parse error"
    if reason.startswith("no decision within"):
        return "timeout"
    return reason[:80]


def run_split(split: str, timeout: float, jobs: int, limit: int | None) -> int:
    if split == "easy":
        folder = DATA / "Evaluation" / "Easy"
        timing = json.loads((DATA / "Evaluation" / "timing_easy.json").read_text())
    else:
        folder = DATA / "Training" / "Programs"
        timing = json.loads((DATA / "Training" / "timing.json").read_text())
    expected = {row["file"]: row["result"] for row in timing}
    files = sorted(f for f in expected if (folder / f).exists())
    if limit:
        files = files[:limit]

    tool = Z3Tool()
    exe = tool.executable()

    def one(name: str):
        # The production path: the tool's own command line in a separate process.
        argv = tool.cmdline(exe, Query((folder / name,)), Limits(wall_s=timeout + 1), folder)
        t0 = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 60,
                              cwd=REPO)
        wall = time.monotonic() - t0
        verdict = tool.determine_result(FinishedRun(proc.returncode, None, proc.stdout, "exit"))
        return name, verdict, wall

    t_start = time.monotonic()
    results = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for i, (name, res, wall) in enumerate(pool.map(one, files), start=1):
            results.append((name, res, wall))
            mark = "WRONG" if res.status.decided and str(res.status) != expected[name] else ""
            print(f"[{i:4d}/{len(files)}] {name:45s} {res.status!s:8s} {wall:6.2f}s "
                  f"(expected {expected[name]}) {mark} {res.reason or ''}"[:200], flush=True)
    decided = [r for r in results if r[1].status.decided]
    wrong = [r for r in decided if str(r[1].status) != expected[r[0]]]
    times = [w for _, _, w in results]
    dtimes = [w for _, r, w in results if r.status.decided]
    groups = collections.Counter(
        _reason_group(r.reason) for _, r, _ in results if not r.status.decided
    )
    by_status = collections.Counter(str(r.status) for _, r, _ in results)
    print()
    print(f"split={split} programs={len(results)} timeout={timeout:g}s jobs={jobs} "
          f"elapsed={time.monotonic() - t_start:.0f}s")
    print(f"statuses: {dict(by_status)}")
    print(f"decided: {len(decided)}/{len(results)} = {100 * len(decided) / max(1, len(results)):.1f}%"
          f"  (TRUE {sum(1 for r in decided if r[1].status.value == 'TRUE')},"
          f" FALSE {sum(1 for r in decided if r[1].status.value == 'FALSE')})")
    print(f"wrong verdicts: {len(wrong)}" + (f"  {[w[0] for w in wrong]}" if wrong else ""))
    print(f"wall time all: median {statistics.median(times):.2f}s p90 {_pct(times, 0.9):.2f}s")
    if dtimes:
        print(f"wall time decided: median {statistics.median(dtimes):.2f}s "
              f"p90 {_pct(dtimes, 0.9):.2f}s")
    print("undecided, by reason:")
    for g, n in groups.most_common():
        print(f"  {n:4d}  {g}")
    return len(wrong)


def candidate_latency(n_programs: int) -> None:
    invs = json.loads((DATA / "Training" / "invariants.json").read_text())
    folder = DATA / "Training" / "Programs"
    lat: list[float] = []
    outcomes: collections.Counter[str] = collections.Counter()
    for name in sorted(invs)[:n_programs]:
        text = (folder / name).read_text(errors="replace")
        try:
            sites = cfront.loop_sites(cfront.parse(text))
        except cfront.CParseError:
            outcomes["parse error"] += 1
            continue
        for inv in invs[name]:
            site = min(sites, key=lambda s: abs(s.line - inv["line"]), default=None)
            if site is None:
                outcomes["no loop"] += 1
                continue
            try:
                api.check_candidate(text, site.label, inv["invariant"], 1000)  # warm the cache
                t0 = time.perf_counter()
                res = api.check_candidate(text, site.label, inv["invariant"], 1000)
                lat.append((time.perf_counter() - t0) * 1000)
                outcomes["ok" if res.ok else f"failed {res.failed}"] += 1
            except (api.CandidateError, api.Unsupported) as exc:
                outcomes[type(exc).__name__] += 1
    print()
    print(f"candidate checks: {len(lat)} on {n_programs} training programs; "
          f"latency median {statistics.median(lat):.1f} ms, p90 {_pct(lat, 0.9):.1f} ms "
          "(encoding cached per program)")
    print(f"candidate outcomes: {dict(outcomes)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--split", choices=("easy", "training"), default="easy")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--candidates", type=int, default=200, help="training programs for latency")
    args = ap.parse_args()
    wrong = run_split(args.split, args.timeout, args.jobs, args.limit)
    if args.candidates:
        candidate_latency(args.candidates)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
