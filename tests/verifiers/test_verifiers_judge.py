"""The REFUTE judge with real g++ and python: limits, sandbox, comparison, compile cache."""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import psutil
import pytest

from verifiers.base import Query
from verifiers.judge import (
    CompileError,
    Program,
    Verdict,
    compile_cpp,
    detect_sandbox,
    outputs_match,
    run_program,
)
from verifiers.registry import get_verifier
from verifiers.result import Limits, Status

SUM_CPP = "#include <iostream>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<\"\\n\";}\n"


@pytest.fixture
def write(tmp_path: Path):
    def _write(name: str, text: str) -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p

    return _write


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One compile cache for the module: each distinct source is compiled once."""
    return tmp_path_factory.mktemp("bin-cache")


def test_token_comparison_is_whitespace_and_case_insensitive() -> None:
    assert outputs_match("YES\n3 4\n", "yes 3\t4")
    assert outputs_match("", "\n \n")
    assert not outputs_match("3 4", "34")
    assert not outputs_match("1 2", "1 2 3")
    assert not outputs_match("1.0", "1")  # exact answers: numbers compared as text


def test_cpp_runs_and_compile_is_cached(write, cache: Path) -> None:
    src = write("sum.cpp", SUM_CPP)
    run = run_program(Program.of(src), "2 40\n", cache_dir=cache / "judge-bin")
    assert run.verdict is Verdict.OK and run.output == "42\n"
    binary = compile_cpp(src, cache / "judge-bin")
    mtime = binary.stat().st_mtime_ns
    assert compile_cpp(src, cache / "judge-bin") == binary
    assert binary.stat().st_mtime_ns == mtime  # not rebuilt
    other = compile_cpp(SUM_CPP.replace("a+b", "a-b"), cache / "judge-bin")
    assert other != binary


def test_compile_error_names_the_problem(write, cache: Path) -> None:
    with pytest.raises(CompileError, match="undeclared|not declared"):
        compile_cpp(write("bad.cpp", "int main(){ return y; }"), cache / "judge-bin")


def test_python_program_and_runtime_error(write) -> None:
    ok = run_program(Program.of(write("p.py", "print(sum(map(int, input().split())))")), "1 2 3")
    assert ok.verdict is Verdict.OK and ok.output == "6\n"
    bad = run_program(Program.of(write("e.py", "raise SystemExit(3)")), "")
    assert bad.verdict is Verdict.RE and bad.returncode == 3


def test_hanging_program_is_tle(write, cache: Path) -> None:
    t = time.monotonic()
    r = run_program(Program.of(write("hang.cpp", "int main(){volatile long x=0;for(;;)x++;}")), "",
                    time_s=0.5, cache_dir=cache / "judge-bin")
    assert r.verdict is Verdict.TLE
    sleeper = run_program(Program.of(write("sleep.py", "import time; time.sleep(60)")), "",
                          time_s=0.5)
    assert sleeper.verdict is Verdict.TLE and sleeper.termination_reason == "walltime"
    assert time.monotonic() - t < 10


def test_allocating_too_much_is_mle(write, cache: Path) -> None:
    cpp = ("#include <vector>\n#include <cstdio>\nint main(){std::vector<std::vector<char>> v;"
           "for(int i=0;i<100;i++)v.emplace_back(50<<20,1);printf(\"%zu\\n\",v.size());}")
    r = run_program(Program.of(write("alloc.cpp", cpp)), "", memory_mb=128, cache_dir=cache / "judge-bin")
    assert r.verdict is Verdict.MLE
    py = run_program(Program.of(write("alloc.py", "x = bytearray(10**9)")), "", memory_mb=128)
    assert py.verdict is Verdict.MLE


def test_forked_children_are_killed(write) -> None:
    marker = f"veribatch-fork-{uuid.uuid4().hex[:8]}"
    code = ("import os, time, sys\n"
            "for _ in range(4):\n"
            "    if os.fork() == 0:\n"
            f"        os.execvp('sleep', ['sleep', '1000', '{marker}'])\n"
            "print('parent done')\n")
    r = run_program(Program.of(write("fork.py", code)), "")
    assert r.verdict is Verdict.OK and r.output == "parent done\n"
    assert _alive(marker) == []


def _alive(marker: str, timeout: float = 3.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in psutil.process_iter(["cmdline"])
                 if marker in " ".join(p.info["cmdline"] or [])]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def test_fork_bomb_is_stopped(write) -> None:
    if detect_sandbox().uid is None:
        pytest.skip("no privilege drop here, so no RLIMIT_NPROC: not safe to fork-bomb this machine")
    code = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n"
    t = time.monotonic()
    name = f"bomb{uuid.uuid4().hex[:8]}.py"
    r = run_program(Program.of(write(name, code)), "", time_s=2)
    # Whichever limit trips first (process count, summed memory, time), the tree is gone.
    assert r.verdict in (Verdict.RE, Verdict.TLE, Verdict.MLE)
    assert time.monotonic() - t < 15
    assert _alive(name) == []


def test_stdout_flood_is_ole(write) -> None:
    r = run_program(Program.of(write("flood.py", "while True: print('x' * 1000)")), "",
                    output_cap=1 << 20)
    assert r.verdict is Verdict.OLE and r.output == ""


def test_network_is_unreachable_in_the_sandbox(write) -> None:
    box = detect_sandbox()
    if not box.network_isolated:
        pytest.skip(f"no network namespace here: {box.notes}")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    code = (f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "print('connected')")
    r = run_program(Program.of(write("net.py", code)), "")
    srv.close()
    assert r.verdict is Verdict.RE and "connected" not in r.output
    assert r.network_isolated


def test_program_cannot_write_outside_its_box(write, tmp_path: Path) -> None:
    box = detect_sandbox()
    if box.uid is None:
        pytest.skip("not running as root: no privilege drop to test")
    target = tmp_path / "owned"
    tmp_path.chmod(0o755)
    code = f"open({str(target)!r}, 'w').write('x')"
    r = run_program(Program.of(write("w.py", code)), "")
    assert r.verdict is Verdict.RE and not target.exists()
    assert "Permission denied" in r.stderr


def test_judge_tool_through_the_registry(
    write, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIBATCH_CACHE", str(cache))
    v = get_verifier("judge", cache_dir=tmp_path / "vcache")
    src, inp = write("sum.cpp", SUM_CPP), write("in.txt", "20 22\n")
    good, wrong = write("good.txt", "42"), write("wrong.txt", "41")
    r = v.run(Query((src, inp, good), property="judge"), Limits(60), tmp_path / "logs")
    assert r.status is Status.TRUE and r.extras["verdict"] == "OK"
    assert r.extras["output"] == "42\n" and r.extras["matches_expected"] is True
    r = v.run(Query((src, inp, wrong), property="judge"), Limits(60), tmp_path / "logs")
    assert r.status is Status.FALSE and "differs" in (r.reason or "")
    ce = v.run(Query((write("ce.cpp", "int main({"), inp), property="judge"), Limits(60),
               tmp_path / "logs")
    assert ce.status is Status.FALSE and ce.extras["verdict"] == "CE"
