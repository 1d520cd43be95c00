"""Dafny 4 adapter on recorded CLI output: verdicts, counts, error kinds and obligations."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifiers.base import FinishedRun, Query, ToolNotFoundError
from verifiers.dafny import DafnyTool
from verifiers.result import Limits, Status

REC = Path(__file__).parent / "recorded" / "dafny"
TOOL = DafnyTool()


def _verdict(name: str, rc: int):
    return TOOL.determine_result(FinishedRun(rc, None, (REC / name).read_text(), "exit"))


def test_cmdline_verify_and_resolve(tmp_path: Path) -> None:
    f = tmp_path / "p.dfy"
    assert TOOL.cmdline("/opt/dafny/dafny", Query((f,), property="dafny-verify"), Limits(600),
                        tmp_path) == ["/opt/dafny/dafny", "verify", "--verification-time-limit",
                                      "20", str(f)]
    short = TOOL.cmdline("dafny", Query((f,), property="dafny-verify"), Limits(5), tmp_path)
    assert short[2:4] == ["--verification-time-limit", "5"]
    own = TOOL.cmdline("dafny", Query((f,), property="dafny-verify",
                                      options=("--verification-time-limit", "60")), Limits(600), tmp_path)
    assert own == ["dafny", "verify", "--verification-time-limit", "60", str(f)]
    assert TOOL.cmdline("dafny", Query((f,), property="dafny-resolve"), Limits(), tmp_path) == [
        "dafny", "resolve", str(f)]
    with pytest.raises(ValueError, match="unknown property"):
        TOOL.cmdline("dafny", Query((f,)), Limits(), tmp_path)  # "unreach-call" is not Dafny's


def test_version_must_be_dafny_4() -> None:
    assert TOOL.parse_version((REC / "version.txt").read_text()) == "4.10.0"
    assert TOOL.parse_version("4.10.0+fcb2042d6d043a2634f0854338c08feeb8e4b5b4") == (
        "4.10.0+fcb2042d6d043a2634f0854338c08feeb8e4b5b4")
    with pytest.raises(ToolNotFoundError, match="Dafny 4.x is required"):
        TOOL.parse_version("Dafny 2.3.0.10506")


def test_verified() -> None:
    v = _verdict("verified.txt", 0)
    assert v.status is Status.TRUE
    assert v.extras["verified"] == 5 and v.extras["error_count"] == 0 and v.extras["errors"] == []
    assert v.extras["parse_ok"] and v.extras["resolve_ok"]


def test_postcondition_and_call_precondition_failures() -> None:
    v = _verdict("postcondition.txt", 4)
    assert v.status is Status.FALSE
    assert v.extras["verified"] == 3 and v.extras["error_count"] == 2
    e1, e2 = v.extras["errors"]
    assert (e1["file"], e1["line"], e1["col"]) == ("program.dfy", 10, 0)
    assert e1["kind"] == "verification" and e1["obligation"] == "postcondition"
    assert e1["related"][0] == {"line": 8, "col": 12,
                                "message": "this is the postcondition that could not be proved"}
    assert (e2["line"], e2["obligation"]) == (31, "precondition")
    assert v.extras["resolve_ok"]  # it resolved; it just did not verify


def test_invariant_failures_tell_entry_from_maintenance() -> None:
    v = _verdict("invariant.txt", 4)
    assert v.status is Status.FALSE
    assert [(e["line"], e["obligation"]) for e in v.extras["errors"]] == [
        (19, "invariant_entry"), (20, "invariant_maintained")]
    assert v.extras["errors"][0]["related"][0]["message"] == "loop invariant violation"


def test_parse_error() -> None:
    v = _verdict("parse_error.txt", 2)
    assert v.status is Status.FALSE and "parse" in (v.reason or "")
    assert not v.extras["parse_ok"] and not v.extras["resolve_ok"]
    (e,) = v.extras["errors"]
    assert (e["line"], e["col"], e["kind"], e["message"]) == (8, 2, "parse", "invalid MethodDecl")


def test_resolution_error() -> None:
    v = _verdict("resolution_error.txt", 2)
    assert v.status is Status.FALSE
    assert v.extras["parse_ok"] and not v.extras["resolve_ok"]
    assert [e["kind"] for e in v.extras["errors"]] == ["resolution", "resolution"]
    assert v.extras["errors"][0]["message"] == "unresolved identifier: Summ"
    assert v.extras["errors"][0]["obligation"] is None


def test_obligation_timeout_is_undecided_not_false() -> None:
    v = _verdict("timeout.txt", 4)
    assert v.status is Status.UNKNOWN and "1 time out" in (v.reason or "")
    assert v.extras["timeouts"] == 1 and v.extras["error_count"] == 0
    (e,) = v.extras["errors"]
    assert e["kind"] == "timeout" and e["line"] == 13


def test_resolve_mode_success_and_crash() -> None:
    assert _verdict("resolve_ok.txt", 0).status is Status.TRUE
    crash = _verdict("crash.txt", 150)
    assert crash.status is Status.ERROR and ".NET" in (crash.reason or "")
