"""Re-measure the shipped sample: verdict and median solve time of each program, by the
toolkit's own verifier (default: the embedded z3), written to ``sample/reference.json``.

The sample's reference is measured, never typed in: ``launch invbench measure-sample`` (or
``python -m veribatch.tasks.invbench.measure``) runs this after a program or the verifier changed.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from veribatch.tasks.invbench.data import SAMPLE_DIR, SAMPLE_REFERENCE


def measure_sample(
    *, verifier: str = "z3", budget_s: float = 60.0, repeats: int = 3, out: Path = SAMPLE_REFERENCE
) -> dict[str, Any]:
    from veribatch.verifiers.base import Query
    from veribatch.verifiers.registry import get_verifier
    from veribatch.verifiers.result import Limits

    v = get_verifier(verifier)
    programs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="invbench-measure-") as tmp:
        for path in sorted(SAMPLE_DIR.glob("*.c")):
            times, statuses = [], set()
            for r in range(repeats):
                res = v.run(Query(files=(path,)), Limits(wall_s=budget_s), Path(tmp) / f"{path.stem}-{r}")
                statuses.add(str(res.status))
                times.append(res.wall_s)
            if len(statuses) != 1 or not statuses <= {"TRUE", "FALSE"}:
                raise RuntimeError(f"{path.name}: {verifier} gave {sorted(statuses)} over {repeats} runs")
            programs[path.name] = {"verdict": statuses.pop(), "time_s": round(statistics.median(times), 4),
                                   "times_s": [round(t, 4) for t in times]}
    ref = {
        "tool": verifier,
        "tool_version": v.version,
        "budget_s": budget_s,
        "repeats": repeats,
        "measured": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {platform.system()} {platform.release()}",
        "programs": programs,
    }
    out.write_text(json.dumps(ref, indent=1, sort_keys=True) + "\n")
    return ref


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m veribatch.tasks.invbench.measure", description=__doc__)
    ap.add_argument("--verifier", default="z3")
    ap.add_argument("--budget-s", type=float, default=60.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    ref = measure_sample(verifier=args.verifier, budget_s=args.budget_s, repeats=args.repeats)
    for name, row in ref["programs"].items():
        print(f"{name:24} {row['verdict']:5} {row['time_s']:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
