"""The embedded verifier beside UAutomizer on the same machine, in one run (issue 27).

    python bench/verifier.py --against uautomizer [--sample 12] [--seed 0] [--timeout 60]
                             [--against-timeout 300] [--json OUT]
    python bench/verifier_against.py ...          (the same)

The embedded verifier's claim is "≥ 10× faster than UAutomizer with 0 wrong".  This measures
it side by side on a seeded sample of InvBench-Easy: per program both verdicts and wall
times, each query through the production path (`get_verifier(name).run`: fork server,
runner, limits), one query at a time so neither shares the cores with the other (UAutomizer
keeps ~2 busy).  Prints the table, the median ratio UAutomizer/z3 over the programs both
decided, and every disagreement — with each other or with InvBench's published label —
with what explains it (a published label from a run that checked no specification, a
bitwise program UAutomizer cannot finish without MathSAT, a reason of either tool).
Needs the real UAutomizer (``eval "$(../shared/tools/uautomizer-0.2.3/setup.sh)"``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
REPO = Path(os.environ.get("VERIBATCH_BENCH_REPO") or HERE).resolve()
sys.path.insert(0, str(REPO))

from veribatch.verifiers.base import Query  # noqa: E402
from veribatch.verifiers.registry import get_verifier  # noqa: E402
from veribatch.verifiers.result import Limits, VerifierResult  # noqa: E402
from veribatch.verifiers.uautomizer import checks_no_specification  # noqa: E402

DATA = Path(os.environ.get("VERIBATCH_SHARED_DATA") or HERE.parent / "shared" / "data") \
    / "invbench" / "Dataset"


def explain(name: str, published: str, ours: VerifierResult, theirs: VerifierResult, program: str) -> str:
    """Why the two verifiers (or one of them and the published label) differ on `name`."""
    why: list[str] = []
    vacuous = checks_no_specification(program)
    if vacuous is not None:
        why.append(f"published {published} rests on a UAutomizer run that checked no specification ({vacuous})")
    if "mathsat" in (theirs.reason or "").lower():
        why.append("UAutomizer's bit-precise retry needs MathSAT (not in the rebuilt tool)")
    for label, res in (("z3", ours), ("uautomizer", theirs)):
        if not res.status.decided:
            why.append(f"{label} {res.status}: {(res.reason or '')[:160]}")
        elif str(res.status) != published:
            evidence = "gcc replayed its counterexample into reach_error" if label == "z3" and \
                "reach_error reached" in str((res.extras.get("counterexample") or {}).get("replay")) else "unchecked"
            why.append(f"{label} {res.status} against the published {published} ({evidence})")
    return "; ".join(why) or "?"


def compare(sample: int, seed: int, timeout: float, against_timeout: float, against: str = "uautomizer",
            out: Path | None = None) -> int:
    folder = DATA / "Evaluation" / "Easy"
    timing = {r["file"]: r for r in json.loads((DATA / "Evaluation" / "timing_easy.json").read_text())}
    files = sorted(random.Random(seed).sample(sorted(timing), min(sample, len(timing))))
    z3, other = get_verifier("z3"), get_verifier(against)
    print(f"code: {REPO}; {len(files)} of Easy (seed {seed}); z3 {z3.version}; {against} {other.version}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; one query at a time; "
          f"wall limits z3 {timeout:g} s, {against} {against_timeout:g} s (no CPU cap)")
    logs = Path(tempfile.mkdtemp(prefix="vb-bench-against-"))
    rows: list[dict[str, Any]] = []
    print(f"\n| program | published (s) | z3 | s | {against} | s | ratio | load |\n"
          "|---|---|---|---|---|---|---|---|")
    for name in files:
        load = os.getloadavg()[0]  # the 1-minute load both queries of the row start under
        q = Query((folder / name,))
        ours = z3.run(q, Limits(wall_s=timeout), logs / "z3" / name)
        theirs = other.run(q, Limits(wall_s=against_timeout, memory_mb=16384), logs / against / name)
        both = ours.status.decided and theirs.status.decided
        ratio = theirs.wall_s / ours.wall_s if both and ours.wall_s > 0 else None
        published = timing[name]["result"]
        row = {"file": name, "published": published, "published_s": round(timing[name]["time"], 2),
               "z3": str(ours.status), "z3_s": ours.wall_s, "z3_reason": ours.reason,
               against: str(theirs.status), f"{against}_s": theirs.wall_s, f"{against}_reason": theirs.reason,
               "ratio": ratio, "load": round(load, 1)}
        if (both and ours.status != theirs.status) or any(
                r.status.decided and str(r.status) != published for r in (ours, theirs)) or not both:
            row["explained"] = explain(name, published, ours, theirs, (folder / name).read_text(errors="replace"))
        rows.append(row)
        print(f"| {name} | {published} ({row['published_s']:.1f}) | {ours.status} | {ours.wall_s:.2f} | "
              f"{theirs.status} | {theirs.wall_s:.2f} | {f'{ratio:.1f}×' if ratio else '–'} | {load:.1f} |",
              flush=True)
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    wrong = [r for r in rows if r["z3"] in ("TRUE", "FALSE") and r[against] in ("TRUE", "FALSE")
             and r["z3"] != r[against]]
    print(f"\nboth decided: {len(ratios)} of {len(rows)}; median ratio {against}/z3 "
          f"{statistics.median(ratios):.1f}× (min {min(ratios):.1f}×, max {max(ratios):.1f}×)" if ratios
          else "\nno program decided by both")
    print(f"z3 decided {sum(r['z3'] in ('TRUE', 'FALSE') for r in rows)}, {against} "
          f"{sum(r[against] in ('TRUE', 'FALSE') for r in rows)}; verdicts that contradict each other: {len(wrong)}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    for r in rows:
        if "explained" in r:
            print(f"- {r['file']}: z3 {r['z3']}, {against} {r[against]}, published {r['published']}: {r['explained']}")
    if out is not None:
        out.write_text(json.dumps({"seed": seed, "sample": sample, "rows": rows,
                                   "median_ratio": statistics.median(ratios) if ratios else None}, indent=1))
    return 1 if wrong else 0


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--against-timeout", type=float, default=300.0, help="UAutomizer's wall limit per program")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", choices=("uautomizer",), default="uautomizer")
    ap.add_argument("--sample", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60.0, help="the embedded verifier's wall limit")
    add_arguments(ap)
    args = ap.parse_args(argv)
    return compare(args.sample, args.seed, args.timeout, args.against_timeout, args.against, args.json)


if __name__ == "__main__":
    sys.exit(main())
