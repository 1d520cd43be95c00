"""UAutomizer adapter: the SV-COMP command line it builds and its verdicts on recorded output.

Ultimate cannot run here (see recorded/README.md).  Parsing is tested on the recorded
files; the end-to-end tests put a stand-in `Ultimate.py` on the path that replays a
recorded run (stdout + the files a real run leaves), so the runner, the work
directory and the limit overrides are exercised exactly as with the real tool.
"""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest

from verifiers.base import FinishedRun, Query
from verifiers.registry import get_verifier
from verifiers.result import Limits, Status
from verifiers.uautomizer import UAutomizerTool

REC = Path(__file__).parent / "recorded" / "uautomizer"
TOOL = UAutomizerTool()


def _run(output: str, workdir: Path | None = None, rc: int = 0) -> FinishedRun:
    return FinishedRun(rc, None, output, "exit", workdir)


def test_cmdline_is_the_svcomp_one(tmp_path: Path) -> None:
    c = tmp_path / "p.c"
    argv = TOOL.cmdline("/opt/U/Ultimate.py", Query((c,)), Limits(600), tmp_path / "w")
    assert argv == ["/opt/U/Ultimate.py", "--spec", str(tmp_path / "w" / "unreach-call.prp"),
                    "--file", str(c), "--architecture", "32bit", "--full-output",
                    "--witness-dir", str(tmp_path / "w")]
    argv64 = TOOL.cmdline("U", Query((c,), data_model="LP64", options=("--x", "1")), Limits(), tmp_path)
    assert argv64[argv64.index("--architecture") + 1] == "64bit" and argv64[-2:] == ["--x", "1"]
    with pytest.raises(ValueError, match="data model"):
        TOOL.cmdline("U", Query((c,), data_model="ILP64"), Limits(), tmp_path)
    with pytest.raises(ValueError, match="exactly one"):
        TOOL.cmdline("U", Query((c, c)), Limits(), tmp_path)


def test_property_file_is_the_svcomp_unreach_call() -> None:
    files = TOOL.support_files(Query((Path("p.c"),)))
    assert files == {"unreach-call.prp": "CHECK( init(main()), LTL(G ! call(reach_error())) )\n"}
    with pytest.raises(ValueError, match="unsupported property"):
        TOOL.support_files(Query((Path("p.c"),), property="valid-memsafety"))


def test_version_from_ultversion() -> None:
    assert TOOL.parse_version((REC / "version.txt").read_text()) == "0.3.1-dev-35a8436538"
    with pytest.raises(ValueError):
        TOOL.parse_version("Did not find Java 21 in known paths")


def test_true_with_invariants_from_the_yaml_witness() -> None:
    d = REC / "true_with_invariants"
    v = TOOL.determine_result(_run((d / "output.log").read_text(), d))
    assert v.status is Status.TRUE
    assert v.extras["invariants"] == [
        {"line": 16, "column": 3,
         "invariant": "(((0 <= x) && (x <= n)) && (y == (2 * x))) && (n <= 1000)"}]


def test_true_with_invariants_from_the_log_when_no_witness(tmp_path: Path) -> None:
    v = TOOL.determine_result(_run((REC / "true_with_invariants" / "output.log").read_text(), tmp_path))
    assert v.status is Status.TRUE
    assert v.extras["invariants"] == [
        {"line": 16, "invariant": "((((0 <= x) && (x <= n)) && (y == (2 * x))) && (n <= 1000))"}]


def test_graphml_witness(tmp_path: Path) -> None:
    (tmp_path / "witness.graphml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns"><graph edgedefault="directed">'
        '<data key="witness-type">correctness_witness</data>'
        '<node id="N0"><data key="entry">true</data></node>'
        '<node id="N5"><data key="invariant">(x &lt;= n) &amp;&amp; (y == 2 * x)</data></node>'
        '<node id="N6"><data key="invariant">1</data></node>'
        '<edge source="N0" target="N5"><data key="startline">16</data></edge>'
        '<edge source="N5" target="N6"><data key="startline">17</data></edge>'
        '</graph></graphml>')
    out = (REC / "true_with_invariants" / "output.log").read_text()
    v = TOOL.determine_result(_run(out, tmp_path))
    assert v.extras["invariants"] == [{"line": 16, "invariant": "(x <= n) && (y == 2 * x)"}]


def test_false_with_counterexample() -> None:
    d = REC / "false"
    v = TOOL.determine_result(_run((d / "output.log").read_text(), d))
    assert v.status is Status.FALSE
    assert "[L7]               reach_error()" in v.extras["counterexample"]
    assert "invariants" not in v.extras


def test_unknown_keeps_the_reason() -> None:
    v = TOOL.determine_result(_run((REC / "unknown.log").read_text()))
    assert v.status is Status.UNKNOWN and v.reason == "Overapproximated counterexample"


def test_tool_errors_and_crashes_are_errors() -> None:
    syntax = TOOL.determine_result(_run((REC / "syntax_error.log").read_text(), rc=7))
    assert syntax.status is Status.ERROR and syntax.reason == "INCORRECT SYNTAX"
    crash = TOOL.determine_result(_run((REC / "crash.log").read_text(), rc=9))
    assert crash.status is Status.ERROR and "Did not find Java 21" in (crash.reason or "")


# -- through the runner, with a stand-in Ultimate.py replaying a recording -------------------

REPLAY = """#!/bin/sh
# Stand-in for Ultimate.py: record argv, replay a recorded run, leave its files behind.
printf '%s\\n' "$@" > "{argv_file}"
case "$1" in --ultversion) cat "{rec}/version.txt"; exit 0;; esac
wd=""; prev=""
for a in "$@"; do [ "$prev" = "--witness-dir" ] && wd="$a"; prev="$a"; done
[ -f "$(dirname "$0")/files/witness.yml" ] && cp "$(dirname "$0")/files/witness.yml" "$wd/"
[ -f "$(dirname "$0")/files/UltimateCounterExample.errorpath" ] && cp "$(dirname "$0")/files/UltimateCounterExample.errorpath" .
cat "$(dirname "$0")/files/output.log"
{tail}
"""


def _stand_in(tmp_path: Path, recording: Path, tail: str = "") -> Path:
    bindir = tmp_path / "bin"
    (bindir / "files").mkdir(parents=True)
    for f in ([recording] if recording.is_file() else recording.iterdir()):
        shutil.copy(f, bindir / "files" / ("output.log" if f.suffix in (".log",) else f.name))
    exe = bindir / "Ultimate.py"
    exe.write_text(REPLAY.format(argv_file=tmp_path / "argv.txt", rec=REC, tail=tail))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return bindir


def _program(tmp_path: Path) -> Query:
    c = tmp_path / "program.c"
    shutil.copy(REC / "program.c", c)
    return Query((c,))


def test_end_to_end_true(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIBATCH_UAUTOMIZER", str(_stand_in(tmp_path, REC / "true_with_invariants")))
    v = get_verifier("uautomizer", cache_dir=tmp_path / "cache")
    assert v.version == "0.3.1-dev-35a8436538"
    r = v.run(_program(tmp_path), Limits(60), tmp_path / "logs")
    assert r.status is Status.TRUE and r.tool_version == "0.3.1-dev-35a8436538"
    assert r.extras["invariants"][0]["line"] == 16
    argv = (tmp_path / "argv.txt").read_text().split("\n")
    prp = Path(argv[argv.index("--spec") + 1])
    assert prp.read_text().startswith("CHECK( init(main())") and prp.parent == Path(r.log_path).parent
    json.dumps(r.to_json())  # records must be JSON-able


def test_end_to_end_false_reads_the_error_path_from_the_workdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIBATCH_UAUTOMIZER", str(_stand_in(tmp_path, REC / "false")))
    r = get_verifier("uautomizer").run(_program(tmp_path), Limits(60), tmp_path / "logs")
    assert r.status is Status.FALSE and "reach_error()" in r.extras["counterexample"]


def test_end_to_end_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = _stand_in(tmp_path, REC / "timeout.log", tail="sleep 60")
    monkeypatch.setenv("VERIBATCH_UAUTOMIZER", str(bindir))
    r = get_verifier("uautomizer").run(_program(tmp_path), Limits(1.0), tmp_path / "logs")
    assert r.status is Status.TIMEOUT and r.termination_reason == "walltime"
    assert "Iteration 18" in Path(r.log_path).read_text()
