"""The escape suite's figures: tried / held / escaped per attack class, as root and as nobody.

Runs `tests/support/escape_suite.py` (attacks on the judge's box and on `launch serve`
through the project's own entry points; see its docstring for the classes) once as root
and once as the unprivileged user nobody (uid 65534, via setpriv), against this checkout
or, with ``--repo`` / ``$VERIBATCH_BENCH_REPO``, another one (before/after a change), and
prints one line per class and user plus every attack that got through.

Usage (as root):
    python bench/escapes.py [--repo /work/main] [--who root nobody] [--classes kmem cpu ...]
                            [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.escape_suite import CLASSES, run_suite, summarize  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(prog="python bench/escapes.py")
    ap.add_argument("--repo", type=Path, default=Path(os.environ.get("VERIBATCH_BENCH_REPO", REPO)),
                    help="the checkout whose veribatch package is attacked")
    ap.add_argument("--who", nargs="+", default=["root", "nobody"], choices=["root", "nobody"])
    ap.add_argument("--json", type=Path, help="write every attack's result here")
    ap.add_argument("--classes", nargs="+", default=[], choices=CLASSES,
                    help="only these classes (default: all)")
    a = ap.parse_args()
    print(f"checkout: {a.repo.resolve()}", flush=True)
    everything: dict[str, list[dict]] = {}
    for who in a.who:
        t = time.monotonic()
        results = run_suite(who, a.repo.resolve(), classes=tuple(a.classes))
        everything[who] = results
        s = summarize(results)
        total = {k: sum(v[k] for v in s.values()) for k in ("tried", "held", "escaped", "error")}
        print(f"\n== as {who} ({time.monotonic() - t:.0f} s) ==")
        print(f"{'class':<10} {'tried':>5} {'held':>5} {'escaped':>7} {'not run':>7}")
        for c in [*(a.classes or CLASSES), "total"]:
            v = total if c == "total" else s[c]
            print(f"{c:<10} {v['tried']:>5} {v['held']:>5} {v['escaped']:>7} {v['error']:>7}")
        mechanisms = {r["memory_limit_by"] for r in results if r.get("memory_limit_by")}
        print(f"memory limit enforced by: {'; '.join(sorted(mechanisms)) or '(not recorded)'}")
        for r in results:
            if r["escaped"] or r.get("error"):
                what = "NOT RUN" if r.get("error") else "ESCAPED"
                print(f"  {what} {r['class']}: {r['name']} via {r['entry']}: {r['detail'][:240]}")
    if a.json:
        a.json.write_text(json.dumps(everything, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
