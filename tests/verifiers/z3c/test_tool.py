"""The `z3` tool adapter: pinned argv, verdicts parsed from the real CLI, and a run under the runner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.z3c_programs import CASES
from veribatch.verifiers.base import FinishedRun, Query
from veribatch.verifiers.result import Limits, Status
from veribatch.verifiers.z3c.tool import EmbeddedZ3Tool

SAFE = dict((n, t) for n, _, t in CASES)["inlined-calls-safe"]
UNSAFE = dict((n, t) for n, _, t in CASES)["inlined-calls-unsafe"]


def test_cmdline_is_pinned(tmp_path: Path):
    tool = EmbeddedZ3Tool()
    q = Query((Path("/data/p.c"),))
    argv = tool.cmdline("/usr/bin/python3", q, Limits(wall_s=60), tmp_path)
    assert argv == ["/usr/bin/python3", "-m", "veribatch.verifiers.z3c", "/data/p.c", "--timeout", "59",
                    "--data-model", "ILP32", "--json"]
    q64 = Query((Path("/data/p.c"),), data_model="LP64", options=("--member", "bmc"))
    argv = tool.cmdline("/py", q64, Limits(wall_s=600, cpu_s=100), tmp_path)
    assert argv == ["/py", "-m", "veribatch.verifiers.z3c", "/data/p.c", "--timeout", "99",
                    "--data-model", "LP64", "--json", "--member", "bmc"]


def test_cmdline_rejects_what_it_cannot_check(tmp_path: Path):
    tool = EmbeddedZ3Tool()
    with pytest.raises(ValueError, match="property"):
        tool.cmdline("/py", Query((Path("a.c"),), property="dafny-verify"), Limits(10), tmp_path)
    with pytest.raises(ValueError, match="exactly one"):
        tool.cmdline("/py", Query((Path("a.c"), Path("b.c"))), Limits(10), tmp_path)


def test_version_comes_from_the_tool():
    tool = EmbeddedZ3Tool()
    v = tool.version(tool.executable())
    assert v.startswith("veribatch-z3c/") and "+z3-" in v


def _cli(tmp_path: Path, text: str, timeout: float = 20) -> str:
    f = tmp_path / "p.c"
    f.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "veribatch.verifiers.z3c", str(f), "--timeout", str(timeout), "--json"],
        capture_output=True, text=True, timeout=timeout + 30,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_determine_result_on_real_cli_output(tmp_path: Path):
    tool = EmbeddedZ3Tool()
    out_true = _cli(tmp_path, SAFE)
    v = tool.determine_result(FinishedRun(0, None, out_true, "exit"))
    assert v.status is Status.TRUE and v.extras["proof"] in ("spacer", "complete-unrolling")
    out_false = _cli(tmp_path, UNSAFE)
    v = tool.determine_result(FinishedRun(0, None, out_false, "exit"))
    assert v.status is Status.FALSE and v.extras["counterexample"]["inputs"]
    out_unknown = _cli(tmp_path, "int main() { union s { int f; } v; v.f = 0; return v.f; }")
    v = tool.determine_result(FinishedRun(0, None, out_unknown, "exit"))
    assert v.status is Status.UNKNOWN and "unions" in v.reason


def test_determine_result_without_json_is_error():
    tool = EmbeddedZ3Tool()
    v = tool.determine_result(FinishedRun(1, None, "Traceback...\nMemoryError", "exit"))
    assert v.status is Status.ERROR and "MemoryError" in v.reason
    v = tool.determine_result(FinishedRun(0, None, json.dumps({"status": "MAYBE"}), "exit"))
    assert v.status is Status.ERROR


def test_cli_exit_code_two_for_a_missing_file(tmp_path: Path):
    proc = subprocess.run([sys.executable, "-m", "veribatch.verifiers.z3c", str(tmp_path / "none.c")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "cannot read" in proc.stderr


def test_runs_under_the_runner_with_limits(tmp_path: Path):
    registry = pytest.importorskip("veribatch.verifiers.registry")
    f = tmp_path / "p.c"
    f.write_text(UNSAFE)
    v = registry.get_verifier("z3")
    r = v.run(Query((f,)), Limits(wall_s=30), tmp_path / "logs")
    assert r.status is Status.FALSE and r.tool == "z3" and r.termination_reason == "exit"
    assert r.tool_version.startswith("veribatch-z3c/")
