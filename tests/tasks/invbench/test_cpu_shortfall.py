"""§5.4 on a node with fewer CPUs than d_a ∥ d_b need: the cap is said (plan, records) and the
decision procedure is not starved below what the baseline had.

The verifier is the UAutomizer adapter driving a stand-in `Ultimate.py` (its CPU work set by the test,
not by a program) that, like UAutomizer's JVM with its solver, keeps two processes busy — for a fixed
amount of CPU work each, less for the instrumented programs than for the original (a useful
invariant makes the proof cheaper) — and then replays a recorded real run
(`../shared/data/recorded/uautomizer/true_invariants`).  Under the local executor on two
CPUs, d_a and d_b in parallel would be four busy processes on two cores, each query twice as
slow as alone; the records and the queries' spans say that they ran one after the other.
The CPU count is the one the run declares (`workers=2`: the executor grants two), not the
machine's: the verdicts are the same on one CPU (`taskset -c 0`), where the baseline's two
processes share it too.  (The real tool on the same path: `tests/verifiers/test_uautomizer_real.py`.)
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from veribatch.launch.run_control import ExecChoice, launch_run, plan_run

BASELINE_WORK_S = 1.5  # CPU seconds per process on the original program
# ... on d_a / d_b: a fifth of the baseline's, so a query decides within the baseline's time
# whatever else loads the machine (the schedule is checked by the queries' spans, not by a
# query missing its limit, which a busy machine decides as much as the schedule does)
QUERY_WORK_S = 0.3

STAND_IN = """#!/bin/sh
for a in "$@"; do case "$a" in */version.c) cat "{rec}/version/stdout--ultversion.txt"; exit 0;; esac; done
wd=""; file=""; prev=""
for a in "$@"; do
  [ "$prev" = "--witness-dir" ] && wd="$a"; [ "$prev" = "--file" ] && file="$a"; prev="$a"
done
case "$(basename "$file")" in cand*) work={query};; *) work={baseline};; esac
burn() {{ {python} -c "import time
while time.process_time() < $work: pass"; }}
echo "start $(basename "$file") $(date +%s.%N)" >> "{spans}"
burn & burn & wait
echo "end $(basename "$file") $(date +%s.%N)" >> "{spans}"
cp "{case}/witness.graphml" "$wd/"
cat "{case}/stdout.txt"
exit $(cat "{case}/exit_code.txt")
"""


@pytest.fixture
def two_process_uautomizer(shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    rec = shared_data / "recorded" / "uautomizer"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "Ultimate.py"
    exe.write_text(STAND_IN.format(rec=rec, case=rec / "true_invariants", query=QUERY_WORK_S,
                                   baseline=BASELINE_WORK_S, python=shutil.which("python3"),
                                   spans=tmp_path / "spans.txt"))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("VERIBATCH_UAUTOMIZER", str(bindir))
    root = tmp_path / "InvBench"
    (root / "Evaluation" / "Easy").mkdir(parents=True)
    shutil.copy(rec / "true_invariants" / "program.c", root / "Evaluation" / "Easy" / "prog.c")
    (root / "Evaluation" / "timing.json").write_text(json.dumps([{"file": "prog.c", "result": "TRUE", "time": 5.0}]))
    return root


def test_verifier_invariant_arm_decides_on_two_cpus(two_process_uautomizer: Path, tmp_path: Path) -> None:
    plan = plan_run("invbench", dataset=f"easy:{two_process_uautomizer}", verifier="uautomizer",
                    options=["budget_s=60"])
    verify_stage = next(s for s in plan.stages if s.name == "verify")
    assert verify_stage.cpus_per_task == 4  # d_a ∥ d_b, two cores each
    out = launch_run(plan, tmp_path / "run", ExecChoice("local", workers=2), progress=False)
    assert out.ok, out
    from veribatch.aggregate.records import load_run

    _, stages = load_run(out.rd.root)
    base = stages["baseline"].frame.iloc[0]
    assert base["status"] == "TRUE" and base["cpus_granted"] == 2
    v = stages["verify"].frame
    inst = v[v["kind"] == "instance"].iloc[0]
    cand = v[v["kind"] == "candidate"].iloc[0]
    assert (inst["cpus_needed"], inst["cpus_granted"], inst["schedule"]) == (4, 2, "sequential")
    # one query at a time, with the baseline's two CPUs (2 granted // 2 per query)
    assert (inst["cpus_per_query"], inst["queries_at_once"]) == (2, 1)
    assert inst["timeout_source"] == "baseline" and inst["timeout_s"] == base["baseline_time_s"]
    assert (cand["d_a_status"], cand["d_b_status"]) == ("TRUE", "TRUE"), (cand["d_a_reason"], cand["d_b_reason"])
    assert (inst["decision"], inst["rule"]) == ("TRUE", "DEC-PROP")
    # decision time as d_a ∥ d_b on a node with cores for both: the slower of the two
    assert inst["decision_time_s"] == max(cand["d_a_time_s"], cand["d_b_time_s"]) < inst["timeout_s"]
    assert inst["speedup"] > 1.0
    # one query at a time (load-independent: in parallel their spans overlap)
    spans: dict[str, dict[str, float]] = {}
    for line in (tmp_path / "spans.txt").read_text().splitlines():
        what, name, when = line.split()
        spans.setdefault(name, {})[what] = float(when)
    assert set(spans) == {"prog.c", "cand0_check.c", "cand0_use.c"}
    assert spans["cand0_use.c"]["end"] <= spans["cand0_check.c"]["start"]  # d_b, then d_a


def test_the_cap_is_in_the_plan_printout(two_process_uautomizer: Path, tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "veribatch", "invbench", "--dataset", f"easy:{two_process_uautomizer}", "--verifier", "uautomizer",
               "--workers", "2", "--dry-run", "--runs-dir", str(tmp_path / "runs")], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "verify: asks for 4 CPUs per shard, capped at 2" in " ".join(r.stdout.split())
