"""`Verifier` end to end with a real process: overrides, cache, start/kill, registry errors."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from veribatch.verifiers.base import Query, Tool, ToolNotFoundError
from veribatch.verifiers.registry import UnknownToolError, get_verifier, verifier_names
from veribatch.verifiers.result import Limits, Status
from veribatch.verifiers.verifier import Verifier


def _script(tmp_path: Path, name: str, body: str) -> Query:
    f = tmp_path / name
    f.write_text(body)
    return Query((f,), property="shell")


def _runs(log_dir: Path) -> int:
    return len(list(log_dir.glob("shell-*"))) if log_dir.exists() else 0


def test_verdict_measurements_and_log(tmp_path: Path, shell_tool: Tool) -> None:
    v = Verifier(shell_tool)
    r = v.run(_script(tmp_path, "t.sh", "echo VERDICT TRUE"), Limits(10), tmp_path / "logs")
    assert r.status is Status.TRUE and r.termination_reason == "exit"
    assert r.tool == "shell" and r.tool_version == "sh-test-1"
    assert r.extras == {"seen": "TRUE"}
    assert Path(r.log_path).read_text() == "VERDICT TRUE\n"
    assert r.wall_s < 5 and r.peak_mem_mb > 0


def test_limit_overrides_what_the_tool_printed(tmp_path: Path, shell_tool: Tool) -> None:
    v = Verifier(shell_tool)
    r = v.run(_script(tmp_path, "t.sh", "echo VERDICT TRUE; sleep 30"), Limits(0.5), tmp_path)
    assert r.status is Status.TIMEOUT and r.termination_reason == "walltime"
    assert "wall-time limit of 0.5s" in (r.reason or "")
    mem = "x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo VERDICT TRUE"
    r = v.run(_script(tmp_path, "m.sh", mem), Limits(20, memory_mb=100), tmp_path)
    assert r.status is Status.OOM and r.termination_reason == "memory"


def test_crash_and_adapter_bug_become_error(tmp_path: Path, shell_tool: Tool) -> None:
    v = Verifier(shell_tool)
    r = v.run(_script(tmp_path, "c.sh", "kill -SEGV $$"), Limits(10), tmp_path)
    assert r.status is Status.ERROR and "SIGSEGV" in (r.reason or "")
    r = v.run(_script(tmp_path, "r.sh", "echo RAISE"), Limits(10), tmp_path)
    assert r.status is Status.ERROR and "adapter bug" in (r.reason or "")


def test_cache_hits_and_misses(tmp_path: Path, shell_tool: Tool) -> None:
    v = Verifier(shell_tool, cache_dir=tmp_path / "cache")
    logs = tmp_path / "logs"
    q = _script(tmp_path, "t.sh", "sleep 0.2; echo VERDICT FALSE")
    first = v.run(q, Limits(10), logs)
    assert _runs(logs) == 1
    again = v.run(q, Limits(600), logs)  # decided, and it fits: reused without running
    assert _runs(logs) == 1 and again.to_json() == first.to_json()
    Path(q.files[0]).write_text("sleep 0.2; echo VERDICT TRUE")  # new content → new key
    assert v.run(q, Limits(10), logs).status is Status.TRUE and _runs(logs) == 2


def test_cached_timeout_does_not_answer_a_longer_query(tmp_path: Path, shell_tool: Tool) -> None:
    v = Verifier(shell_tool, cache_dir=tmp_path / "cache")
    logs = tmp_path / "logs"
    q = _script(tmp_path, "slow.sh", "sleep 1.2; echo VERDICT TRUE")
    assert v.run(q, Limits(0.4), logs).status is Status.TIMEOUT
    assert v.run(q, Limits(0.4), logs).status is Status.TIMEOUT and _runs(logs) == 1
    assert v.run(q, Limits(10), logs).status is Status.TRUE and _runs(logs) == 2


def test_parallel_start_and_kill_the_rest(tmp_path: Path, shell_tool: Tool) -> None:
    """InvBench's pattern: several queries in flight, the first decision kills the others."""
    v = Verifier(shell_tool, cache_dir=tmp_path / "cache")
    fast = v.start(_script(tmp_path, "fast.sh", "sleep 0.3; echo VERDICT FALSE"), Limits(60), tmp_path)
    slow = [v.start(_script(tmp_path, f"s{i}.sh", f"sleep 50; echo {i}"), Limits(60), tmp_path)
            for i in range(4)]
    assert all(s.poll() is None for s in slow)
    decided = fast.wait(10)
    assert decided is not None and decided.status is Status.FALSE
    t = time.monotonic()
    killed = [s.kill() for s in slow]
    assert time.monotonic() - t < 2
    assert {k.termination_reason for k in killed} == {"cancelled"}
    assert {k.status for k in killed} == {Status.UNKNOWN}
    assert slow[0].kill() is killed[0] and slow[0].poll() is killed[0]
    # A cancelled run is not a result about the query: never cached.
    again = v.start(_script(tmp_path, "s0.sh", "sleep 50; echo 0"), Limits(60), tmp_path)
    assert again.poll() is None
    again.kill()


def test_registry_names_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert {"z3", "uautomizer", "dafny", "judge"} <= set(verifier_names())
    with pytest.raises(UnknownToolError, match="known: .*dafny.*judge.*uautomizer"):
        get_verifier("cbmc")
    with pytest.raises(UnknownToolError, match="runtime"):
        get_verifier("judge", runtime="docker")
    monkeypatch.delenv("VERIBATCH_UAUTOMIZER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    v = get_verifier("uautomizer")  # planning works without the tool...
    c = tmp_path / "p.c"
    c.write_text("int main(){}")
    with pytest.raises(ToolNotFoundError, match="VERIBATCH_UAUTOMIZER"):
        v.run(Query((c,)), Limits(10), tmp_path)  # ...running names where it looked


def test_missing_query_file_raises(tmp_path: Path, shell_tool: Tool) -> None:
    with pytest.raises(FileNotFoundError, match="nope.sh"):
        Verifier(shell_tool).run(Query((tmp_path / "nope.sh",)), Limits(5), tmp_path)


def test_unreadable_version_means_the_tool_cannot_run(tmp_path: Path, shell_tool: Tool) -> None:
    broken = tmp_path / "broken-tool"
    broken.write_text("#!/bin/sh\necho 'usage: broken-tool FILE' >&2\nexit 2\n")
    broken.chmod(0o755)

    class Broken(type(shell_tool)):  # type: ignore[misc]
        def executable(self) -> str:
            return str(broken)

        def version(self, executable: str) -> str:
            from veribatch.verifiers.base import read_version

            return read_version([executable, "--version"])

    with pytest.raises(ToolNotFoundError, match="cannot read the version.*usage: broken-tool"):
        Verifier(Broken()).run(_script(tmp_path, "t.sh", "echo VERDICT TRUE"), Limits(5), tmp_path)
