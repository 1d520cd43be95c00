"""Benchmark of the embedded Z3 verifier on InvBench (issues 3 and 9).

    python bench/verifier.py [--timeout 60] [--jobs 2] [--split easy|training] [--limit N]
                             [--sample N [--seed S]]
                             [--floor 20] [--candidates 200]

Every query goes through the production path — `verifiers.registry.get_verifier("z3")`
→ `Verifier.run` → the runner (fork server, limits, log files) — so the figures are
what a shard pays.  Prints:

- the **floor**: wall time of a trivial program (`TRIVIAL`: one unreachable error call),
  median and p90 over `--floor` queries, beside the same program solved in this
  process (no process at all) — their difference is the per-query overhead;
- on the split: decided rate, wrong verdicts against UAutomizer's (must be 0; a
  gcc-confirmed FALSE against a label with a cause — a published run known to have
  checked nothing, a file that needed repair, or Wonda's recorded re-run of
  UAutomizer answering FALSE too — is listed apart with its cause, not counted wrong),
  median/p90 wall time (all, decided), and the floor again beside the median, the
  reasons that keep the rest undecided (grouped by construct);
- candidate-check latency (median ms per `check_candidate` on the training set's
  UAutomizer invariants).

Exit code 1 when any verdict is wrong.  To compare an older checkout, run this file
with ``VERIBATCH_BENCH_REPO=/path/to/checkout`` (only `Verifier.run` is needed there).
"""

from __future__ import annotations

import argparse
import collections
import json
import os  # noqa: E402
import random
import re
import statistics
import sys
import tempfile  # noqa: E402
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
REPO = Path(os.environ.get("VERIBATCH_BENCH_REPO") or HERE).resolve()
sys.path.insert(0, str(REPO))
# The verifier runs in a fork server started as `python -m`, which imports from its cwd
# and then PYTHONPATH before the installed package: both must name the checkout measured,
# or an older checkout's figures are the installed code's.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])

from veribatch.verifiers import cfront  # noqa: E402
from veribatch.verifiers.base import Query  # noqa: E402
from veribatch.verifiers.registry import get_verifier  # noqa: E402
from veribatch.verifiers.result import Limits  # noqa: E402
from veribatch.verifiers.z3c import api, portfolio  # noqa: E402

DATA = Path(os.environ.get("VERIBATCH_SHARED_DATA") or HERE.parent / "shared" / "data") \
    / "invbench" / "Dataset"
# Trivial, but with an error call to rule out, so a portfolio member really runs.
TRIVIAL = ("extern void reach_error(void);\n"
           "int main(void) { int x = 0; if (x != 0) reach_error(); return 0; }\n")
_FLOOR: dict[str, float] = {}


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def _reason_group(reason: str | None) -> str:
    if not reason:
        return "?"
    m = re.search(r"unsupported: (.*?)(?: \(line \d+\).*)?$", reason)
    if m:
        group = re.sub(r"'[^']*'", "'…'", m.group(1))
        # memory constructs: outside the Horn encoding, BMC alone found no counterexample
        return group + (" [BMC only: no counterexample]" if "model checking alone" in reason else "")
    if reason.startswith("parse error"):
        return "parse error"
    if reason.startswith("no decision within"):
        return "timeout"
    return reason[:80]


def _disputed_labels(expected: dict[str, str]) -> dict[str, str]:
    """Easy files where Wonda's recorded re-run of UAutomizer decided against InvBench's label."""
    path = DATA.parents[1] / "wonda" / "wonda-eval-invbench-easy.json"
    if not path.exists():
        return {}
    return {r["file"]: r["baseline_decision"] for r in json.loads(path.read_text())
            if r["baseline_decision"] in ("TRUE", "FALSE")
            and expected.get(r["file"], r["baseline_decision"]) != r["baseline_decision"]}


# Published TRUE labels that rest on a UAutomizer run that checked nothing (issue 21,
# re-run with UAutomizer 0.2.3: "the program does not contain any specification").
_VACUOUS_LABELS = {
    "prodbin-ll_unwindbound2_3.c": "its header comment lost its */, so the whole file is a "
                                   "comment: UAutomizer checked no specification",
    "dll-rb-cnstr_1-2_4.c": "it includes <assert.h>: UAutomizer 0.2.3 prints \"the program does "
                            "not contain any specification\"",
}


def _dispute_cause(name: str, res, rerun: str | None) -> str | None:
    """Why a verdict against the published label is not counted wrong, or None (it is wrong).

    Only a FALSE that gcc replayed into reach_error may stand against a label, and only
    with a cause: a label known to rest on a run that checked nothing, an input the
    verifier had to repair (a lost `*/`: as published, the program is all comment),
    or Wonda's recorded re-run of UAutomizer answering FALSE too.
    """
    cex = (res.extras or {}).get("counterexample") or {}
    if str(res.status) != "FALSE" or "reach_error reached" not in str(cex.get("replay")):
        return None
    causes = []
    if name in _VACUOUS_LABELS:
        causes.append(_VACUOUS_LABELS[name])
    elif (res.extras or {}).get("input_repaired"):
        causes.append(f"the published file needed repair ({res.extras['input_repaired']})")
    if rerun == "FALSE":
        causes.append("Wonda's recorded re-run of UAutomizer answers FALSE")
    return "; ".join(causes) or None


def _certified(res) -> bool:
    """TRUE from a re-checked proof (Spacer/templates, or a complete unrolling), FALSE from a
    trace gcc replayed into reach_error: what issue 21 asks of every verdict."""
    extras = res.extras or {}
    if str(res.status) == "TRUE":
        return extras.get("proof_checked") is True and bool(extras.get("proof"))
    cex = extras.get("counterexample") or {}
    return "reach_error reached" in str(cex.get("replay"))


def _decider(res) -> str:
    """Which member decided, in which of its slices (``by templates@5``: the portfolio's
    sixth slice): where the time before a verdict went."""
    log = (res.extras or {}).get("portfolio") or []
    if not res.status.decided or not log:
        return ""
    return f"by {log[-1].get('member')}@{len(log) - 1} "


def run_split(split: str, timeout: float, jobs: int, limit: int | None,
              sample: int | None = None, seed: int = 0, match: str | None = None) -> int:
    if split == "easy":
        folder = DATA / "Evaluation" / "Easy"
        timing = json.loads((DATA / "Evaluation" / "timing_easy.json").read_text())
    else:
        folder = DATA / "Training" / "Programs"
        timing = json.loads((DATA / "Training" / "timing.json").read_text())
    expected = {row["file"]: row["result"] for row in timing}
    disputed = _disputed_labels(expected) if split == "easy" else {}  # Wonda re-ran Easy only
    files = sorted(f for f in expected if (folder / f).exists())
    if match:  # one family or a few (`--match '^(egcd|fermat)'`), before any sample
        files = [f for f in files if re.search(match, f)]
    if sample:  # a seeded random sample of the split (the first N are not representative)
        files = sorted(random.Random(seed).sample(files, min(sample, len(files))))
    if limit:
        files = files[:limit]

    verifier = get_verifier("z3")
    logs = Path(tempfile.mkdtemp(prefix="vb-bench-verifier-"))

    def one(name: str):
        # The production path: what a shard's verifier query costs, start-up included.
        t0 = time.monotonic()
        res = verifier.run(Query((folder / name,)), Limits(wall_s=timeout + 1), logs / name)
        return name, res, time.monotonic() - t0

    t_start = time.monotonic()
    results = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for i, (name, res, wall) in enumerate(pool.map(one, files), start=1):
            results.append((name, res, wall))
            mark = "WRONG" if res.status.decided and str(res.status) != expected[name] else ""
            if mark and _dispute_cause(name, res, disputed.get(name)):
                mark = "DISPUTED-LABEL"
            print(f"[{i:4d}/{len(files)}] {name:45s} {res.status!s:8s} {wall:6.2f}s "
                  f"(expected {expected[name]}) {mark} {_decider(res)}{res.reason or ''}"[:200],
                  flush=True)
    decided = [r for r in results if r[1].status.decided]
    against = [r for r in decided if str(r[1].status) != expected[r[0]]]
    causes = {r[0]: _dispute_cause(r[0], r[1], disputed.get(r[0])) for r in against}
    wrong = [r for r in against if not causes[r[0]]]
    times = [w for _, _, w in results]
    dtimes = [w for _, r, w in results if r.status.decided]
    groups = collections.Counter(
        _reason_group(r.reason) for _, r, _ in results if not r.status.decided
    )
    by_status = collections.Counter(str(r.status) for _, r, _ in results)
    print()
    print(f"split={split} programs={len(results)}"
          + (f" (seeded sample: --sample {sample} --seed {seed})" if sample else "")
          + f" timeout={timeout:g}s jobs={jobs} "
          f"elapsed={time.monotonic() - t_start:.0f}s")
    print(f"statuses: {dict(by_status)}")
    print(f"decided: {len(decided)}/{len(results)} = {100 * len(decided) / max(1, len(results)):.1f}%"
          f"  (TRUE {sum(1 for r in decided if r[1].status.value == 'TRUE')},"
          f" FALSE {sum(1 for r in decided if r[1].status.value == 'FALSE')})")
    print(f"wrong verdicts: {len(wrong)}" + (f"  {[w[0] for w in wrong]}" if wrong else ""))
    bare = [r[0] for r in decided if not _certified(r[1])]
    print(f"verdicts without a certificate (TRUE: re-checked proof; FALSE: gcc replay): "
          f"{len(bare)}" + (f"  {bare}" if bare else ""))
    if len(against) > len(wrong):
        print(f"disputed labels (against InvBench's published verdict: {len(against)}; "
              f"{len(against) - len(wrong)} are gcc-confirmed FALSE against a label with a cause):")
        for name, cause in sorted(causes.items()):
            if cause:
                print(f"  {name}: label {expected[name]}, gcc replays reach_error; {cause}")
    print(f"wall time all: median {statistics.median(times):.2f}s p90 {_pct(times, 0.9):.2f}s")
    if dtimes:
        print(f"wall time decided: median {statistics.median(dtimes):.2f}s "
              f"p90 {_pct(dtimes, 0.9):.2f}s")
    if _FLOOR:
        print(f"floor {1000 * _FLOOR['median']:.0f} ms  vs  median solve time (decided) "
              f"{1000 * statistics.median(dtimes or [float('nan')]):.0f} ms  "
              f"(floor = {100 * _FLOOR['median'] / statistics.median(dtimes or [1]):.0f}% of it)")
    print("undecided, by reason:")
    for g, n in groups.most_common():
        print(f"  {n:4d}  {g}")
    return len(wrong)


def floor(n: int) -> None:
    """Per-query overhead: a trivial program through the production path vs in this process."""
    verifier = get_verifier("z3")
    tmp = Path(tempfile.mkdtemp(prefix="vb-bench-floor-"))
    prog = tmp / "trivial.c"
    prog.write_text(TRIVIAL)
    first_t0 = time.monotonic()
    first = verifier.run(Query((prog,)), Limits(wall_s=30), tmp / "first")
    first_s = time.monotonic() - first_t0
    walls: list[float] = []
    tool_walls: list[float] = []
    for i in range(n):
        t0 = time.monotonic()
        res = verifier.run(Query((prog,)), Limits(wall_s=30), tmp / f"q{i}")
        walls.append(time.monotonic() - t0)
        tool_walls.append(res.wall_s)
        assert res.status.value == "TRUE", res
    inproc: list[float] = []
    for _ in range(max(3, n // 2)):
        t0 = time.monotonic()
        portfolio.verify_text(TRIVIAL, 30, in_process=True)
        inproc.append(time.monotonic() - t0)
    med, solve = statistics.median(walls), statistics.median(inproc[1:])
    _FLOOR["median"] = med
    enforced = getattr(res, "limits_enforced_by", None) or "process group (direct child)"
    print(f"floor: trivial program through Verifier.run, {n} queries: median {1000 * med:.0f} ms, "
          f"p90 {1000 * _pct(walls, 0.9):.0f} ms (tool wall median "
          f"{1000 * statistics.median(tool_walls):.0f} ms); first query {1000 * first_s:.0f} ms "
          f"({first.status}, start-up paid once)")
    print(f"floor: same program solved in this process: median {1000 * solve:.1f} ms  →  "
          f"per-query overhead {1000 * (med - solve):.0f} ms  [{enforced}]")


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
    ap.add_argument("--sample", type=int, default=None, help="a random sample of N programs")
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed")
    ap.add_argument("--match", default=None,
                    help="only the programs whose file name this regular expression matches")
    ap.add_argument("--candidates", type=int, default=200, help="training programs for latency")
    ap.add_argument("--floor", type=int, default=20, help="queries of a trivial program (0: skip)")
    ap.add_argument("--floor-only", action="store_true", help="measure the floor and stop")
    ap.add_argument("--against", choices=("uautomizer",), default=None,
                    help="side by side with the real UAutomizer instead (bench/verifier_against.py)")
    import verifier_against  # beside this file

    verifier_against.add_arguments(ap)
    args = ap.parse_args()
    if args.json:  # resolved before the chdir; `compare` writes it with Path.write_text
        args.json = Path(args.json).resolve()
    os.chdir(REPO)  # the fork server's `python -m` puts its cwd first on sys.path
    if args.against:
        return verifier_against.compare(args.sample or 12, args.seed, args.timeout, args.against_timeout,
                                        args.against, args.json)
    print(f"code: {REPO}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if args.floor:
        floor(args.floor)
    if args.floor_only:
        return 0
    wrong = run_split(args.split, args.timeout, args.jobs, args.limit, args.sample, args.seed,
                      args.match)
    if args.candidates:
        candidate_latency(args.candidates)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
