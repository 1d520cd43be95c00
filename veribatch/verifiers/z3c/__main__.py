"""`python -m veribatch.verifiers.z3c FILE --timeout S --json`: the embedded verifier's command line.

Prints one JSON object (``--json``) or a readable line.  Exit code 0 whatever the
verdict; 2 when the file cannot be read.  ``--member NAME`` runs a single
portfolio member in this process (how a multi-threaded caller runs slices).

`main(argv)` is also what the runner's fork server calls in a fork of its warm
interpreter (`verifiers.z3c.tool.EmbeddedZ3Tool.warm_module`), after `warm_up` ran once there:
the same command line and output, without a fresh Python and z3 import per query.
"""

from __future__ import annotations

import time

_T0 = time.monotonic()  # a member's slice counts from here: imports and parsing are in it

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import z3  # noqa: E402

from veribatch.verifiers.z3c import engines, portfolio  # noqa: E402

WARM_UP_PROGRAM = """extern void reach_error(void);
extern int __VERIFIER_nondet_int(void);
int main() {
  int n = __VERIFIER_nondet_int(); int i = 0; int s = 0;
  if (n < 0 || n > 100) return 0;
  while (i < n) { s = s + 2; i = i + 1; }
  if (s != 2 * n) reach_error();
  return 0;
}
"""


def warm_up() -> None:
    """Run every member once, so the lazily initialised parts of z3 and of the C front end
    (parser tables, Spacer, the NLA solver, tactics) are ready before the first fork."""
    for member in engines.MEMBERS:
        portfolio.run_member_safely(member, WARM_UP_PROGRAM, 5.0, "ILP32")
    portfolio.check_supported(WARM_UP_PROGRAM, "ILP32", "<warm-up>")
    # Then a new, untouched Z3 context for the forks: Spacer's search depends on the
    # context's history (see `engines.fresh_context`), so a query must start from a
    # context holding none of the warm-up's terms — made here once, since making one
    # costs ~25 ms (most of what the warm-up saves), and never used in this process.
    engines.fresh_context()
    z3.main_ctx()


def main(argv: list[str] | None = None) -> int:
    # From the command line a member's slice counts from the interpreter's start (imports
    # and parsing are in it); called in a warm fork, from now.
    t0 = _T0 if argv is None else time.monotonic()
    ap = argparse.ArgumentParser(prog="python -m veribatch.verifiers.z3c", description=__doc__)
    ap.add_argument("file", nargs="?")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds for the whole portfolio")
    ap.add_argument("--data-model", choices=("ILP32", "LP64"), default="ILP32")
    ap.add_argument("--member", choices=engines.MEMBERS, help="run one member in-process")
    ap.add_argument("--bmc-depth", type=int, default=0, help="with --member bmc: first depth")
    ap.add_argument("--seed", type=int, default=0, help="with --member spacer*: Spacer's seed")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--version", action="store_true")
    args = ap.parse_args(argv)
    if args.version:
        print(portfolio.tool_version())
        return 0
    if args.file is None:
        ap.error("the following arguments are required: file")
    try:
        with open(args.file, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError as exc:
        print(f"cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    start = time.monotonic()
    if args.member:
        sys.setrecursionlimit(20000)
        left = max(0.05, args.timeout - (time.monotonic() - t0))
        got = portfolio.run_member_safely(
            args.member, text, left, args.data_model, args.bmc_depth, args.seed
        )
        print(json.dumps(got), flush=True)
        sys.stderr.flush()
        os._exit(0)  # skip tearing down Z3's context: it can take longer than the slice
    out = portfolio.verify_text(
        text, args.timeout, data_model=args.data_model, filename=args.file,
        path=os.path.abspath(args.file),
    )
    payload = out.to_json()
    payload["tool_version"] = portfolio.tool_version()
    payload["wall_s"] = round(time.monotonic() - start, 3)
    if args.json:
        print(json.dumps(payload))
    else:
        print(f"{out.status}" + (f"  ({out.reason})" if out.reason else ""))
        for inv in out.extras.get("invariants", []) or []:
            print(f"  loop {inv['loop']} (line {inv['line']}): {inv['invariant']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
