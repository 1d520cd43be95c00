"""The embedded verifier without its start-up: warm forks, forked members, and what a proof
must pass before it is a TRUE."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from veribatch.verifiers.base import Query
from veribatch.verifiers.registry import get_verifier
from veribatch.verifiers.result import Limits, Status
from veribatch.verifiers.z3c import api, chc

# Safe for any number of iterations: Spacer proves it (i == j); no bounded unrolling can.
UNBOUNDED = """\
extern int __VERIFIER_nondet_int(void);
extern void reach_error(void);
int main() {
  int i = 0, j = 0;
  while (__VERIFIER_nondet_int()) { i++; j++; }
  if (i != j) reach_error();
  return 0;
}
"""


def test_queries_run_as_warm_forks_not_fresh_interpreters(hard_c: str, tmp_path: Path) -> None:
    prog = tmp_path / "hard.c"
    prog.write_text(hard_c)
    q = get_verifier("z3").start(Query((prog,)), Limits(wall_s=60), tmp_path / "logs")
    proc = q._process
    assert proc is not None
    deadline = time.monotonic() + 60
    while proc._root < 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    root = psutil.Process(proc._root)
    # A fork of the fork server running verifiers.z3c's main(), not an exec of `python -m`.
    assert root.name() == "vb-warm", root.name()
    assert "veribatch.verifiers.forkserver" in " ".join(root.cmdline())
    res = q.kill()
    assert res.status is Status.UNKNOWN and res.termination_reason == "cancelled"
    ok = tmp_path / "ok.c"
    ok.write_text(UNBOUNDED)
    res = get_verifier("z3").run(Query((ok,)), Limits(wall_s=60), tmp_path / "logs")
    assert res.status is Status.TRUE, res
    assert res.extras["proof_checked"] is True and res.extras["invariants"]
    assert res.limits_enforced_by is not None and "subreaper" in res.limits_enforced_by


def test_a_proof_that_does_not_recheck_is_not_a_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    # The plain solver cannot decide a clause (what happens with non-linear clauses or
    # when the time is up): Spacer's proof stands unchecked, which must not be TRUE.
    monkeypatch.setattr(chc, "validate",
                        lambda *a, **k: (None, "clause 1 (step, line 5): timeout"))
    res = api.verify(UNBOUNDED, 4, in_process=True)
    assert res.status in (Status.UNKNOWN, Status.TIMEOUT), res
    assert "could not be re-checked (clause 1 (step, line 5): timeout)" in (res.reason or "")


def test_the_recheck_gets_the_rest_of_the_budget(invbench_easy: Path) -> None:
    """egcd2: Spacer (NLA) finds a proof within its slice, its re-check takes 1-2 s, past the
    slice's grace: the forked member is given the query's budget for it, so its "safe" comes
    after slice + grace.  Without that, a member is killed at slice + grace, and no answer
    of any slice could come later than that (whatever the machine's speed or load).

    Spacer-NLA alone (another member's proof, e.g. BMC's complete unrolling, would hide a
    lost one), with a 0.3 s grace so the margin is wide.  Runs in a fresh interpreter:
    members fork only from a single-threaded process, and the test process may hold
    threads other tests left behind."""
    import json
    import subprocess
    import sys

    probe = (
        "import json, sys\n"
        "from veribatch.verifiers.z3c import portfolio\n"
        "assert portfolio._can_fork()\n"
        "portfolio.GRACE_S = 0.3\n"
        "text = open(sys.argv[1]).read()\n"
        "out = portfolio.verify_text(text, 60, filename='egcd2-ll_valuebound1_2.c',"
        " members=('spacer-nla',))\n"
        "print(json.dumps({'grace': portfolio.GRACE_S, **out.to_json()}, default=str))\n"
    )
    r = subprocess.run([sys.executable, "-c", probe, str(invbench_easy / "egcd2-ll_valuebound1_2.c")],
                       capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[3])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["status"] == "TRUE" and out["proof"] == "spacer" and out["proof_checked"], out
    safe = [e for e in out["portfolio"] if e["answer"] == "safe"]
    assert safe and safe[0]["wall_s"] > safe[0]["slice_s"] + out["grace"], out["portfolio"]


def test_warm_up_leaves_an_untouched_context_for_the_queries() -> None:
    """Spacer's search depends on the ids of the terms before it: after the warm-up, the first
    term a query creates must get the id it gets in a fresh interpreter."""
    import subprocess
    import sys

    probe = "import z3; print(z3.Int('probe').get_id())"
    fresh = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           check=True).stdout.strip()
    warm = subprocess.run([sys.executable, "-c", "import veribatch.verifiers.z3c.__main__ as m; m.warm_up(); "
                           + probe], capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run([sys.executable, "-c", "from veribatch.verifiers.z3c import portfolio; "
                            "from veribatch.verifiers.z3c.__main__ import WARM_UP_PROGRAM as P; "
                            "portfolio.check_supported(P, 'ILP32', 'p'); " + probe],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert warm == fresh and dirty != fresh, (fresh, warm, dirty)
