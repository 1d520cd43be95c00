"""The real UAutomizer 0.2.3 (``../shared/tools/uautomizer-0.2.3``, laid out by its
``setup.sh``, which `.ci/run` runs) through every path the papers use it on.

Programs are ones it decides in a few seconds.  Without the tool (``$VERIBATCH_UAUTOMIZER``,
java, the z3 4.12.0 it shipped) these tests skip and say what to run; with ``CI`` set they
fail, so CI can never pass without having run them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from veribatch.verifiers.base import Query, read_version
from veribatch.verifiers.registry import get_verifier
from veribatch.verifiers.result import Limits, Status
from veribatch.verifiers.uautomizer import DATA_DIR, z3_path

pytestmark = [pytest.mark.uautomizer, pytest.mark.slow]

SETUP = "eval \"$(../shared/tools/uautomizer-0.2.3/setup.sh)\""
Z3 = "4.12.0"  # the z3 UAutomizer 0.2.3 shipped; another one changes times and some verdicts
EASY_TRUE = "bh2017-ex-add_2.c"  # TRUE in ~5 s of CPU, loop invariants at its loop


def _missing() -> str | None:
    exe = os.environ.get("VERIBATCH_UAUTOMIZER")
    if not exe or not Path(exe).is_file():
        return f"$VERIBATCH_UAUTOMIZER is {exe!r}, not Ultimate.py (run: {SETUP})"
    if shutil.which("java") is None:
        return "no java on PATH (UAutomizer needs Java 11 or 17)"
    z3 = z3_path(exe)
    if z3 is None:
        return f"no z3 beside Ultimate.py or on PATH (run: {SETUP})"
    m = re.search(r"Z3 version (\S+)", read_version([z3, "-version"]))
    if not m or m.group(1) != Z3:
        return f"{z3} is z3 {m.group(1) if m else '?'}, not the {Z3} UAutomizer 0.2.3 shipped (run: {SETUP})"
    return None


@pytest.fixture(scope="module")
def ultimate() -> Path:
    """`Ultimate.py` of the real tool, or skip (fail in CI) saying what is missing."""
    why = _missing()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI: the real UAutomizer is not set up: {why}")
        pytest.skip(f"the real UAutomizer is not set up: {why}")
    return Path(os.environ["VERIBATCH_UAUTOMIZER"])


@pytest.fixture(scope="module")
def easy(shared_data: Path) -> Path:
    return shared_data / "invbench" / "Dataset" / "Evaluation" / "Easy"


def _read_only(folder: Path) -> list[str]:
    """bwrap's argv that runs a command with `folder` mounted read-only (as a cluster's
    software share or an image would be): a missing write bit would not stop root."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        if os.environ.get("CI"):
            pytest.fail("CI: bwrap missing (.ci/run installs bubblewrap)")
        pytest.skip("bwrap (bubblewrap) is needed for a read-only mount")
    return [bwrap, "--dev-bind", "/", "/", "--ro-bind", str(folder), str(folder), "--"]


def test_runs_from_a_read_only_tool_folder(ultimate: Path, easy: Path, shared_data: Path, tmp_path: Path) -> None:
    """`launch verify` with the tool folder mounted read-only — the shared copy itself, as CI
    and a cluster's software share have it (else the set-up copy): a verdict, Ultimate's
    settings in the query's own folder, nothing left there or beside the tool."""
    shared_copy = (shared_data.parent / "tools" / "uautomizer-0.2.3" / "UAutomizer-linux").resolve()
    tool_dir = shared_copy if (shared_copy / "Ultimate.py").is_file() else ultimate.resolve().parent
    ro = _read_only(tool_dir)
    probe = subprocess.run([*ro, "touch", str(tool_dir / "write-probe")], capture_output=True, text=True)
    assert probe.returncode != 0 and "Read-only file system" in probe.stderr  # really read-only
    before = sorted(p.name for p in tool_dir.iterdir())
    argv = [*ro, sys.executable, "-m", "veribatch", "verify", str(easy / EASY_TRUE), "--tool", "uautomizer",
            "--log-dir", str(tmp_path / "logs"), "--json"]
    env = {**os.environ, "COLUMNS": "200", "VERIBATCH_UAUTOMIZER": str(tool_dir / "Ultimate.py")}
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert res["status"] == "TRUE" and res["tool_version"] == f"0.2.3-release-863304a+z3-{Z3}", res
    assert any(i["loop"] == 1 for i in res["extras"]["invariants"]), res["extras"]["invariants"]
    workdir = Path(res["log_path"]).parent
    assert (workdir / "unreach-call.prp").is_file() and not (workdir / DATA_DIR).exists()
    assert sorted(p.name for p in tool_dir.iterdir()) == before and not (tool_dir / "data").exists()


def _processes_in(folder: Path) -> dict[int, str]:
    """pid → command line of every process whose working directory is `folder` (the runner
    starts the tool there; the JVM and its solvers inherit it)."""
    out: dict[int, str] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if Path(os.readlink(proc / "cwd")) == folder:
                out[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return out


def test_a_timeout_ends_the_whole_jvm_tree_and_no_cpu_cap_unless_asked(
    ultimate: Path, hard_c: str, tmp_path: Path
) -> None:
    """A wall limit on the real JVM: TIMEOUT, no CPU-time rlimit on the java process (the
    benchmarks are wall-clock), and afterwards no process of the query is left."""
    program = tmp_path / "cubes.c"
    program.write_text(hard_c)
    v = get_verifier("uautomizer")
    assert v.version.endswith(f"+z3-{Z3}")
    q = v.start(Query((program,)), Limits(wall_s=8.0, memory_mb=4096), tmp_path / "logs")
    java: dict[int, str] = {}
    limits_line = ""
    deadline = time.monotonic() + 8.0
    while time.monotonic() < deadline and q.poll() is None:
        java = {pid: cmd for pid, cmd in _processes_in(q.workdir).items() if "java" in cmd.split(" ")[0]}
        if java:
            pid = next(iter(java))
            limits_line = next((ln for ln in Path(f"/proc/{pid}/limits").read_text().splitlines()
                                if ln.startswith("Max cpu time")), "")
            break
        time.sleep(0.1)
    assert java, "no java process seen in the query's folder"
    assert limits_line.split()[3:5] == ["unlimited", "unlimited"], limits_line
    r = q.wait()
    assert r is not None and r.status is Status.TIMEOUT and r.termination_reason == "walltime", r
    assert r.reason == "wall-time limit of 8.0s reached"
    assert _processes_in(q.workdir) == {}  # java, z3 and the wrapper all gone
    assert all(not Path(f"/proc/{pid}").exists() for pid in java)
    assert not (q.workdir / DATA_DIR).exists()


BITWISE_C = """\
extern void __assert_fail(const char *, const char *, unsigned int, const char *);
void reach_error() { __assert_fail("0", "bitwise.c", 2, "reach_error"); }
extern unsigned int __VERIFIER_nondet_uint(void);
int main() {
    unsigned int x = __VERIFIER_nondet_uint();
    unsigned int i = 0;
    while (i < 4) {
        x = x ^ (x << 1U);
        i++;
    }
    if ((x & 1U) != 0U && (x & 1U) != 1U) reach_error();
    return 0;
}
"""


def test_bitwise_operators_end_in_a_recorded_error_that_names_mathsat(ultimate: Path, tmp_path: Path) -> None:
    """The integer run over-approximates ^ and &; the bit-precise retry needs MathSAT, which
    the rebuilt tool lacks: ERROR with both runs' reasons, never a verdict."""
    program = tmp_path / "bitwise.c"
    program.write_text(BITWISE_C)
    r = get_verifier("uautomizer").run(Query((program,)), Limits(wall_s=300, memory_mb=4096), tmp_path / "logs")
    assert r.status is Status.ERROR and r.termination_reason == "exit", r
    assert r.reason is not None and r.reason.startswith('ExceptionOrErrorResult: RuntimeException: '
                                                         'java.io.IOException: Cannot run program "mathsat"')
    assert "integer run: UnprovableResult" in r.reason and "overapproximation of bitwiseXor" in r.reason
    assert r.extras["ultimate_runs"] == 2


def test_a_program_without_a_specification_is_no_verdict(ultimate: Path, easy: Path, tmp_path: Path) -> None:
    """dll-rb-cnstr_1-2_4 calls reach_error nowhere (its __VERIFIER_assert is never defined):
    the wrapper prints TRUE, InvBench published TRUE; nothing was checked."""
    from veribatch.verifiers.uautomizer import checks_no_specification

    program = easy / "dll-rb-cnstr_1-2_4.c"
    assert checks_no_specification(program.read_text()) is not None
    r = get_verifier("uautomizer").run(Query((program,)), Limits(wall_s=300, memory_mb=4096), tmp_path / "logs")
    assert r.extras["result_line"] == "TRUE" and r.extras["no_specification"] is True
    assert r.status is Status.UNKNOWN and "does not contain any specification" in (r.reason or "")


def test_cebench_states_labelled_by_both_verifiers_agree(ultimate: Path, tmp_path: Path) -> None:
    """A CE-Bench slice: the sample's first program built and labelled by the embedded
    verifier (replayed traces, re-checked proofs), then two GENUINE and two SPURIOUS of its
    states labelled again by UAutomizer — the paper's labeller, its 100 s budget — through
    the same `label_of`: the labels agree."""
    from veribatch.aggregate.records import load_run
    from veribatch.launch.run_control import ExecChoice, launch_run, plan_run
    from veribatch.tasks.cebench.label import label_of

    plan = plan_run("cebench", dataset="sample", limit=1)
    out = launch_run(plan, tmp_path / "run", ExecChoice("local", workers=1), progress=False)
    assert out.ok, out
    _, stages = load_run(out.rd.root)
    f = stages["label"].frame
    states = f[f["kind"] == "counterexample"]
    picked = [*states[states["label"] == "GENUINE"].head(2).itertuples(),
              *states[states["label"] == "SPURIOUS"].head(2).itertuples()]
    assert len(picked) == 4, states[["ce_id", "label"]]
    ua = get_verifier("uautomizer")
    for row in picked:
        path = tmp_path / f"{row.ce_id.replace('/', '_')}.c"
        path.write_text(row.instrumented)
        res = ua.run(Query((path,)), Limits(wall_s=100.0, memory_mb=4096), tmp_path / "ua")
        got = label_of(res)
        assert (got.label, got.evidence) == (row.label, "trusted-verdict:uautomizer"), (row.ce_id, res.reason)


INVBENCH_SLICE = {  # file → published verdict: UAutomizer decides each in a few seconds
    "hard-u_unwindbound1_5.c": "TRUE",   # two loops, an invariant at each
    "trex01-1_1.c": "FALSE",
    "sll-queue-1_12.c": "TRUE",          # published from a run that checked no specification
}


def test_invbench_baseline_and_verifier_invariant_arm(ultimate: Path, shared_data: Path, tmp_path: Path) -> None:
    """InvBench-Easy, `--verifier uautomizer`: the baseline's verdicts are the published ones
    (the vacuous one is no verdict, its label marked), and the §5.4 arm feeds UAutomizer's
    own loop invariants back to UAutomizer and decides with them.  Its decision timeout is
    the budget (``timeout_source=budget``), so the load of the machine decides nothing here;
    the schedule is what the CPUs allow and is recorded."""
    from veribatch.aggregate.records import load_run
    from veribatch.launch.run_control import ExecChoice, launch_run, plan_run

    src = shared_data / "invbench" / "Dataset" / "Evaluation"
    root = tmp_path / "InvBench" / "Evaluation"
    (root / "Easy").mkdir(parents=True)
    for name in INVBENCH_SLICE:
        (root / "Easy" / name).symlink_to(src / "Easy" / name)
    rows = [r for r in json.loads((src / "timing_easy.json").read_text()) if r["file"] in INVBENCH_SLICE]
    (root / "timing_easy.json").write_text(json.dumps(rows))
    plan = plan_run("invbench", dataset=f"easy:{root.parent}", verifier="uautomizer",
                    options=["budget_s=300", "timeout_source=budget"])
    out = launch_run(plan, tmp_path / "run", ExecChoice("local", workers=2), progress=False)
    assert out.ok, out
    _, stages = load_run(out.rd.root)
    base = stages["baseline"].frame.set_index("instance_id")
    got = {i.rsplit("/", 1)[1]: (r["status"], bool(r["label_without_specification"])) for i, r in base.iterrows()}
    assert got == {"hard-u_unwindbound1_5.c": ("TRUE", False), "trex01-1_1.c": ("FALSE", False),
                   "sll-queue-1_12.c": ("UNKNOWN", True)}, base[["status", "reason"]]
    assert "no specification" in base.loc["invbench/easy/sll-queue-1_12.c", "reason"]
    v = stages["verify"].frame
    inst = v[(v["kind"] == "instance") & v["instance_id"].str.endswith("hard-u_unwindbound1_5.c")].iloc[0]
    cand = v[(v["kind"] == "candidate") & v["instance_id"].str.endswith("hard-u_unwindbound1_5.c")].iloc[0]
    assert inst["schedule"] == ("sequential" if inst["cpus_granted"] < inst["cpus_needed"] else "parallel")
    # both loops' invariants placed (Ultimate's function-entry entries left out, with the reason)
    assert "not a loop head" in (cand["reason"] or "") and "loop 1" not in (cand["reason"] or "")
    assert (cand["d_a_status"], cand["d_b_status"]) == ("TRUE", "TRUE"), (cand["d_a_reason"], cand["d_b_reason"])
    assert (inst["decision"], inst["rule"]) == ("TRUE", "DEC-PROP")
    assert inst["timeout_source"] == "budget" and inst["speedup"] > 0
