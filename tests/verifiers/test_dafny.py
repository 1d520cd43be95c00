"""The Dafny 4 adapter on real Dafny output: all 22 recorded cases of
../shared/data/recorded/dafny (Dafny's own integration-test expectations), each in the
4.10.0 wording DafnyComp used and in the newest wording, with the exit codes their
command.txt records.  Nothing here was written by hand except the expectations."""

from __future__ import annotations

from pathlib import Path

import pytest

from veribatch.verifiers.base import FinishedRun, Query, ToolNotFoundError
from veribatch.verifiers.dafny import DafnyTool
from veribatch.verifiers.result import Limits, Status

TOOL = DafnyTool()
RECORDED_DAFNY_WORDINGS = ("v4.10.0", "head")

# case → (exit code recorded in command.txt, status, verified, error kinds/obligations in
# output order).  An obligation stands for a verification error; "parse"/"resolution"/
# "timeout"/"out_of_resource" for errors of that kind.
CASES: dict[str, tuple[int, Status, int | None, list[str]]] = {
    "verified_ok": (0, Status.TRUE, 3, []),
    "postcondition": (4, Status.FALSE, 2, ["postcondition"]),
    "precondition_call": (4, Status.FALSE, 0, ["precondition"] * 4),
    "invariant_entry": (4, Status.FALSE, 0, ["invariant_entry"] * 2),
    "invariant_maintained": (4, Status.FALSE, 1, ["invariant_maintained"] * 2),
    "assertion": (4, Status.FALSE, 0, ["assertion"] * 2),
    "termination": (4, Status.FALSE, 2, ["termination"]),
    "decreases": (4, Status.FALSE, 1, ["decreases"]),
    "index_out_of_range": (4, Status.FALSE, 1, ["well_formedness"]),
    "multiple_errors": (4, Status.FALSE, 5, ["decreases", "postcondition", "postcondition",
                                             "assertion", "assertion"]),
    "custom_error_attr": (4, Status.FALSE, 1, [
        "unclassified", "unclassified", "unclassified", "postcondition", "precondition",
        "postcondition", "invariant_entry", "invariant_maintained", "invariant_maintained"]),
    "default_snippets": (4, Status.FALSE, 0, ["assertion", "precondition"]),
    "parse_error_resolve": (2, Status.ERROR, None, ["parse"]),
    "parse_error_verify": (2, Status.ERROR, None, ["parse"] * 3),
    "parse_function_method": (2, Status.ERROR, None, ["parse"] * 2),
    "resolution_type_error": (2, Status.FALSE, None, ["resolution"] * 3),
    "resolution_method_in_expr": (2, Status.FALSE, None, ["resolution"] * 3),
    "timeout": (4, Status.UNKNOWN, 1, ["timeout"]),
    "out_of_resource": (4, Status.UNKNOWN, 1, ["out_of_resource"]),
    "assume_warning": (2, Status.TRUE, 2, []),
    "trigger_warning": (0, Status.TRUE, 1, []),
    # verified, but with "proved using contradictory assumptions" warnings (vacuity; DafnyComp
    # reads them per declaration, tests/tasks/dafnycomp/test_strength.py)
    "contradictory_assumptions": (0, Status.TRUE, 32, []),
}
ALL_CASES = sorted([*CASES, "bodyless_verify_false"])


def test_all_recorded_cases_are_covered(shared_data: Path) -> None:
    on_disk = sorted(p.name for p in (shared_data / "recorded" / "dafny").iterdir() if p.is_dir())
    assert on_disk == ALL_CASES and len(on_disk) == 23


def _labels(errors: list[dict]) -> list[str]:
    return [e["obligation"] if e["kind"] == "verification" else e["kind"] for e in errors]


@pytest.mark.parametrize("wording", RECORDED_DAFNY_WORDINGS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_recorded_case(recorded_dafny, case: str, wording: str) -> None:
    code, status, verified, labels = CASES[case]
    v = TOOL.determine_result(FinishedRun(code, None, recorded_dafny(case, wording), "exit"))
    assert v.status is status, (v.status, v.reason)
    assert _labels(v.extras["errors"]) == labels
    assert v.extras["exit_code"] == code
    if verified is None:  # no summary line: the program did not parse or resolve
        assert "verified" not in v.extras and not v.extras["resolve_ok"]
        assert v.extras["parse_ok"] is (labels[0] == "resolution")
        assert v.extras["phase"] == labels[0]
    else:
        assert v.extras["verified"] == verified and v.extras["resolve_ok"]
        # time-outs and out-of-resource print an Error line but are not counted as errors
        assert v.extras["error_count"] == sum(lab not in ("timeout", "out_of_resource") for lab in labels)


@pytest.mark.parametrize("wording", RECORDED_DAFNY_WORDINGS)
def test_positions_and_related_locations(recorded_dafny, wording: str) -> None:
    def errors(case: str) -> list[dict]:
        return TOOL.determine_result(FinishedRun(4, None, recorded_dafny(case, wording), "exit")).extras["errors"]

    (e,) = errors("postcondition")
    assert (e["file"], e["line"], e["col"]) == ("git-issue147.dfy", 7, 0)
    assert e["related"] == [{"line": 6, "col": 17, "message": "this is the postcondition that could not be proved"}]
    inv = errors("invariant_entry")
    assert [x["line"] for x in inv] == [10, 21]
    assert inv[0]["related"] == [{"line": None, "col": None, "message": "loop invariant violation"}]
    # with snippets on (Dafny's default), a related location follows the snippet and a blank line
    snip = errors("default_snippets")
    assert [(x["line"], x["col"]) for x in snip] == [(13, 2), (17, 7)]
    assert snip[1]["related"][0]["line"] == 10 and "related" not in snip[0]
    (t,) = errors("timeout")
    assert (t["line"], t["col"]) == ((4, 7) if wording == "v4.10.0" else (5, 7))


@pytest.mark.parametrize("wording", RECORDED_DAFNY_WORDINGS)
def test_undecided_obligations_are_counted(recorded_dafny, wording: str) -> None:
    t = TOOL.determine_result(FinishedRun(4, None, recorded_dafny("timeout", wording), "exit"))
    assert t.extras["timeouts"] == 1 and "1 time out" in (t.reason or "")
    o = TOOL.determine_result(FinishedRun(4, None, recorded_dafny("out_of_resource", wording), "exit"))
    assert o.extras["out_of_resource"] == 1 and o.extras["timeouts"] == 0


@pytest.mark.parametrize("wording", RECORDED_DAFNY_WORDINGS)
def test_warnings_do_not_fail_a_proof_but_are_reported(recorded_dafny, wording: str) -> None:
    # exit code 2 + "0 errors": an assume is a warning, not a syntax error
    a = TOOL.determine_result(FinishedRun(2, None, recorded_dafny("assume_warning", wording), "exit"))
    assert a.status is Status.TRUE and a.extras["warnings_failed_compilation"]
    assert [w["kind"] for w in a.extras["warnings"]] == ["assume"] * 3
    assert [w["line"] for w in a.extras["warnings"]] == [7, 11, 13]
    t = TOOL.determine_result(FinishedRun(0, None, recorded_dafny("trigger_warning", wording), "exit"))
    assert [w["kind"] for w in t.extras["warnings"]] == ["trigger"]
    assert not t.extras["warnings_failed_compilation"]
    i = TOOL.determine_result(FinishedRun(4, None, recorded_dafny("invariant_entry", wording), "exit"))
    assert [w["kind"] for w in i.extras["warnings"]] == ["bodyless_loop"]


@pytest.mark.parametrize("wording", RECORDED_DAFNY_WORDINGS)
def test_bodyless_and_verify_false_runs(recorded_dafny, wording: str) -> None:
    """The case concatenates three commands (command.txt): verify, verify with
    --allow-external-contracts (both exit 0), then `dafny run`.  Each is read on its own."""
    text = recorded_dafny("bodyless_verify_false", wording)
    cut = "Dafny program verifier finished with 2 verified, 0 errors\n"
    first, second, third = _three(text, cut)
    v1 = TOOL.determine_result(FinishedRun(0, None, first, "exit"))
    assert v1.status is Status.TRUE and v1.extras["verified"] == 2
    kinds = [w["kind"] for w in v1.extras["warnings"]]
    # "0 errors" although a {:verify false} method was skipped: only the warnings tell
    assert kinds.count("verify_false") == 1 and kinds.count("bodyless_ensures") == 4
    assert kinds.count("extern") == 4 and kinds.count("bodyless_loop") == 1 and len(kinds) == 10
    v2 = TOOL.determine_result(FinishedRun(0, None, second, "exit"))
    assert "extern" not in [w["kind"] for w in v2.extras["warnings"]] and v2.status is Status.TRUE
    # `dafny run`: verification passed, compilation failed (not something the task runs)
    v3 = TOOL.determine_result(FinishedRun(3, None, third, "exit"))
    assert [e["line"] for e in v3.extras["errors"]] == [8, 10, 18]


def _three(text: str, cut: str) -> tuple[str, str, str]:
    parts = text.split(cut)
    assert len(parts) == 4, len(parts)
    return parts[0] + cut, parts[1] + cut, parts[2] + cut + parts[3]


def test_crash_without_verdict_is_error() -> None:
    # what a run that dies before printing anything of the above leaves (no recorded case
    # shows a crash; the adapter must not call it a verdict)
    v = TOOL.determine_result(FinishedRun(134, None, "Unhandled exception. System.IO.IOException\n", "exit"))
    assert v.status is Status.ERROR and "no verdict" in (v.reason or "")


def test_cmdline_verify_and_resolve(tmp_path: Path) -> None:
    f = tmp_path / "program.dfy"
    assert TOOL.cmdline("/opt/dafny/dafny", Query((f,), property="dafny-verify"), Limits(600),
                        tmp_path) == [
        "/opt/dafny/dafny", "verify", "--use-basename-for-filename", "--show-snippets:false",
        "--verification-time-limit:30", str(f)]
    short = TOOL.cmdline("dafny", Query((f,), property="dafny-verify"), Limits(5), tmp_path)
    assert "--verification-time-limit:5" in short
    own = TOOL.cmdline("dafny", Query((f,), property="dafny-verify",
                                      options=("--verification-time-limit:60", "--cores:1")),
                       Limits(600), tmp_path)
    assert own == ["dafny", "verify", "--use-basename-for-filename", "--show-snippets:false",
                   "--verification-time-limit:60", "--cores:1", str(f)]
    assert TOOL.cmdline("dafny", Query((f,), property="dafny-resolve"), Limits(), tmp_path) == [
        "dafny", "resolve", "--use-basename-for-filename", "--show-snippets:false", str(f)]
    with pytest.raises(ValueError, match="unknown property"):
        TOOL.cmdline("dafny", Query((f,)), Limits(), tmp_path)  # "unreach-call" is not Dafny's


def test_option_spellings_are_those_of_dafnys_own_runs(shared_data: Path) -> None:
    """Every option the adapter passes appears verbatim in a real recorded command line."""
    lines = "\n".join((p / "command.txt").read_text() for p in (shared_data / "recorded" / "dafny").glob("*/"))
    for opt in ("--use-basename-for-filename", "--show-snippets:false", "--verification-time-limit:",
                "--cores:"):
        assert opt in lines, opt
    assert "dafny resolve --use-basename-for-filename --show-snippets:false" in lines


def test_version_must_be_dafny_4() -> None:
    assert TOOL.parse_version("4.10.0\n") == "4.10.0"
    assert TOOL.parse_version("4.10.0+fcb2042d6d043a2634f0854338c08feeb8e4b5b4") == (
        "4.10.0+fcb2042d6d043a2634f0854338c08feeb8e4b5b4")
    with pytest.raises(ToolNotFoundError, match="Dafny 4.x is required"):
        TOOL.parse_version("Dafny 2.3.0.10506")
