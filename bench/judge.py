"""Benchmark of the REFUTE judge on the shipped sample (issue 11).

    python bench/judge.py [--inputs 3] [--runs 5] [--problems 12] [--repeat 20]

Prints, side by side:
1. the sandbox's price: milliseconds per run of a trivial C++ and Python program in
   bubblewrap vs. without isolation (``unsafe``), and the ratio;
2. judged inputs per second on the sample (validator + correct solution + up to `runs` runs
   of the wrong solution per input; inputs from each problem's blind generator plus its
   example), with a cold compile cache and again with the warm one, and the compile cache's
   hit rate for each pass.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from veribatch.tasks.refute import data  # noqa: E402
from veribatch.tasks.refute.counterexample import JudgeLimits, judge_input  # noqa: E402
from veribatch.tasks.refute.problem import program, solutions  # noqa: E402
from veribatch.verifiers.judge import STATS, Program, detect_sandbox, run_program  # noqa: E402


def sandbox_overhead(repeat: int, cache: Path, work: Path) -> None:
    box, bare = detect_sandbox("auto"), detect_sandbox("unsafe")
    progs = {"C++": Program.of(_write(work / "t.cpp", "#include <cstdio>\nint main(){puts(\"1\");}\n")),
             "Python": Program.of(_write(work / "t.py", "print(1)\n"))}
    print(f"sandbox: {box.label} vs {bare.label}   ({repeat} runs each)")
    print(f"  {'program':8} {box.kind + ' ms':>10} {'none ms':>10} {'ratio':>7}")
    for name, prog in progs.items():
        ms = {}
        for b in (box, bare):
            run_program(prog, "", cache_dir=cache, sandbox=b)  # compile / warm up
            times = []
            for _ in range(repeat):
                t = time.perf_counter()
                r = run_program(prog, "", cache_dir=cache, sandbox=b)
                times.append(1000 * (time.perf_counter() - t))
                assert r.verdict == "OK", r
            ms[b.kind] = statistics.median(times)
        print(f"  {name:8} {ms[box.kind]:10.1f} {ms['none']:10.1f} {ms[box.kind] / ms['none']:7.2f}")


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def judge_pass(insts: list, inputs: dict[str, list[bytes]], limits: JudgeLimits, cache: Path,
               work: Path) -> tuple[int, float, float, dict[str, int]]:
    box = detect_sandbox("auto")
    h0, m0, e0 = STATS.hits, STATS.misses, STATS.errors
    n, outcomes = 0, {}
    t = time.perf_counter()
    for inst in insts:
        sol = solutions(inst, work / inst.payload["problem_id"])
        for x in inputs[inst.id]:
            j = judge_input(sol, x, limits, cache_dir=cache, sandbox=box)
            outcomes[j.outcome] = outcomes.get(j.outcome, 0) + 1
            n += 1
    wall = time.perf_counter() - t
    hits, total = STATS.hits - h0, STATS.hits - h0 + STATS.misses - m0 + STATS.errors - e0
    return n, wall, hits / total if total else 0.0, outcomes


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench/judge.py")
    ap.add_argument("--inputs", type=int, default=3, help="blind-generator inputs per problem")
    ap.add_argument("--runs", type=int, default=5, help="wrong-solution runs per input")
    ap.add_argument("--problems", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=20, help="runs per sandbox-overhead figure")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-judge-") as tmp:
        root = Path(tmp)
        cache = root / "bin"
        (root / "w").mkdir()
        sandbox_overhead(a.repeat, cache, root / "w")
        insts = data.load("sample", limit=a.problems)
        box = detect_sandbox("auto")
        inputs: dict[str, list[bytes]] = {}
        for inst in insts:
            gen = program(root / "gen", inst.payload["problem_id"], "python",
                          inst.payload["x_blind_generator"])
            xs = [inst.payload["example_input"].encode()]
            xs += [run_program(gen, "", time_s=10, sandbox=box).output.encode() for _ in range(a.inputs)]
            inputs[inst.id] = xs
        limits = JudgeLimits(run_s=5.0, generator_s=10.0, runs=a.runs)
        print(f"\njudging {sum(map(len, inputs.values()))} inputs of {len(insts)} sample problems "
              f"(runs={a.runs}, run limit {limits.run_s:g} s, sandbox {box.label})")
        print(f"  {'pass':6} {'inputs':>6} {'wall s':>8} {'inputs/s':>9} {'cache hit rate':>15}  outcomes")
        rates = []
        for name in ("cold", "warm"):
            n, wall, hit, outcomes = judge_pass(insts, inputs, limits, cache, root / "w")
            rates.append(n / wall)
            print(f"  {name:6} {n:6d} {wall:8.1f} {n / wall:9.2f} {100 * hit:14.1f}%  "
                  + ", ".join(f"{k}={v}" for k, v in sorted(outcomes.items())))
        print(f"  warm/cold throughput: {rates[1] / rates[0]:.2f}x; compile cache overall: "
              f"{STATS.hits} hits, {STATS.misses} misses, {STATS.errors} errors "
              f"({100 * STATS.hit_rate:.1f}% hits)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
