"""The judge's verdicts under issue 28's second red team, as the user running the tests (the
escape suite repeats the classes as root and as nobody): output at the cap and a quick
exit, CPU in children shorter than a poll, stderr that reads like the sandbox's own failure
next to a real one, an input Python and C++ read differently, and the seccomp filter's new
refusals (sockets, io_uring, SysV IPC, xattrs, inotify, host file locks, SIGCHLD's action),
and the compile cache's cap."""

from __future__ import annotations

import dataclasses
import platform
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support.escape_attacks import CPU_WAITED
from veribatch.tasks.refute.counterexample import (
    JudgeLimits,
    Solutions,
    judge_input,
    run_generator,
)
from veribatch.verifiers.judge import (
    Program,
    Verdict,
    detect_sandbox,
    run_program,
    run_sandboxed,
)
from veribatch.verifiers.judge.reading import two_readings
from veribatch.verifiers.result import Limits

CAP = 1 << 20


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bin-cache")


def test_output_just_over_the_cap_is_ole_however_fast_the_exit(write, cache: Path) -> None:
    prog = Program.of(write("over.py", "import sys\nsys.stdout.buffer.write(b'7' * "
                                       f"({CAP} + 4096))\n"))
    for _ in range(4):  # the exit races the pump: every run must say so
        r = run_program(prog, "", time_s=5, output_cap=CAP, cache_dir=cache)
        assert r.verdict is Verdict.OLE and r.output == "", (r.verdict, len(r.output))
    at_cap = Program.of(write("at.py", f"import sys\nsys.stdout.buffer.write(b'7' * {CAP})\n"))
    assert run_program(at_cap, "", time_s=5, output_cap=CAP, cache_dir=cache).verdict is Verdict.OK
    for _ in range(2):
        out = run_generator(prog, JudgeLimits(input_cap=CAP), cache_dir=cache,
                            sandbox=detect_sandbox(), time_s=5)
        assert not isinstance(out, bytes) and out.reason == "generator_output_limit", out


def test_cpu_in_children_shorter_than_a_poll_is_counted(write, cache: Path,
                                                        tmp_path: Path) -> None:
    # the escape suite's attack: 500 x 5 ms of CPU, no child alive long enough to be polled;
    # a judged program cannot fork (its allow-list), the compiler's filter lets it
    prog = Program.of(write("burst.py", CPU_WAITED))
    r = run_program(prog, "", time_s=1, wall_s=60, cache_dir=cache)
    assert r.verdict is Verdict.RE and r.cpu_s < 1.0 and "PermissionError" in r.stderr, r
    ex = run_sandboxed(["/usr/bin/python3", "-I", "-S", "burst.py"],
                       {"burst.py": CPU_WAITED.encode()}, Limits(wall_s=60, cpu_s=1, memory_mb=256),
                       stdin_path=None, stdout_path=tmp_path / "out",
                       stderr_path=tmp_path / "err", output_cap=1 << 16, syscalls=None)
    assert ex.termination_reason == "cputime" and ex.cpu_s > 1.0, (ex.termination_reason, ex.cpu_s)


def test_the_program_s_text_never_makes_it_the_judge_s_failure(write, cache: Path) -> None:
    for text, code in (("bwrap: Creating new namespace failed: x", 1),
                       ("veribatch-box: cannot enter the cgroup /x", 125)):
        prog = Program.of(write(f"spoof{code}.py", f"import sys\nsys.stderr.write({text!r})\n"
                                                   f"sys.exit({code})\n"))
        r = run_program(prog, "", time_s=5, cache_dir=cache)
        assert r.verdict is Verdict.RE and r.reason == f"exit code {code}", r
        j = run_generator(prog, JudgeLimits(), cache_dir=cache, sandbox=detect_sandbox(),
                          time_s=5)
        assert not isinstance(j, bytes) and j.reason == "generator_crash", j


def test_a_sandbox_that_fails_to_start_is_the_judge_s_failure(write, cache: Path) -> None:
    where = Path(tempfile.mkdtemp(prefix="veribatch-fake-bwrap-"))  # reachable by nobody
    where.chmod(0o755)
    try:
        fake = where / "bwrap"
        fake.write_text("#!/bin/sh\necho 'bwrap: Cannot mount proc on /newroot/proc' >&2\nexit 1\n")
        fake.chmod(0o755)
        box = dataclasses.replace(detect_sandbox(), executable=str(fake))
        r = run_program(Program.of(write("ok.py", "print(1)\n")), "", time_s=5, sandbox=box)
        assert r.verdict is Verdict.ERROR, r
        assert r.reason.startswith("sandbox failed before the program started: bwrap: Cannot mount"), r
    finally:
        shutil.rmtree(where, ignore_errors=True)


@pytest.mark.parametrize("data", [b"-3 0_5\n", "-3 \uff15\n".encode(), b"-3\x1c5\n",
                                  "-3\u00a05\n".encode(), b"+3 5\n", b"3 5\r\n", b"nan 5\n",
                                  b"3\t5\n", b"3 .5\n"])
def test_an_input_read_two_ways_is_named(data: bytes) -> None:
    assert two_readings(data) is not None


@pytest.mark.parametrize("data", [b"-3 5\n", b"2\n1 2 3\n", b"abc 1.25 -7e5 007\n", b"x_y +\n"])
def test_plain_inputs_have_one_reading(data: bytes) -> None:
    assert two_readings(data) is None


def test_a_counterexample_only_where_both_read_the_same(write, cache: Path) -> None:
    """The validator reads 5 in ``0_5``, the wrong solution's ``cin`` reads 0 and divides by
    it: judged a success, that would be a counterexample to another instance."""
    sol = Solutions(
        Program.of(write("wrong.cpp", "#include <iostream>\nint main(){ volatile long a, b; "
                                      "long x = 0, y = 0; std::cin >> x >> y; a = x; b = y; "
                                      "std::cout << a / b << '\\n'; }\n")),
        Program.of(write("correct.cpp", "#include <iostream>\nint main(){ long a = 0, b = 0; "
                                        "std::cin >> a >> b; std::cout << (b ? a / b : 0) "
                                        "<< '\\n'; }\n")),
        Program.of(write("val.py", "import sys\na, b = map(int, sys.stdin.read().split())\n"
                                   "assert b != 0\n")))
    lim = JudgeLimits(run_s=5, runs=1)
    box = detect_sandbox()
    bad = judge_input(sol, b"-3 0_5\n", lim, cache_dir=cache, sandbox=box)
    assert (bad.outcome, bad.reason) == ("failure", "invalid_input"), bad
    assert "'0_5'" in bad.detail and bad.validator_verdict is None, bad
    ok = judge_input(sol, b"-3 5\n", lim, cache_dir=cache, sandbox=box)
    assert (ok.outcome, ok.reason) == ("failure", "same_output"), ok


@pytest.mark.skipif(platform.machine() != "x86_64", reason="system call numbers of x86_64")
def test_the_filter_refuses_sockets_io_uring_ipc_xattrs_inotify_and_locks(write,
                                                                          tmp_path: Path) -> None:
    prog = write("probe2.py", """import ctypes, fcntl, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
def sock(fam, typ):
    try:
        socket.socket(fam, typ)
        return 0
    except OSError as e:
        return e.errno
def pair():
    try:
        socket.socketpair()
        return 0
    except OSError as e:
        return e.errno
def call(nr, *args):
    r = libc.syscall(L(nr), *[L(a) for a in args])
    return ctypes.get_errno() if r < 0 else 0
try:
    open("/tmp/f", "w").close()
    fd = os.open("/tmp/f", os.O_RDWR)
    print("create 0")
except OSError as e:  # the allow-list: no file is created or opened to write
    print("create", e.errno)
    fd = os.open(__file__, os.O_RDONLY)
def lock(how):
    try:
        how()
        return 0
    except OSError as e:
        return e.errno
print(sock(socket.AF_VSOCK, socket.SOCK_STREAM), sock(socket.AF_INET, socket.SOCK_DGRAM),
      sock(socket.AF_UNIX, socket.SOCK_STREAM), pair())
print(call(425, 4, 0), call(29, 0, 4096, 0o1600), call(68, 0, 0o1600), call(64, 0, 1, 0o1600))
print(call(190, fd, 0, 0, 0, 0), call(294, 0))
print(lock(lambda: fcntl.flock(fd, fcntl.LOCK_EX)), lock(lambda: fcntl.lockf(fd, fcntl.LOCK_EX)))
print("getfl", fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE)
import signal
def act(sig, how):
    try:
        signal.signal(sig, how)
        return 0
    except OSError as e:
        return e.errno
print(act(signal.SIGCHLD, signal.SIG_IGN), act(signal.SIGUSR1, signal.SIG_IGN),
      signal.getsignal(signal.SIGCHLD))
""")
    r = run_program(Program.of(prog), "", time_s=5)  # the python allow-list
    assert r.verdict is Verdict.OK, r
    # EPERM (1) everywhere but io_uring (ENOSYS, 38); plain fcntl, other signals' actions
    # and asking for SIGCHLD's still work (children whose parent ignores SIGCHLD are reaped
    # by the kernel, their CPU time lost to the judge's count)
    assert r.output.split("\n")[:7] == ["create 1", "1 1 1 1", "38 1 1 1", "1 1", "1 1",
                                         "getfl 0", "1 0 0"], r.output
    ex = run_sandboxed(["/usr/bin/python3", "-I", "-S", "probe2.py"],  # the compiler's deny-list
                       {"probe2.py": prog.read_bytes()}, Limits(wall_s=20, cpu_s=5, memory_mb=256),
                       stdin_path=None, stdout_path=tmp_path / "o", stderr_path=tmp_path / "e",
                       output_cap=1 << 16, syscalls=None)
    assert ex.read_output().split("\n")[:7] == ["create 0", "1 1 1 1", "38 1 1 1", "1 1",
                                                "1 1", "getfl 2", "1 0 0"], ex.read_stderr()


def test_the_compile_cache_is_capped_least_recently_used_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every model-written source is new: an uncapped cache grows by a static binary each."""
    from veribatch.verifiers.judge import compile_cpp
    from veribatch.verifiers.judge.compile import CACHE_ENV

    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, "1")  # 1 MB: less than one static binary
    first = compile_cpp("int main(){ return 1; }\n", cache)
    assert first.is_file()
    second = compile_cpp("int main(){ return 2; }\n", cache)
    assert second.is_file() and not first.exists(), "the older binary was not evicted"
    again = compile_cpp("int main(){ return 2; }\n", cache)  # a hit: still there
    assert again == second and second.is_file()


def test_the_compile_cache_cap_counts_the_compile_logs(tmp_path: Path) -> None:
    """A log per entry (up to 1 MB of warnings) is cache content too: 2 x 700 KB of logs
    beside 10-byte binaries are over a 1 MB cap."""
    import os
    import time

    from veribatch.verifiers.judge.compile import evict

    for i, name in enumerate(("a" * 64, "b" * 64)):
        entry = tmp_path / name[:2] / name
        entry.mkdir(parents=True)
        (entry / "prog").write_bytes(b"x" * 10)
        (entry / "compile.log").write_bytes(b"w" * 700_000)
        os.utime(entry, (time.time() - 100 + i, time.time() - 100 + i))
    gone = evict(tmp_path, cap_mb=1)
    assert [p.name for p in gone] == ["a" * 64], gone


def test_a_wall_clock_kill_under_the_cpu_limit_is_inconclusive_never_a_success(
        write, cache: Path) -> None:
    # a wrong solution that waits (as a correct one does on a loaded node) is stopped by the
    # wall clock with almost no CPU: retried once alone, then "wrong_inconclusive", an error
    ok = write("sum_ok.py", "print(sum(map(int, input().split())))\n")
    waits = write("sum_waits.py", "import time\ntime.sleep(30)\n")
    valid = write("valid_any.py", "import sys\nsys.stdin.read()\n")
    r = run_program(Program.of(waits), "1 2", time_s=1, wall_s=1.5)
    assert r.verdict is Verdict.TLE and r.inconclusive and "inconclusive" in (r.reason or ""), r
    spin = run_program(Program.of(write("spin.py", "while True: pass\n")), "", time_s=0.5)
    assert spin.verdict is Verdict.TLE and not spin.inconclusive, spin
    j = judge_input(Solutions(Program.of(waits), Program.of(ok), Program.of(valid)), b"1 2\n",
                    JudgeLimits(run_s=1.0, runs=1), cache_dir=cache, sandbox=detect_sandbox())
    assert (j.outcome, j.reason, j.wrong_verdict) == ("error", "wrong_inconclusive", "TLE"), j
    assert "again when run alone" in j.detail


def test_a_run_alone_waits_for_the_others_and_keeps_new_ones_out() -> None:
    import threading
    import time

    from veribatch.verifiers.judge.run import _run_lock

    first = _run_lock(exclusive=False)
    second = _run_lock(exclusive=False)  # runs share the node
    got: list[float] = []
    t = threading.Thread(target=lambda: (got.append(time.monotonic()), _run_lock(True).close(),
                                         got.append(time.monotonic())))
    t0 = time.monotonic()
    t.start()
    time.sleep(0.5)
    assert len(got) == 1  # still waiting for the shared holders
    first.close()
    second.close()
    t.join(5)
    assert len(got) == 2 and got[1] - t0 >= 0.5


def test_the_shipped_validators_parse_integers_without_float() -> None:
    from veribatch.tasks.refute.data import SAMPLE_DIR
    from veribatch.verifiers.judge.reading import float_reads

    validators = sorted((SAMPLE_DIR / "problems").glob("*/validator.py"))
    assert len(validators) == 12
    assert {v.parent.name: float_reads(v.read_text()) for v in validators} == {
        v.parent.name: [] for v in validators}
    assert float_reads("import sys\nn = int(input())\nx = float(input())\n") == [3]
    assert float_reads("a = list(map(float, input().split()))\n") == [1]
