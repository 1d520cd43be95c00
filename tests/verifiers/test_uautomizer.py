"""UAutomizer adapter on real Ultimate Automizer output (``../shared/data/recorded/uautomizer``).

Every recorded case (captured from a real 0.2.3, see that folder's README) is read by the
adapter exactly as a run leaves it: the wrapper's output, and the files it wrote into its
working/witness directory, beside the loop map the adapter writes there before a run.
Ultimate itself cannot run here; the end-to-end tests put a stand-in `Ultimate.py` on the
path that replays a recording, so the runner, the tool's environment (PATH, heap) and the
work directory are exercised as with the real tool.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
from pathlib import Path

import pytest

from veribatch.verifiers.base import (
    FinishedRun,
    Query,
    ToolEnvironment,
    UnsupportedQueryError,
    read_version,
)
from veribatch.verifiers.registry import get_verifier
from veribatch.verifiers.result import Limits, Status
from veribatch.verifiers.runner import execute
from veribatch.verifiers.uautomizer import LOOPS_FILE, UAutomizerTool, jvm_heap_mb, z3_path

TOOL = UAutomizerTool()
LEFT_BEHIND = ("witness.graphml", "UltimateCounterExample.errorpath", "Ultimate.log")
MATHSAT = 'ExceptionOrErrorResult: RuntimeException: java.io.IOException: Cannot run program "mathsat"'
FERMAT_LINES = [(49, 3), (22, None), (40, 2), (15, None), (35, 1)]  # log order; loops 35/40/49


@pytest.fixture(scope="module")
def rec(shared_data: Path) -> Path:
    return shared_data / "recorded" / "uautomizer"


def _replay(case: Path, tmp_path: Path) -> FinishedRun:
    """The case as a finished run: support files first (as the runner writes them), then the
    files the real run left in its working directory."""
    work = tmp_path / "work"
    work.mkdir()
    for name, text in TOOL.support_files(Query((case / "program.c",))).items():
        (work / name).write_text(text)
    for name in LEFT_BEHIND:
        if (case / name).is_file():
            shutil.copy(case / name, work / name)
    output = (case / "stdout.txt").read_text() + (case / "stderr.txt").read_text()
    return FinishedRun(int((case / "exit_code.txt").read_text()), None, output, "exit", work)


def _invariant_lines(v) -> list[tuple[int, int | None]]:
    return [(i["line"], i["loop"]) for i in v.extras["invariants"]]


# -- every recorded case ---------------------------------------------------------------------

def check_true_invariants(v) -> None:
    assert v.status is Status.TRUE and v.reason is None
    assert v.extras["invariants"] == [
        {"line": 34, "loop": 1, "invariant": "(!(y <= 0) || !(z <= 0)) || !(x <= 0)"},
        {"line": 27, "loop": None, "invariant": "1"},  # `int main() {`: a function head, no loop
    ]
    assert v.extras["solver_commands"] == ["/opt/solvers/z3"]


def check_true_five_loop_invariants(v) -> None:
    assert v.status is Status.TRUE
    assert _invariant_lines(v) == FERMAT_LINES
    assert v.extras["invariants"][0]["invariant"] == (
        "((A * 4 + r * 4 + v * v + 2 * u == 2 * v + u * u && A % 2 == 1) && cond == 1) && R * R + 1 < 2 * R + A")


def check_true_quantified(v) -> None:
    # WARN lines of the back-translator sit between each header and its invariant
    assert v.status is Status.TRUE and _invariant_lines(v) == FERMAT_LINES
    assert sum("\\exists ULTIMATE.start_main_~R~0#1 : int" in i["invariant"] for i in v.extras["invariants"]) == 4
    assert v.extras["solver_commands"] == ["/usr/bin/z3"]  # Debian's z3 took part: visible


def check_true_no_specification(v) -> None:
    # the wrapper says TRUE, but nothing was checked: no verdict, and the reason says why
    assert v.extras["result_line"] == "TRUE" and v.extras["no_specification"] is True
    assert v.status is Status.UNKNOWN and "invariants" not in v.extras
    assert v.reason == ("no specification checked (the wrapper printed TRUE): We were not able to verify any "
                        "specification because the program does not contain any specification.")


def check_false_counterexample(v) -> None:
    assert v.status is Status.FALSE and "invariants" not in v.extras
    assert v.reason == "a call to reach_error is reachable at line 8"  # the output's CounterExampleResult
    assert v.extras["counterexample"].startswith("[L42]              _Bool c = __VERIFIER_nondet_bool();")
    assert "[L8]               reach_error()" in v.extras["counterexample"]


def check_syntax_error(v) -> None:
    # the wrapper printed UNKNOWN after a bit-precise retry; Ultimate said where the C is wrong
    assert v.extras["result_line"] == "UNKNOWN" and v.extras["ultimate_runs"] == 2
    assert v.status is Status.ERROR
    assert v.reason == "Incorrect Syntax at line 7: Syntax error (statement problem) in C program: Missing ;"


def check_unknown_toolchain_timeout(v) -> None:
    assert v.status is Status.UNKNOWN
    assert v.reason == ("integer run: TimeoutResultAtElement [Line: 17]: Timeout (TraceAbstraction); "
                        "bit-precise run: TimeoutResult: Timeout "
                        "(de.uni_freiburg.informatik.ultimate.plugins.generator.rcfgbuilder)")


def check_error_after_internal_timeout(v) -> None:
    assert v.status is Status.ERROR and v.reason.startswith(MATHSAT)
    assert v.reason.endswith("; integer run: TimeoutResultAtElement [Line: 17]: Timeout (TraceAbstraction)")


def check_error_bitprecise(v) -> None:
    assert v.status is Status.ERROR and v.reason.startswith(MATHSAT)
    assert v.reason.endswith("integer run: UnprovableResult [Line: 20]: Unable to prove that call to reach_error "
                             "is unreachable (Reason: overapproximation of someBinaryDOUBLEComparisonOperation "
                             "at line 44.)")


def check_killed(v) -> None:
    # no Result: block; through the runner its own wall limit makes this TIMEOUT (below)
    assert v.status is Status.ERROR and "Killed by 15" in v.reason and "invariants" not in v.extras


CASES = {
    "true_invariants": check_true_invariants,
    "true_five_loop_invariants": check_true_five_loop_invariants,
    "true_quantified_invariants_debian_z3_4.8.12": check_true_quantified,
    "true_no_specification": check_true_no_specification,
    "false_counterexample": check_false_counterexample,
    "syntax_error": check_syntax_error,
    "unknown_toolchain_timeout": check_unknown_toolchain_timeout,
    "error_after_internal_timeout_needs_mathsat": check_error_after_internal_timeout,
    "error_bitprecise_needs_mathsat": check_error_bitprecise,
    "timeout_killed_5s": check_killed,
    "timeout_killed_20s": check_killed,
}


def test_every_recorded_case_has_a_check(rec: Path) -> None:
    assert {p.name for p in rec.iterdir() if p.is_dir()} == {*CASES, "version"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_recorded_case(case: str, rec: Path, tmp_path: Path) -> None:
    v = TOOL.determine_result(_replay(rec / case, tmp_path))
    CASES[case](v)
    json.dumps(v.extras)  # records must be JSON-able


def test_the_graphml_witness_is_not_what_the_lines_come_from(rec: Path, tmp_path: Path) -> None:
    """The witness puts the invariant of the loop on line 34 on edges from lines 31/39/41;
    without the log nothing is taken from it."""
    run = _replay(rec / "true_invariants", tmp_path)
    assert "startline\">31<" in (run.workdir / "witness.graphml").read_text().replace("'", '"')
    no_log = FinishedRun(0, None, "Result:\nTRUE\n", "exit", run.workdir)
    assert TOOL.determine_result(no_log).extras["invariants"] == []


def test_without_the_loop_map_lines_stay_and_loops_are_unknown(rec: Path, tmp_path: Path) -> None:
    run = _replay(rec / "true_invariants", tmp_path)
    (run.workdir / LOOPS_FILE).unlink()
    v = TOOL.determine_result(run)
    assert [(i["line"], i["loop"]) for i in v.extras["invariants"]] == [(34, None), (27, None)]


def test_loop_map_is_the_front_ends_numbering(rec: Path) -> None:
    files = TOOL.support_files(Query((rec / "true_five_loop_invariants" / "program.c",)))
    assert files["unreach-call.prp"] == "CHECK( init(main()), LTL(G ! call(reach_error())) )\n"
    loops = json.loads(files[LOOPS_FILE])["loops"]
    assert [(s["loop"], s["line"], s["kind"]) for s in loops] == [(1, 35, "while"), (2, 40, "while"), (3, 49, "while")]
    # true_no_specification lost the */ of its header comment (as UAutomizer reads it anyway):
    # the front end closes it before the first line of code (`cfront.close_lost_comment`),
    # keeping the lines, so its loop is numbered at the original's line
    program = rec / "true_no_specification" / "program.c"
    repaired = json.loads(TOOL.support_files(Query((program,)))[LOOPS_FILE])
    assert repaired["loops"] == [{"loop": 1, "line": 35, "kind": "while"}]
    assert "while" in program.read_text().splitlines()[34]
    with pytest.raises(UnsupportedQueryError, match="unsupported property"):
        TOOL.support_files(Query((Path("p.c"),), property="valid-memsafety"))


# -- command line, heap, solver, version -----------------------------------------------------

def test_cmdline_is_the_svcomp_one_and_the_environment_sets_path_and_heap(tmp_path: Path) -> None:
    c = tmp_path / "p.c"
    w = tmp_path / "w"
    argv = TOOL.cmdline("/opt/U/Ultimate.py", Query((c,)), Limits(600, memory_mb=16384), w)
    assert argv == ["/opt/U/Ultimate.py",
                    "--spec", str(w / "unreach-call.prp"), "--file", str(c), "--architecture", "32bit",
                    "--full-output", "--witness-dir", str(w), "--data", str(w / "ultimate-data")]
    # what the shell prologue used to set: the tool's directory first on PATH, the heap in MB
    assert TOOL.environment("/opt/U/Ultimate.py", Limits(600, memory_mb=16384)) == ToolEnvironment(
        variables={"_JAVA_OPTIONS": "-Xmx13824m"}, path_prepend=("/opt/U",))
    argv64 = TOOL.cmdline("/U/Ultimate.py", Query((c,), data_model="LP64", options=("--x", "1")), Limits(), w)
    assert argv64[argv64.index("--architecture") + 1] == "64bit" and argv64[-2:] == ["--x", "1"]
    with pytest.raises(UnsupportedQueryError, match="data model"):
        TOOL.cmdline("U", Query((c,), data_model="ILP64"), Limits(), w)
    with pytest.raises(UnsupportedQueryError, match="exactly one"):
        TOOL.cmdline("U", Query((c, c)), Limits(), w)


def test_heap_follows_the_memory_limit() -> None:
    assert jvm_heap_mb(16384) == 13824  # InvBench's harness limit: room for z3 (-memory:2024) + JVM
    assert jvm_heap_mb(4096) == 2048 and jvm_heap_mb(1000) == 500


def test_environment_sets_path_and_heap_and_the_arguments_pass_unchanged(tmp_path: Path) -> None:
    """Run a script that reports what it got, through the runner, with the tool's environment
    applied to an inherited one (as `Verifier.start` does)."""
    tool_dir = tmp_path / "ult dir"
    tool_dir.mkdir()
    probe = tool_dir / "Ultimate.py"
    probe.write_text('#!/bin/sh\nprintf "%s\\n" "${PATH%%:*}" "${PATH#*:}" "$_JAVA_OPTIONS" "$#" "$@"\n')
    probe.chmod(0o755)
    env = TOOL.environment(str(probe), Limits(memory_mb=4096)).applied_to({"PATH": "/usr/bin:/bin"})
    ex = execute([str(probe), "--file", "a b.c"], Limits(30), tmp_path / "out.log", env=env)
    assert ex.termination_reason == "exit" and ex.returncode == 0, ex.read_output()
    assert ex.read_output().splitlines() == [str(tool_dir), "/usr/bin:/bin", "-Xmx2048m", "2", "--file", "a b.c"]


def _real_z3() -> str:
    found = shutil.which("z3", path=str(Path(sys.executable).parent)) or shutil.which("z3")
    if found is None:
        pytest.skip("no z3 binary (z3-solver installs one beside the interpreter)")
    return found


def test_the_z3_beside_ultimate_wins_and_is_in_the_version(
    rec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whichever z3 the machine has first on PATH plays no part: PATH is set here to a folder
    holding another z3 (one that says a version no real z3 has)."""
    z3 = _real_z3()
    real = re.search(r"Z3 version (\S+)", read_version([z3, "-version"]))
    assert real is not None
    tool_dir = tmp_path / "UAutomizer-linux"
    tool_dir.mkdir()
    script = tool_dir / "Ultimate.py"
    script.write_text(f"#!/bin/sh\nexec /bin/cat '{rec / 'version' / 'stdout--ultversion.txt'}'\n")
    script.chmod(0o755)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "z3").write_text("#!/bin/sh\necho 'Z3 version 0.0.1-elsewhere - 64 bit'\n")
    (elsewhere / "z3").chmod(0o755)
    monkeypatch.setenv("PATH", str(elsewhere))
    assert z3_path(str(script)) == str(elsewhere / "z3")  # nothing beside it yet
    assert TOOL.version(str(script)) == "0.2.3-release-863304a+z3-0.0.1-elsewhere"
    (tool_dir / "z3").symlink_to(z3)
    assert z3_path(str(script)) == str(tool_dir / "z3")
    assert TOOL.version(str(script)) == f"0.2.3-release-863304a+z3-{real.group(1)}"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    (tool_dir / "z3").unlink()
    assert TOOL.version(str(script)) == "0.2.3-release-863304a+z3-none"


def test_version_from_ultversion(rec: Path) -> None:
    assert TOOL.parse_version((rec / "version" / "stdout--ultversion.txt").read_text()) == "0.2.3-release-863304a"
    assert (rec / "version" / "stdout--version.txt").read_text().strip() == "863304a1"  # the wrapper's hash only
    with pytest.raises(ValueError):
        TOOL.parse_version((rec / "version" / "stdout--version.txt").read_text())


# -- through the runner, with a stand-in Ultimate.py replaying a recording --------------------

REPLAY = """#!/bin/sh
# Stand-in for Ultimate.py: note argv and environment, replay a recorded run, leave its files.
printf '%s\\n' "$@" > "{log}/argv.txt"
printf '%s\\n' "$PATH" "$_JAVA_OPTIONS" > "{log}/env.txt"
for a in "$@"; do case "$a" in */version.c) cat "{rec}/version/stdout--ultversion.txt"; exit 0;; esac; done
wd=""; prev=""
for a in "$@"; do [ "$prev" = "--witness-dir" ] && wd="$a"; [ "$prev" = "--data" ] && dd="$a"; prev="$a"; done
[ -d "$dd" ] && touch "$dd/settings" && echo "$dd" > "{log}/data.txt"
[ -f "{case}/witness.graphml" ] && cp "{case}/witness.graphml" "$wd/"
[ -f "{case}/UltimateCounterExample.errorpath" ] && cp "{case}/UltimateCounterExample.errorpath" .
cat "{case}/stdout.txt"
{tail}
exit $(cat "{case}/exit_code.txt")
"""


def _stand_in(tmp_path: Path, rec: Path, case: str, tail: str = "") -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "Ultimate.py"
    exe.write_text(REPLAY.format(log=tmp_path, rec=rec, case=rec / case, tail=tail))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return bindir


def _program(rec: Path, case: str, tmp_path: Path) -> Query:
    c = tmp_path / "program.c"
    shutil.copy(rec / case / "program.c", c)
    return Query((c,))


def test_end_to_end_true(rec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIBATCH_UAUTOMIZER", str(_stand_in(tmp_path, rec, "true_invariants")))
    v = get_verifier("uautomizer", cache_dir=tmp_path / "cache")
    assert v.version.startswith("0.2.3-release-863304a+z3-")
    r = v.run(_program(rec, "true_invariants", tmp_path), Limits(60, memory_mb=16384), tmp_path / "logs")
    assert r.status is Status.TRUE and r.tool_version == v.version
    assert r.extras["invariants"][0] == {"line": 34, "loop": 1,
                                         "invariant": "(!(y <= 0) || !(z <= 0)) || !(x <= 0)"}
    argv = (tmp_path / "argv.txt").read_text().split("\n")
    prp = Path(argv[argv.index("--spec") + 1])
    assert prp.read_text().startswith("CHECK( init(main())") and prp.parent == Path(r.log_path).parent
    path, java = (tmp_path / "env.txt").read_text().splitlines()
    # Ultimate's settings went to a folder of this query's own, gone after the run
    data = Path((tmp_path / "data.txt").read_text().strip())
    assert data == Path(r.log_path).parent / "ultimate-data" and not data.exists()
    assert path.split(os.pathsep)[0] == str(tmp_path / "bin") and java == "-Xmx13824m"
    json.dumps(r.to_json())


def test_end_to_end_false_reads_the_error_path_from_the_workdir(
    rec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIBATCH_UAUTOMIZER", str(_stand_in(tmp_path, rec, "false_counterexample")))
    r = get_verifier("uautomizer").run(_program(rec, "false_counterexample", tmp_path), Limits(60),
                                       tmp_path / "logs")
    assert r.status is Status.FALSE and "reach_error()" in r.extras["counterexample"]


def test_end_to_end_error_exit_code_keeps_the_reason(rec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    case = "error_bitprecise_needs_mathsat"
    monkeypatch.setenv("VERIBATCH_UAUTOMIZER", str(_stand_in(tmp_path, rec, case)))
    r = get_verifier("uautomizer").run(_program(rec, case, tmp_path), Limits(60), tmp_path / "logs")
    assert r.status is Status.ERROR and r.termination_reason == "exit" and r.reason.startswith(MATHSAT)


def test_end_to_end_timeout(rec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = _stand_in(tmp_path, rec, "timeout_killed_20s", tail="sleep 60")
    monkeypatch.setenv("VERIBATCH_UAUTOMIZER", str(bindir))
    r = get_verifier("uautomizer").run(_program(rec, "timeout_killed_20s", tmp_path), Limits(1.0), tmp_path / "logs")
    assert r.status is Status.TIMEOUT and r.termination_reason == "walltime"
    assert "Start difference." in Path(r.log_path).read_text()


def test_a_program_that_calls_reach_error_nowhere_is_named_before_any_run(rec: Path, shared_data: Path) -> None:
    """The class behind the vacuous TRUE: what UAutomizer reads has no call of reach_error."""
    from veribatch.verifiers.uautomizer import checks_no_specification

    lost = (rec / "true_no_specification" / "program.c").read_text()  # its header lost its */
    assert checks_no_specification(lost) == "no code: the program text is all comment"
    assert checks_no_specification((rec / "true_invariants" / "program.c").read_text()) is None
    easy = shared_data / "invbench" / "Dataset" / "Evaluation" / "Easy"
    # `#include <assert.h>` and an undefined __VERIFIER_assert: reach_error's only call is in no code path
    assert checks_no_specification((easy / "dll-rb-cnstr_1-2_4.c").read_text()) == (
        "reach_error is declared but called nowhere in the program's code")
    assert checks_no_specification("void reach_error(void);\n/* reach_error(); */\nint main() { return 0; }\n")
    assert checks_no_specification('void reach_error() {}\nint main() { if (1) reach_error(); }\n') is None
    assert checks_no_specification('char *s = "/* x";\nvoid reach_error() {}\nint main() { reach_error(); }') is None
